#!/usr/bin/env bash
# CPU per request of the actiongate daemon, next to a bare axum server (the
# floor, bench/cost/floor/) measured in the same run. See README.md beside it.
#
# The server under load runs pinned to CPU $SERVER_CPU (0), wrk pinned to CPU
# $LOAD_CPU (1). Each load: a fresh server (a daemon on a fresh data dir), a
# warm-up of $WARMUP s that is not counted, then $DURATION s of wrk with
# $CONNECTIONS connections on one thread. The server's utime+stime (fields 14
# and 15 of /proc/PID/stat, all its threads) is read just before and just
# after, and divided by the 2xx answers counted: µs of CPU per request. A
# non-2xx answer or a socket error fails the run.
#
# Loads: the daemon's GET /healthz, POST /v1/check (tool bash, profile
# standard) and POST /v1/actions (a decision-only file action, allowed under
# standard, stored with the built-in default durability), for BIN_A and BIN_B
# in turn (A B in odd rounds, B A in even ones), and the floor's GET /healthz
# and POST /v1/check, once per round, first. After the actions load the
# daemon stops and the database's bytes in use per stored action are counted
# (db_bytes.py). The tables give the median of the rounds: each load's cost,
# then each endpoint's cost as a multiple of the floor's.
#
# Environment: BIN_A (required), BIN_B (optional), ROUNDS (3), DURATION (10,
# whole seconds, at most 10), WARMUP (2), CONNECTIONS (16), SERVER_CPU (0),
# LOAD_CPU (1), FLOOR_BIN (default: built here with cargo), OUT (default
# bench/out/cost-<UTC stamp>), SETTINGS (daemon settings as VAR=value words,
# e.g. "ACTIONGATE_STORAGE__DURABILITY=normal").
# Needs: wrk (Debian: apt-get install -y wrk), curl, jq, taskset, python3,
# cargo (for the floor, unless FLOOR_BIN is given).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)

BIN_A=${BIN_A:-}
BIN_B=${BIN_B:-}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
CONNECTIONS=${CONNECTIONS:-16}
SERVER_CPU=${SERVER_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
SETTINGS=${SETTINGS:-}
OUT=${OUT:-$ROOT/bench/out/cost-$(date -u +%Y%m%dT%H%M%SZ)}

die() {
  echo "run.sh: $*" >&2
  exit 1
}

for tool in wrk curl jq taskset getconf python3; do
  command -v "$tool" >/dev/null || die "$tool not found (wrk: apt-get install -y wrk)"
done
[ -n "$BIN_A" ] || die "set BIN_A to a daemon binary (and optionally BIN_B)"
for n in "$ROUNDS" "$DURATION" "$WARMUP" "$CONNECTIONS" "$SERVER_CPU" "$LOAD_CPU"; do
  [[ "$n" =~ ^[0-9]+$ ]] || die "ROUNDS, DURATION, WARMUP, CONNECTIONS and the CPUs are whole numbers"
done
((ROUNDS >= 1 && DURATION >= 1 && DURATION <= 10 && CONNECTIONS >= 1)) ||
  die "need ROUNDS >= 1, 1 <= DURATION <= 10, CONNECTIONS >= 1"
((SERVER_CPU != LOAD_CPU)) || die "SERVER_CPU and LOAD_CPU must differ"
for cpu in "$SERVER_CPU" "$LOAD_CPU"; do
  taskset -c "$cpu" true 2>/dev/null || die "cannot run on CPU $cpu"
done

# Absolute paths: servers start from their own work dirs.
abs() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }
BIN_A=$(abs "$BIN_A")
[ -x "$BIN_A" ] || die "BIN_A $BIN_A is not an executable"
if [ -n "$BIN_B" ]; then
  BIN_B=$(abs "$BIN_B")
  [ -x "$BIN_B" ] || die "BIN_B $BIN_B is not an executable"
fi
if [ -z "${FLOOR_BIN:-}" ]; then
  cargo build --quiet --release --manifest-path "$HERE/floor/Cargo.toml"
  FLOOR_BIN=$HERE/floor/target/release/actiongate-cost-floor
fi
FLOOR_BIN=$(abs "$FLOOR_BIN")

