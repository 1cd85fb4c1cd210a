"""A client of the tasks extension (`io.modelcontextprotocol/tasks`,
SEP-2663), built on the official SDK's public extension API: PyPI `mcp` 2.3
ships no tasks client, but lets an extension claim the `resultType: "task"`
shape of `tools/call` and resolve it. The resolver polls `tasks/get` until
the task ends and returns the tool's result, so `client.call_tool` stays a
plain call for the test. Every handle and state seen is recorded."""

from __future__ import annotations

from typing import Any, Literal

import anyio
import mcp_types as types
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from pydantic import ConfigDict

TASKS = "io.modelcontextprotocol/tasks"
TERMINAL = {"completed", "failed", "cancelled"}


class TaskHandle(types.Result):
    """`CreateTaskResult`: what `tools/call` answers instead of its result."""

    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"]
    task_id: str
    status: str
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None


class TaskState(types.Result):
    """`tasks/get`'s answer: the task, with its result once completed."""

    model_config = ConfigDict(extra="allow")
    task_id: str
    status: str
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    poll_interval_ms: int | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class TaskParams(types.RequestParams):
    task_id: str


class GetTaskRequest(types.Request[TaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskParams
    name_param = "taskId"


class CancelTaskRequest(types.Request[TaskParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskParams
    name_param = "taskId"


class Ack(types.Result):
    model_config = ConfigDict(extra="allow")


async def get_task(session, task_id: str) -> TaskState:
    return await session.send_request(GetTaskRequest(params=TaskParams(task_id=task_id)), TaskState)


async def cancel_task(session, task_id: str) -> None:
    await session.send_request(CancelTaskRequest(params=TaskParams(task_id=task_id)), Ack)


class Tasks(ClientExtension):
    """Declares the extension and resolves task handles by polling."""

    identifier = TASKS

    def __init__(self, max_poll_seconds: float = 0.5):
        self.max_poll_seconds = max_poll_seconds
        self.handles: list[TaskHandle] = []
        self.states: list[TaskState] = []

    def claims(self):
        return [ResultClaim(result_type="task", model=TaskHandle, resolve=self._resolve)]

    async def _resolve(self, handle: TaskHandle, ctx: ClaimContext) -> types.CallToolResult:
        self.handles.append(handle)
        while True:
            state = await get_task(ctx.session, handle.task_id)
            self.states.append(state)
            if state.status in TERMINAL:
                break
            await anyio.sleep(min((state.poll_interval_ms or 1000) / 1000, self.max_poll_seconds))
        if state.status == "completed" and state.result is not None:
            return types.CallToolResult.model_validate(state.result)
        raise RuntimeError(f"task {handle.task_id} ended {state.status}: {state.error}")
