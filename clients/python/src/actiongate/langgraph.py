"""Answer LangChain's ``HumanInTheLoopMiddleware`` through actiongate
(``pip install actiongate[langgraph]``).

The middleware pauses the agent with a LangGraph interrupt listing the tool
calls to review (``action_requests``). :meth:`HitlGate.resume` turns each
into a gate action, waits for the operators and returns the
``Command(resume={"decisions": [...]})`` that continues the run: one
``{"type": "approve"}`` or ``{"type": "reject", "message": <why>}`` per
request, in order. Interrupts of ``interrupt_mode="per_call"``
(``tool_approval``) are answered by id.

Fail closed: a gate that cannot be reached, a denial, an expiry or no
decision within ``wait`` is a rejection whose message says why.

>>> gate = HitlGate(Client(), wait=300)
>>> result = agent.invoke({"messages": [...]}, config)
>>> while "__interrupt__" in result:
...     result = agent.invoke(gate.resume(result), config)
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple, Union

from langgraph.types import Command

from ._adapters import DetailFn, ToolCall, ToolMap, Verdict, adecide_all, decide_all
from ._core import Timeout
from .aio import AsyncClient
from .client import Client
from .errors import ActionGateError

__all__ = ["HitlGate"]


class HitlGate:
    """Decides HumanInTheLoopMiddleware interrupts through actiongate.

    Use a :class:`~actiongate.Client` with :meth:`resume` and an
    :class:`~actiongate.AsyncClient` with :meth:`aresume`. ``wait``: seconds
    to wait for the operators; ``timeout``: how long they have (the action's
    deadline); ``session``: the run or task the calls belong to
    (docs/sessions.md).
    """

    def __init__(
        self,
        client: Union[Client, AsyncClient],
        *,
        wait: float = 300,
        timeout: Timeout = None,
        session: Optional[str] = None,
    ) -> None:
        self.client = client
        self.wait = wait
        self.timeout = timeout
        self.session = session
        self._tools = ToolMap()

    def tool(self, name: str, *, tool: Optional[str] = None, detail: Optional[DetailFn] = None) -> "HitlGate":
        """Names the LangChain tool ``name`` to the gate as ``tool`` with
        ``detail`` made from its arguments (default: the name and the
        arguments as compact JSON). Returns the gate, for chaining."""
        self._tools.add(name, tool, detail)
        return self

    # ------------------------------------------------------------- helpers

    def _plan(self, source: Any) -> List[Tuple[Any, List[ToolCall], bool]]:
        """(interrupt, calls, batched) for each interrupt found in ``source``."""
        plans = []
        for intr in _interrupts(source):
            value = getattr(intr, "value", intr)
            if not isinstance(value, dict):
                raise ActionGateError("not a HumanInTheLoopMiddleware interrupt")
            reqs: Any
            if value.get("type") == "tool_approval":
                reqs = [value]
                batched = False
            else:
                reqs = value.get("action_requests")
                if not isinstance(reqs, list):
                    raise ActionGateError("not a HumanInTheLoopMiddleware interrupt: no action_requests")
                batched = True
            calls = [
                self._tools.call(str(r.get("name", "tool")), r.get("args") or {}, _reason(r))
                for r in reqs
                if isinstance(r, dict)
            ]
            plans.append((intr, calls, batched))
        if not plans:
            raise ActionGateError("no interrupt to answer")
        return plans

    @staticmethod
    def _command(plans: List[Tuple[Any, List[ToolCall], bool]], verdicts: List[Verdict]) -> Command[Any]:
        answers: List[Tuple[Any, Any]] = []
        i = 0
        for intr, calls, batched in plans:
            decisions = [_decision(v) for v in verdicts[i : i + len(calls)]]
            i += len(calls)
            answers.append((intr, {"decisions": decisions} if batched else decisions[0]))
        if len(answers) == 1 and answers[0][1].get("decisions") is not None:
            return Command(resume=answers[0][1])
        by_id: Dict[str, Any] = {}
        for intr, answer in answers:
            iid = getattr(intr, "id", None)
            if not isinstance(iid, str):
                raise ActionGateError("several interrupts without ids cannot be answered")
            by_id[iid] = answer
        return Command(resume=by_id)

    # ------------------------------------------------------------- answers

    def decisions(self, source: Any) -> List[Dict[str, Any]]:
        """The decisions for one batched interrupt's ``action_requests``, in order."""
        plans = self._plan(source)
        calls = [c for _, cs, _ in plans for c in cs]
        return [_decision(v) for v in decide_all(self._sync(), calls, self.wait, self.timeout, self.session)]

    def resume(self, source: Any) -> Command[Any]:
        """The ``Command`` answering the interrupt(s) in ``source``: an
        ``invoke`` result (``__interrupt__`` or ``.interrupts``), a list of
        interrupts, one interrupt, or its value."""
        plans = self._plan(source)
        calls = [c for _, cs, _ in plans for c in cs]
        return self._command(plans, decide_all(self._sync(), calls, self.wait, self.timeout, self.session))

    async def aresume(self, source: Any) -> Command[Any]:
        """:meth:`resume` with an :class:`~actiongate.AsyncClient`."""
        if not isinstance(self.client, AsyncClient):
            raise TypeError("aresume needs an AsyncClient")
        plans = self._plan(source)
        calls = [c for _, cs, _ in plans for c in cs]
        return self._command(plans, await adecide_all(self.client, calls, self.wait, self.timeout, self.session))

    def _sync(self) -> Client:
        if not isinstance(self.client, Client):
            raise TypeError("resume needs a Client; use aresume with an AsyncClient")
        return self.client


def _decision(v: Verdict) -> Dict[str, Any]:
    return {"type": "approve"} if v.approved else {"type": "reject", "message": v.message}


def _reason(request: Dict[str, Any]) -> Optional[str]:
    text = request.get("description")
    return text[:4096] if isinstance(text, str) and text else None


def _interrupts(source: Any) -> List[Any]:
    if isinstance(source, dict) and "__interrupt__" in source:
        return list(source["__interrupt__"])
    found = getattr(source, "interrupts", None)
    if isinstance(found, (list, tuple)):
        return list(found)
    if isinstance(source, (list, tuple)):
        return list(source)
    return [source]
