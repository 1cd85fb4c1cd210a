"""CPU of the daemon per allowed handler action: `tools/call` on /mcp (the
official Python SDK, stateless era and handshake era) against the same
action through `POST /v1/actions?wait=`. Sequential calls on loopback; the
daemon's CPU time (utime + stime from /proc) is divided by the number of
calls. The executor is a tiny in-process HTTP server (its CPU is not
counted).

Usage: target/mcp-venv/bin/python bench/mcp/cpu.py [BINARY] [N]
"""

import asyncio
import http.server
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parents[2]
BINARY = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else ROOT / "target/release/actiongate"
N = int(sys.argv[2]) if len(sys.argv) > 2 else 300
TICK = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Executor(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        body = b'{"written":2}'
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


def cpu_seconds(pid):
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


async def mcp_calls(base, key, mode, n):
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"})
    async with http:
        async with Client(streamable_http_client(f"{base}/mcp", http_client=http),
                          mode=mode, cache=None) as c:
            await c.list_tools()
            for i in range(n):
                r = await c.call_tool("files__write", {"path": f"/tmp/{i}"})
                assert not r.is_error, r


def main():
    exe = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Executor)
    threading.Thread(target=exe.serve_forever, daemon=True).start()
    exe_url = f"http://127.0.0.1:{exe.server_address[1]}/hook"
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        env = dict(os.environ, ACTIONGATE_LOG_LEVEL="warn")
        proc = subprocess.Popen([str(BINARY), "serve", "--listen", f"127.0.0.1:{port}",
                                 "--data-dir", f"{tmp}/data"], env=env, cwd=tmp,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            base = f"http://127.0.0.1:{port}"
            key_path = Path(tmp) / "data/admin.key"
            for _ in range(600):
                if key_path.exists() and key_path.read_text().strip():
                    try:
                        if httpx2.get(f"{base}/healthz").status_code == 200:
                            break
                    except httpx2.HTTPError:
                        pass
                time.sleep(0.05)
            admin = key_path.read_text().strip()
            api = httpx2.Client(base_url=base, headers={"Authorization": f"Bearer {admin}"})
            agent = api.post("/v1/keys", json={"role": "agent", "agent": "bench"}).json()["key"]
            api.put("/v1/agents/bench", json={"profile": "open"}).raise_for_status()
            api.post("/v1/handlers", json={
                "id": "files", "name": "Files", "url": exe_url, "timeout": "5s",
                "permissions": [{"name": "fs.write", "parameters_schema": {
                    "type": "object", "properties": {"path": {"type": "string"}}}}],
                "actions": [{"name": "write", "params_schema": {"type": "object",
                             "properties": {"path": {"type": "string"}}, "required": ["path"]},
                             "permission": "fs.write", "scope": {"path": "/path"},
                             "detail": "write {path}"}],
            }).raise_for_status()
            rest = httpx2.Client(base_url=base, headers={"Authorization": f"Bearer {agent}"})
            results = {}
            for name, run in [
                ("POST /v1/actions?wait=10", None),
                ("tools/call 2026-07-28", "2026-07-28"),
                ("tools/call legacy", "legacy"),
            ]:
                before = cpu_seconds(proc.pid)
                started = time.monotonic()
                if run is None:
                    for i in range(N):
                        a = rest.post("/v1/actions?wait=10", json={
                            "handler": "files", "action": "write", "params": {"path": f"/tmp/{i}"}}).json()
                        assert a["status"] == "completed", a
                else:
                    asyncio.run(mcp_calls(base, agent, run, N))
                wall = time.monotonic() - started
                cpu = cpu_seconds(proc.pid) - before
                results[name] = (cpu / N * 1e6, wall / N * 1e3)
            for name, (cpu_us, wall_ms) in results.items():
                print(f"{name:28} {cpu_us:8.0f} µs CPU/call  {wall_ms:7.2f} ms wall/call  (n={N})")
        finally:
            proc.terminate()
            proc.wait(timeout=15)
            exe.shutdown()


if __name__ == "__main__":
    main()
