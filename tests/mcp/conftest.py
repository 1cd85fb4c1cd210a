"""Fixtures of the MCP suite: the real daemon on a free loopback port with a
fresh data dir, keys made through its API, and MCP clients of the official
Python SDK (PyPI `mcp`) in both protocol eras."""

import contextlib
import os
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import httpx2
import pytest

ROOT = Path(__file__).resolve().parents[2]
# A relative CARGO_TARGET_DIR is relative to the repository, as for cargo.
TARGET = ROOT / os.environ.get("CARGO_TARGET_DIR", "target")
BINARY = TARGET / "debug" / "actiongate"

# Both eras: the initialize handshake and the stateless revision.
MODES = ["legacy", "2026-07-28"]

# Seconds between progress notifications while a call waits (short, so the
# tests see several).
PROGRESS_SECONDS = 2


@pytest.fixture
def anyio_backend():
    return "asyncio"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Daemon:
    def __init__(self, base: str, admin: str, data_dir: Path):
        self.base = base
        self.admin = admin
        self.data_dir = data_dir
        self.http = httpx2.Client(base_url=base, timeout=30)
        self.operator = self.key("operator")
        self.agent = self.key("agent", "agent-1")

    def api(self, method: str, path: str, key: str | None = None, body=None):
        headers = {"Authorization": f"Bearer {key or self.admin}"}
        resp = self.http.request(method, path, headers=headers, json=body)
        try:
            data = resp.json()
        except ValueError:
            data = resp.text
        return resp.status_code, data

    def key(self, role: str, agent: str | None = None) -> str:
        status, body = self.api("POST", "/v1/keys", body={"role": role, "agent": agent})
        assert status == 201, body
        return body["key"]

    def profile(self, agent: str, profile) -> None:
        status, body = self.api("PUT", f"/v1/agents/{agent}", body={"profile": profile})
        assert status < 300, body

    def pending(self, tool: str | None = None) -> list:
        path = "/v1/actions?status=pending" + (f"&tool={tool}" if tool else "")
        status, body = self.api("GET", path, self.operator)
        assert status == 200, body
        return body["items"]

    def wait_pending(self, tool: str | None = None, timeout: float = 20) -> dict:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            items = self.pending(tool)
            if items:
                return items[0]
            time.sleep(0.05)
        raise AssertionError("no pending action appeared")

    def action(self, action_id: str) -> dict:
        status, body = self.api("GET", f"/v1/actions/{action_id}", self.operator)
        assert status == 200, body
        return body

    def decide(self, action_id: str, verdict: str, body=None) -> dict:
        status, resp = self.api(
            "POST", f"/v1/actions/{action_id}/{verdict}", self.operator, body or {}
        )
        assert status == 200, resp
        return resp


@pytest.fixture(scope="session")
def daemon():
    assert BINARY.exists(), f"build the daemon first: {BINARY}"
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp) / "data"
        port = free_port()
        env = dict(os.environ)
        env["ACTIONGATE_HTTP__MCP_PROGRESS_SECONDS"] = str(PROGRESS_SECONDS)
        env["ACTIONGATE_ACTIONS__MIN_TIMEOUT"] = "1s"
        env.setdefault("ACTIONGATE_LOG_LEVEL", "warn")
        log = open(Path(tmp) / "daemon.log", "w")
        proc = subprocess.Popen(
            [str(BINARY), "serve", "--listen", f"127.0.0.1:{port}", "--data-dir", str(data_dir)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=tmp,
        )
        try:
            base = f"http://127.0.0.1:{port}"
            key_path = data_dir / "admin.key"
            admin = ""
            for _ in range(600):
                assert proc.poll() is None, (Path(tmp) / "daemon.log").read_text()
                if key_path.exists() and key_path.read_text().strip():
                    with contextlib.suppress(httpx2.HTTPError):
                        if httpx2.get(f"{base}/healthz", timeout=2).status_code == 200:
                            admin = key_path.read_text().strip()
                            break
                time.sleep(0.05)
            assert admin, "the daemon did not start"
            d = Daemon(base, admin, data_dir)
            d.log_path = Path(tmp) / "daemon.log"
            yield d
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            log.close()
