#!/usr/bin/env bash
# List benchmark (issue 15, "bounded responses"): SESSIONS sessions of the largest
# allowed agent, then 16 concurrent `sessions.list(limit=100)` clients, each following
# next_page to the end, for ROUNDS rounds. Reports the gateway's resident memory at rest
# and at its peak while the lists run (see tests/src/bin/list_bench.rs); the bound is
# 512 MiB.
#
# Usage: tests/bench/list/run.sh [dev|distributed|all]
# Environment: SESSIONS (default 100), CONCURRENCY (default 16), ROUNDS (default 3),
#              AGENT_BYTES (default 1040000: just under the 1 MiB agent limit),
#              RSS_CAP_MIB (default 4096: the driver stops past it, to spare the machine),
#              PROFILE (default release; `debug` reuses the test build),
#              AGENTD_BIN (default target/$PROFILE/agentd: point it at another build to
#              measure it, e.g. the one before a change),
#              AGENTD_TEST_POSTGRES_URL / _NATS_URL / _REDIS_URL as for scripts/test.
set -euo pipefail
cd "$(dirname "$0")/../../.."
mode="${1:-all}"
PROFILE="${PROFILE:-release}"
PG="${AGENTD_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test}"
NATS="${AGENTD_TEST_NATS_URL:-nats://127.0.0.1:4222}"
REDIS="${AGENTD_TEST_REDIS_URL:-redis://127.0.0.1:6379}"

profile_flag=(--release)
[ "$PROFILE" = debug ] && profile_flag=()
cargo build "${profile_flag[@]}" -p agentd -p agentd-tests --bin agentd --bin list_bench >&2
BIN="${AGENTD_BIN:-$PWD/target/$PROFILE/agentd}"
DRIVER="$PWD/target/$PROFILE/list_bench"
WORK="$(mktemp -d)"
KEY="sk-agentd-bench-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
PIDS=()
DB=""
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    [ -n "$DB" ] && psql "$PG" -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT

cat > "$WORK/catalog.json" <<'JSON'
[{"id": "bench-zero-latency", "provider": "scripted", "display_name": "zero-latency benchmark model",
  "prices": {"input": 0, "output": 0}}]
JSON

common_env=(
    RUST_LOG=warn
    AGENTD_BOOTSTRAP_API_KEY="$KEY"
    AGENTD_RATE_LIMIT_CREATE=1000000
    AGENTD_RATE_LIMIT_READ=1000000
    AGENTD_MODEL_CATALOG="$WORK/catalog.json"
    AGENTD_HTTP_ADDR=127.0.0.1:0
)

# start NAME ROLE [ENV…]: starts a role, waits for its listener line, sets $URL and $PID.
start() {
    local name="$1" role="$2"; shift 2
    env "${common_env[@]}" "$@" "$BIN" "$role" > "$WORK/$name.out" 2> "$WORK/$name.err" &
    PID=$!
    PIDS+=("$PID")
    for _ in $(seq 1 300); do
        URL="$(sed -n 's/^agentd: \(http\|ops\) listening on //p' "$WORK/$name.out" | head -1)"
        [ -n "$URL" ] && return 0
        sleep 0.1
    done
    echo "$name did not start:" >&2; cat "$WORK/$name.err" >&2; exit 1
}

drive() { # drive URL PID
    "$DRIVER" --url "$1" --key "$KEY" --model bench-zero-latency --pid "$2" \
        --sessions "${SESSIONS:-100}" --concurrency "${CONCURRENCY:-16}" --rounds "${ROUNDS:-3}" \
        --agent-bytes "${AGENT_BYTES:-1040000}" --rss-cap-mib "${RSS_CAP_MIB:-4096}" || {
        echo "the driver failed; the processes' last log lines:" >&2
        tail -n 20 "$WORK"/*.err >&2
        return 1
    }
}

if [ "$mode" = dev ] || [ "$mode" = all ]; then
    echo "== agentd dev" >&2
    start dev dev AGENTD_DATA_DIR="$WORK/dev"
    echo "{\"stack\":\"dev\",\"report\":$(drive "$URL" "$PID")}"
    kill "$PID" 2>/dev/null || true
fi

if [ "$mode" = distributed ] || [ "$mode" = all ]; then
    echo "== distributed: the gateway on PostgreSQL, NATS JetStream, Redis" >&2
    DB="agentd_listbench_$$"
    psql "$PG" -qc "CREATE DATABASE $DB" >/dev/null
    dist_env=(
        AGENTD_DATABASE_URL="${PG%/*}/$DB" AGENTD_NATS_URL="$NATS" AGENTD_REDIS_URL="$REDIS"
        AGENTD_NATS_STREAM="AGENTD_LISTBENCH_$$" AGENTD_NATS_CONSUMER="listbench-$$" AGENTD_REDIS_PREFIX="listbench-$$"
        AGENTD_SECRET_KEY="$(head -c 32 /dev/urandom | base64)" AGENTD_GRPC_ADDR=127.0.0.1:0
        # Production roles require an object store; listing never touches it, so a
        # shared directory keeps this bench independent of an S3 server.
        AGENTD_OBJECT_STORE_URL="file://$WORK/blobs"
    )
    env "${common_env[@]}" "${dist_env[@]}" "$BIN" migrate >&2
    start gateway gateway "${dist_env[@]}"
    echo "{\"stack\":\"distributed\",\"report\":$(drive "$URL" "$PID")}"
fi
