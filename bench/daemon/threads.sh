#!/usr/bin/env bash
# Where the CPU goes per request, by thread of the daemon, for POST
# /v1/check and POST /v1/actions on one daemon.
#
#   bench/daemon/threads.sh [BIN]
#
# Starts BIN (default: the release build of this tree, built if needed)
# with a fresh data dir, durability $DURABILITY (normal), the daemon's
# settings in $SETTINGS (VAR=value, space-separated; none) and an agent with
# profile `open`, warms both routes up for 1 s, then for each route runs
# oha with $CONNECTIONS (64) connections for $REQUESTS (60000) requests and
# prints, per request: the CPU time (user + system, from
# /proc/<pid>/task/*/stat) of every daemon thread that used any, one figure
# per thread grouped by thread name (the writer's thread is named like the
# runtime's workers; it is the one that only new actions keep busy; the
# sqlx threads are SQLite connections, one of them the background
# checkpoint), and oha's own; the machine's idle share; and the machine
# time per request (CPUs / rate). Needs oha and python3.
set -euo pipefail
# A BIN given is relative to where this was started from.
BIN=${1:+$(cd "$(dirname "$1")" && pwd)/$(basename "$1")}
cd "$(dirname "$0")/../.."
# shellcheck source=bench/daemon/daemon.sh
. bench/daemon/daemon.sh

REQUESTS=${REQUESTS:-60000}
command -v oha >/dev/null || { echo "oha not found: cargo install oha --locked" >&2; exit 1; }
bench_bin

WORK=$(mktemp -d)
PID=
trap '[ -n "$PID" ] && kill "$PID" 2>/dev/null; wait 2>/dev/null; rm -rf "$WORK"' EXIT
bench_routes "$WORK"

# "tid name cpu-ticks" for every thread of the daemon.
threads() {
  for t in /proc/"$PID"/task/*; do
    echo "$(basename "$t") $(sed 's/^[0-9]* (\(.*\)) .*/\1/' "$t/stat" | tr ' ' _) $(awk '{print $14 + $15}' "$t/stat")"
  done
}
for path in /v1/check /v1/actions; do
  threads >"$WORK/before"
  machine_before=$(jiffies)
  # oha's own CPU time, from its rusage.
  python3 -c 'import resource, subprocess, sys
subprocess.run(sys.argv[2:], stdout=open(sys.argv[1], "w"), check=True)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(r.ru_utime, r.ru_stime)' "$WORK/oha.json" \
    oha -n "$REQUESTS" --output-format json "${LOAD[@]}" "$BASE$path" >"$WORK/oha.time"
  machine_after=$(jiffies)
  threads >"$WORK/after"
  python3 - "$path" "$WORK" "$REQUESTS" $machine_before $machine_after <<'PY'
import json, os, sys
path, work, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
tick = os.sysconf("SC_CLK_TCK")
def load(name):
    out = {}
    for line in open(os.path.join(work, name)):
        tid, comm, ticks = line.split()
        out[tid] = (comm, int(ticks))
    return out
before, after = load("before"), load("after")
used = {tid: (comm, ticks - before.get(tid, (comm, 0))[1]) for tid, (comm, ticks) in after.items()}
used = {tid: v for tid, v in used.items() if v[1] > 0}
per = lambda ticks: ticks / tick * 1e6 / n
groups = {}
for tid, (comm, ticks) in sorted(used.items(), key=lambda kv: -kv[1][1]):
    groups.setdefault(comm, []).append(per(ticks))
user, system = map(float, open(os.path.join(work, "oha.time")).read().split()[-2:])
d = json.load(open(os.path.join(work, "oha.json")))
rate = d["summary"]["requestsPerSec"]
idle0, all0, idle1, all1 = map(int, sys.argv[4:8])
idle = 100 * (idle1 - idle0) / max(1, all1 - all0)
threads = "  ".join("%s %s" % (comm, "+".join("%.1f" % v for v in vals)) for comm, vals in groups.items())
daemon = sum(sum(v) for v in groups.values())
print("%-12s %6.0f/s  daemon %5.1f us (%s)  oha %4.1f us  idle %4.1f%%  machine %5.1f us/request"
      % (path, rate, daemon, threads, (user + system) * 1e6 / n, idle, os.cpu_count() * 1e6 / rate))
PY
done
