#!/usr/bin/env bash
# Memory benchmark (issue 19): one memory store at the 2,000-memory cap, then lone
# sequential requests against it — list pages (basic, limit 100; full, limit 20 as the
# SDK's worker syncs; depth=1 roll-ups), retrieve (view=full) and an update with a
# content_sha256 precondition, the gateway's share of writing one memory back after a
# tool call — for
#   dev          `agentd dev` (SQLite);
#   distributed  gateway + worker on PostgreSQL, NATS, Redis.
# Prints one JSON report per stack on stdout (tests/src/bin/memory_bench.rs) and a
# one-line summary of each on stderr. Targets: list page p50 <= 10 ms, retrieve p50
# <= 3 ms. In dev (whose in-process runner serves `cloud` environments), also the
# write-back cost per tool call: TOOL_TURNS turns of one `bash` call each on the
# zero-latency scripted model, without a store, with the full store mounted, and
# appending to one of its memories.
#
# Usage: tests/bench/memory/run.sh [dev|distributed|all]
# Environment: MEMORIES (default 2000), SAMPLES (default 300), TOOL_TURNS (default 50),
#              AGENTD_TEST_POSTGRES_URL / _NATS_URL / _REDIS_URL / _S3_ENDPOINT as for scripts/test.
set -euo pipefail
cd "$(dirname "$0")/../../.."
mode="${1:-all}"
case "$mode" in
    dev|distributed|all) ;;
    *) echo "usage: $0 [dev|distributed|all]" >&2; exit 2 ;;
esac
PG="${AGENTD_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test}"
NATS="${AGENTD_TEST_NATS_URL:-nats://127.0.0.1:4222}"
REDIS="${AGENTD_TEST_REDIS_URL:-redis://127.0.0.1:6379}"
S3="${AGENTD_TEST_S3_ENDPOINT:-http://127.0.0.1:9000}"
S3_AUTH="Authorization: AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=0"

cargo build --release -p agentd -p agentd-tests --bin agentd --bin memory_bench >&2
BIN="${AGENTD_BIN:-$PWD/target/release/agentd}"
DRIVER="$PWD/target/release/memory_bench"
WORK="$(mktemp -d)"
KEY="sk-agentd-bench-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
PIDS=()
db="" stream="" bucket=""
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    # `agentd dev` mounts a tmpfs per session sandbox under the data directory.
    grep -o " $WORK/[^ ]*" /proc/mounts 2>/dev/null | sort -r | xargs -r umount -l 2>/dev/null || true
    rm -rf "$WORK"
    if [ -n "$db" ]; then psql "$PG" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true; fi
    if [ -n "$stream" ]; then
        local hostport="${NATS#nats://}"
        if exec 3<>"/dev/tcp/${hostport%:*}/${hostport##*:}"; then
            printf 'CONNECT {"verbose":false}\r\nSUB _INBOX.bench 1\r\nPUB $JS.API.STREAM.DELETE.%s _INBOX.bench 0\r\n\r\nPING\r\n' "$stream" >&3
            timeout 2 grep -q -m1 stream_delete_response <&3 || true
            exec 3<&-
        fi 2>/dev/null
        redis-cli -u "$REDIS" --scan --pattern "memorybench-$$:*" 2>/dev/null | xargs -r redis-cli -u "$REDIS" del >/dev/null 2>&1 || true
    fi
    if [ -n "$bucket" ]; then curl -s -o /dev/null -H "$S3_AUTH" -X DELETE "$S3/$bucket" || true; fi
}
trap cleanup EXIT

cat > "$WORK/catalog.json" <<'JSON'
[{"id": "bench-zero-latency", "provider": "scripted", "display_name": "zero-latency benchmark model",
  "prices": {"input": 0, "output": 0}}]
JSON

common_env=(
    RUST_LOG=warn
    AGENTD_MODEL_CATALOG="$WORK/catalog.json"
    AGENTD_BOOTSTRAP_API_KEY="$KEY"
    AGENTD_RATE_LIMIT_CREATE=1000000
    AGENTD_RATE_LIMIT_READ=1000000
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
        def r: . * 100 | round / 100;
        "\($stack): \(.memories) memories; p50/p99 ms — list basic/100 \(.list_basic_limit_100.p50_ms | r)/\(.list_basic_limit_100.p99_ms | r), "
        + "list full/20 \(.list_full_limit_20.p50_ms | r)/\(.list_full_limit_20.p99_ms | r), "
        + "depth=1 \(.list_depth_1.p50_ms | r)/\(.list_depth_1.p99_ms | r), "
        + "retrieve \(.retrieve_full.p50_ms | r)/\(.retrieve_full.p99_ms | r), "
        + "update \(.update_with_precondition.p50_ms | r)/\(.update_with_precondition.p99_ms | r)"
        + (if .tool_calls then "; bash turn send→idle p50 without store \(.tool_calls.bash_without_store.p50_ms | r), "
            + "store mounted \(.tool_calls.bash_with_store_unchanged.p50_ms | r), "
            + "appending to a memory \(.tool_calls.bash_appending_to_a_memory.p50_ms | r)" else "" end)
    ' <<< "$2" >&2
}

# drive URL [TOOL_TURNS]
drive() {
    "$DRIVER" --url "$1" --key "$KEY" --memories "${MEMORIES:-2000}" --samples "${SAMPLES:-300}" \
        --tool-turns "${2:-0}" --model bench-zero-latency
}

if [ "$mode" = dev ] || [ "$mode" = all ]; then
    echo "== dev: agentd dev (SQLite)" >&2
    start dev dev AGENTD_DATA_DIR="$WORK/dev"
    report dev "$(drive "$URL" "${TOOL_TURNS:-50}")"
    kill "$PID" 2>/dev/null || true
fi

if [ "$mode" = distributed ] || [ "$mode" = all ]; then
    echo "== distributed: gateway + worker on PostgreSQL, NATS, Redis" >&2
    db="agentd_memorybench_$$"
    stream="AGENTD_MEMORYBENCH_$$"
    bucket="agentd-memorybench-$$"
    psql "$PG" -qc "CREATE DATABASE $db" >/dev/null
    curl -sf -o /dev/null -H "$S3_AUTH" -X PUT "$S3/$bucket" || {
        echo "no S3 server answers at $S3 (scripts/test --services-only starts one)" >&2; exit 1; }
    dist_env=(
        AGENTD_DATABASE_URL="${PG%/*}/$db" AGENTD_NATS_URL="$NATS" AGENTD_REDIS_URL="$REDIS"
        AGENTD_NATS_STREAM="$stream" AGENTD_NATS_CONSUMER="memorybench-$$" AGENTD_REDIS_PREFIX="memorybench-$$"
        AGENTD_SECRET_KEY="$(head -c 32 /dev/urandom | base64)" AGENTD_GRPC_ADDR=127.0.0.1:0
        AGENTD_OBJECT_STORE_URL="s3://$bucket/agentd" AGENTD_OBJECT_STORE_ENDPOINT="$S3"
        AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1
    )
    env "${common_env[@]}" "${dist_env[@]}" "$BIN" migrate >&2
    start gateway gateway "${dist_env[@]}"
    gw_url="$URL"
    start worker worker "${dist_env[@]}"
    report distributed "$(drive "$gw_url")"
fi
