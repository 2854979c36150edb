#!/usr/bin/env bash
# Side by side: LangGraph's Agent Server (`langgraph dev`, its in-memory dev server) and
# `agentd dev`, same machine, same driver design, one run each, then the ratios.
#
# Usage: tests/bench/peer/run.sh   (also `tests/bench/turn/run.sh peer`)
# Environment: PEER_C1_TURNS (default 20: LangGraph's in-memory queue polls about once
#              a second, so a C=1 turn takes ~1 s), PEER_C32_TURNS (default 10 per
#              thread), PEER_JOBS (default 32: `--n-jobs-per-worker`, so all 32 threads
#              can run at once rather than the default 10), AGENTD_C1_TURNS (default
#              200), AGENTD_C32_TURNS (default 30), LANGGRAPH_PACKAGES (the pip
#              requirements, pinned below), AGENTD_BENCH_CACHE (where the venv lives;
#              default ~/.cache/agentd-bench).
#
# The LangGraph server is installed from PyPI into its own venv (kept in the cache, one
# per package set), with a graph of one node that returns a fixed AI message: no model
# call, like agentd's zero-latency `scripted` model. It listens on 127.0.0.1 with no
# browser, no tunnel, no reload and no telemetry. tests/src/bin/peer_bench.rs drives it
# (a turn = one run created on a thread and waited for with `runs/wait`); agentd is
# driven by tests/bench/turn/run.sh dev (a turn = one user.message sent and its
# `session.status_idle` awaited on the session's live stream). CPU is each server's
# process tree from /proc; the driver shares the cores in both cases.
#
# Prints one JSON line per run and one with the ratios on stdout, and a one-line
# summary of each on stderr.
set -euo pipefail
cd "$(dirname "$0")/../../.."
PEER_C1_TURNS="${PEER_C1_TURNS:-20}"
PEER_C32_TURNS="${PEER_C32_TURNS:-10}"
PEER_JOBS="${PEER_JOBS:-32}"
AGENTD_C1_TURNS="${AGENTD_C1_TURNS:-200}"
AGENTD_C32_TURNS="${AGENTD_C32_TURNS:-30}"
LANGGRAPH_PACKAGES="${LANGGRAPH_PACKAGES:-langgraph-cli[inmem]==0.4.40 langgraph-api==0.16.7}"
CACHE="${AGENTD_BENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agentd-bench}"
VENV="$CACHE/langgraph-$(echo "$LANGGRAPH_PACKAGES" | md5sum | cut -c1-12)"

# A venv's scripts name its path, so it is built in place; the marker says it finished.
if [ ! -f "$VENV/.installed" ]; then
    echo "== installing $LANGGRAPH_PACKAGES into $VENV" >&2
    rm -rf "$VENV"
    mkdir -p "$CACHE"
    python3.11 -m venv "$VENV"
    # shellcheck disable=SC2086 # one word per requirement
    "$VENV/bin/pip" install -q $LANGGRAPH_PACKAGES >&2
    touch "$VENV/.installed"
fi

# The same packages as tests/bench/turn/run.sh builds, so features unify alike and
# neither build invalidates the other.
cargo build --release -p agentd -p agentd-tests --bin agentd --bin turn_bench --bin peer_bench >&2
DRIVER="$PWD/target/release/peer_bench"
WORK="$(mktemp -d)"
SERVER=""
cleanup() {
    if [ -n "$SERVER" ]; then kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT

mkdir "$WORK/graph"
cat > "$WORK/graph/graph.py" <<'PY'
"""A zero-latency graph: one node that answers every turn with a fixed AI message."""
from typing import Annotated, TypedDict

from langchain_core.messages import AIMessage, AnyMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def reply(state: State) -> dict:
    return {"messages": [AIMessage(content="ok")]}


builder = StateGraph(State)
builder.add_node("reply", reply)
builder.add_edge(START, "reply")
builder.add_edge("reply", END)
graph = builder.compile()
PY
echo '{"dependencies": ["."], "graphs": {"agent": "./graph.py:graph"}}' > "$WORK/graph/langgraph.json"

port="$("$VENV/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
echo "== LangGraph $("$VENV/bin/pip" show langgraph-api 2>/dev/null | sed -n 's/^Version: //p') dev server on 127.0.0.1:$port" >&2
(
    cd "$WORK/graph"
    exec env LANGGRAPH_CLI_NO_ANALYTICS=1 LANGSMITH_TRACING=false LANGCHAIN_TRACING_V2=false \
        "$VENV/bin/langgraph" dev --host 127.0.0.1 --port "$port" --no-browser --no-reload \
        --n-jobs-per-worker "$PEER_JOBS" --server-log-level WARNING
) > "$WORK/langgraph.log" 2>&1 &
SERVER=$!
for _ in $(seq 1 120); do
    curl -sf "http://127.0.0.1:$port/ok" >/dev/null && break
    kill -0 "$SERVER" 2>/dev/null || { echo "langgraph dev did not start:" >&2; cat "$WORK/langgraph.log" >&2; exit 1; }
    sleep 0.5
done

peer_summary() { # peer_summary LABEL < REPORT
    jq -r --arg name "$1" '"\($name): \(.turns) turns at C=\(.concurrency): \(.turns_per_second * 10 | round / 10) turns/s, send→done p50 \(.send_to_done_ms.p50 | round) / p99 \(.send_to_done_ms.p99 | round) ms, \(.server_cpu_ms_per_turn * 10 | round / 10) ms server CPU/turn, RSS \(.rss_kib / 1024 | round) MiB, machine \(.machine_busy_percent | round) % busy"' >&2
}
for c in 1 32; do
    turns="$PEER_C1_TURNS"; [ "$c" = 32 ] && turns="$PEER_C32_TURNS"
    out="$("$DRIVER" --url "http://127.0.0.1:$port" --assistant agent --concurrency "$c" --turns "$turns" --pid "$SERVER")"
    echo "{\"stack\":\"langgraph\",\"report\":$out}" | tee -a "$WORK/peer.jsonl"
    peer_summary "langgraph C=$c" <<< "$out"
done
kill "$SERVER"; wait "$SERVER" 2>/dev/null || true; SERVER=""

echo "== agentd dev under turn_bench" >&2
C1_TURNS="$AGENTD_C1_TURNS" C32_TURNS="$AGENTD_C32_TURNS" tests/bench/turn/run.sh dev | tee -a "$WORK/peer.jsonl"

# Ratios agentd / LangGraph: throughput (higher is agentd faster; target ≥ 10 at C=32)
# and server CPU per turn (lower is agentd cheaper; target ≤ 0.2).
jq -sc '
    def at(s; c): map(select(.stack == s and .report.concurrency == c))[0].report;
    def r2: . * 100 | round / 100;
    . as $all | {stack: "peer", ratios: ([1, 32] | map(. as $c | ($all | at("dev"; $c)) as $a | ($all | at("langgraph"; $c)) as $l | {
        concurrency: $c,
        throughput_ratio: ($a.turns_per_second / $l.turns_per_second | r2),
        cpu_per_turn_ratio: ($a.server_cpu_ms_per_turn / $l.server_cpu_ms_per_turn | r2),
        p50_ms: {agentd: ($a.send_to_idle_ms.p50 | r2), langgraph: ($l.send_to_done_ms.p50 | r2)}}))}
' "$WORK/peer.jsonl" | tee "$WORK/ratios.json"
jq -r '"peer: agentd / LangGraph " + (.ratios | map("C=\(.concurrency): ×\(.throughput_ratio) throughput, ×\(.cpu_per_turn_ratio) CPU per turn") | join("; "))' "$WORK/ratios.json" >&2
