-- wrk script of bench/cost/run.sh: POSTs one JSON body with a bearer key,
-- counts the answers by status class in every thread, and prints one line
-- for run.sh to read:
--   requests=N ok=N other=N errors=N p50_us=N p99_us=N rps=N
-- ok counts 2xx answers only; other counts every other status; errors adds
-- wrk's socket errors (connect, read, write, timeout).
--
-- Usage: wrk ... -s post.lua URL -- BODY_FILE KEY_FILE
-- (files, so that neither the body nor the key is on a command line; an
-- empty KEY_FILE argument sends no authorization header, an empty
-- BODY_FILE makes the request a GET without a body).

local threads = {}

local function slurp(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  ok = 0
  other = 0
  if args[1] == nil or args[1] == "" then
    wrk.method = "GET"
  else
    wrk.method = "POST"
    wrk.body = slurp(args[1])
    wrk.headers["content-type"] = "application/json"
  end
  if args[2] and args[2] ~= "" then
    wrk.headers["authorization"] = "Bearer " .. (slurp(args[2]):gsub("%s+", ""))
  end
  -- wrk builds the one request every connection sends after init returns.
end

function response(status, headers, body)
  if status >= 200 and status < 300 then
    ok = ok + 1
  else
    other = other + 1
  end
end

function done(summary, latency, requests)
  local n_ok, n_other = 0, 0
  for _, t in ipairs(threads) do
    n_ok = n_ok + t:get("ok")
    n_other = n_other + t:get("other")
  end
  local e = summary.errors
  local errors = e.connect + e.read + e.write + e.timeout
  io.write(string.format(
    "requests=%d ok=%d other=%d errors=%d p50_us=%d p99_us=%d rps=%.0f\n",
    summary.requests, n_ok, n_other, errors,
    latency:percentile(50), latency:percentile(99),
    summary.requests / (summary.duration / 1e6)))
end
