#!/usr/bin/env bash
# Load benchmarks of the daemon, from other processes on loopback.
#
# For each durability (normal, full) it starts the release daemon with a
# fresh data dir and measures, in one run:
#   1. GET  /v1/whoami   the trivial authenticated JSON endpoint
#   2. POST /v1/check    the decision, nothing stored
#   3. POST /v1/actions  decision-only, allowed (profile open), durable
# each with oha, 64 connections for $DURATION in all, taken in $WINDOWS
# windows in turn (whoami, check, actions, whoami, ...): this machine's speed
# drifts by a fifth within minutes, and in turns the drift weighs on the
# three alike instead of on whichever ran last; then
#   4. approval-to-waiter latency with 1,000 concurrent long-polls
#   5. resident memory with 10,000 idle long-polls
# (bench/daemon/longpoll.py). Results go to bench/out/daemon-<stamp>/ and a
# summary table to stdout.
#
# Needs: oha (cargo install oha --locked), python3. Environment:
# DURATION (default 10s, whole seconds), WINDOWS (5), CONNECTIONS (64),
# ROUNDS (1), DURABILITIES ("normal full"), LONGPOLLS (1000), IDLE (10000),
# CARGO_TARGET_DIR, BIN, SETTINGS (the daemon's settings as environment
# variables, space-separated, e.g. "ACTIONGATE_STORAGE__WRITER_CPU=1").
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=bench/daemon/daemon.sh
. bench/daemon/daemon.sh

DURATION=${DURATION:-10s}
WINDOWS=${WINDOWS:-5}
SECONDS_EACH=${DURATION%s}
if ! [[ "$SECONDS_EACH" =~ ^[0-9]+$ && "$WINDOWS" =~ ^[0-9]+$ ]] || ((WINDOWS < 1 || SECONDS_EACH < WINDOWS)); then
  echo "DURATION must be whole seconds (e.g. 10s), at least WINDOWS ($WINDOWS) of them"
  exit 1
fi
WINDOW="$((SECONDS_EACH / WINDOWS))s"
ROUNDS=${ROUNDS:-1}
DURABILITIES=${DURABILITIES:-normal full}
LONGPOLLS=${LONGPOLLS:-1000}
IDLE=${IDLE:-10000}
TARGET_DIR=${CARGO_TARGET_DIR:-target}
VENV=target/bench-venv
OUT=bench/out/daemon-$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUT"

command -v oha >/dev/null || { echo "oha not found: cargo install oha --locked"; exit 1; }
if ! "$VENV/bin/python" -c 'import aiohttp' 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check 'aiohttp==3.12.15'
fi
# BIN=path/to/actiongate measures that binary instead (e.g. an older commit's
# build, to compare in one session); otherwise the release build of this tree.
if [ -z "${BIN:-}" ]; then
  cargo build --quiet --release -p actiongate
  BIN="$TARGET_DIR/release/actiongate"
fi
# Absolute: the daemon is started from its work dir.
BIN="$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")"

# 10,000 idle long-polls need as many sockets in the client and the daemon
# (separate processes, so each needs a bit more than 10,000).
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt $((IDLE + 1000)) ]; then
  echo "open-file limit $(ulimit -n) is too low for $IDLE long-polls"
  exit 1
fi

WORK=$(mktemp -d)
PID=
stop_daemon() {
  if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then
    kill "$PID"
    wait "$PID" 2>/dev/null || true
  fi
  PID=
}
trap 'stop_daemon; rm -rf "$WORK"' EXIT

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "nproc: $(nproc)"
  echo "cpu: $(lscpu | sed -n 's/^Model name: *//p' | head -1)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "binary: $BIN"
  echo "settings: ${SETTINGS:-defaults}"
  echo "oha: $(oha --version)"
} | tee "$OUT/machine.txt"

# A fresh daemon (see bench_daemon) with the keys of the loads: AGENT
# (`bench`, profile open), ASKER (`asker`, profile guarded: every action
# asks) and OPERATOR.
start_daemon() {
  local durability=$1
  rm -rf "$WORK/data"
  # shellcheck disable=SC2086 # one word a setting
  bench_daemon "$WORK" "$durability" "$BIN" "$OUT/daemon-$durability.log" ${SETTINGS:-} $PENDING_SETTING
  ASKER=$(bench_key '{"role":"agent","agent":"asker"}')
  OPERATOR=$(bench_key '{"role":"operator"}')
  bench_api PUT /v1/agents/asker '{"profile":"guarded"}' >/dev/null
}

# The three loads: name, method, path.
LOADS=("whoami GET /v1/whoami" "check POST /v1/check" "actions POST /v1/actions")

oha_args() {
  local method=$1
  OHA=(-c "$CONNECTIONS" --no-tui -m "$method" -H "authorization: Bearer $AGENT")
  if [ "$method" = POST ]; then
    OHA+=(-T application/json -d "$BODY")
  fi
}

# Each load once for 2 s (a warm-up, not recorded), then WINDOWS windows of
# each in turn, to "$1-<name>-w<n>.json".
loads() {
  local prefix=$1 load name method path
  for load in "${LOADS[@]}"; do
    read -r name method path <<<"$load"
    oha_args "$method"
    oha -z 2s "${OHA[@]}" "$BASE$path" >/dev/null
  done
  for w in $(seq 1 "$WINDOWS"); do
    for load in "${LOADS[@]}"; do
      read -r name method path <<<"$load"
      oha_args "$method"
      oha -z "$WINDOW" --output-format json "${OHA[@]}" "$BASE$path" >"$prefix-$name-w$w.json"
    done
  done
  for load in "${LOADS[@]}"; do
    read -r name _ <<<"$load"
    echo "  $name: $(python3 bench/daemon/summary.py one "$prefix-$name-w"*.json)"
  done
}

for round in $(seq 1 "$ROUNDS"); do
  for durability in $DURABILITIES; do
    echo "== round $round, durability=$durability"
    start_daemon "$durability"
    loads "$OUT/r$round-$durability"
    "$VENV/bin/python" bench/daemon/longpoll.py latency --base "$BASE" --agent-key "$ASKER" \
      --operator-key "$OPERATOR" --pid "$PID" -n "$LONGPOLLS" | tee "$OUT/r$round-$durability-latency.json"
    "$VENV/bin/python" bench/daemon/longpoll.py idle --base "$BASE" --agent-key "$ASKER" \
      --operator-key "$OPERATOR" --pid "$PID" -n "$IDLE" | tee "$OUT/r$round-$durability-idle.json"
    stop_daemon
  done
done

python3 bench/daemon/summary.py table "$OUT" | tee "$OUT/summary.md"
