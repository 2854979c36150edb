#!/usr/bin/env bash
# Turn benchmark: C concurrent sessions × M turns against a zero-latency model, for
# `agentd dev` and for the distributed stack (gateway + worker on PostgreSQL, NATS,
# Redis). Prints one JSON report per run on stdout (see tests/src/bin/turn_bench.rs)
# and a one-line human summary of each on stderr.
#
# Usage: tests/bench/turn/run.sh [dev|distributed|all|soak|scale|flat|peer|streams|read|deploy]
# Environment: C1_TURNS (default 200), C32_TURNS (default 50 per session),
#              SOAK_SECONDS (default 120; 600 for the documented 10-minute soak),
#              KILL_EVERY (default 15 s), SOAK_CONCURRENCY (default 8),
#              SCALE_CONCURRENCY (default 32), SCALE_TURNS (default 30 per session),
#              FLAT_TURNS (default 100000), FLAT_SESSION_TURNS (default 50),
#              FLAT_FILL_CONCURRENCY (default 64), FLAT_C32_TURNS (default 20),
#              FLAT_STACKS (default "dev distributed"),
#              AGENTD_TEST_POSTGRES_URL / _NATS_URL / _REDIS_URL as for scripts/test.
#              streams: STREAMS (default 10000), STREAM_SESSIONS (default STREAMS: one
#              stream per session), IDLE_SECONDS (default 30), FANOUT_STREAMS (default
#              1000), FANOUT_TURNS (default 20), FIRST_TURNS (default 100).
#              read: READ_CONCURRENCY (default 64), READ_SECONDS (default 20).
#              STACKS (streams, read): "dev distributed" (default) or either one.
#              deploy: DEPLOY_CONCURRENCY (default 32), DEPLOY_TURNS (default 30 per session).
#
# soak: the distributed stack with two workers, one of which is SIGKILLed and replaced
# every KILL_EVERY seconds while sessions (25 turns each, then a new one) send turns for
# SOAK_SECONDS; reports lost turns and duplicate events (both must be 0), latency
# including recovery, and every long-lived process's resident memory over time (sampled
# every 10 s; growth is measured after a warm-up of a third of the run).
#
# scale: the distributed stack as 1 gateway × 1 worker, 1 × 3 and 2 × 3 processes on
# one database, stream and prefix (fresh processes per configuration). Sessions are
# spread round-robin over the gateways and each listens on another gateway than the
# one it sends to. Every configuration's committed history is audited (0 lost, 0
# duplicate turns), and the report gives each process's CPU seconds plus those of
# postgres, nats-server and redis-server (whole services, from /proc), the driver's and
# how busy the machine was: the ceiling is whatever is busiest.
#
# flat: per-turn CPU, latency and RSS on an empty store, then after FLAT_TURNS more
# committed turns (sessions of FLAT_SESSION_TURNS turns, FLAT_FILL_CONCURRENCY at once,
# progress on stderr), measured again with fresh sessions and with the fill's longest
# sessions; prints the ratios full / empty. For each stack in FLAT_STACKS.
#
# peer: tests/bench/peer/run.sh — LangGraph's dev server and agentd dev under the same
# driver design, one run, with the ratios.
#
# streams: per stack, STREAMS idle SSE streams (`GET /v1/sessions/{id}/events/stream`)
# on one gateway: its RSS per stream and its CPU while they idle IDLE_SECONDS; then
# FANOUT_STREAMS streams on one session and FANOUT_TURNS turns: commit → receipt on
# every stream; then one stream, FIRST_TURNS turns: commit → first event at C=1
# (tests/src/bin/stream_bench.rs). `ulimit -n` is raised to the hard limit.
#
# read: per stack, READ_CONCURRENCY keep-alive connections sending `GET /v1/agents/{id}`
# for READ_SECONDS with rate-limit metering on (a read limit no run reaches; Redis in the
# distributed stack): req/s, p50/p99, CPU per request of agentd, of Redis + PostgreSQL
# (every postgres process of the machine) and of the driver (tests/src/bin/read_bench.rs).
#
# Each mode prints one JSON object per run on stdout and a one-line summary per stack on
# stderr.
#
# The zero-latency model is the built-in `scripted` provider, routed through the model
# catalog (AGENTD_MODEL_CATALOG), so the numbers measure agentd itself: admission,
# commits, the queue, the bus and streaming — not a model.
set -euo pipefail
cd "$(dirname "$0")/../../.."
mode="${1:-all}"
case "$mode" in
    dev|distributed|all|soak|scale|flat|streams|read|deploy) ;;
    peer) exec tests/bench/peer/run.sh ;;
    *) echo "usage: $0 [dev|distributed|all|soak|scale|flat|peer|streams|read|deploy]" >&2; exit 2 ;;