TCK=$(getconf CLK_TCK)
mkdir -p "$OUT/logs"
WORK=$OUT/work
RESULTS=$OUT/results.tsv
printf 'round\tbinary\tendpoint\trequests\tticks\tcpu_us_per_req\tp50_us\tp99_us\trps\tserver_cpu_pct\tothers_on_cpu_pct\tloadavg\n' >"$RESULTS"

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: nproc $(nproc), $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
  echo "commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "A: $BIN_A"
  [ -z "$BIN_B" ] || echo "B: $BIN_B"
  echo "floor: $FLOOR_BIN"
  echo "wrk: $(wrk -v 2>&1 | head -1)"
  echo "load: ${DURATION}s x $CONNECTIONS connections (1 wrk thread on CPU $LOAD_CPU), warm-up ${WARMUP}s; server on CPU $SERVER_CPU; CLK_TCK $TCK; rounds $ROUNDS"
  echo "settings: ${SETTINGS:-built-in defaults}"
  echo "loadavg at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$OUT/machine.txt"

PID=
stop_server() {
  if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then
    kill "$PID"
    wait "$PID" 2>/dev/null || true
  fi
  PID=
}
cleanup() {
  stop_server
  # Only the data dirs this run made, inside its own OUT.
  if [ -d "$WORK" ]; then
    rm -rf -- "$WORK"
  fi
}
trap cleanup EXIT

# A loopback port nothing answers on (a clash at bind fails start_server).
free_port() {
  local port
  for _ in $(seq 1 50); do
    port=$((20000 + RANDOM % 40000))
    if ! (: <"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "$port"
      return
    fi
  done
  die "no free loopback port found"
}

# start_server NAME CMD...: runs CMD 127.0.0.1:PORT pinned to SERVER_CPU from the fresh dir
# $WORK/NAME (its data dir is $WORK/NAME/data), output to logs/NAME.log;
# waits for GET /readyz. Sets PID, BASE and DIR.
start_server() {
  local name=$1 port
  shift
  DIR=$WORK/$name
  mkdir -p "$DIR"
  port=$(free_port)
  BASE=http://127.0.0.1:$port
  # The daemon reads config/actiongate.toml from its work dir when present:
  # $DIR has none, so it runs on its built-in defaults plus SETTINGS.
  # shellcheck disable=SC2086 # SETTINGS: one VAR=value a word
  (cd "$DIR" && exec env -u ACTIONGATE_CONFIG $SETTINGS taskset -c "$SERVER_CPU" "$@" "127.0.0.1:$port") \
    >"$OUT/logs/$name.log" 2>&1 &
  PID=$!
  for _ in $(seq 1 100); do
    curl -fsS -o /dev/null "$BASE/readyz" 2>/dev/null && return
    kill -0 "$PID" 2>/dev/null || die "$name exited at start; see $OUT/logs/$name.log"
    sleep 0.1
  done
  die "$name not ready after 10 s; see $OUT/logs/$name.log"
}

# The daemon's command line up to its address (start_server appends it).
daemon_cmd() {
  DAEMON=("$1" serve --data-dir data --listen)
}
floor_cmd() {
  FLOOR=("$FLOOR_BIN")
}

# api METHOD PATH BODY: a request with the admin key; prints the answer.
api() {
  curl -fsS -X "$1" "$BASE$2" -H "authorization: Bearer $ADMIN" \
    -H 'content-type: application/json' -d "$3"
}

# Keys and profile of the daemon just started: an agent `bench` with profile
# `standard`, its key in $DIR/agent.key.
daemon_setup() {
  ADMIN=$(tr -d '[:space:]' <"$DIR/data/admin.key")
  (umask 077 && api POST /v1/keys '{"role":"agent","agent":"bench"}' | jq -er .key >"$DIR/agent.key")
  api PUT /v1/agents/bench '{"profile":"standard"}' >/dev/null
}

# sanity NAME PATH BODY KEYFILE: one request before the load (a GET when
# BODY is empty); it must be 2xx (and, for a stored action, allowed), its
# answer is kept in the log.
sanity() {
  local name=$1 path=$2 body=$3 key=$4 code auth=() send=()
  if [ -n "$key" ]; then
    auth=(-H "authorization: Bearer $(tr -d '[:space:]' <"$key")")
  fi
  if [ -n "$body" ]; then
    send=(-X POST -H 'content-type: application/json' --data-binary "@$body")
  fi
  code=$(curl -sS -o "$OUT/logs/$name.first.json" -w '%{http_code}' "${send[@]}" "$BASE$path" \
    "${auth[@]}")
  [[ "$code" == 2?? ]] || die "$name: first request answered $code: $(cat "$OUT/logs/$name.first.json")"
}

# CPU ticks (utime + stime) of process $1 so far, all its threads.
cpu_ticks() {
  local line rest
  read -r line <"/proc/$1/stat"
  rest=${line##*) } # after the command name, which may hold spaces
  # shellcheck disable=SC2086 # split into fields; $1 is field 3 (state)
  set -- $rest
  echo $((${12} + ${13}))
}

# Busy ticks of CPU $1 so far (user nice system irq softirq steal).
cpu_busy() {
  awk -v cpu="cpu$1" '$1 == cpu {print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat
}

# wrk_run SECONDS PATH BODY KEYFILE: wrk on LOAD_CPU; prints post.lua's line.
wrk_run() {
  taskset -c "$LOAD_CPU" wrk -t1 -c "$CONNECTIONS" -d "${1}s" --latency -s "$HERE/post.lua" \
    "$BASE$2" -- "$3" "$4" | grep '^requests='
}

# measure ROUND LABEL ENDPOINT PATH BODY KEYFILE: the warm-up, then the
# counted load of the server at PID; appends a row to results.tsv.
measure() {
  local round=$1 label=$2 endpoint=$3 path=$4 body=$5 key=$6 line t0 t1 b0 b1 load
  local requests ok other errors p50 p99 rps p50_us p99_us
  wrk_run "$WARMUP" "$path" "$body" "$key" >/dev/null
  b0=$(cpu_busy "$SERVER_CPU")
  t0=$(cpu_ticks "$PID")
  line=$(wrk_run "$DURATION" "$path" "$body" "$key")
  t1=$(cpu_ticks "$PID")
  b1=$(cpu_busy "$SERVER_CPU")
  echo "$label $endpoint round $round: $(grep '^Threads' "/proc/$PID/status")" >>"$OUT/logs/threads.txt"
  load=$(cut -d' ' -f1 /proc/loadavg)
  echo "$line" >>"$OUT/logs/wrk.txt"
  eval "$(tr ' ' '\n' <<<"$line" | grep -E '^(requests|ok|other|errors|p50_us|p99_us|rps)=[0-9.]+$')"
  requests=${requests:-0} ok=${ok:-0} other=${other:-0} errors=${errors:-0}
  p50=${p50_us:-0} p99=${p99_us:-0}
  ((other == 0 && errors == 0)) ||
    die "$label $endpoint round $round: $other non-2xx answers, $errors socket errors ($line)"
  ((ok > 0)) || die "$label $endpoint round $round: no request answered ($line)"
  awk -v OFS='\t' -v r="$round" -v l="$label" -v e="$endpoint" -v ok="$ok" -v t="$((t1 - t0))" \
    -v b="$((b1 - b0))" -v tck="$TCK" -v d="$DURATION" -v p50="$p50" -v p99="$p99" -v rps="$rps" -v la="$load" \
    'BEGIN { print r, l, e, ok, t, sprintf("%.1f", t * 1e6 / tck / ok), p50, p99, rps,
             sprintf("%.0f", 100 * t / tck / d), sprintf("%.0f", 100 * (b - t) / tck / d), la }' >>"$RESULTS"
  tail -1 "$RESULTS" | awk -F'\t' '{ printf "  %-6s %-8s %8d req  %7s µs CPU/req  p50 %6.2f ms  p99 %7.2f ms  server CPU %s%%  others on its CPU %s%%  load %s\n",
    $2, $3, $4, $6, $7 / 1000, $8 / 1000, $10, $11, $12 }'
}

