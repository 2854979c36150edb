#!/usr/bin/env bash
# Files benchmark (issue 18): upload and download throughput of one FILE_BYTES file
# (default 1 GiB) through the Files API, and the resident memory growth of the process
# that receives the upload, for
#   dev          `agentd dev`: blobs in a directory under the data dir (filesystem);
#   distributed  gateway + worker on PostgreSQL, NATS, Redis, blobs in a bucket on the
#                S3-compatible test server (AGENTD_TEST_S3_ENDPOINT, default
#                http://127.0.0.1:9000: `scripts/test --services-only` starts moto's).
# Prints one JSON report per stack on stdout (tests/src/bin/files_bench.rs) and a
# one-line summary of each on stderr.
#
# Usage: tests/bench/files/run.sh [dev|distributed|all]
# Environment: FILE_BYTES (default 1073741824), AGENTD_TEST_POSTGRES_URL / _NATS_URL /
#              _REDIS_URL / _S3_ENDPOINT as for scripts/test.
#
# AGENTD_MAX_FILE_BYTES is raised above FILE_BYTES (the default limit is 500 MB). Files
# uploaded through POST /v1/files are not downloadable (400 file_not_downloadable; only
# files a session's tools write are), so for the download leg the driver marks the file
# downloadable directly in the database (`UPDATE files SET downloadable = 1`), then
# downloads it checking every byte, then deletes it.
#
# Resident memory: VmRSS of the receiving process sampled every 10 ms during the upload;
# the growth is the peak sample minus the first. Targets on the reference machine:
# >= 200 MB/s each way on the filesystem backend, growth <= 32 MiB.
set -euo pipefail
cd "$(dirname "$0")/../../.."
mode="${1:-all}"
case "$mode" in
    dev|distributed|all) ;;
    *) echo "usage: $0 [dev|distributed|all]" >&2; exit 2 ;;
esac
FILE_BYTES="${FILE_BYTES:-1073741824}"
PG="${AGENTD_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test}"
NATS="${AGENTD_TEST_NATS_URL:-nats://127.0.0.1:4222}"
REDIS="${AGENTD_TEST_REDIS_URL:-redis://127.0.0.1:6379}"
S3="${AGENTD_TEST_S3_ENDPOINT:-http://127.0.0.1:9000}"
# The harness's S3 requests name the test key without a real signature (moto checks
# who asks, not the signature); agentd signs its own with AWS_* below.
S3_AUTH="Authorization: AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=0"

cargo build --release -p agentd -p agentd-tests --bin agentd --bin files_bench >&2
BIN="${AGENTD_BIN:-$PWD/target/release/agentd}"
DRIVER="$PWD/target/release/files_bench"
WORK="$(mktemp -d)"
KEY="sk-agentd-bench-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
PIDS=()
db="" stream="" bucket=""
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$WORK"
    if [ -n "$db" ]; then psql "$PG" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true; fi
    if [ -n "$stream" ]; then
        local hostport="${NATS#nats://}"
        if exec 3<>"/dev/tcp/${hostport%:*}/${hostport##*:}"; then
            printf 'CONNECT {"verbose":false}\r\nSUB _INBOX.bench 1\r\nPUB $JS.API.STREAM.DELETE.%s _INBOX.bench 0\r\n\r\nPING\r\n' "$stream" >&3
            timeout 2 grep -q -m1 stream_delete_response <&3 || true
            exec 3<&-
        fi 2>/dev/null
        redis-cli -u "$REDIS" --scan --pattern "filesbench-$$:*" 2>/dev/null | xargs -r redis-cli -u "$REDIS" del >/dev/null 2>&1 || true
    fi
    if [ -n "$bucket" ]; then
        # The driver deletes its file; anything left (a failed run) goes with the bucket.
        { curl -s -H "$S3_AUTH" "$S3/$bucket?list-type=2" | grep -o '<Key>[^<]*</Key>' | sed 's/<[^>]*>//g' |
            while read -r key; do curl -s -o /dev/null -H "$S3_AUTH" -X DELETE "$S3/$bucket/$key"; done; } || true
        curl -s -o /dev/null -H "$S3_AUTH" -X DELETE "$S3/$bucket" || true
    fi
}
trap cleanup EXIT

