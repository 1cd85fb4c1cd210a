#!/usr/bin/env bash
# Does the daemon give memory back after bursts of long-polls? Starts BIN
# (default: the release build of this tree, built if needed) with a fresh
# data dir, makes $N (10000) pending actions, then $ROUNDS (3) times opens
# $N long-polls at once, closes them all and reads the idle VmRSS. See
# bench/memory/README.md for the figures. Needs python3 with aiohttp
# (installed with pip if missing) and curl.
#
#   bench/memory/run.sh [BIN]      (N, ROUNDS, SETTLE, HOLD seconds: environment)
set -euo pipefail
BIN=${1:+$(cd "$(dirname "$1")" && pwd)/$(basename "$1")}
cd "$(dirname "$0")/../.."
# shellcheck source=bench/daemon/daemon.sh
. bench/daemon/daemon.sh

python3 -c 'import aiohttp' 2>/dev/null \
  || python3 -m pip install --quiet --disable-pip-version-check aiohttp
bench_bin
# 10,000 sockets on each side (two processes), and the probes.
ulimit -n "$(ulimit -Hn)"

WORK=$(mktemp -d)
PID=
trap '[ -n "$PID" ] && kill "$PID" 2>/dev/null; wait 2>/dev/null; rm -rf "$WORK"' EXIT
# shellcheck disable=SC2086 # one word a setting
bench_daemon "$WORK" "$DURABILITY" "$BIN" "$WORK/daemon.log" ${SETTINGS:-} $PENDING_SETTING
# Every action asks: each stays pending for its long-poll.
bench_api PUT /v1/agents/bench '{"profile":"guarded"}' >/dev/null
echo "== $BIN ($(basename "$BIN")), durability $DURABILITY"
python3 bench/memory/rounds.py --base "$BASE" --agent-key "$AGENT" --pid "$PID" \
  -n "${N:-10000}" --rounds "${ROUNDS:-3}" --settle "${SETTLE:-10}" --hold "${HOLD:-0}"
