#!/usr/bin/env bash
# Event-stream benchmark (BENCHMARKS.md, "Events"): starts a release daemon on
# loopback with a fresh data dir, runs the load client against it, stops it.
#   bench/events/run.sh [SUBSCRIBERS] [EVENTS_PER_SECOND] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
SUBS=${1:-1000}
RATE=${2:-500}
SECS=${3:-20}
PORT=${PORT:-18457}
TARGET=${CARGO_TARGET_DIR:-target}

# BIN=path/to/actiongate runs that daemon (e.g. an older commit's build, to
# compare in one session) with this tree's load client.
cargo build --release -q -p actiongate --bin actiongate --example events_load
BIN=$(realpath "${BIN:-$TARGET/release/actiongate}")
ulimit -n 8192

DATA=$(mktemp -d)
trap 'kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; rm -rf "$DATA"' EXIT
# Started in its data dir, so it runs on built-in defaults whatever build it
# is (an older one would reject this tree's config/actiongate.toml keys).
(cd "$DATA" && ACTIONGATE_LOG=warn exec "$BIN" serve --data-dir "$DATA" \
  --listen "127.0.0.1:$PORT" 2>"$DATA/daemon.log") &
PID=$!
for _ in $(seq 100); do
  [ -s "$DATA/admin.key" ] && curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break
  sleep 0.1
done
echo "daemon pid $PID, durability full, $(nproc) cores"
"$TARGET/release/examples/events_load" --base "http://127.0.0.1:$PORT" \
  --admin-key "$(cat "$DATA/admin.key")" --pid "$PID" \
  --subscribers "$SUBS" --rate "$RATE" --seconds "$SECS"
