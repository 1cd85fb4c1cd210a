"""Handler actions as MCP tools on the real daemon, driven by the official
SDK's client in both eras: allowed (the executor's answer is the result),
asked (the call waits, with progress, for the operator), denied and failed
(error results); the handler's hints as annotations, which allow nothing;
the list's cache hints and `subscriptions/listen` in the stateless era, and
`notifications/tools/list_changed` in the handshake era."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import anyio
import pytest

from conftest import MODES
from test_daemon import connect, decide_later, text

pytestmark = pytest.mark.anyio


class Executor:
    """An executor on a loopback port: `/ok` answers 200 with what it wrote,
    `/fail` answers 400 (a failure, not retried). Records every call."""

    def __init__(self):
        self.calls = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.calls.append((self.path, body))
                if self.path == "/ok":
                    status, answer = 200, {"written": len(body["params"].get("content", ""))}
                else:
                    status, answer = 400, {"error": "disk full"}
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()


def files_handler(handler_id: str, url: str) -> dict:
    return {
        "id": handler_id, "name": "Files", "url": url, "timeout": "5s",
        "permissions": [{"name": "fs.write", "parameters_schema": {
            "type": "object", "properties": {"path": {"type": "string"}}}}],
        "actions": [
            {"name": "write", "description": "Write a file.",
             "params_schema": {"type": "object", "required": ["path"], "properties": {
                 "path": {"type": "string"}, "content": {"type": "string"}}},
             "permission": "fs.write", "scope": {"path": "/path"}, "detail": "write {path}",
             "hints": {"read_only": False, "destructive": True, "idempotent": True}},
            {"name": "stat", "description": "Look at a file.",
             "params_schema": {"type": "object", "required": ["path"], "properties": {
                 "path": {"type": "string"}}},
             "permission": "fs.write", "scope": {"path": "/path"}, "detail": "stat {path}",
             "hints": {"read_only": True, "open_world": False}},
        ],
    }


@pytest.fixture(scope="module")
def executor():
    e = Executor()
    yield e
    e.close()


@pytest.fixture(scope="module")
def handlers(daemon, executor):
    for hid, path in [("files", "/ok"), ("broken", "/fail")]:
        status, body = daemon.api("POST", "/v1/handlers", body=files_handler(hid, executor.url + path))
        assert status == 201, body
    yield
    for hid in ["files", "broken"]:
        daemon.api("DELETE", f"/v1/handlers/{hid}")


@pytest.fixture
def files_profile(daemon, handlers):
    daemon.profile("agent-1", {
        "allow": ["tool:files:write /tmp/.*"],
        "deny": ["tool:files:write /etc/.*"],
        "ask": ["tool:files:.*", "tool:broken:.*"],
    })
    yield
    daemon.profile("agent-1", "guarded")


@pytest.mark.parametrize("mode", MODES)
async def test_handler_actions_are_tools_with_their_hints(daemon, files_profile, mode):
    async with connect(daemon, mode) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    w, s = tools["files__write"], tools["files__stat"]
    assert w.description == "Write a file."
    assert w.input_schema["required"] == ["path"]
    assert (w.annotations.read_only_hint, w.annotations.destructive_hint,
            w.annotations.idempotent_hint) == (False, True, True)
    assert (s.annotations.read_only_hint, s.annotations.open_world_hint) == (True, False)
    assert s.annotations.title == "Files: stat"


@pytest.mark.parametrize("mode", MODES)
async def test_an_allowed_call_answers_with_the_executors_result(daemon, executor, files_profile, mode):
    async with connect(daemon, mode) as client:
        r = await client.call_tool("files__write", {"path": f"/tmp/{mode}", "content": "hello"})
    assert not r.is_error, text(r)
    assert r.structured_content == {"written": 5}
    assert json.loads(text(r)) == {"written": 5}
    assert executor.calls[-1][1]["params"] == {"path": f"/tmp/{mode}", "content": "hello"}


@pytest.mark.parametrize("mode", MODES)
async def test_an_asked_call_waits_for_the_operator_with_progress(daemon, executor, files_profile, mode):
    seen = []

    async def on_progress(progress, total, message):
        seen.append(message)

    before = len(executor.calls)
    t, out = decide_later(daemon, "files", "approve", seen=seen, min_progress=1)
    async with connect(daemon, mode) as client:
        r = await client.call_tool(
            "files__write", {"path": f"/srv/{mode}", "content": "abc"}, progress_callback=on_progress
        )
    t.join(10)
    assert "error" not in out, out
    assert not r.is_error, text(r)
    assert r.structured_content == {"written": 3}
    assert seen and seen[0].startswith("waiting for an operator"), seen
    assert len(executor.calls) == before + 1


@pytest.mark.parametrize("mode", MODES)
async def test_denied_and_failed_calls_are_error_results(daemon, executor, files_profile, mode):
    before = len(executor.calls)
    async with connect(daemon, mode) as client:
        denied = await client.call_tool("files__write", {"path": "/etc/passwd"})
        assert denied.is_error and text(denied).startswith("denied"), text(denied)
        assert len(executor.calls) == before, "a denied call reaches no executor"

        t, out = decide_later(daemon, "broken", "approve")
        failed = await client.call_tool("broken__write", {"path": "/srv/x"})
        t.join(10)
        assert failed.is_error and "failed" in text(failed), text(failed)

        invalid = await client.call_tool("files__write", {"content": "no path"})
        assert invalid.is_error


async def test_a_read_only_hint_allows_nothing(daemon, files_profile):
    t, out = decide_later(daemon, "files", "deny", body={"reason": "hints are not rules"})
    async with connect(daemon, "2026-07-28") as client:
        r = await client.call_tool("files__stat", {"path": "/etc/shadow"})
    t.join(10)
    assert r.is_error and "hints are not rules" in text(r), text(r)
    assert daemon.action(out["id"])["status"] == "denied"


async def test_the_stateless_list_carries_cache_hints(daemon):
    async with connect(daemon, "2026-07-28") as client:
        listed = await client.list_tools()
    assert listed.ttl_ms == 10_000
    assert listed.cache_scope == "private"


def register_later(daemon, handler_id, after=1.0):
    def run():
        time.sleep(after)
        daemon.api("POST", "/v1/handlers", body=files_handler(handler_id, "http://127.0.0.1:9/x"))

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


async def test_listen_tells_a_stateless_client_that_the_list_changed(daemon):
    async with connect(daemon, "2026-07-28") as client:
        async with client.listen(tools_list_changed=True) as sub:
            t = register_later(daemon, "late1")
            with anyio.fail_after(15):
                async for event in sub:
                    assert type(event).__name__ == "ToolsListChanged", event
                    break
            t.join(5)
        names = {t.name for t in (await client.list_tools()).tools}
    daemon.api("DELETE", "/v1/handlers/late1")
    assert "late1__write" in names


async def test_a_handshake_session_hears_that_the_list_changed(daemon):
    changed = anyio.Event()

    async def on_message(message):
        if "tools/list_changed" in repr(message) or "ToolListChanged" in repr(message):
            changed.set()

    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    import httpx2

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {daemon.agent}"},
                              timeout=httpx2.Timeout(30.0, read=300.0))
    async with http:
        transport = streamable_http_client(f"{daemon.base}/mcp", http_client=http)
        async with Client(transport, mode="legacy", cache=None, message_handler=on_message) as client:
            await client.list_tools()
            t = register_later(daemon, "late2")
            with anyio.fail_after(15):
                await changed.wait()
            t.join(5)
            names = {t.name for t in (await client.list_tools()).tools}
    daemon.api("DELETE", "/v1/handlers/late2")
    assert "late2__write" in names
