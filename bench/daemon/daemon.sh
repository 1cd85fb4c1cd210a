# Sourced by the daemon's load scripts (run.sh, compare.sh, threads.sh,
# idle.sh): the build to load, a daemon on a free loopback port, the keys to
# load it with, and the machine's idle time.

# What every load posts, with how many connections, and the durability of
# a single daemon (run.sh takes each of $DURABILITIES instead).
BODY='{"tool":"bash","detail":"cargo test --workspace"}'
CONNECTIONS=${CONNECTIONS:-64}
DURABILITY=${DURABILITY:-normal}
# Loads that keep thousands of actions pending for one agent, each with its
# long-poll (the long-poll and memory benchmarks), lift
# limits.max_pending_per_agent (default 100) and limits.max_open_per_key
# (default 200) with these settings. Builds older than those limits refuse
# an unknown setting: run them with PENDING_SETTING= (empty), or with only
# the first.
PENDING_SETTING=${PENDING_SETTING-"ACTIONGATE_LIMITS__MAX_PENDING_PER_AGENT=1000000 ACTIONGATE_LIMITS__MAX_OPEN_PER_KEY=1000000"}

# bench_daemon WORK DURABILITY BIN LOG [VAR=value...]: starts BIN (an
# absolute path) from WORK, away from config/actiongate.toml, so that every
# build runs on its own built-in defaults plus the VAR=value settings given,
# with its data in WORK/data and its output in LOG; waits until it is ready;
# creates an agent `bench` with profile `open` (every action allowed). Sets
# BASE (http://127.0.0.1:<port>), PID, ADMIN (the admin key) and AGENT
# (`bench`'s key).
bench_daemon() {
  local work=$1 durability=$2 bin=$3 log=$4 port
  shift 4
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  BASE="http://127.0.0.1:$port"
  (cd "$work" && exec env ACTIONGATE_LOG=warn ACTIONGATE_STORAGE__DURABILITY="$durability" "$@" \
    "$bin" --data-dir "$work/data" serve --listen "127.0.0.1:$port") >"$log" 2>&1 &
  PID=$!
  for _ in $(seq 1 100); do
    curl -fsS "$BASE/readyz" >/dev/null 2>&1 && break
    sleep 0.1
  done
  ADMIN=$(tr -d '[:space:]' <"$work/data/admin.key")
  AGENT=$(bench_key '{"role":"agent","agent":"bench"}')
  bench_api PUT /v1/agents/bench '{"profile":"open"}' >/dev/null
}

# bench_api METHOD PATH BODY: a request with the admin key.
bench_api() {
  curl -fsS -X "$1" "$BASE$2" -H "authorization: Bearer $ADMIN" -H 'content-type: application/json' -d "$3"
}

# bench_key BODY: creates a key as POST /v1/keys describes it; prints the key.
bench_key() {
  bench_api POST /v1/keys "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["key"])'
}

# jiffies: the machine's idle and all jiffies so far (idle + iowait; user to
# steal), from /proc/stat.
jiffies() { awk '/^cpu / {print $5 + $6, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9}' /proc/stat; }

# bench_bin: BIN if set, else the release build of this tree (built if
# needed); run from the repository's root.
bench_bin() {
  if [ -z "${BIN:-}" ]; then
    cargo build --quiet --release -p actiongate
    BIN="$(cd "${CARGO_TARGET_DIR:-target}/release" && pwd)/actiongate"
  fi
}

# bench_routes WORK: bench_daemon with durability $DURABILITY, BIN and the
# settings in $SETTINGS (VAR=value, space-separated), its output dropped;
# sets LOAD, oha's arguments for $CONNECTIONS connections posting $BODY with
# the agent's key (the URL to follow), and warms up POST /v1/check and
# POST /v1/actions for a second each.
bench_routes() {
  # shellcheck disable=SC2086 # one word a setting
  bench_daemon "$1" "$DURABILITY" "$BIN" /dev/null ${SETTINGS:-}
  LOAD=(-c "$CONNECTIONS" --no-tui -m POST -H "authorization: Bearer $AGENT" -H 'content-type: application/json' -d "$BODY")
  local path
  for path in /v1/check /v1/actions; do
    oha -z 1s "${LOAD[@]}" "$BASE$path" >/dev/null
  done
}
