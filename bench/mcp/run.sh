#!/usr/bin/env bash
# CPU per allowed handler action through MCP `tools/call` (stateless era and
# handshake era) against the same action through `POST /v1/actions?wait=`,
# next to a bare axum server (bench/cost/floor) measured in the same run.
#
# The server under load runs pinned to CPU $SERVER_CPU (0); wrk and the
# executor (a second copy of the floor, answering POST /hook) run on
# $LOAD_CPU (1), so the daemon's CPU is its own work. Each load: a fresh
# daemon on a fresh data dir (built-in defaults: durability full, log level
# info), agent `bench` with profile `open`, handler `files` whose action
# `write` goes to the executor; a warm-up of $WARMUP s not counted, then
# $DURATION s of wrk with $CONNECTIONS connections. The daemon's utime+stime
# (/proc/PID/stat) is divided by the answers that really succeeded (2xx and
# the body says completed / isError false): µs of CPU per call.
#
# Loads: floor (POST /v1/check of the floor), actions (POST
# /v1/actions?wait=10, the handler action, answered once completed),
# mcp-2026 (POST /mcp tools/call files__write, 2026-07-28, no session),
# mcp-2025 (the same in a 2025-11-25 session opened once with initialize).
#
# Environment: BIN (default target/release/actiongate), ROUNDS (3), DURATION
# (10), WARMUP (2), CONNECTIONS (16), SERVER_CPU (0), LOAD_CPU (1),
# FLOOR_BIN (default: built here), OUT (default bench/out/mcp-<UTC stamp>).
# Needs: wrk, curl, jq, taskset, cargo (for the floor unless FLOOR_BIN).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BIN=${BIN:-$ROOT/target/release/actiongate}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
CONNECTIONS=${CONNECTIONS:-16}
SERVER_CPU=${SERVER_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
OUT=${OUT:-$ROOT/bench/out/mcp-$(date -u +%Y%m%dT%H%M%SZ)}

die() {
  echo "run.sh: $*" >&2
  exit 1
}
for tool in wrk curl jq taskset getconf; do
  command -v "$tool" >/dev/null || die "$tool not found (wrk: apt-get install -y wrk)"
done
[ -x "$BIN" ] || die "BIN $BIN is not an executable (cargo build --release)"
if [ -z "${FLOOR_BIN:-}" ]; then
  cargo build --quiet --release --manifest-path "$ROOT/bench/cost/floor/Cargo.toml"
  FLOOR_BIN=$ROOT/bench/cost/floor/target/release/actiongate-cost-floor
fi
# Absolute paths: servers start from their own work dirs.
abs() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }
FLOOR_BIN=$(abs "$FLOOR_BIN")
BIN=$(abs "$BIN")
TCK=$(getconf CLK_TCK)
WORK=$OUT/work
mkdir -p "$OUT/logs" "$WORK"
RESULTS=$OUT/results.tsv
printf 'round\tload\tcalls\tticks\tcpu_us_per_call\tp50_us\tp99_us\trps\tloadavg\n' >"$RESULTS"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: nproc $(nproc), $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
  echo "commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "daemon: $BIN; floor: $FLOOR_BIN"
  echo "load: ${DURATION}s x $CONNECTIONS connections (wrk and executor on CPU $LOAD_CPU), warm-up ${WARMUP}s; daemon on CPU $SERVER_CPU; rounds $ROUNDS"
  echo "loadavg at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$OUT/machine.txt"

PID= EXEC_PID=
stop() {
  if [ -n "$1" ] && kill -0 "$1" 2>/dev/null; then
    kill "$1"
    wait "$1" 2>/dev/null || true
  fi
}
cleanup() {
  stop "$PID"
  stop "$EXEC_PID"
  if [ -d "$WORK" ]; then rm -rf -- "$WORK"; fi
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
  die "no free loopback port"
}

