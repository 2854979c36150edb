#!/usr/bin/env bash
# Instructions per turn of `agentd dev` under callgrind: a count that does not depend on
# what else the machine is doing (CPU time on two shared cores does), so two builds can
# be compared on a loaded machine. The zero-latency model, as in run.sh.
#
# Usage: tests/bench/turn/instructions.sh [AGENTD_BINARY]   (default target/release/agentd)
# Environment: WARM_TURNS (default 5), TURNS (default 100), CONCURRENCY (default 1: one
#              session; N: N sessions, TURNS each).
#
# The warm-up runs uninstrumented (callgrind --instr-atstart=no); instrumentation is
# switched on for the measured turns only, then dumped. Prints one JSON line on stdout
# ({"binary", "turns", "concurrency", "instructions", "instructions_per_turn"}) and a
# summary on stderr. Needs valgrind (apt-get install valgrind) and jq.
set -euo pipefail
cd "$(dirname "$0")/../../.."
BIN="${1:-$PWD/target/release/agentd}"
WARM_TURNS="${WARM_TURNS:-5}"
TURNS="${TURNS:-100}"
CONCURRENCY="${CONCURRENCY:-1}"
for tool in valgrind callgrind_control jq; do
    command -v "$tool" >/dev/null || { echo "$0: $tool is required (apt-get install valgrind jq)" >&2; exit 2; }
done
[ -x "${DRIVER:-}" ] || { cargo build --release -p agentd-tests --bin turn_bench >&2; DRIVER="$PWD/target/release/turn_bench"; }
WORK="$(mktemp -d)"
KEY="sk-agentd-bench-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
PID=
cleanup() {
    [ -n "$PID" ] && kill "$PID" 2>/dev/null || true
    wait 2>/dev/null || true
    [ -n "${KEEP:-}" ] && cp "$WORK"/callgrind.out* "$KEEP"/ 2>/dev/null; rm -rf "$WORK"
}
trap cleanup EXIT
cat > "$WORK/catalog.json" <<'JSON'
[{"id": "bench-zero-latency", "provider": "scripted", "display_name": "zero-latency benchmark model",
  "prices": {"input": 0, "output": 0}}]
JSON
env RUST_LOG=warn AGENTD_BOOTSTRAP_API_KEY="$KEY" AGENTD_RATE_LIMIT_CREATE=1000000 AGENTD_RATE_LIMIT_READ=1000000 \
    AGENTD_MODEL_CATALOG="$WORK/catalog.json" AGENTD_HTTP_ADDR=127.0.0.1:0 AGENTD_OPS_ADDR=127.0.0.1:0 \
    AGENTD_DATA_DIR="$WORK/dev" \
    valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$WORK/callgrind.out" "$BIN" dev \
    > "$WORK/dev.out" 2> "$WORK/dev.err" &
PID=$!
URL=
for _ in $(seq 1 600); do
    URL="$(sed -n 's/^agentd: http listening on //p' "$WORK/dev.out" 2>/dev/null | head -1 || true)"
    [ -n "$URL" ] && break
    sleep 0.2
done
[ -n "$URL" ] || { echo "agentd dev did not start under valgrind:" >&2; cat "$WORK/dev.err" >&2; exit 1; }
drive() {
    "$DRIVER" --url "$URL" --key "$KEY" --model bench-zero-latency --concurrency "$CONCURRENCY" \
        --turn-timeout 600 "$@" > /dev/null
}
drive --turns "$WARM_TURNS" --sessions-out "$WORK/sessions"
callgrind_control -i on "$PID" > /dev/null 2>&1
drive --turns "$TURNS" --reuse "$WORK/sessions"
callgrind_control -d "$PID" > /dev/null 2>&1
callgrind_control -i off "$PID" > /dev/null 2>&1
# The dump's `summary:` line (or `totals:`), summed over the dump files of the process.
total=0
for file in "$WORK"/callgrind.out*; do
    value="$(sed -n 's/^\(summary\|totals\): *\([0-9]*\).*/\2/p' "$file" | tail -1)"
    total=$((total + ${value:-0}))
done
turns=$((TURNS * CONCURRENCY))
jq -cn --arg binary "$BIN" --argjson turns "$turns" --argjson concurrency "$CONCURRENCY" --argjson total "$total" \
    '{binary: $binary, turns: $turns, concurrency: $concurrency, instructions: $total,
      instructions_per_turn: ($total / $turns | floor)}'
echo "$(basename "$BIN"): $(awk -v t="$total" -v n="$turns" 'BEGIN { printf "%.2f", t / n / 1e6 }') M instructions per turn ($turns turns at C=$CONCURRENCY)" >&2