esac
C1_TURNS="${C1_TURNS:-200}"
C32_TURNS="${C32_TURNS:-50}"
PG="${AGENTD_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test}"
NATS="${AGENTD_TEST_NATS_URL:-nats://127.0.0.1:4222}"
REDIS="${AGENTD_TEST_REDIS_URL:-redis://127.0.0.1:6379}"

cargo build --release -p agentd -p agentd-tests --bin agentd --bin turn_bench --bin peer_bench >&2
BIN="${AGENTD_BIN:-$PWD/target/release/agentd}"
DRIVER="$PWD/target/release/turn_bench"
WORK="$(mktemp -d)"
KEY="sk-agentd-bench-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
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
        # The file may not exist yet: the process opens it when it starts.
        URL="$(sed -n "s/^agentd: $listener listening on //p" "$WORK/$name.out" 2>/dev/null | head -1 || true)"
        [ -n "$URL" ] && return 0
        sleep 0.1
    done
    echo "$name did not start:" >&2; cat "$WORK/$name.err" >&2; exit 1
}

drive() { # drive URL CONCURRENCY TURNS PIDS… [-- MORE DRIVER FLAGS…]
    local url="$1" c="$2" t="$3"; shift 3
    local pid_args=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do pid_args+=(--pid "$1"); shift; done
    [ $# -gt 0 ] && shift
    "$DRIVER" --url "$url" --key "$KEY" --model bench-zero-latency --concurrency "$c" --turns "$t" "${pid_args[@]}" "$@"
}

# cache_metrics OPS_URL: how the worker's history cache did (hits, misses, bytes held)
# and, in dev, the SQLite writer's group commits (commits, and the checkouts they
# covered), on stderr.
cache_metrics() {
    curl -s "$1/metrics" | grep -E '^agentd_(worker_history_cache|sqlite_group)' >&2 || true
}

# summary LABEL < REPORT: the one-line human summary of a turn_bench report, on stderr.
# Processes labelled alike but numbered (worker1, worker2, …) are added up; the busiest
# process or backend is named, since on two shared cores it is where the ceiling is.
summary() {
    jq -r --arg name "$1" '
        def r: . * 10 | round / 10;
        def r2: . * 100 | round / 100;
        (([.processes[] | {k: (.label | sub("[0-9]+$"; "")), v: .cpu_seconds}]
            + [(.backends // {}) | to_entries[] | {k: .key, v: .value.cpu_seconds}]
            + [{k: "driver", v: .driver_cpu_seconds}])
            | group_by(.k) | map({k: .[0].k, v: (map(.v) | add)})) as $cpu
        | "\($name): \(.turns) turns at C=\(.concurrency) over \(.gateways) gateway(s): \(.turns_per_second | round) turns/s, "
          + "send→idle p50 \(.send_to_idle_ms.p50 | r) / p99 \(.send_to_idle_ms.p99 | r) ms, "
          + "\(.server_cpu_ms_per_turn | r) ms agentd CPU/turn, "
          + (if .audited_sessions > 0 then "lost \(.lost_turns + .timed_out_turns), duplicate \(.duplicate_turns + .duplicate_events), " else "" end)
          + "CPU s: \($cpu | map("\(.k) \(.v | r2)") | join(", ")); "
          + "machine \(.machine_busy_percent | round) % busy, busiest: \($cpu | max_by(.v) | .k)"
    ' >&2
}

# report STACK LABEL JSON: prints the JSON line and its summary.
report() {
    echo "{\"stack\":\"$1\",\"report\":$3}"
    summary "$1 $2" <<< "$3"
}

if [ "$mode" = dev ] || [ "$mode" = all ]; then
    echo "== agentd dev" >&2
    start dev dev AGENTD_DATA_DIR="$WORK/dev"
    dev_url="$URL"; dev_pid="$PID"
    report dev C=1 "$(drive "$dev_url" 1 "$C1_TURNS" "dev=$dev_pid")"
    report dev C=32 "$(drive "$dev_url" 32 "$C32_TURNS" "dev=$dev_pid")"
    cache_metrics "$(sed -n 's/^agentd: ops listening on //p' "$WORK/dev.out" | head -1)"
fi

# drop_backends: the database, the JetStream stream (through the JetStream API on a
# bare NATS connection: no NATS client is needed) and the Redis keys of this run.
drop_backends() {
    psql "$PG" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
    local hostport="${NATS#nats://}"
    if exec 3<>"/dev/tcp/${hostport%:*}/${hostport##*:}"; then
        printf 'CONNECT {"verbose":false}\r\nSUB _INBOX.bench 1\r\nPUB $JS.API.STREAM.DELETE.%s _INBOX.bench 0\r\n\r\nPING\r\n' "$stream" >&3
        timeout 2 grep -q -m1 stream_delete_response <&3 || true
        exec 3<&-
    fi 2>/dev/null
    redis-cli -u "$REDIS" --scan --pattern "bench-$$:*" 2>/dev/null | xargs -r redis-cli -u "$REDIS" del >/dev/null 2>&1 || true
}

# distributed_db [ENV…]: a fresh database, stream and prefix (dropped on exit); migrate.
distributed_db() {
    db="agentd_bench_$$"
    stream="AGENTD_BENCH_$$"
    psql "$PG" -qc "CREATE DATABASE $db" >/dev/null
    trap 'cleanup; drop_backends' EXIT
    dist_env=(
        AGENTD_DATABASE_URL="${PG%/*}/$db" AGENTD_NATS_URL="$NATS" AGENTD_REDIS_URL="$REDIS"
        AGENTD_NATS_STREAM="$stream" AGENTD_NATS_CONSUMER="bench-$$" AGENTD_REDIS_PREFIX="bench-$$"
        AGENTD_SECRET_KEY="$(head -c 32 /dev/urandom | base64)" AGENTD_GRPC_ADDR=127.0.0.1:0
        # Production roles require an object store; turns never touch it, so a shared
        # directory keeps this bench independent of an S3 server.
        AGENTD_OBJECT_STORE_URL="file://$WORK/blobs" "$@"
    )
    env "${common_env[@]}" "${dist_env[@]}" "$BIN" migrate >&2
}

# distributed_stack [ENV…]: distributed_db, then start the gateway.
distributed_stack() {
    distributed_db "$@"
    start gateway gateway "${dist_env[@]}"
    gw_url="$URL"; gw_pid="$PID"
}

# stop PID…: SIGTERM, then wait for the processes to finish their graceful shutdown.
stop() {
    for pid in "$@"; do kill "$pid" 2>/dev/null || true; done
    for pid in "$@"; do wait "$pid" 2>/dev/null || true; done
}

backends=(--backend postgres --backend nats-server --backend redis-server)

if [ "$mode" = distributed ] || [ "$mode" = all ]; then
    echo "== distributed: gateway + worker on PostgreSQL, NATS JetStream, Redis" >&2
    distributed_stack
    start worker worker "${dist_env[@]}"
    wk_pid="$PID" wk_ops="$URL"
    report distributed C=1 "$(drive "$gw_url" 1 "$C1_TURNS" "gateway=$gw_pid" "worker=$wk_pid" -- "${backends[@]}")"
    report distributed C=32 "$(drive "$gw_url" 32 "$C32_TURNS" "gateway=$gw_pid" "worker=$wk_pid" -- "${backends[@]}")"
    cache_metrics "$wk_ops"
fi

if [ "$mode" = scale ]; then
    SCALE_CONCURRENCY="${SCALE_CONCURRENCY:-32}"
    SCALE_TURNS="${SCALE_TURNS:-30}"
    echo "== scale: gateways × workers on one PostgreSQL, NATS, Redis; C=$SCALE_CONCURRENCY" >&2
    distributed_db
    for config in 1x1 1x3 2x3; do
        gateways="${config%x*}" workers="${config#*x}"
        url_args=() pid_args=() running=()
        for g in $(seq 1 "$gateways"); do
            start "gateway$g-$config" gateway "${dist_env[@]}"
            url_args+=(--url "$URL"); pid_args+=(--pid "gateway$g=$PID"); running+=("$PID")
        done
        for w in $(seq 1 "$workers"); do
            start "worker$w-$config" worker "${dist_env[@]}"
            pid_args+=(--pid "worker$w=$PID"); running+=("$PID")
        done
        out="$("$DRIVER" "${url_args[@]}" --key "$KEY" --model bench-zero-latency --concurrency "$SCALE_CONCURRENCY" \
            --turns "$SCALE_TURNS" --audit "${backends[@]}" "${pid_args[@]}")"
        echo "{\"stack\":\"scale\",\"gateways\":$gateways,\"workers\":$workers,\"report\":$out}"
        summary "scale ${gateways}x${workers}" <<< "$out"
        stop "${running[@]}"
    done
fi

# flat_stack STACK URL PID…: the flat-cost measurement on one running stack.
flat_stack() {
    local stack="$1" url="$2"; shift 2
    local pids=("$@") extra=()
    [ "$stack" = distributed ] && extra=("${backends[@]}")
    local sessions="$WORK/$stack.sessions" phase c turns out
    measure() { # measure PHASE [DRIVER FLAGS…]: C=1 and C=32 on the stack as it is.
        local phase="$1"; shift
        for c in 1 32; do
            turns="$C1_TURNS"; [ "$c" = 32 ] && turns="$FLAT_C32_TURNS"
            out="$(drive "$url" "$c" "$turns" "${pids[@]}" -- "${extra[@]}" "$@")"
            echo "{\"stack\":\"flat-$stack\",\"phase\":\"$phase\",\"report\":$out}" | tee -a "$WORK/flat-$stack.jsonl"
            summary "flat $stack $phase" <<< "$out"
        done
    }
    : > "$WORK/flat-$stack.jsonl"
    measure empty
    echo "== flat $stack: filling $FLAT_TURNS turns (sessions of $FLAT_SESSION_TURNS, C=$FLAT_FILL_CONCURRENCY)" >&2
    out="$(drive "$url" "$FLAT_FILL_CONCURRENCY" "$FLAT_SESSION_TURNS" "${pids[@]}" -- "${extra[@]}" \
        --total "$FLAT_TURNS" --sessions-out "$sessions")"
    echo "{\"stack\":\"flat-$stack\",\"phase\":\"fill\",\"report\":$out}"
    summary "flat $stack fill" <<< "$out"
    measure full-fresh
    # The fill's longest sessions first: their history is what a long conversation has.
    sort -t "$(printf '\t')" -k2,2nr "$sessions" > "$sessions.longest"
    measure full-long-history --reuse "$sessions.longest"
    # Ratios full / empty per concurrency: 1.0 is flat; the target is within ±10 %.
    jq -sc --arg stack "$stack" '
        def at(p; c): map(select(.phase == p and .report.concurrency == c))[0].report;
        def ratio(a; b): if b > 0 then (a / b * 100 | round) / 100 else null end;
        . as $all | [1, 32] | map(. as $c | ($all | at("empty"; $c)) as $e
            | {concurrency: $c} + (["full-fresh", "full-long-history"] | map(. as $p | ($all | at($p; $c)) as $f | {
                key: $p, value: {
                    cpu_per_turn_ratio: ratio($f.server_cpu_ms_per_turn; $e.server_cpu_ms_per_turn),
                    p50_ratio: ratio($f.send_to_idle_ms.p50; $e.send_to_idle_ms.p50),
                    rss_kib_before: [$e.processes[].rss_kib], rss_kib_after: [$f.processes[].rss_kib]}}) | from_entries))
        | {stack: ("flat-" + $stack), ratios: .}
    ' "$WORK/flat-$stack.jsonl" | tee "$WORK/flat-$stack.ratios"
    jq -r '.stack + " full/empty: " + (.ratios | map("C=\(.concurrency) CPU/turn ×\(.["full-fresh"].cpu_per_turn_ratio) fresh, ×\(.["full-long-history"].cpu_per_turn_ratio) long history; p50 ×\(.["full-fresh"].p50_ratio) / ×\(.["full-long-history"].p50_ratio); RSS \(.["full-fresh"].rss_kib_before | map(./1024|round) | join("+")) → \(.["full-long-history"].rss_kib_after | map(./1024|round) | join("+")) MiB") | join("; "))' \
        "$WORK/flat-$stack.ratios" >&2
}

if [ "$mode" = flat ]; then
    FLAT_TURNS="${FLAT_TURNS:-100000}"
    FLAT_SESSION_TURNS="${FLAT_SESSION_TURNS:-50}"
    FLAT_FILL_CONCURRENCY="${FLAT_FILL_CONCURRENCY:-64}"
    FLAT_C32_TURNS="${FLAT_C32_TURNS:-20}"
    for stack in ${FLAT_STACKS:-dev distributed}; do
        echo "== flat $stack: C=1 × $C1_TURNS and C=32 × $FLAT_C32_TURNS, empty, then after $FLAT_TURNS turns" >&2
        case "$stack" in
            dev)
                start flatdev dev AGENTD_DATA_DIR="$WORK/flatdev"
                flat_stack dev "$URL" "dev=$PID"
                stop "$PID" ;;
            distributed)
                distributed_stack
                start worker worker "${dist_env[@]}"
                flat_stack distributed "$gw_url" "gateway=$gw_pid" "worker=$PID"
                stop "$gw_pid" "$PID" ;;
            *) echo "FLAT_STACKS: unknown stack $stack" >&2; exit 2 ;;
        esac
    done