# daemon_loads ROUND LABEL BIN: both endpoints, each on a fresh daemon.
daemon_loads() {
  local round=$1 label=$2 name
  daemon_cmd "$3"
  name=r$round-$label-check
  start_server "$name" "${DAEMON[@]}"
  daemon_setup
  sanity "$name-healthz" /healthz "" ""
  measure "$round" "$label" healthz /healthz "" ""
  sanity "$name" /v1/check "$HERE/check.json" "$DIR/agent.key"
  measure "$round" "$label" check /v1/check "$HERE/check.json" "$DIR/agent.key"
  stop_server
  name=r$round-$label-actions
  start_server "$name" "${DAEMON[@]}"
  daemon_setup
  sanity "$name" /v1/actions "$HERE/action.json" "$DIR/agent.key"
  jq -e '.status == "approved"' "$OUT/logs/$name.first.json" >/dev/null ||
    die "$name: the action was not allowed: $(cat "$OUT/logs/$name.first.json")"
  measure "$round" "$label" actions /v1/actions "$HERE/action.json" "$DIR/agent.key"
  stop_server
  printf '%s\t%s\t%s\n' "$round" "$label" "$(python3 "$HERE/db_bytes.py" "$DIR/data/actiongate.db")" |
    tee -a "$OUT/bytes.tsv" | awk -F'\t' '{ print "  " $2 " database: " $3 }'
}