# start NAME CPU CMD...: CMD 127.0.0.1:PORT from $WORK/NAME on CPU; waits
# for /readyz. Sets STARTED (its pid), BASE and DIR.
start() {
  local name=$1 cpu=$2 port
  shift 2
  DIR=$WORK/$name
  mkdir -p "$DIR"
  port=$(free_port)
  BASE=http://127.0.0.1:$port
  (cd "$DIR" && exec env -u ACTIONGATE_CONFIG taskset -c "$cpu" "$@" "127.0.0.1:$port") \
    >"$OUT/logs/$name.log" 2>&1 &
  STARTED=$!
  for _ in $(seq 1 100); do
    curl -fsS -o /dev/null "$BASE/readyz" 2>/dev/null && return
    kill -0 "$STARTED" 2>/dev/null || die "$name exited at start; see $OUT/logs/$name.log"
    sleep 0.1
  done
  die "$name not ready after 10 s"
}

cpu_ticks() {
  local line rest
  read -r line <"/proc/$1/stat"
  rest=${line##*) }
  # shellcheck disable=SC2086
  set -- $rest
  echo $((${12} + ${13}))
}

# measure ROUND LOAD PATH BODY KEY HEADERS MARKER: warm-up, counted load.
measure() {
  local round=$1 load=$2 path=$3 args=("$4" "$5" "$6" "$7") line t0 t1
  local requests ok other errors p50_us p99_us rps
  taskset -c "$LOAD_CPU" wrk -t1 -c "$CONNECTIONS" -d "${WARMUP}s" -s "$HERE/mcp.lua" \
    "$BASE$path" -- "${args[@]}" >/dev/null 2>>"$OUT/logs/wrk-stderr.txt"
  t0=$(cpu_ticks "$PID")
  line=$(taskset -c "$LOAD_CPU" wrk -t1 -c "$CONNECTIONS" -d "${DURATION}s" --latency \
    -s "$HERE/mcp.lua" "$BASE$path" -- "${args[@]}" 2>>"$OUT/logs/wrk-stderr.txt" | grep '^requests=')
  t1=$(cpu_ticks "$PID")
  echo "$load round $round: $line" >>"$OUT/logs/wrk.txt"
  eval "$(tr ' ' '\n' <<<"$line" | grep -E '^(requests|ok|other|errors|p50_us|p99_us|rps)=[0-9.]+$')"
  ((${other:-1} == 0 && ${errors:-1} == 0)) ||
    die "$load round $round: $other bad answers, $errors socket errors ($line); see logs/wrk-stderr.txt"
  ((ok > 0)) || die "$load round $round: nothing answered"
  awk -v OFS='\t' -v r="$round" -v l="$load" -v ok="$ok" -v t="$((t1 - t0))" -v tck="$TCK" \
    -v p50="$p50_us" -v p99="$p99_us" -v rps="$rps" -v la="$(cut -d' ' -f1 /proc/loadavg)" \
    'BEGIN { print r, l, ok, t, sprintf("%.1f", t * 1e6 / tck / ok), p50, p99, rps, la }' >>"$RESULTS"
  tail -1 "$RESULTS" | awk -F'\t' '{ printf "  %-9s %7d calls %8s µs CPU/call  p50 %6.2f ms  p99 %7.2f ms  load %s\n",
    $2, $3, $5, $6 / 1000, $7 / 1000, $9 }'
}

F=$WORK/files
mkdir -p "$F"
: >"$F/none.key"
: >"$F/no.headers"
echo '{"tool":"bash","detail":"ls -la"}' >"$F/check.json"
echo '{"handler":"files","action":"write","params":{"path":"/tmp/x"}}' >"$F/action.json"
META='"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}'
echo '{"jsonrpc":"2.0","id":@ID@,"method":"tools/call","params":{"name":"files__write","arguments":{"path":"/tmp/x"},'"$META"'}}' >"$F/call-2026.json"
echo '{"jsonrpc":"2.0","id":@ID@,"method":"tools/call","params":{"name":"files__write","arguments":{"path":"/tmp/x"}}}' >"$F/call-2025.json"
printf 'accept: application/json, text/event-stream\nmcp-protocol-version: 2026-07-28\nmcp-method: tools/call\nmcp-name: files__write\n' >"$F/2026.headers"

