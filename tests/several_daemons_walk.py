#!/usr/bin/env python3
"""Runs the README's "Several daemons" commands as written, with only what a
shared test machine needs changed: free ports instead of 5432 and 8080-8083,
`runuser -u postgres --` for `sudo -u postgres` (run as root), nginx with a
config file of its own instead of /etc/nginx (Debian's `nginx` package), and
a throwaway Postgres cluster with Debian's auth defaults (peer locally,
scram-sha-256 over TCP) instead of the system one. Then checks that the
three daemons act as one behind nginx. Leaves nothing running.

    cargo build -p actiongate && python3 tests/several_daemons_walk.py [debug|release]
"""
import os, re, socket, subprocess, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
W = f"{ROOT}/target/readme-walk"
PROFILE = sys.argv[1] if len(sys.argv) > 1 else "debug"

def free():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

readme = open(f"{ROOT}/README.md").read()
sec = readme[readme.index("## Several daemons"):readme.index("## Docker")]
blocks = re.findall(r"```sh\n(.*?)```", sec, re.S)
assert len(blocks) == 2, blocks

pg, n1, n2, n3, lb = free(), free(), free(), free(), free()
subs = [
    ("sudo -u postgres ", "runuser -u postgres -- "),
    ("127.0.0.1:5432", f"127.0.0.1:{pg}"),
    ("8081", str(n1)), ("8082", str(n2)), ("8083", str(n3)),
    ("listen 8080;", f"listen 127.0.0.1:{lb};"),
    ("http://127.0.0.1:8080", f"http://127.0.0.1:{lb}"),
    ("sudo tee /etc/nginx/conf.d/actiongate.conf", f"tee {W}/nginx/actiongate.conf"),
    ("sudo nginx -s reload || sudo nginx", f"nginx -p {W}/nginx -c {W}/nginx/nginx.conf"),
    ("PASSWORD@", "walk-secret@"),
]
def sub(text):
    for a, b in subs:
        text = text.replace(a, b)
    return text

setup = f"""
set -euo pipefail
export PATH={ROOT}/target/{PROFILE}:$PATH
PGBIN=/usr/lib/postgresql/15/bin
cd {W}
mkdir -p pg nginx/tmp && chown postgres:postgres pg
runuser -u postgres -- $PGBIN/initdb -D {W}/pg/data -U postgres --auth-local=peer --auth-host=scram-sha-256 >/dev/null
runuser -u postgres -- $PGBIN/pg_ctl -D {W}/pg/data -o "-p {pg} -k {W}/pg -c listen_addresses=127.0.0.1" -l {W}/pg/log -w start >/dev/null
# As the system cluster's socket would be found.
export PGHOST={W}/pg PGPORT={pg}
cat > nginx/nginx.conf <<EOF
pid {W}/nginx/nginx.pid;
error_log {W}/nginx/error.log;
events {{}}
http {{
    access_log {W}/nginx/access.log;
    client_body_temp_path {W}/nginx/tmp/body;
    proxy_temp_path {W}/nginx/tmp/proxy;
    fastcgi_temp_path {W}/nginx/tmp/fastcgi;
    uwsgi_temp_path {W}/nginx/tmp/uwsgi;
    scgi_temp_path {W}/nginx/tmp/scgi;
    include {W}/nginx/actiongate.conf;
}}
EOF
"""
# createuser --pwprompt reads the password twice (no tty here: from stdin).
block1 = sub(blocks[0]).replace(
    "runuser -u postgres -- createuser --pwprompt",
    "printf 'walk-secret\\nwalk-secret\\n' | runuser -u postgres -- createuser --pwprompt")
block2 = sub(blocks[1])
checks = f"""
echo '--- checks'
ls node1 node2 node3
test -f node1/admin.key && ! test -f node2/admin.key && ! test -f node3/admin.key
for p in {n1} {n2} {n3}; do
    for i in $(seq 150); do curl -sf http://127.0.0.1:$p/readyz && break; sleep 0.2; done
    curl -sf http://127.0.0.1:$p/readyz >/dev/null; echo
done
# A pending action through the balancer, approved through it, seen on every daemon.
AGENT=$(curl -sf -X POST http://127.0.0.1:{lb}/v1/keys -H "authorization: Bearer $ACTIONGATE_KEY" -H 'content-type: application/json' -d '{{"role":"agent","agent":"coder"}}' | sed 's/.*"key":"\\([^"]*\\)".*/\\1/')
ID=$(curl -sf -X POST http://127.0.0.1:{lb}/v1/actions -H "authorization: Bearer $AGENT" -H 'content-type: application/json' -d '{{"tool":"bash","detail":"make"}}' | sed 's/.*"id":"\\([^"]*\\)".*/\\1/')
actiongate pending
actiongate approve "$ID"
for p in {n1} {n2} {n3}; do curl -sf http://127.0.0.1:$p/v1/actions/$ID -H "authorization: Bearer $AGENT" | grep -o '"status":"[a-z]*"'; done
timeout 3 curl -sN http://127.0.0.1:{lb}/v1/events -H "authorization: Bearer $ACTIONGATE_KEY" -H 'Last-Event-ID: 0' | grep -c '^id:' || true
echo '--- walk done'
"""
teardown = f"""
nginx -p {W}/nginx -c {W}/nginx/nginx.conf -s stop 2>/dev/null || true
kill $(jobs -p) 2>/dev/null || true
wait 2>/dev/null || true
runuser -u postgres -- /usr/lib/postgresql/15/bin/pg_ctl -D {W}/pg/data -m fast -w stop >/dev/null 2>&1 || true
"""
script = setup + "\necho '--- README block 1'\n" + block1 + "\necho '--- README block 2'\n" + block2 + checks
full = "trap '" + teardown.replace("'", "'\\''") + "' EXIT\n" + script
subprocess.run(["rm", "-rf", W], check=True)
os.makedirs(W)
open(f"{W}/walk.sh", "w").write(full)
print(f"ports: pg {pg}, daemons {n1} {n2} {n3}, nginx {lb}", flush=True)
sys.exit(subprocess.run(["bash", f"{W}/walk.sh"]).returncode)
