# The cost of deciding in a session that holds many approved plan steps
# (each a counted grant of one use): PLANS plans of 200 steps are approved
# in one session, then a check and an action are timed.
#   python3 bench/sessions/plan-steps.py target/release/actiongate [PLANS]
import json, os, subprocess, sys, time, urllib.request, socket, tempfile
BIN = sys.argv[1]; PLANS = int(sys.argv[2]) if len(sys.argv) > 2 else 10
d = tempfile.mkdtemp(prefix="ag-plan-steps.")
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
p = subprocess.Popen([BIN, "serve", "--data-dir", d, "--listen", f"127.0.0.1:{port}"], stderr=subprocess.DEVNULL,
                     env={**os.environ, "ACTIONGATE_LOG": "warn", "ACTIONGATE_LIMITS__MAX_PENDING_PER_AGENT": "100000"})
base = f"http://127.0.0.1:{port}"
def call(m, path, key, body=None):
    r = urllib.request.Request(base + path, method=m, data=None if body is None else json.dumps(body).encode(),
                               headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(r) as resp: return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as e: return e.code, json.loads(e.read() or b"null")
for _ in range(100):
    try:
        urllib.request.urlopen(base + "/healthz"); break
    except Exception: time.sleep(0.1)
admin = open(d + "/admin.key").read().strip()
_, k = call("POST", "/v1/keys", admin, {"role": "agent", "agent": "bot"}); agent = k["key"]
_, k = call("POST", "/v1/keys", admin, {"role": "operator"}); op = k["key"]
t0 = time.time()
for i in range(PLANS):
    st, plan = call("POST", "/v1/plans", agent, {"reason": "r", "session": "big", "steps": [{"tool": "bash", "detail": f"make target-{i}-{j}"} for j in range(200)]})
    assert st == 201, plan
    st, res = call("POST", f"/v1/plans/{plan['id']}/approve", op, {})
    assert st == 200, res
print("setup", round(time.time() - t0, 1), "s for", PLANS * 200, "steps")
for detail in ["make target-0-5", "make target-0-5 && make target-0-6", "ls -la", "make other"]:
    t = time.time(); st, r = call("POST", "/v1/check", agent, {"tool": "bash", "detail": detail, "session": "big"})
    print(detail, st, r.get("result") if isinstance(r, dict) else r, round((time.time() - t) * 1000, 1), "ms")
time.sleep(float(os.environ.get("PAUSE", "0")))  # time to attach perf to p.pid
t = time.time(); st, r = call("POST", "/v1/actions", agent, {"tool": "bash", "detail": "make target-3-7", "session": "big"})
print("action", st, r.get("status"), round((time.time() - t) * 1000, 1), "ms")
p.terminate(); p.wait()
subprocess.run(["rm", "-rf", d])
