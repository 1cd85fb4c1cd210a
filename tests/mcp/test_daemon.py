"""`/mcp` of the real daemon driven by the official Python SDK client, in
both eras: `mode="legacy"` (initialize handshake, sessions) and
`mode="2026-07-28"` (stateless)."""

import contextlib
import json
import os
import threading
import time

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from conftest import MODES, PROGRESS_SECONDS

pytestmark = pytest.mark.anyio

# How long the long-wait tests keep a call waiting for a human: beyond the
# 60 s after which Claude Code cuts a silent HTTP request.
LONG_WAIT = float(os.environ.get("MCP_LONG_WAIT_SECONDS", "70"))


@contextlib.asynccontextmanager
async def connect(daemon, mode, key=None, read_timeout=300.0):
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {key or daemon.agent}"},
        timeout=httpx2.Timeout(30.0, read=read_timeout),
    )
    async with http:
        transport = streamable_http_client(f"{daemon.base}/mcp", http_client=http)
        async with Client(transport, mode=mode, cache=None) as client:
            yield client


def text(result) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


def decide_later(daemon, tool, verdict, after=0.0, body=None, seen=None, min_progress=0):
    """Decides the first pending action of `tool` from the API, in a thread,
    once `after` seconds passed and `min_progress` notifications were seen."""
    out = {}

    def run():
        try:
            action = daemon.wait_pending(tool)
            out["id"] = action["id"]
            end = time.monotonic() + after
            while time.monotonic() < end or (seen is not None and len(seen) < min_progress):
                if time.monotonic() > end + 120:
                    break
                time.sleep(0.1)
            out["decided"] = daemon.decide(action["id"], verdict, body)
        except Exception as e:  # reported by the test
            out["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, out


async def test_a_request_without_a_key_is_refused(daemon):
    resp = httpx2.post(
        f"{daemon.base}/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"Accept": "application/json, text/event-stream"},
    )
    assert resp.status_code == 401
    assert resp.headers["content-type"] == "application/problem+json"


@pytest.mark.parametrize("mode", MODES)
async def test_tools_are_listed_with_their_schemas(daemon, mode):
    async with connect(daemon, mode) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        for name in ["request_permission", "check_action", "request_action",
                     "get_action_status", "approval_prompt"]:
            assert name in tools, (mode, list(tools))
        schema = tools["request_permission"].input_schema
        assert schema["properties"]["permission"]["minLength"] == 1
        assert schema["properties"]["reason"]["minLength"] == 1
        t = schema["properties"]["timeout_minutes"]
        assert (t["minimum"], t["maximum"], t["default"]) == (1, 60, 15)
        assert set(schema["required"]) == {"permission", "reason"}


@pytest.mark.parametrize("mode", MODES)
async def test_permission_approved_from_the_api_while_the_call_blocks(daemon, mode):
    permission = f"deploy:{mode}"
    seen = []

    async def on_progress(progress, total, message):
        seen.append((progress, message))

    t, out = decide_later(daemon, "permission", "approve", seen=seen, min_progress=2)
    async with connect(daemon, mode) as client:
        result = await client.call_tool(
            "request_permission",
            {"permission": permission, "reason": "ship it", "timeout_minutes": 5},
            progress_callback=on_progress,
        )
    t.join(10)
    assert "error" not in out, out
    assert not result.is_error
    assert text(result) == f"Permission granted for {permission}"
    assert len(seen) >= 2, seen
    assert seen[0][1].startswith("waiting for an operator, 5 min left"), seen
    assert seen[1][0] > seen[0][0]
    assert daemon.action(out["id"])["status"] == "approved"


@pytest.mark.parametrize("mode", MODES)
async def test_permission_denied_is_a_normal_result_with_the_reason(daemon, mode):
    t, out = decide_later(daemon, "permission", "deny", body={"reason": "not now"})
    async with connect(daemon, mode) as client:
        result = await client.call_tool(
            "request_permission", {"permission": "net:x", "reason": "fetch"}
        )
    t.join(10)
    assert not result.is_error
    assert text(result) == "Permission denied for net:x: not now"


@pytest.mark.parametrize("mode", MODES)
async def test_check_request_and_poll(daemon, mode):
    daemon.profile("agent-1", {"allow": ["tool:bash:ls"], "ask": ["tool:bash:.*"]})
    try:
        async with connect(daemon, mode) as client:
            c = await client.call_tool("check_action", {"tool": "bash", "detail": "ls"})
            assert c.structured_content["result"] == "allow"
            r = await client.call_tool(
                "request_action", {"tool": "bash", "detail": "make", "wait_seconds": 0}
            )
            action = r.structured_content["action"]
            assert action["status"] == "pending"
            s = await client.call_tool("get_action_status", {"id": action["id"]})
            assert s.structured_content["action"]["status"] == "pending"
            daemon.decide(action["id"], "deny", {"reason": "no"})
            s = await client.call_tool("get_action_status", {"id": action["id"]})
            assert s.structured_content["action"]["status"] == "denied"
            assert s.is_error
    finally:
        daemon.profile("agent-1", "guarded")


async def test_closing_a_session_is_not_logged_as_a_failure(daemon, caplog):
    """The SDK closes its session with DELETE on leaving and logs any answer
    but 200 or 204 as "Session termination failed"."""
    caplog.set_level("DEBUG", logger="mcp.client.streamable_http")
    async with connect(daemon, "legacy") as client:
        await client.list_tools()
    failed = [r.getMessage() for r in caplog.records if "termination failed" in r.getMessage()]
    assert failed == [], failed


@pytest.mark.parametrize("mode", MODES)
async def test_approval_prompt_speaks_claude_codes_json(daemon, mode):
    daemon.profile("agent-1", {"allow": ["tool:bash:ls"], "deny": ["tool:bash:rm( .*)?"], "ask": []})
    try:
        async with connect(daemon, mode) as client:
            r = await client.call_tool(
                "approval_prompt", {"tool_name": "Bash", "input": {"command": "ls"}}
            )
            assert json.loads(text(r)) == {"behavior": "allow", "updatedInput": {"command": "ls"}}
            r = await client.call_tool(
                "approval_prompt", {"tool_name": "Bash", "input": {"command": "rm x"}}
            )
            answer = json.loads(text(r))
            assert answer["behavior"] == "deny" and "denied" in answer["message"]
            assert not r.is_error
            # Input it cannot read: a tool error, its text still the deny.
            r = await client.call_tool("approval_prompt", {})
            assert r.is_error
            answer = json.loads(text(r))
            assert set(answer) == {"behavior", "message"} and answer["behavior"] == "deny"
    finally:
        daemon.profile("agent-1", "guarded")


@pytest.mark.parametrize("mode", MODES)
async def test_a_client_that_disconnects_cancels_its_pending_item(daemon, mode):
    async with connect(daemon, mode) as client:
        with anyio.move_on_after(3):
            await client.call_tool("request_permission", {"permission": f"gone:{mode}", "reason": "r"})
    end = time.monotonic() + 10
    while time.monotonic() < end:
        status, body = daemon.api("GET", "/v1/actions?tool=permission", daemon.operator)
        mine = [a for a in body["items"] if a["detail"] == f"gone:{mode}"]
        if mine and mine[0]["status"] == "cancelled":
            return
        time.sleep(0.1)
    raise AssertionError(f"not cancelled: {mine}")


async def test_a_long_wait_is_not_cut_and_a_minute_without_a_decision_times_out(daemon):
    """Two calls of a minute or more, side by side (the suite waits once).
    Stateless era: a human decides after LONG_WAIT seconds. Handshake era:
    nobody decides, and after timeout_minutes (1) the call ends with an
    error result. Each client's read timeout is 10 s, so only the progress
    notifications keep either call alive."""
    seen = []

    async def on_progress(progress, total, message):
        seen.append(progress)

    t, out = decide_later(daemon, "permission", "approve", after=LONG_WAIT)

    async def decided():
        async with connect(daemon, "2026-07-28", read_timeout=10.0) as client:
            started = time.monotonic()
            result = await client.call_tool(
                "request_permission", {"permission": "long:stateless", "reason": "wait"},
                progress_callback=on_progress,
            )
        return time.monotonic() - started, result

    async def undecided():
        # Asked once the decider holds the other action: it decides that one.
        while "id" not in out and "error" not in out:
            await anyio.sleep(0.05)
        async with connect(daemon, "legacy", read_timeout=10.0) as client:
            started = time.monotonic()
            result = await client.call_tool(
                "request_permission",
                {"permission": "long:legacy", "reason": "wait", "timeout_minutes": 1},
                progress_callback=lambda *a: anyio.sleep(0),
            )
        return time.monotonic() - started, result

    answers = {}

    async def run(name, call):
        answers[name] = await call()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run, "decided", decided)
        tg.start_soon(run, "undecided", undecided)
    t.join(10)
    assert "error" not in out, out
    took, result = answers["decided"]
    assert took >= LONG_WAIT
    assert text(result) == "Permission granted for long:stateless"
    assert len(seen) >= LONG_WAIT / PROGRESS_SECONDS / 2
    took, result = answers["undecided"]
    assert took >= 59
    assert result.is_error
    assert text(result) == "Permission request timed out after 1 minutes"
