#!/usr/bin/env bash
# The cost of a sandbox start per isolation level (runner/examples/sandbox_start.rs):
# open (workdir, uid, tmpfs), first bash call (the wrapped shell starts), a warm call,
# discard. Needs root and bubblewrap, like the runner's default. Usage:
#   tests/bench/sandbox/run.sh [ROUNDS]        (default 50; PROFILE=dev for a debug build)
set -euo pipefail
cd "$(dirname "$0")/../../.."
[ "$(id -u)" -eq 0 ] || { echo "run as root: the sandbox gives each session its own uid" >&2; exit 1; }
command -v bwrap >/dev/null || { echo "install bubblewrap first (scripts/test does)" >&2; exit 1; }
profile="${PROFILE:-release}"
cargo run --quiet --profile "$profile" -p agentd-runner --example sandbox_start -- "${1:-50}"