start executor "$LOAD_CPU" "$FLOOR_BIN"
EXEC_PID=$STARTED
HOOK=$BASE/hook

# A fresh daemon with agent `bench` (profile open) and the handler; its
# agent key in $DIR/agent.key.
daemon() {
  start "$1" "$SERVER_CPU" "$BIN" serve --data-dir data --listen
  PID=$STARTED
  local admin
  admin=$(tr -d '[:space:]' <"$DIR/data/admin.key")
  api() { curl -fsS -X "$1" "$BASE$2" -H "authorization: Bearer $admin" -H 'content-type: application/json' -d "$3"; }
  (umask 077 && api POST /v1/keys '{"role":"agent","agent":"bench"}' | jq -er .key >"$DIR/agent.key")
  api PUT /v1/agents/bench '{"profile":"open"}' >/dev/null
  api POST /v1/handlers '{"id":"files","name":"Files","url":"'"$HOOK"'","timeout":"5s",
    "permissions":[{"name":"fs.write","parameters_schema":{"type":"object","properties":{"path":{"type":"string"}}}}],
    "actions":[{"name":"write","params_schema":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]},
      "permission":"fs.write","scope":{"path":"/path"},"detail":"write {path}"}]}' >/dev/null
}

# A 2025-11-25 session of the daemon just started: its headers file.
session() {
  local key sid
  key=$(tr -d '[:space:]' <"$DIR/agent.key")
  sid=$(curl -fsS -D - -o /dev/null "$BASE/mcp" -H "authorization: Bearer $key" \
    -H 'content-type: application/json' -H 'accept: application/json, text/event-stream' \
    -d '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}' |
    tr -d '\r' | sed -n 's/^mcp-session-id: //Ip')
  [ -n "$sid" ] || die "no Mcp-Session-Id from initialize"
  curl -fsS -o /dev/null "$BASE/mcp" -H "authorization: Bearer $key" -H "mcp-session-id: $sid" \
    -H 'mcp-protocol-version: 2025-11-25' -H 'content-type: application/json' \
    -H 'accept: application/json, text/event-stream' -d '{"jsonrpc":"2.0","method":"notifications/initialized"}'
  printf 'accept: application/json, text/event-stream\nmcp-protocol-version: 2025-11-25\nmcp-session-id: %s\n' "$sid" >"$DIR/2025.headers"
}

for round in $(seq 1 "$ROUNDS"); do
  echo "== round $round"
  start "r$round-floor" "$SERVER_CPU" "$FLOOR_BIN"
  PID=$STARTED
  measure "$round" floor /v1/check "$F/check.json" "$F/none.key" "$F/no.headers" '"result":"allow"'
  stop "$PID"

  daemon "r$round-actions"
  measure "$round" actions '/v1/actions?wait=10' "$F/action.json" "$DIR/agent.key" "$F/no.headers" '"status":"completed"'
  stop "$PID"

  daemon "r$round-mcp-2026"
  measure "$round" mcp-2026 /mcp "$F/call-2026.json" "$DIR/agent.key" "$F/2026.headers" '"isError":false'
  stop "$PID"

  daemon "r$round-mcp-2025"
  session
  measure "$round" mcp-2025 /mcp "$F/call-2025.json" "$DIR/agent.key" "$DIR/2025.headers" '"isError":false'
  stop "$PID"
done

# The median of the rounds, per load.
{
  echo "| load | µs CPU per call (median of $ROUNDS) | calls/s | p50 ms |"
  echo "| --- | --- | --- | --- |"
  for load in floor actions mcp-2026 mcp-2025; do
    awk -F'\t' -v l="$load" '$2 == l { print $5, $8, $6 }' "$RESULTS" | sort -n |
      awk -v l="$load" '{ c[NR] = $1; r[NR] = $2; p[NR] = $3 }
        END { m = int((NR + 1) / 2); printf "| %s | %s | %s | %.2f |\n", l, c[m], r[m], p[m] / 1000 }'
  done
} | tee "$OUT/summary.md"
