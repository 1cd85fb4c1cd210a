#!/usr/bin/env bash
# Instructions the daemon spends per request, counted by callgrind over the
# whole process (every thread, user space only: not the kernel's TCP and
# file writes). Unlike a timed run this hardly moves with the machine's
# load, so two builds compare on small changes: run each twice.
#
#   bench/daemon/instructions.sh BIN [REQUESTS] [PATH]
#
# PATH is /v1/actions (default) or /v1/check. A daemon with no load is run
# once under callgrind and stopped; then again with REQUESTS (3000) requests
# from oha (16 connections); the difference divided by REQUESTS is printed,
# so start-up cancels out. Under callgrind the threads take turns, so the
# writer's batches are smaller than in a timed run: per-commit costs weigh
# more here. Needs valgrind, oha and python3.
set -euo pipefail

BIN=${1:?usage: $0 BIN [REQUESTS] [PATH]}
N=${2:-3000}
ROUTE=${3:-/v1/actions}
BODY='{"tool":"bash","detail":"cargo test --workspace"}'
for tool in valgrind oha python3; do
  command -v "$tool" >/dev/null || { echo "$tool not found" >&2; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
base="http://127.0.0.1:$port"

ready() {
  for _ in $(seq 600); do
    curl -fsS "$base/readyz" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  echo "daemon did not start" >&2
  return 1
}

# Keys and profile, natively.
(cd "$work" && exec env ACTIONGATE_LOG=warn "$BIN" --data-dir "$work/data" serve --listen "127.0.0.1:$port") >/dev/null 2>&1 &
pid=$!
ready
admin=$(tr -d '[:space:]' <"$work/data/admin.key")
api() { curl -fsS -X "$1" "$base$2" -H "authorization: Bearer $admin" -H 'content-type: application/json' -d "$3"; }
agent=$(api POST /v1/keys '{"role":"agent","agent":"bench"}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["key"])')
api PUT /v1/agents/bench '{"profile":"open"}' >/dev/null
kill "$pid"
wait "$pid" 2>/dev/null || true

# Total instructions of a daemon run that serves $1 requests.
count() {
  (cd "$work" && exec env ACTIONGATE_LOG=warn valgrind --tool=callgrind \
    --callgrind-out-file="$work/cg.%p" "$BIN" --data-dir "$work/data" serve \
    --listen "127.0.0.1:$port") >/dev/null 2>&1 &
  local vg=$!
  ready
  if [ "$1" -gt 0 ]; then
    oha -n "$1" -c 16 --no-tui -m POST -H "authorization: Bearer $agent" \
      -H 'content-type: application/json' -d "$BODY" "$base$ROUTE" >/dev/null
  fi
  kill -INT "$vg"
  wait "$vg" 2>/dev/null || true
  awk '/^summary:/ {s += $2} END {print s}' "$work"/cg.*
  rm -f "$work"/cg.*
}

idle=$(count 0)
loaded=$(count "$N")
echo "$(basename "$BIN") $ROUTE: $(( (loaded - idle) / N )) instructions per request"