fi

if [ "$mode" = soak ]; then
    SOAK_SECONDS="${SOAK_SECONDS:-120}"
    KILL_EVERY="${KILL_EVERY:-15}"
    SOAK_CONCURRENCY="${SOAK_CONCURRENCY:-8}"
    echo "== soak: ${SOAK_SECONDS}s, a worker SIGKILLed every ${KILL_EVERY}s" >&2
    distributed_stack AGENTD_LEASE=3s AGENTD_QUEUE_ACK_WAIT=3s
    start stable worker "${dist_env[@]}"
    stable_pid="$PID"
    start victim worker "${dist_env[@]}"
    victim_pid="$PID"
    "$DRIVER" --url "$gw_url" --key "$KEY" --model bench-zero-latency --concurrency "$SOAK_CONCURRENCY" \
        --duration "$SOAK_SECONDS" --turns 25 --turn-timeout 60 --pid "$gw_pid" --pid "$stable_pid" > "$WORK/soak.json" &
    driver=$!
    : > "$WORK/rss.csv"
    started=$SECONDS
    kills=0
    while kill -0 "$driver" 2>/dev/null; do
        sleep 1
        elapsed=$((SECONDS - started))
        if [ $((elapsed % 10)) -eq 0 ]; then
            for pair in "gateway:$gw_pid" "stable_worker:$stable_pid"; do
                rss=$(awk '/VmRSS/ {print $2}' "/proc/${pair#*:}/status" 2>/dev/null || echo 0)
                echo "$elapsed,${pair%%:*},$rss" >> "$WORK/rss.csv"
            done
        fi
        if [ $((elapsed % KILL_EVERY)) -eq 0 ] && [ "$elapsed" -gt 0 ]; then
            kill -9 "$victim_pid" 2>/dev/null || true
            kills=$((kills + 1))
            start "victim$kills" worker "${dist_env[@]}"
            victim_pid="$PID"
        fi
    done
    wait "$driver"
    echo "{\"stack\":\"soak\",\"worker_kills\":$kills,\"report\":$(cat "$WORK/soak.json")}"
    echo "resident memory (KiB) every 10 s, per long-lived process:" >&2
    for name in gateway stable_worker; do
        samples=$(awk -F, -v n="$name" '$2 == n {print $3}' "$WORK/rss.csv" | tr '\n' ' ')
        # Growth after warm-up: from the sample at a third of the run to the last one.
        warm=$((SOAK_SECONDS / 3 / 10 * 10))
        first=$(awk -F, -v n="$name" -v w="$warm" '$2 == n && $1 >= w {print $3; exit}' "$WORK/rss.csv")
        last=$(awk -F, -v n="$name" '$2 == n {v=$3} END {print v}' "$WORK/rss.csv")
        echo "{\"process\":\"$name\",\"rss_kib\":[${samples// /,}0],\"growth_percent\":$(( first > 0 ? (last - first) * 100 / first : 0 ))}" | sed 's/,0]/]/'
    done
