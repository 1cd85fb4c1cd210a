#!/usr/bin/env bash
# End-to-end executor benchmark (BENCHMARKS.md, "Executors"): for each
# durability it starts the release daemon on loopback with a fresh data dir,
# runs the load client (bench/executor/load.rs: a no-op executor in-process,
# N concurrent agents, request to `completed`, plus the direct-to-executor
# and decision-only baselines in the same run) and stops the daemon.
#   bench/executor/run.sh [CONCURRENCY,...] [SECONDS]
# Environment: DURABILITIES ("normal full"), CARGO_TARGET_DIR, BIN (another
# daemon binary to measure, e.g. an older commit's build; the load client is
# always this tree's).
set -euo pipefail
cd "$(dirname "$0")/../.."
CONC=${1:-1,64}
SECS=${2:-10}
DURABILITIES=${DURABILITIES:-normal full}
TARGET=${CARGO_TARGET_DIR:-target}

cargo build --release -q -p actiongate --bin actiongate --example executor_load
ulimit -n 8192

DATA=
PID=
stop() {
  if [ -n "$PID" ]; then kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi
  if [ -n "$DATA" ]; then rm -rf "$DATA"; fi
  PID=; DATA=
}
trap stop EXIT
echo "commit $(git rev-parse --short HEAD)$(git diff --quiet || echo '+dirty'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
for d in $DURABILITIES; do
  DATA=$(mktemp -d)
  PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  ACTIONGATE_LOG=warn ACTIONGATE_STORAGE__DURABILITY=$d "${BIN:-$TARGET/release/actiongate}" serve \
    --data-dir "$DATA" --listen "127.0.0.1:$PORT" 2>"$DATA/daemon.log" &
  PID=$!
  for _ in $(seq 100); do
    [ -s "$DATA/admin.key" ] && curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break
    sleep 0.1
  done
  echo "== durability $d"
  "$TARGET/release/examples/executor_load" --base "http://127.0.0.1:$PORT" \
    --admin-key "$(cat "$DATA/admin.key")" --concurrency "$CONC" --seconds "$SECS"
  stop
done
