"""Gate the tools of an OpenAI Agents SDK agent (``pip install actiongate[openai-agents]``).

It uses the SDK's own approval flow:

- :meth:`AgentsGate.needs_approval` is a tool's ``needs_approval`` callable.
  It asks the gate: a call it allows is recorded as an action (taking a
  counted grant's use or a plan step) and runs, ``deny`` raises
  :class:`~actiongate.Denied` (the run stops), ``ask`` (or a use taken
  meanwhile) interrupts the run.
- :meth:`AgentsGate.resolve` takes a run result's ``interruptions``, asks
  the gate for each (so operators see and decide them), waits, and applies
  each answer with ``state.approve(item)`` or ``state.reject(item,
  rejection_message=...)``; ``Runner.run(agent, state)`` then resumes.

Both fail closed: if the gate cannot be asked, the call needs approval, and
an approval the gate cannot give is a rejection whose message says why.

>>> gate = AgentsGate(AsyncClient(), wait=300)
>>> @function_tool(needs_approval=gate.needs_approval("delete_file", tool="fs",
...                detail=lambda a: f"delete {a['path']}"))
... async def delete_file(path: str) -> str: ...
>>> result = await gate.run(agent, "clean up")   # Runner.run, resolving interruptions
"""

from __future__ import annotations

import json
from typing import Any, Awaitable, Callable, Dict, List, Optional

from ._adapters import DetailFn, ToolCall, ToolMap, Verdict, adecide_all
from ._core import Timeout
from .aio import AsyncClient
from .errors import ActionGateError, Denied

__all__ = ["AgentsGate"]

NeedsApproval = Callable[[Any, Dict[str, Any], str], Awaitable[bool]]


class AgentsGate:
    """Gates function tools of the OpenAI Agents SDK through actiongate.

    ``wait`` is how many seconds :meth:`resolve` waits for the operators;
    ``timeout`` how long they have to decide (the action's deadline);
    ``reason`` is shown to them (default: the tool and agent names);
    ``session`` is the run or task the calls belong to (its grants, an
    approved plan's steps and its taint apply: docs/sessions.md).
    """

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

    def needs_approval(
        self,
        name: str,
        *,
        tool: Optional[str] = None,
        detail: Optional[DetailFn] = None,
    ) -> NeedsApproval:
        """The ``needs_approval`` callable of the SDK tool called ``name``.

        The gate sees it as ``tool`` (default ``name``) with ``detail`` made
        from the call's arguments (default: the arguments as compact JSON).
        """
        self._tools.add(name, tool, detail)

        async def policy(_ctx: Any, params: Dict[str, Any], _call_id: str) -> bool:
            call = self._tools.call(name, params, None)
            if call.caution is not None:
                # Only an operator's approval allows it: interrupt.
                return True
            try:
                decision = await self.client.check(call.tool, call.detail, session=self.session)
            except ActionGateError:
                # Fail closed: interrupt; resolve() asks again and rejects if
                # the gate still cannot answer.
                return True
            if decision.result == "deny":
                raise Denied(decision.reason)
            if decision.result != "allow":
                return True
            # Allowed: recorded as the action it is before it runs, which
            # takes a counted grant's use or an approved plan step (a check
            # takes nothing: a grant of one use would let every call
            # through) and puts it in the audit. Only a call stored approved
            # runs unasked; one stored asked (its use taken meanwhile) is
            # withdrawn and interrupts.
            try:
                action = await self.client.request(
                    call.tool, call.detail, reason=call.reason, wait=0, session=self.session
                )
                if action.status == "approved" and not action.edited:
                    return False
                if action.status == "pending":
                    await self.client.cancel(action.id)
            except ActionGateError:
                pass
            return True

        return policy

    async def resolve(self, result: Any, wait: Optional[float] = None) -> Any:
        """Decides a run result's ``interruptions`` through the gate.

        Returns the ``RunState`` (``result.to_state()``) with every
        interruption approved or rejected, ready for ``Runner.run(agent,
        state)``.
        """
        state = result.to_state()
        items = list(getattr(result, "interruptions", None) or [])
        for item, verdict in zip(items, await self.verdicts(items, wait)):
            if verdict.approved:
                state.approve(item)
            else:
                state.reject(item, rejection_message=verdict.message)
        return state

    async def verdicts(self, items: List[Any], wait: Optional[float] = None) -> List[Verdict]:
        """The gate's verdict on each approval item, in order. An item whose
        call cannot be told (no arguments and no call to read) is rejected
        without asking: nobody could judge it."""
        calls: List[ToolCall] = []
        unreadable: List[int] = []
        for i, item in enumerate(items):
            name = getattr(item, "tool_name", None) or getattr(item, "name", None) or "tool"
            agent = getattr(getattr(item, "agent", None), "name", None)
            reason = self.reason or (f"agent {agent} calls {name}" if agent else f"calls {name}")
            args = _arguments(item)
            if args is None:
                unreadable.append(i)
                continue
            calls.append(self._tools.call(name, args, reason))
        w = self.wait if wait is None else wait
        decided = iter(await adecide_all(self.client, calls, w, self.timeout, self.session))
        refused = Verdict(False, "actiongate: what this call would do cannot be read; not run")
        return [refused if i in unreadable else next(decided) for i in range(len(items))]

    async def run(self, agent: Any, input: Any, *, max_rounds: int = 20, **kwargs: Any) -> Any:
        """``Runner.run`` that resolves interruptions through the gate until
        the run finishes (at most ``max_rounds`` resumptions)."""
        from agents import Runner

        result = await Runner.run(agent, input, **kwargs)
        for _ in range(max_rounds):
            if not getattr(result, "interruptions", None):
                return result
            state = await self.resolve(result)
            result = await Runner.run(agent, state, **kwargs)
        if getattr(result, "interruptions", None):
            raise ActionGateError(f"still interrupted after {max_rounds} rounds")
        return result


def _arguments(item: Any) -> Optional[Dict[str, Any]]:
    """What an approval item's call would do: a function call's arguments,
    or, for a call that has none (a shell command, a patch, a computer
    action), the call itself, ids aside. ``None`` when neither can be read."""
    raw = getattr(item, "arguments", None)
    if isinstance(raw, str):
        try:
            value = json.loads(raw) if raw else {}
        except ValueError:
            return {"arguments": raw}
        return value if isinstance(value, dict) else {"arguments": value}
    call = getattr(item, "raw_item", None)
    if hasattr(call, "model_dump"):
        call = call.model_dump(mode="json", exclude_none=True)
    if not isinstance(call, dict):
        return None
    described = {k: v for k, v in call.items() if k not in ("id", "call_id", "status")}
    return described if len(described) > ("type" in described) else None