fi

if [ "$mode" = streams ]; then
    # The same packages as the build above: another set resolves other features and
    # rebuilds the workspace.
    cargo build --release -p agentd -p agentd-tests --bin stream_bench >&2
    STREAM_DRIVER="$PWD/target/release/stream_bench"
    STREAMS="${STREAMS:-10000}"
    STREAM_SESSIONS="${STREAM_SESSIONS:-$STREAMS}"
    IDLE_SECONDS="${IDLE_SECONDS:-30}"
    FANOUT_STREAMS="${FANOUT_STREAMS:-1000}"
    FANOUT_TURNS="${FANOUT_TURNS:-20}"
    FIRST_TURNS="${FIRST_TURNS:-100}"
    # Every stream is a socket at both ends: driver and gateway inherit this limit.
    ulimit -n "$(ulimit -Hn)"
    streams_run() { # streams_run STACK URL GATEWAY_PID
        local stack="$1" url="$2" pid="$3" idle fanout first
        local base=(--url "$url" --key "$KEY" --model bench-zero-latency --pid "$pid")
        idle="$("$STREAM_DRIVER" "${base[@]}" --mode idle --streams "$STREAMS" --sessions "$STREAM_SESSIONS" --idle-seconds "$IDLE_SECONDS")"
        echo "{\"stack\":\"$stack\",\"report\":$idle}"
        fanout="$("$STREAM_DRIVER" "${base[@]}" --mode fanout --streams "$FANOUT_STREAMS" --events "$FANOUT_TURNS")"
        echo "{\"stack\":\"$stack\",\"report\":$fanout}"
        first="$("$STREAM_DRIVER" "${base[@]}" --mode fanout --streams 1 --events "$FIRST_TURNS")"
        echo "{\"stack\":\"$stack\",\"report\":$first}"
        jq -rn --arg stack "$stack" --argjson idle "$idle" --argjson fanout "$fanout" --argjson first "$first" '
            "streams \($stack): \($idle.streams) idle streams, \($idle.rss_per_stream_kib * 10 | round / 10) KiB RSS each, "
            + "idle CPU \($idle.gateway_idle_cpu_ms_per_s * 10 | round / 10) ms/s (\($idle.keepalives_per_s | round) keep-alives/s); "
            + "\($fanout.streams) streams on one session: commit→receipt p50 \($fanout.commit_to_receipt_ms.every_event.p50 | round) / p99 \($fanout.commit_to_receipt_ms.every_event.p99 | round) ms; "
            + "C=1 commit→first event p50 \($first.commit_to_receipt_ms.user_message.p50 * 10 | round / 10) ms, send→first p50 \($first.send_to_user_message_receipt_ms.p50 * 10 | round / 10) ms"' >&2
    }
    for stack in ${STACKS:-dev distributed}; do
        if [ "$stack" = dev ]; then
            echo "== streams: agentd dev" >&2
            start streams-dev dev AGENTD_DATA_DIR="$WORK/streams-dev"
            streams_run dev "$URL" "$PID"
            kill "$PID"
        else
            echo "== streams: distributed gateway (+ one worker for the turns)" >&2
            distributed_stack
            start streams-worker worker "${dist_env[@]}"
            streams_run distributed "$gw_url" "$gw_pid"
        fi
    done