for round in $(seq 1 "$ROUNDS"); do
  echo "== round $round"
  floor_cmd
  start_server "r$round-floor" "${FLOOR[@]}"
  sanity "r$round-floor" /v1/check "$HERE/check.json" ""
  measure "$round" floor healthz /healthz "" ""
  measure "$round" floor check /v1/check "$HERE/check.json" ""
  stop_server
  order=(A)
  if [ -n "$BIN_B" ]; then
    if ((round % 2)); then order=(A B); else order=(B A); fi
  fi
  for label in "${order[@]}"; do
    if [ "$label" = A ]; then bin=$BIN_A; else bin=$BIN_B; fi
    daemon_loads "$round" "$label" "$bin"
  done
done

echo "loadavg at end: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/machine.txt"

# The table: the median of the rounds per binary and endpoint, and the range
# of CPU µs/request.
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
{
  echo
  echo "| binary | endpoint | requests | CPU µs/request (range) | p50 ms | p99 ms | server CPU % | others on its CPU % |"
  echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
  for key in "floor healthz" "floor check" "A healthz" "A check" "A actions" "B healthz" "B check" "B actions"; do
    read -r label endpoint <<<"$key"
    rows=$(awk -F'\t' -v l="$label" -v e="$endpoint" 'NR > 1 && $2 == l && $3 == e' "$RESULTS")
    [ -n "$rows" ] || continue
    col() { cut -f"$1" <<<"$rows" | median; }
    lo=$(cut -f6 <<<"$rows" | sort -n | head -1)
    hi=$(cut -f6 <<<"$rows" | sort -n | tail -1)
    printf '| %s | %s | %.0f | **%.1f** (%s–%s) | %.2f | %.2f | %.0f | %.0f |\n' "$label" "$endpoint" \
      "$(col 4)" "$(col 6)" "$lo" "$hi" "$(awk -v x="$(col 7)" 'BEGIN{print x/1000}')" \
      "$(awk -v x="$(col 8)" 'BEGIN{print x/1000}')" "$(col 10)" "$(col 11)"
  done
  echo
  echo "Medians of $ROUNDS round(s); requests = 2xx answers in ${DURATION}s. A = $BIN_A${BIN_B:+, B = $BIN_B}."
  # Each endpoint against its floor: a GET against the bare GET, the JSON
  # POSTs against the bare JSON POST; the goals are issue 38's.
  med() { awk -F'\t' -v l="$1" -v e="$2" 'NR > 1 && $2 == l && $3 == e { print $6 }' "$RESULTS" | median; }
  echo
  echo "| endpoint | floor | floor µs | binary | µs | ratio | goal |"
  echo "| --- | --- | ---: | --- | ---: | ---: | ---: |"
  for row in "healthz healthz 1.25" "check check 1.3" "actions check 2.5"; do
    read -r endpoint floor goal <<<"$row"
    f=$(med floor "$floor")
    for label in A B; do
      [ "$label" = A ] || [ -n "$BIN_B" ] || continue
      v=$(med "$label" "$endpoint")
      awk -v e="$endpoint" -v fl="$floor" -v f="$f" -v l="$label" -v v="$v" -v g="$goal" \
        'BEGIN { printf "| %s | bare %s | %.1f | %s | %.1f | **%.2f×** | ≤ %s× |\n", e, fl, f, l, v, v / f, g }'
    done
  done
  if [ -s "$OUT/bytes.tsv" ]; then
    for label in A B; do
      [ "$label" = A ] || [ -n "$BIN_B" ] || continue
      v=$(awk -F'\t' -v l="$label" '$2 == l { sub(/.*per_action=/, "", $3); print $3 }' "$OUT/bytes.tsv" | median)
      printf '| database bytes per decision-only action | | | %s | %.0f | | ≤ 600 |\n' "$label" "$v"
    done
  fi
  others=$(awk -F'\t' 'NR > 1 && $11 > m { m = $11 } END { print m + 0 }' "$RESULTS")
  if ((others > 10)); then
    echo "Noisy: other work took up to ${others}% of CPU $SERVER_CPU during a load (load average $(cut -d' ' -f1-3 /proc/loadavg) at the end)."
  fi
} | tee "$OUT/summary.md"
echo "rows: $RESULTS"
