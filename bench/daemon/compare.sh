#!/usr/bin/env bash
# Compares builds of the daemon on POST /v1/check and POST /v1/actions,
# alternating them so each pair of runs sees the same machine: on a shared
# two-core machine the speed drifts by a third over minutes, so only figures
# taken side by side compare.
#
#   bench/daemon/compare.sh ROUNDS BIN[,VAR=value...] [BIN[,VAR=value...]...]
#
# For each round and build: a fresh daemon (built-in defaults, its own data
# dir, durability $DURABILITY or normal, plus the VAR=value settings given
# with that BIN, e.g. `target/release/actiongate,ACTIONGATE_STORAGE__BATCH_MAX=32`
# to compare settings of one build), an agent with profile `open`, then oha
# with $CONNECTIONS (64) connections for $SECONDS_EACH (4) seconds on /v1/check and on
# /v1/actions (each after a 1 s warm-up). Prints one line per run: 2xx/s of
# both, their ratio, the actions' p99, the daemon's CPU time per action
# (user + system, from /proc) and how idle the machine was during the
# actions' run; then the median of each over the rounds, per argument.
# Needs oha and python3.
set -euo pipefail
# shellcheck source=bench/daemon/daemon.sh
. "$(dirname "$0")/daemon.sh"

ROUNDS=${1:?rounds}
shift
[ $# -gt 0 ] || { echo "usage: $0 ROUNDS BIN[,VAR=value...] [BIN[,VAR=value...]...]" >&2; exit 2; }
SECONDS_EACH=${SECONDS_EACH:-4}
command -v oha >/dev/null || { echo "oha not found: cargo install oha --locked" >&2; exit 1; }
RESULTS=$(mktemp)
trap 'rm -f "$RESULTS"' EXIT

run_one() {
  local arg=$1 bin settings=() label work
  bin=${arg%%,*}
  [ "$arg" = "$bin" ] || IFS=, read -ra settings <<<"${arg#*,}"
  label="$(basename "$bin")${settings[*]:+ ${settings[*]}}"
  bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
  work=$(mktemp -d)
  bench_daemon "$work" "$DURABILITY" "$bin" /dev/null "${settings[@]}"
  local line=""
  for path in /v1/check /v1/actions; do
    local common=(-c "$CONNECTIONS" --no-tui -m POST -H "authorization: Bearer $AGENT" -H 'content-type: application/json' -d "$BODY")
    oha -z 1s "${common[@]}" "$BASE$path" >/dev/null
    local before after machine_before machine_after
    before=$(awk '{print $14 + $15}' "/proc/$PID/stat")
    machine_before=$(jiffies)
    oha -z "${SECONDS_EACH}s" --output-format json "${common[@]}" "$BASE$path" >"$work/oha.json"
    machine_after=$(jiffies)
    after=$(awk '{print $14 + $15}' "/proc/$PID/stat")
    line+=$(python3 - "$work/oha.json" "$before" "$after" "$(getconf CLK_TCK)" $machine_before $machine_after <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ok = sum(n for code, n in d["statusCodeDistribution"].items() if code.startswith("2"))
rate = d["summary"]["requestsPerSec"] * ok / max(1, sum(d["statusCodeDistribution"].values()))
cpu_us = (int(sys.argv[3]) - int(sys.argv[2])) / int(sys.argv[4]) * 1e6 / max(ok, 1)
idle0, all0, idle1, all1 = map(int, sys.argv[5:9])
idle = 100 * (idle1 - idle0) / max(1, all1 - all0)
print("%.0f %.2f %.1f %.1f " % (rate, d["latencyPercentiles"]["p99"] * 1000, cpu_us, idle), end="")
PY
)
  done
  kill "$PID"
  wait "$PID" 2>/dev/null || true
  rm -rf "$work"
  read -r check _ _ _ actions p99 cpu idle <<<"$line"
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$label" "$check" "$actions" "$p99" "$cpu" "$idle" >>"$RESULTS"
  printf '%-24s check %6s/s  actions %6s/s  actions/check %.3f  actions p99 %5s ms  daemon CPU %5s us/action  idle %4s%%\n' \
    "$label" "$check" "$actions" "$(python3 -c "print($actions / $check)")" "$p99" "$cpu" "$idle"
}

for _ in $(seq 1 "$ROUNDS"); do
  for arg in "$@"; do
    run_one "$arg"
  done
done

echo "medians over $ROUNDS round(s):"
python3 - "$RESULTS" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    label, *values = line.rstrip("\n").split("\t")
    runs.setdefault(label, []).append([float(v) for v in values])
for label, rows in runs.items():
    med = lambda i: statistics.median(r[i] for r in rows)
    ratios = statistics.median(r[1] / r[0] for r in rows)
    print("%-24s check %6.0f/s  actions %6.0f/s  actions/check %.3f  actions p99 %5.2f ms  daemon CPU %5.1f us/action  idle %4.1f%%"
          % (label, med(0), med(1), ratios, med(2), med(3), med(4)))
PY