fi

if [ "$mode" = read ]; then
    cargo build --release -p agentd -p agentd-tests --bin read_bench >&2
    READ_DRIVER="$PWD/target/release/read_bench"
    READ_CONCURRENCY="${READ_CONCURRENCY:-64}"
    READ_SECONDS="${READ_SECONDS:-20}"
    # Metering stays on, with a read bucket no run empties.
    read_limit=AGENTD_RATE_LIMIT_READ=1000000000
    read_run() { # read_run STACK URL PID [BACKEND_PID…]
        local stack="$1" url="$2" pid="$3" report; shift 3
        local backends=()
        for backend in "$@"; do backends+=(--backend-pid "$backend"); done
        report="$("$READ_DRIVER" --url "$url" --key "$KEY" --concurrency "$READ_CONCURRENCY" --seconds "$READ_SECONDS" --pid "$pid" "${backends[@]}")"
        echo "{\"stack\":\"$stack\",\"report\":$report}"
        jq -rn --arg stack "$stack" --argjson r "$report" '
            "read \($stack): \($r.requests_per_second | round) req/s at C=\($r.concurrency), p50 \($r.latency_ms.p50) / p99 \($r.latency_ms.p99) ms, "
            + "agentd \($r.server_cpu_us_per_request | round) µs CPU/request (\($r.server_cores * 100 | round) % of a core), "
            + "backends \($r.backend_cpu_us_per_request | round) µs, driver \($r.driver_cpu_us_per_request | round) µs (\($r.driver_cores * 100 | round) %), non-200: \($r.non_200)"' >&2
    }
    for stack in ${STACKS:-dev distributed}; do
        if [ "$stack" = dev ]; then
            echo "== read: agentd dev" >&2
            start read-dev dev AGENTD_DATA_DIR="$WORK/read-dev" "$read_limit"
            read_run dev "$URL" "$PID"
            kill "$PID"
        else
            echo "== read: distributed gateway (Redis metering)" >&2
            distributed_stack "$read_limit"
            # shellcheck disable=SC2046 # one pid per word
            read_run distributed "$gw_url" "$gw_pid" $(pgrep -x redis-server) $(pgrep -x postgres)
        fi
    done
