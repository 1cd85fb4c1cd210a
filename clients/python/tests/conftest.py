"""Fixtures: the real actiongate daemon on a free loopback port, its keys,
and a tiny executor for handler actions.

The daemon binary is ``$ACTIONGATE_BIN``, else
``${CARGO_TARGET_DIR:-<repo>/target}/debug/actiongate`` (``.ci/python-tests``
builds it). One daemon serves the whole session; each test makes its own
agent (``agent_key``) so queues never mix.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import httpx
import pytest

REPO = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

# Policy of the test agents: echo allowed, bash asked, anything called
# "danger" denied, everything else denied (unmatched).
PROFILE = {
    "allow": ["tool:echo:.*"],
    "ask": [
        "tool:bash:.*",
        "tool:permission:.*",
        "tool:slow:.*",
        "tool:fs:.*",
        "tool:.*_file:.*",
        "tool:run_shell:.*",
        "tool:pyexec:.*",
        "tool:file:.*",
        "tool:write_note:.*",
    ],
    "deny": ["tool:danger:.*"],
}


def binary() -> Path:
    env = os.environ.get("ACTIONGATE_BIN")
    if env:
        return Path(env)
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    if not target.is_absolute():
        target = REPO / target
    return target / "debug" / "actiongate"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Daemon:
    """A running daemon: its URL, admin key and helpers to make keys."""

    def __init__(self, url: str, admin: str, proc: "subprocess.Popen[bytes]", log: Path) -> None:
        self.url = url
        self.admin = admin
        self.proc = proc
        self.log = log
        self.http = httpx.Client(base_url=url, headers={"authorization": f"Bearer {admin}"}, timeout=30)

    def call(self, method: str, path: str, body: Any = None) -> Any:
        r = self.http.request(method, path, json=body)
        assert r.status_code < 300, f"{method} {path}: {r.status_code} {r.text}"
        return r.json() if r.content else None

    def key(self, role: str, agent: Optional[str] = None) -> str:
        body: Dict[str, Any] = {"role": role}
        if agent:
            body["agent"] = agent
        return str(self.call("POST", "/v1/keys", body)["key"])

    def agent(self, profile: Any = None) -> str:
        name = f"py-{uuid.uuid4().hex[:10]}"
        self.call("PUT", f"/v1/agents/{name}", {"profile": profile if profile is not None else PROFILE})
        return name


def _start(data: Path) -> Daemon:
    exe = binary()
    if not exe.exists():
        pytest.exit(f"no daemon binary at {exe}: run `cargo build -p actiongate`", returncode=3)
    port = free_port()
    log = data.parent / f"daemon-{port}.log"
    # The daemon reads every ACTIONGATE_* variable as a setting: give it
    # none of the caller's (ACTIONGATE_BIN, ACTIONGATE_KEY, ...).
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACTIONGATE_")}
    # Short deadlines so expiry can be tested in seconds.
    env["ACTIONGATE_ACTIONS__MIN_TIMEOUT"] = "1s"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(exe), "serve", "--listen", f"127.0.0.1:{port}", "--data-dir", str(data)],
            cwd=str(data.parent),
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"daemon exited with {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200 and (data / "admin.key").exists():
                admin = (data / "admin.key").read_text().strip()
                return Daemon(url, admin, proc, log)
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"daemon not ready in 60 s: {log.read_text()[-2000:]}")


@pytest.fixture(scope="session")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    # pytest's own temp dirs: it keeps the last few runs' and removes older ones.
    tmp = tmp_path_factory.mktemp("actiongate")
    d = _start(tmp / "data")
    try:
        yield d
    finally:
        d.http.close()
        d.proc.terminate()
        try:
            d.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            d.proc.kill()
            d.proc.wait()
        if os.environ.get("ACTIONGATE_TEST_LOG"):
            sys.stderr.write(d.log.read_text())


@pytest.fixture
def agent(daemon: Daemon) -> str:
    """A fresh agent with the test profile."""
    return daemon.agent()


@pytest.fixture
def agent_key(daemon: Daemon, agent: str) -> str:
    return daemon.key("agent", agent)


@pytest.fixture(scope="session")
def operator_key(daemon: Daemon) -> str:
    return daemon.key("operator")


class Executor:
    """A loopback executor that answers 200 and records what it ran."""

    def __init__(self) -> None:
        self.received: List[Dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                n = int(self.headers.get("content-length", "0"))
                body = json.loads(self.rfile.read(n) or b"{}")
                outer.received.append(body)
                out = json.dumps({"ran": body.get("action"), "params": body.get("params")}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="session")
def handler(daemon: Daemon) -> Iterator[str]:
    """A registered handler ``pyexec`` (permission ``notes.write``, scope
    ``path``; action ``write``) served by :class:`Executor`."""
    ex = Executor()
    daemon.call(
        "POST",
        "/v1/handlers",
        {
            "id": "pyexec",
            "name": "Python test executor",
            "url": ex.url,
            "permissions": [
                {
                    "name": "notes.write",
                    "parameters_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
                }
            ],
            "actions": [
                {
                    "name": "write",
                    "permission": "notes.write",
                    "params_schema": {
                        "type": "object",
                        "properties": {"path": {"type": "string"}, "text": {"type": "string"}},
                        "required": ["path"],
                    },
                    "scope": {"path": "/path"},
                    "detail": "write {path}",
                }
            ],
        },
    )
    try:
        yield "pyexec"
    finally:
        ex.close()
