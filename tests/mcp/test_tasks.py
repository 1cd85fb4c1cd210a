"""The tasks extension (SEP-2663) on the real daemon, driven by the official
SDK's client with a tasks extension written on its public extension API
(tasks_ext.py): in the stateless era a call that waits for a human answers
with a task at once and the client follows it with `tasks/get`; in the
handshake era the same client's calls block as before."""

import contextlib
import time

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from conftest import MODES
from tasks_ext import Tasks, cancel_task, get_task
from test_daemon import decide_later, text

pytestmark = pytest.mark.anyio


@contextlib.asynccontextmanager
async def tasks_client(daemon, mode, tasks, key=None):
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {key or daemon.agent}"},
        timeout=httpx2.Timeout(30.0, read=300.0),
    )
    async with http:
        transport = streamable_http_client(f"{daemon.base}/mcp", http_client=http)
        async with Client(transport, mode=mode, cache=None, extensions=[tasks]) as client:
            yield client


async def test_a_waiting_permission_is_a_task_the_client_follows(daemon):
    tasks = Tasks()
    t, out = decide_later(daemon, "permission", "approve", after=1.5)
    async with tasks_client(daemon, "2026-07-28", tasks) as client:
        result = await client.call_tool(
            "request_permission",
            {"permission": "task:deploy", "reason": "ship it", "timeout_minutes": 5},
        )
    t.join(10)
    assert "error" not in out, out
    assert text(result) == "Permission granted for task:deploy"
    assert not result.is_error
    assert [h.task_id for h in tasks.handles] == [f"permission.{out['id']}"]
    working = [s for s in tasks.states if s.status == "working"]
    assert working, tasks.states
    assert working[0].status_message.startswith("waiting for an operator, 5 min left")
    assert tasks.states[-1].status == "completed"


async def test_a_denied_request_action_task_is_an_error_result(daemon):
    daemon.profile("agent-1", {"allow": [], "ask": ["tool:bash:.*"]})
    try:
        tasks = Tasks()
        t, out = decide_later(daemon, "bash", "deny", body={"reason": "not on fridays"})
        async with tasks_client(daemon, "2026-07-28", tasks) as client:
            result = await client.call_tool(
                "request_action", {"tool": "bash", "detail": "make deploy", "reason": "ship"}
            )
        t.join(10)
        assert result.is_error
        assert "not on fridays" in text(result)
        assert tasks.handles[0].task_id == f"action.{out['id']}"
    finally:
        daemon.profile("agent-1", "guarded")


async def test_tasks_cancel_withdraws_the_pending_item(daemon):
    tasks = Tasks()
    async with tasks_client(daemon, "2026-07-28", tasks) as client:
        handle = await client.session.call_tool(
            "request_permission", {"permission": "task:cancel", "reason": "r"}, allow_claimed=True
        )
        assert handle.result_type == "task", handle
        state = await get_task(client.session, handle.task_id)
        assert state.status == "working"
        await cancel_task(client.session, handle.task_id)
        state = await get_task(client.session, handle.task_id)
        assert state.status == "cancelled"
    action_id = handle.task_id.split(".", 1)[1]
    assert daemon.action(action_id)["status"] == "cancelled"


async def test_a_task_is_answered_to_its_agent_only(daemon):
    tasks = Tasks()
    async with tasks_client(daemon, "2026-07-28", tasks) as client:
        handle = await client.session.call_tool(
            "request_permission", {"permission": "task:mine", "reason": "r"}, allow_claimed=True
        )
    other = daemon.key("agent", "agent-2")
    async with tasks_client(daemon, "2026-07-28", Tasks(), key=other) as client:
        with pytest.raises(Exception) as refused:
            await get_task(client.session, handle.task_id)
        assert "not found" in str(refused.value).lower()
        with pytest.raises(Exception):
            await cancel_task(client.session, handle.task_id)
    action_id = handle.task_id.split(".", 1)[1]
    assert daemon.action(action_id)["status"] == "pending"
    daemon.decide(action_id, "deny", {"reason": "cleanup"})


@pytest.mark.parametrize("mode", MODES)
async def test_a_call_decided_at_once_needs_no_task(daemon, mode):
    daemon.profile("agent-1", {"allow": ["tool:permission:task:now"], "ask": []})
    try:
        tasks = Tasks()
        async with tasks_client(daemon, mode, tasks) as client:
            result = await client.call_tool(
                "request_permission", {"permission": "task:now", "reason": "r"}
            )
        assert text(result) == "Permission granted for task:now"
        assert not tasks.handles
    finally:
        daemon.profile("agent-1", "guarded")


async def test_the_handshake_era_has_no_tasks(daemon):
    """SEP-2663 defines the extension for the stateless revision only: a
    legacy session's call blocks and answers with the decision."""
    tasks = Tasks()
    t, out = decide_later(daemon, "permission", "approve", after=1)
    async with tasks_client(daemon, "legacy", tasks) as client:
        started = time.monotonic()
        result = await client.call_tool(
            "request_permission", {"permission": "task:legacy", "reason": "r"}
        )
    t.join(10)
    assert text(result) == "Permission granted for task:legacy"
    assert not tasks.handles
    assert time.monotonic() - started >= 1