common_env=(
    RUST_LOG=warn
    AGENTD_BOOTSTRAP_API_KEY="$KEY"
    AGENTD_RATE_LIMIT_CREATE=1000000
    AGENTD_RATE_LIMIT_READ=1000000
    AGENTD_MAX_FILE_BYTES=$((FILE_BYTES + 1048576))
    AGENTD_HTTP_ADDR=127.0.0.1:0
    AGENTD_OPS_ADDR=127.0.0.1:0
)

# start NAME ROLE [ENV…]: starts a role, waits for its listener line (the API's; a
# worker's operations listener), sets $URL and $PID.
start() {
    local name="$1" role="$2"; shift 2
    local listener=http
    [ "$role" = worker ] && listener=ops
    env "${common_env[@]}" "$@" "$BIN" "$role" > "$WORK/$name.out" 2> "$WORK/$name.err" &
    PID=$!
    PIDS+=("$PID")
    for _ in $(seq 1 300); do
        URL="$(sed -n "s/^agentd: $listener listening on //p" "$WORK/$name.out" 2>/dev/null | head -1 || true)"
        [ -n "$URL" ] && return 0
        sleep 0.1
    done
    echo "$name did not start:" >&2; cat "$WORK/$name.err" >&2; exit 1
}

# report STACK JSON: the JSON line and its one-line summary.
report() {
    echo "{\"stack\":\"$1\",\"report\":$2}"
    jq -r --arg stack "$1" '
        def r: . * 10 | round / 10;
        "\($stack): \(.bytes / 1048576 | round) MiB up \(.upload_mb_per_s | r) MB/s, down \(.download_mb_per_s | r) MB/s (byte-exact), "
        + "RSS \(.rss_kib_before_upload / 1024 | r) → peak \(.rss_kib_peak_during_upload / 1024 | r) MiB during the upload "
        + "(growth \(.rss_growth_mib_during_upload | r) MiB), agentd CPU \(.server_cpu_seconds_upload_and_download | r) s"
    ' <<< "$2" >&2
}

if [ "$mode" = dev ] || [ "$mode" = all ]; then
    echo "== dev: agentd dev, blobs in <data dir>/blobs" >&2
    start dev dev AGENTD_DATA_DIR="$WORK/dev"
    report dev "$("$DRIVER" --url "$URL" --key "$KEY" --pid "$PID" --bytes "$FILE_BYTES" \
        --database-url "sqlite://$WORK/dev/agentd.db")"
    kill "$PID" 2>/dev/null || true
fi

if [ "$mode" = distributed ] || [ "$mode" = all ]; then
    echo "== distributed: gateway + worker, blobs on the S3 server at $S3" >&2
    db="agentd_filesbench_$$"
    stream="AGENTD_FILESBENCH_$$"
    bucket="agentd-filesbench-$$"
    psql "$PG" -qc "CREATE DATABASE $db" >/dev/null
    curl -sf -o /dev/null -H "$S3_AUTH" -X PUT "$S3/$bucket" || {
        echo "no S3 server answers at $S3 (scripts/test --services-only starts one)" >&2; exit 1; }
    dist_env=(
        AGENTD_DATABASE_URL="${PG%/*}/$db" AGENTD_NATS_URL="$NATS" AGENTD_REDIS_URL="$REDIS"
        AGENTD_NATS_STREAM="$stream" AGENTD_NATS_CONSUMER="filesbench-$$" AGENTD_REDIS_PREFIX="filesbench-$$"
        AGENTD_SECRET_KEY="$(head -c 32 /dev/urandom | base64)" AGENTD_GRPC_ADDR=127.0.0.1:0
        AGENTD_OBJECT_STORE_URL="s3://$bucket/agentd" AGENTD_OBJECT_STORE_ENDPOINT="$S3"
        AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1
    )
    env "${common_env[@]}" "${dist_env[@]}" "$BIN" migrate >&2
    start gateway gateway "${dist_env[@]}"
    gw_url="$URL"; gw_pid="$PID"
    start worker worker "${dist_env[@]}"
    report distributed "$("$DRIVER" --url "$gw_url" --key "$KEY" --pid "$gw_pid" --bytes "$FILE_BYTES" \
        --database-url "${PG%/*}/$db")"
fi
