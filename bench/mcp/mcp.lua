-- wrk script of bench/mcp/run.sh: POSTs one JSON-RPC body (or plain JSON
-- body) with a bearer key and extra headers, gives each request its own
-- JSON-RPC id (a session must not see two requests with one id in flight),
-- and counts as ok only a 2xx answer whose body holds the success marker.
-- Prints one line for run.sh to read:
--   requests=N ok=N other=N errors=N p50_us=N p99_us=N rps=N
--
-- Usage: wrk ... -s mcp.lua URL -- BODY_FILE KEY_FILE HEADERS_FILE MARKER
-- BODY_FILE may hold the text @ID@, replaced by a fresh id per request;
-- HEADERS_FILE has one `Name: value` a line (may be empty); MARKER is a
-- plain string every good answer contains (e.g. "isError":false).

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
  n = 0
  body = slurp(args[1])
  marker = args[4]
  headers = {["content-type"] = "application/json"}
  headers["authorization"] = "Bearer " .. (slurp(args[2]):gsub("%s+", ""))
  for line in slurp(args[3]):gmatch("[^\n]+") do
    local k, v = line:match("^([^:]+):%s*(.-)%s*$")
    if k then headers[k] = v end
  end
end

function request()
  n = n + 1
  local b = body:gsub("@ID@", tostring(n))
  return wrk.format("POST", nil, headers, b)
end

function response(status, hdrs, b)
  if status >= 200 and status < 300 and b:find(marker, 1, true) then
    ok = ok + 1
  else
    other = other + 1
    if other == 1 then io.stderr:write("first bad answer: ", status, " ", b:sub(1, 400), "\n") end
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