fi

# deploy: the compose stack in containers (scripts/stack, the release binary copied into
# the image) driven through its balancer at C=DEPLOY_CONCURRENCY (32) with 1 worker, then
# with 3 (`scripts/stack scale 3`): turns/s and send → idle latency per configuration, the
# committed history audited (0 lost, 0 duplicate). The processes run in containers, so
# the report has no per-process CPU; machine_busy_percent says how loaded the box was.
if [ "$mode" = deploy ]; then
    DEPLOY_CONCURRENCY="${DEPLOY_CONCURRENCY:-32}"
    DEPLOY_TURNS="${DEPLOY_TURNS:-30}"
    export AGENTD_STACK_PROJECT="agentd-bench-$$" AGENTD_IMAGE=localhost/agentd:bench
    free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
    for port in AGENTD_PORT GATEWAY_1_OPS_PORT GATEWAY_2_OPS_PORT NATS_MONITORING_PORT MINIO_PORT MINIO_CONSOLE_PORT; do
        export "$port=$(free_port)"
    done
    trap 'cleanup; scripts/stack down >&2 || true' EXIT
    echo "== deploy: the compose stack through its balancer" >&2
    url="$(scripts/stack up --workers 1 --binary "$BIN" -f tests/bench/turn/deploy.yml)"
    KEY="$(scripts/stack key)"
    for workers in 1 3; do
        [ "$workers" = 1 ] || scripts/stack scale "$workers"
        sleep 2
        report="$("$DRIVER" --url "$url" --key "$KEY" --model agentd-script --concurrency "$DEPLOY_CONCURRENCY" \
            --turns "$DEPLOY_TURNS" --audit)"
        report "deploy-${workers}w" "C=$DEPLOY_CONCURRENCY" "$report"
    done
fi
