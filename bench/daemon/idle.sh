#!/usr/bin/env bash
# Why the machine idles under load: who had been woken and was waiting for a
# CPU while a CPU sat idle, and what it waited behind, for POST /v1/check
# and POST /v1/actions.
#
#   bench/daemon/idle.sh [BIN]
#
# Starts BIN (default: the release build of this tree, built if needed)
# with a fresh data dir, durability $DURABILITY (normal), the daemon's
# settings in $SETTINGS (VAR=value, space-separated; none) and an agent
# with profile `open`; for each route runs oha with $CONNECTIONS (64)
# connections for 4 s and, from its second second, records the scheduler's
# switch and wakeup events on every CPU for $WINDOW (0.5) seconds with
# `perf record`; then prints what bench/daemon/idle.py makes of them. Needs
# oha, python3 and perf with the rights to trace the scheduler (root, or
# kernel.perf_event_paranoid at -1).
set -euo pipefail
# A BIN given is relative to where this was started from.
BIN=${1:+$(cd "$(dirname "$1")" && pwd)/$(basename "$1")}
cd "$(dirname "$0")/../.."
# shellcheck source=bench/daemon/daemon.sh
. bench/daemon/daemon.sh

WINDOW=${WINDOW:-0.5}
for tool in oha perf python3; do
  command -v "$tool" >/dev/null || { echo "$tool not found" >&2; exit 1; }
done
bench_bin

WORK=$(mktemp -d)
PID=
trap '[ -n "$PID" ] && kill "$PID" 2>/dev/null; wait 2>/dev/null; rm -rf "$WORK"' EXIT
bench_routes "$WORK"

for path in /v1/check /v1/actions; do
  oha -z 4s --output-format json "${LOAD[@]}" "$BASE$path" >"$WORK/oha.json" &
  load=$!
  sleep 1
  # The runtime starts its workers (one a CPU) before anything else, so
  # the runtime's threads after them are its blocking pool: the writer,
  # the only thing the daemon runs there. sqlx runs a thread per SQLite
  # connection, the background checkpoint's among them.
  for t in /proc/"$PID"/task/*; do
    echo "$(basename "$t") $(cat "$t/comm")"
  done | sort -n | awk -v cpus="$(nproc)" '
    $2 == "tokio-rt-worker" { $2 = (++n <= cpus) ? "runtime worker" : "writer" }
    $2 == "sqlx-sqlite-wor" { $2 = "sqlx connection" }
    { print }' >"$WORK/tids"
  before=$(jiffies)
  perf record -q -m 4096 -a -e sched:sched_switch -e sched:sched_wakeup -o "$WORK/sched.data" -- sleep "$WINDOW" >/dev/null 2>&1
  after=$(jiffies)
  wait "$load"
  perf script -i "$WORK/sched.data" -F comm,pid,tid,cpu,time,event,trace >"$WORK/sched.txt" 2>/dev/null
  rate=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["summary"]["requestsPerSec"])' "$WORK/oha.json")
  printf '== %s: %.0f/s, machine idle %s%% (/proc/stat)\n' "$path" "$rate" \
    "$(echo "$before $after" | awk '{printf "%.1f", 100 * ($3 - $1) / ($4 - $2)}')"
  python3 bench/daemon/idle.py "$WORK/sched.txt" "$rate" "$WORK/tids"
done
