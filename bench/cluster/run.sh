#!/usr/bin/env bash
# Several daemons on one Postgres against one daemon on SQLite: durable
# actions per second and CPU per request with 1, 2 and 3 daemons on
# Postgres and 1 on SQLite, next to a bare axum server (bench/cost/floor)
# measured in the same run; and the cross-node wake (an agent's long-poll on
# one daemon, the operator's decision on another). See README.md beside it.
#
# The system under test (the daemons and Postgres, or the floor) runs on
# CPU $SUT_CPU (0), wrk on CPU $LOAD_CPU (1): one wrk per daemon at once,
# $CONNECTIONS connections in all. Each setup starts on a fresh database,
# warms up for $WARMUP s, then loads POST /v1/actions (a decision-only
# action allowed under `standard`, stored durably: SQLite's durability
# `full`, Postgres with fsync and synchronous_commit on) for $DURATION s.
# CPU per request is utime+stime (/proc/PID/stat) of the daemons, and of
# every Postgres process, divided by the 2xx answers. The floor answers
# POST /v1/check with a small JSON decision (no key, policy or store).
#
# Postgres' own floor for the same rows is measured in the same run: pgbench
# ($CONNECTIONS clients, on CPU $LOAD_CPU) inserting an action row and its
# event row per transaction (floor.sql, floor-schema.sql), synchronous_commit
# on; the summary gives each Postgres setup's requests/s as a share of it.
#
# Environment: BIN (required: an actiongate binary, release build),
# DURATION (10), WARMUP (2), CONNECTIONS (24), WAKES (50), SUT_CPU (0),
# LOAD_CPU (1), FLOOR_BIN (default: built here with cargo), OUT (default
# bench/out/cluster-<UTC stamp>).
# Needs: wrk, curl, jq, taskset, python3, Debian's postgresql (initdb, pg_ctl).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
COST=$ROOT/bench/cost
BIN=${BIN:-}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
CONNECTIONS=${CONNECTIONS:-24}
WAKES=${WAKES:-50}
SUT_CPU=${SUT_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
OUT=${OUT:-$ROOT/bench/out/cluster-$(date -u +%Y%m%dT%H%M%SZ)}

die() {
  echo "run.sh: $*" >&2
  exit 1
}
for tool in wrk curl jq taskset getconf python3 pgbench psql; do
  command -v "$tool" >/dev/null || die "$tool not found"
done
[ -x "$BIN" ] || die "set BIN to an actiongate binary"
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
PGBIN=$(find /usr/lib/postgresql -maxdepth 2 -name bin -type d 2>/dev/null | sort | tail -1)
[ -x "$PGBIN/initdb" ] || die "no Postgres (apt-get install postgresql)"
if [ -z "${FLOOR_BIN:-}" ]; then
  cargo build --quiet --release --manifest-path "$COST/floor/Cargo.toml"
  FLOOR_BIN=$COST/floor/target/release/actiongate-cost-floor
fi
[ -x "$FLOOR_BIN" ] || die "no floor binary at $FLOOR_BIN"

TCK=$(getconf CLK_TCK)
mkdir -p "$OUT/logs"
OUT=$(cd "$OUT" && pwd)
WORK=$OUT/work
mkdir -p "$WORK"
RESULTS=$OUT/results.tsv
printf 'setup\tdaemons\trequests\trps\tdaemon_us_per_req\tpostgres_us_per_req\tp50_ms\tp99_ms\tothers_on_sut_cpu_pct\n' >"$RESULTS"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: nproc $(nproc), $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
  echo "commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "binary: $BIN"
  echo "floor: $FLOOR_BIN"
  echo "postgres: $("$PGBIN/postgres" --version)"
  echo "load: ${DURATION}s, $CONNECTIONS connections over one wrk per daemon on CPU $LOAD_CPU; daemons and Postgres on CPU $SUT_CPU"
  echo "loadavg at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$OUT/machine.txt"

PIDS=()
RUNAS=()
if [ "$(id -u)" = 0 ]; then RUNAS=(runuser -u postgres --); fi
PGDATA=$WORK/pg
stop_daemons() {
  for pid in "${PIDS[@]}"; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  PIDS=()
}
cleanup() {
  stop_daemons
  [ -d "$PGDATA" ] && "${RUNAS[@]}" "$PGBIN/pg_ctl" -D "$PGDATA" -m immediate stop >/dev/null 2>&1 || true
  [ -f "$WORK/pg.log" ] && cp "$WORK/pg.log" "$OUT/logs/postgres.log"
  [ -d "$WORK" ] && rm -rf -- "$WORK"
}
trap cleanup EXIT

free_port() {
  local port
  for _ in $(seq 1 50); do
    port=$((20000 + RANDOM % 40000))
    if ! (: <"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "$port"
      return
    fi
  done
  die "no free port"
}

# Postgres: one throwaway cluster for the run, on SUT_CPU, durable commits.
PGPORT=$(free_port)
mkdir -p "$PGDATA"
[ "$(id -u)" = 0 ] && chown -R postgres:postgres "$WORK"
"${RUNAS[@]}" "$PGBIN/initdb" -D "$PGDATA" -U postgres --auth=trust -E UTF8 >"$OUT/logs/initdb.log"
"${RUNAS[@]}" taskset -c "$SUT_CPU" "$PGBIN/pg_ctl" -D "$PGDATA" -l "$WORK/pg.log" -w \
  -o "-p $PGPORT -k $WORK -c listen_addresses=127.0.0.1 -c max_connections=200" start >/dev/null
PGPID=$(head -1 "$PGDATA/postmaster.pid")
psql_do() { psql -h 127.0.0.1 -p "$PGPORT" -U postgres -d postgres -Atqc "$1"; }

# Ticks of the daemons, and of every process of the cluster.
ticks_of() {
  local sum=0 pid line rest
  for pid in "$@"; do
    read -r line <"/proc/$pid/stat" || continue
    rest=${line##*) }
    # shellcheck disable=SC2086
    set -- $rest
    sum=$((sum + ${12} + ${13}))
  done
  echo "$sum"
}
pg_pids() { echo "$PGPID $(pgrep -P "$PGPID" | tr '\n' ' ')"; }
# Busy ticks of CPU $1 so far (user nice system irq softirq steal).
cpu_busy() { awk -v cpu="cpu$1" '$1 == cpu {print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat; }

# start_nodes N URL: N daemons on SUT_CPU (URL empty: SQLite); sets BASES.
start_nodes() {
  local n=$1 url=$2 i dir port
  BASES=()
  for i in $(seq 1 "$n"); do
    dir=$WORK/node$i
    mkdir -p "$dir"
    port=$(free_port)
    (cd "$dir" && exec env ${url:+ACTIONGATE_STORAGE__DATABASE_URL=$url} ACTIONGATE_LOG=warn \
      taskset -c "$SUT_CPU" "$BIN" serve --data-dir data --listen "127.0.0.1:$port") \
      >"$OUT/logs/$SETUP-node$i.log" 2>&1 &
    PIDS+=($!)
    BASES+=("http://127.0.0.1:$port")
    for _ in $(seq 1 100); do
      curl -fsS -o /dev/null "${BASES[-1]}/readyz" 2>/dev/null && break
      sleep 0.1
    done
    curl -fsS -o /dev/null "${BASES[-1]}/readyz" || die "$SETUP node $i not ready"
  done
  ADMIN=$(tr -d '[:space:]' <"$WORK/node1/data/admin.key")
  api() { curl -fsS -X "$1" "${BASES[0]}$2" -H "authorization: Bearer $ADMIN" -H 'content-type: application/json' -d "$3"; }
  (umask 077 && api POST /v1/keys '{"role":"agent","agent":"bench"}' | jq -er .key >"$WORK/agent.key")
  api PUT /v1/agents/bench '{"profile":"standard"}' >/dev/null
}

# wrk_all SECONDS [PATH BODY KEYFILE]: one wrk per server in BASES at once
# (POST /v1/actions with the agent's key by default); prints the 2xx
# answers, the others, the mean of the p50s and the highest p99 (µs).
wrk_all() {
  local per=$((CONNECTIONS / ${#BASES[@]})) base i=0 loads=()
  local path=${2:-/v1/actions} body=${3:-$COST/action.json} key=${4-$WORK/agent.key}
  ((per >= 1)) || per=1
  for base in "${BASES[@]}"; do
    taskset -c "$LOAD_CPU" wrk -t1 -c "$per" -d "${1}s" --latency -s "$COST/post.lua" \
      "$base$path" -- "$body" "$key" | grep '^requests=' >"$WORK/wrk.$i" &
    loads+=($!)
    i=$((i + 1))
  done
  # Only the loads: the servers are background jobs too.
  wait "${loads[@]}"
  cat "$WORK"/wrk.* >>"$OUT/logs/wrk.txt"
  awk '{ for (f = 1; f <= NF; f++) { split($f, kv, "="); v[kv[1]] = kv[2] }
         ok += v["ok"]; bad += v["other"] + v["errors"]; p50 += v["p50_us"]; if (v["p99_us"] > p99) p99 = v["p99_us"] }
       END { printf "%d %d %.0f %d\n", ok, bad, p50 / NR, p99 }' "$WORK"/wrk.*
  rm -f "$WORK"/wrk.*
}

# record SETUP N OK BAD P50 P99 DAEMON_TICKS PG_TICKS BUSY_TICKS PG: a row.
record() {
  local setup=$1 n=$2 ok=$3 bad=$4 p50=$5 p99=$6 dt=$7 pt=$8 bt=$9 pg=${10}
  ((bad == 0)) || die "$setup: $bad non-2xx answers or socket errors"
  ((ok > 0)) || die "$setup: nothing answered"
  awk -v OFS='\t' -v s="$setup" -v n="$n" -v ok="$ok" -v d="$DURATION" -v dt="$dt" \
    -v pt="$pt" -v bt="$bt" -v tck="$TCK" -v p50="$p50" -v p99="$p99" -v pg="$pg" \
    'BEGIN { print s, n, ok, sprintf("%.0f", ok / d), sprintf("%.1f", dt * 1e6 / tck / ok),
             (pg == "" ? "-" : sprintf("%.1f", pt * 1e6 / tck / ok)), sprintf("%.2f", p50 / 1000),
             sprintf("%.2f", p99 / 1000), sprintf("%.0f", 100 * (bt - dt - pt) / tck / d) }' >>"$RESULTS"
  tail -1 "$RESULTS"
}

# measure SETUP N URL
measure() {
  SETUP=$1
  local n=$2 url=$3 d0 d1 p0 p1 b0 b1 ok bad p50 p99
  start_nodes "$n" "$url"
  wrk_all "$WARMUP" >/dev/null
  b0=$(cpu_busy "$SUT_CPU")
  d0=$(ticks_of "${PIDS[@]}")
  p0=$(ticks_of $(pg_pids))
  read -r ok bad p50 p99 < <(wrk_all "$DURATION")
  d1=$(ticks_of "${PIDS[@]}")
  p1=$(ticks_of $(pg_pids))
  b1=$(cpu_busy "$SUT_CPU")
  # Postgres' ticks are counted apart in every setup (idle under SQLite).
  record "$SETUP" "$n" "$ok" "$bad" "$p50" "$p99" "$((d1 - d0))" "$((p1 - p0))" "$((b1 - b0))" "$url"
  stop_daemons
}

# The floor: a bare axum server on SUT_CPU answering POST /v1/check.
SETUP=floor
port=$(free_port)
taskset -c "$SUT_CPU" "$FLOOR_BIN" "127.0.0.1:$port" >"$OUT/logs/floor.log" 2>&1 &
PIDS+=($!)
BASES=("http://127.0.0.1:$port")
for _ in $(seq 1 100); do
  curl -fsS -o /dev/null -X POST -H 'content-type: application/json' --data-binary "@$COST/check.json" \
    "${BASES[0]}/v1/check" 2>/dev/null && break
  sleep 0.1
done
wrk_all "$WARMUP" /v1/check "$COST/check.json" "" >/dev/null
b0=$(cpu_busy "$SUT_CPU")
d0=$(ticks_of "${PIDS[@]}")
p0=$(ticks_of $(pg_pids))
read -r ok bad p50 p99 < <(wrk_all "$DURATION" /v1/check "$COST/check.json" "")
d1=$(ticks_of "${PIDS[@]}")
p1=$(ticks_of $(pg_pids))
b1=$(cpu_busy "$SUT_CPU")
record floor 1 "$ok" "$bad" "$p50" "$p99" "$((d1 - d0))" "$((p1 - p0))" "$((b1 - b0))" ""
stop_daemons

# Postgres' floor: pgbench committing the same two rows per transaction.
psql_do "CREATE DATABASE floor"
psql -h 127.0.0.1 -p "$PGPORT" -U postgres -d floor -q -f "$HERE/floor-schema.sql"
pgbench_floor() {
  taskset -c "$LOAD_CPU" pgbench -h 127.0.0.1 -p "$PGPORT" -U postgres -n -c "$CONNECTIONS" -j 1 \
    -T "$1" -f "$HERE/floor.sql" floor
}
pgbench_floor "$WARMUP" >/dev/null
b0=$(cpu_busy "$SUT_CPU")
p0=$(ticks_of $(pg_pids))
pgbench_floor "$DURATION" >"$OUT/logs/pgbench.txt"
p1=$(ticks_of $(pg_pids))
b1=$(cpu_busy "$SUT_CPU")
tx=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$OUT/logs/pgbench.txt")
lat=$(sed -n 's/^latency average = \([0-9.]*\) ms/\1/p' "$OUT/logs/pgbench.txt")
[ -n "$tx" ] || die "pgbench: no transactions counted (logs/pgbench.txt)"
lat_us=$(awk -v l="$lat" 'BEGIN { printf "%.0f", l * 1000 }')
record pg-floor 0 "$tx" 0 "$lat_us" "$lat_us" 0 "$((p1 - p0))" "$((b1 - b0))" pgbench

measure sqlite-1 1 ""
for n in 1 2 3; do
  psql_do "CREATE DATABASE bench$n"
  measure "postgres-$n" "$n" "postgres://postgres@127.0.0.1:$PGPORT/bench$n"
done

# Cross-node wake: the agent long-polls on node 1, the operator approves on
# node 2; the time from the approval's answer to the poll's.
psql_do "CREATE DATABASE wake"
SETUP=wake
start_nodes 2 "postgres://postgres@127.0.0.1:$PGPORT/wake"
(umask 077 && curl -fsS -X POST "${BASES[0]}/v1/keys" -H "authorization: Bearer $ADMIN" \
  -H 'content-type: application/json' -d '{"role":"agent","agent":"asker"}' | jq -er .key >"$WORK/asker.key")
(umask 077 && curl -fsS -X POST "${BASES[0]}/v1/keys" -H "authorization: Bearer $ADMIN" \
  -H 'content-type: application/json' -d '{"role":"operator"}' | jq -er .key >"$WORK/operator.key")
taskset -c "$LOAD_CPU" python3 "$HERE/wake.py" "${BASES[0]}" "${BASES[1]}" "$WORK/asker.key" \
  "$WORK/operator.key" "$WAKES" >"$OUT/logs/wakes.txt"
stop_daemons
tail -1 "$OUT/logs/wakes.txt" | tee "$OUT/wake.txt"

{
  echo
  echo "| setup | daemons | requests/s | daemon CPU µs/request | Postgres CPU µs/request | p50 ms | p99 ms | others on CPU $SUT_CPU % |"
  echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
  awk -F'\t' 'NR > 1 { printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $4, $5, $6, $7, $8, $9 }' "$RESULTS"
  echo
  echo "floor: POST /v1/check of a bare axum server; pg-floor: pgbench, an action row and its event row"
  echo "per transaction (p50 and p99 are its average latency; daemon CPU is none); the others:"
  echo "POST /v1/actions, each stored durably."
  echo "p50: the mean of each wrk's (one per daemon), p99: the highest."
  echo
  echo "| Postgres setup | requests/s | pg-floor tx/s | share of the floor | Postgres CPU µs vs the floor's |"
  echo "| --- | ---: | ---: | ---: | ---: |"
  awk -F'\t' '$1 == "pg-floor" { ftx = $4; fcpu = $6 }
       $1 ~ /^postgres-/ { printf "| %s | %s | %s | %.0f%% | %.2f× |\n", $1, $4, ftx, 100 * $4 / ftx, $6 / fcpu }' "$RESULTS"
  echo
  cat "$OUT/wake.txt"
  echo "loadavg at end: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$OUT/summary.md"
