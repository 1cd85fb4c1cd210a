# What a new grant costs other writers when many actions of its tool are
# pending: PENDING bash actions wait for a human, then 30 grants that cover
# none of them are made one after another while another client asks
# actions of a tool none of them reaches; prints each side's latency.
#   python3 bench/grants/pending-scan.py target/release/actiongate [PENDING]
# On Postgres: DATABASE_URL=postgres://... (an empty database) before it.
import json, os, socket, subprocess, sys, tempfile, threading, time, urllib.request

BIN = sys.argv[1]
PENDING = int(sys.argv[2]) if len(sys.argv) > 2 else 10000
d = tempfile.mkdtemp(prefix="ag-pending-scan.")
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
p = subprocess.Popen([BIN, "serve", "--data-dir", d, "--listen", f"127.0.0.1:{port}"], stderr=subprocess.DEVNULL,
                     env={**os.environ, "ACTIONGATE_LOG": "warn", "ACTIONGATE_LIMITS__MAX_PENDING_PER_AGENT": "1000000",
                          **({"ACTIONGATE_STORAGE__DATABASE_URL": os.environ["DATABASE_URL"]} if os.environ.get("DATABASE_URL") else {})})
base = f"http://127.0.0.1:{port}"


def call(method, path, key, body=None):
    r = urllib.request.Request(base + path, method=method, data=None if body is None else json.dumps(body).encode(),
                               headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(r) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def pct(xs, q):
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(q * len(xs)))], 2)


try:
    for _ in range(100):
        try:
            urllib.request.urlopen(base + "/healthz"); break
        except Exception:
            time.sleep(0.1)
    admin = open(d + "/admin.key").read().strip()
    agent = call("POST", "/v1/keys", admin, {"role": "agent", "agent": "bot"})[1]["key"]
    op = call("POST", "/v1/keys", admin, {"role": "operator"})[1]["key"]

    def ask(lo, hi):
        for i in range(lo, hi):
            st, a = call("POST", "/v1/actions", agent, {"tool": "bash", "detail": f"rm -rf build-{i}", "timeout": "1h"})
            assert st == 201 and a["status"] == "pending", a

    t0 = time.time()
    askers = [threading.Thread(target=ask, args=(j * PENDING // 8, (j + 1) * PENDING // 8)) for j in range(8)]
    [t.start() for t in askers]; [t.join() for t in askers]
    print(f"{PENDING} pending in {time.time() - t0:.1f} s")

    done = threading.Event()
    others = []

    def other():
        while not done.is_set():
            t = time.time()
            st, a = call("POST", "/v1/actions", agent, {"tool": "deploy", "detail": "x", "timeout": "1h"})
            assert st == 201, a
            others.append((time.time() - t) * 1000)

    o = threading.Thread(target=other); o.start()
    time.sleep(0.5)
    quiet = len(others)
    grants = []
    for i in range(30):
        t = time.time()
        st, r = call("POST", "/v1/grants", op, {"tool": "bash", "pattern": f"make nothing-{i}", "expires": "1h"})
        assert st == 201, r
        grants.append((time.time() - t) * 1000)
    done.set(); o.join()
    during = others[quiet:]
    print(f"grant: p50 {pct(grants, 0.5)} ms, max {pct(grants, 1)} ms")
    print(f"another action meanwhile ({len(during)}): p50 {pct(during, 0.5)} ms, p99 {pct(during, 0.99)} ms, max {pct(during, 1)} ms")
finally:
    p.terminate(); p.wait()
    subprocess.run(["rm", "-rf", d])
