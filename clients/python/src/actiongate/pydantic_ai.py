"""Gate the tools of a pydantic-ai agent (``pip install actiongate[pydantic-ai]``).

It uses pydantic-ai's own human-in-the-loop mechanism: tools declared with
``requires_approval=True`` end a run with ``DeferredToolRequests``; this
gate asks actiongate about each (so operators see and decide them), waits
(bounded), and answers with ``DeferredToolResults`` (``True`` or
``ToolDenied(message)``), then resumes the run::

    agent = Agent(model, output_type=[str, DeferredToolRequests])

    @agent.tool_plain(requires_approval=True)
    def delete_file(path: str) -> str: ...

    gate = PydanticAIGate(AsyncClient(), wait=300)
    result = await gate.run(agent, "clean up the build folder")

Every call becomes an action (allowed ones too, for the audit). A denial's
reason reaches the model as the tool's answer; a gate that cannot answer,
or a wait that runs out, is a denial.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ._adapters import DetailFn, ToolCall, ToolMap, adecide_all
from ._core import Timeout
from .aio import AsyncClient
from .errors import ActionGateError

__all__ = ["PydanticAIGate"]


class PydanticAIGate:
    """Decides a pydantic-ai run's approval requests through actiongate, in
    ``session`` when given (the run or task the calls belong to:
    docs/sessions.md)."""

    def __init__(
        self,
        client: AsyncClient,
        *,
        wait: float = 300,
        timeout: Timeout = None,
        reason: Optional[str] = None,
        session: Optional[str] = None,
    ) -> None:
        self.client = client
        self.wait = wait
        self.timeout = timeout
        self.reason = reason
        self.session = session
        self._tools = ToolMap()

    def tool(self, name: str, *, tool: Optional[str] = None, detail: Optional[DetailFn] = None) -> None:
        """Names the pydantic-ai tool ``name`` as the gate's ``tool`` with
        ``detail`` made from its arguments (default: the name and the
        arguments as compact JSON)."""
        self._tools.add(name, tool, detail)

    async def resolve(self, requests: Any) -> Any:
        """The ``DeferredToolResults`` answering a ``DeferredToolRequests``."""
        from pydantic_ai import DeferredToolResults, ToolDenied

        parts = list(getattr(requests, "approvals", None) or [])
        calls: List[ToolCall] = []
        for part in parts:
            args = part.args_as_dict() if hasattr(part, "args_as_dict") else {}
            calls.append(self._tools.call(part.tool_name, args, self.reason or f"pydantic-ai calls {part.tool_name}"))
        verdicts = await adecide_all(self.client, calls, self.wait, self.timeout, self.session)
        results = DeferredToolResults()
        for part, verdict in zip(parts, verdicts):
            results.approvals[part.tool_call_id] = True if verdict.approved else ToolDenied(verdict.message)
        # Calls waiting for external execution are not ours to answer: a run
        # that has them ends with them, as without the gate.
        return results

    async def run(self, agent: Any, prompt: Optional[str] = None, *, max_rounds: int = 20, **kwargs: Any) -> Any:
        """``agent.run(prompt)`` resolving approval requests through the gate
        until the run ends (at most ``max_rounds`` resumptions)."""
        from pydantic_ai import DeferredToolRequests

        result = await agent.run(prompt, **kwargs)
        for _ in range(max_rounds):
            output = result.output
            if not isinstance(output, DeferredToolRequests) or not output.approvals:
                return result
            answers = await self.resolve(output)
            extra: Dict[str, Any] = {k: v for k, v in kwargs.items() if k != "message_history"}
            result = await agent.run(message_history=result.all_messages(), deferred_tool_results=answers, **extra)
        if isinstance(result.output, DeferredToolRequests) and result.output.approvals:
            raise ActionGateError(f"still waiting for approvals after {max_rounds} rounds")
        return result
