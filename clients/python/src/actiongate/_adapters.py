"""What the framework adapters share: naming a tool call as a gate action,
asking for a batch of them, and reading the answers, failing closed.

A batch is asked all at once (so a human sees every call of a model turn
together) and then waited for within one deadline; the answers come back in
the order of the calls.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union

from ._core import Timeout
from .aio import AsyncClient
from .client import Client
from .errors import ActionGateError, TimedOut
from .models import Action

#: Turns a tool call's arguments into the action's detail.
DetailFn = Callable[[Dict[str, Any]], str]


@dataclass(frozen=True)
class Verdict:
    """The gate's answer to one tool call: run it, or not and why."""

    approved: bool
    message: str = ""
    action: Optional[Action] = None


@dataclass(frozen=True)
class ToolCall:
    """A tool call to ask about: the gate's tool name, detail and reason."""

    tool: str
    detail: str
    reason: Optional[str]
    #: The call's input, shown to the humans who decide (a file write's
    #: content, an edit's old and new text); the policy reads only the
    #: tool and detail.
    params: Optional[Dict[str, Any]] = None
    #: Why only an operator's approval may allow it (the action's caution).
    caution: Optional[str] = None


#: The most characters of a detail the daemon takes (64 Ki), with room to spare.
MAX_DETAIL = 60_000

#: Most characters of one string of an input shown as params.
_MAX_SHOWN_STRING = 16 * 1024


def _shown(value: Any) -> Any:
    """``value`` with long strings cut, saying how much is not shown."""
    if isinstance(value, str):
        if len(value) <= _MAX_SHOWN_STRING:
            return value
        return f"{value[:_MAX_SHOWN_STRING]}…[{len(value) - _MAX_SHOWN_STRING} more characters not shown]"
    if isinstance(value, Mapping):
        return {str(k): _shown(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_shown(v) for v in value]
    return value


def compact_json(args: Any) -> str:
    """The default detail: the arguments as compact JSON (as the Claude Code
    hook spells MCP tools)."""
    return json.dumps(args, separators=(",", ":"), ensure_ascii=False, default=str)


class ToolMap:
    """How framework tool names map to gate tools and details."""

    def __init__(self) -> None:
        self._map: Dict[str, Tuple[str, Optional[DetailFn]]] = {}

    def add(self, name: str, tool: Optional[str], detail: Optional[DetailFn]) -> None:
        """Gate the framework's tool ``name`` as ``tool`` (default: the same name)."""
        self._map[name] = (tool or name, detail)

    def call(self, name: str, args: Mapping[str, Any], reason: Optional[str]) -> ToolCall:
        """The gate action for one call (unknown tools: the name and JSON args)."""
        tool, detail = self._map.get(name, (name, None))
        text = detail(dict(args)) if detail is not None else compact_json(dict(args))
        if len(text) <= MAX_DETAIL:
            return ToolCall(tool, text, reason)
        # Too large for a detail (a file's whole body): asked cut, the input
        # shown as params, and only an operator who read it may allow it.
        shown = _shown(dict(args))
        params = shown if len(compact_json(shown)) <= 192 * 1024 else {"not_shown": "the call's input is too large to show"}
        return ToolCall(
            tool,
            f"{text[: MAX_DETAIL - 64]}…[cut: the whole input is in params]",
            reason,
            params=params,
            caution=f"the call's input is too large to show whole in its detail ({len(text)} characters): only an operator who read it may allow it",
        )


def verdict(action: Action, wait: float) -> Verdict:
    """Reads a settled (or still pending) action as a verdict."""
    if action.was_approved and action.edited:
        # An approver who edited the call approved the edited one, not the
        # call the framework is about to run with its original arguments.
        return Verdict(False, f"Not run as asked: {edited_reason(action)}.", action)
    if action.approved:
        return Verdict(True, "", action)
    if action.status == "denied":
        return Verdict(False, f"Denied by actiongate: {action.denial_reason}", action)
    if action.status == "expired":
        return Verdict(False, "Not approved: nobody decided before the deadline.", action)
    if action.status == "cancelled":
        return Verdict(False, "Not approved: the request was withdrawn.", action)
    if action.status == "pending":
        return Verdict(False, f"Not approved: no decision within {wait:g} s.", action)
    return Verdict(False, f"Not approved: the action is {action.status}.", action)


def edited_reason(action: Action) -> str:
    """Why an approval an operator edited does not run the original call."""
    approved = action.raw.get("approved_detail")
    what = f"; the approved call is: {approved}" if isinstance(approved, str) else ""
    return f"an operator changed this call before approving it{what}"


def failed(error: BaseException) -> Verdict:
    """Fail closed: the gate could not answer, so the call does not run."""
    return Verdict(False, f"Not run: actiongate could not decide ({error}).")


def decide_all(
    client: Client, calls: List[ToolCall], wait: float, timeout: Timeout, session: Optional[str] = None
) -> List[Verdict]:
    """Asks about every call (in ``session``, when given), then waits for all
    within ``wait`` seconds."""
    deadline = time.monotonic() + wait
    started: List[Union[Action, Verdict]] = []
    for c in calls:
        try:
            started.append(
                client.request(
                    c.tool, c.detail, reason=c.reason, timeout=timeout, session=session, params=c.params, caution=c.caution
                )
            )
        except ActionGateError as e:
            started.append(failed(e))
    out: List[Verdict] = []
    for item in started:
        if isinstance(item, Verdict):
            out.append(item)
            continue
        action = item
        try:
            if not action.settled:
                action = client.wait(action.id, max(0.0, deadline - time.monotonic()))
        except TimedOut as e:
            action = _withdraw(client, e.action or action)
            if action.status in ("pending", "cancelled"):
                out.append(Verdict(False, f"Not approved: no decision within {wait:g} s.", action))
                continue
        except ActionGateError as e:
            out.append(failed(e))
            continue
        out.append(verdict(action, wait))
    return out


def _withdraw(client: Client, action: Action) -> Action:
    try:
        return client.cancel(action.id)
    except ActionGateError:
        # Decided meanwhile (409), or unreachable: read it back if possible.
        try:
            return client.get(action.id)
        except ActionGateError:
            return action


async def adecide_all(
    client: AsyncClient, calls: List[ToolCall], wait: float, timeout: Timeout, session: Optional[str] = None
) -> List[Verdict]:
    """The async :func:`decide_all`."""
    deadline = time.monotonic() + wait
    out: List[Verdict] = []
    started: List[Union[Action, Verdict]] = []
    for c in calls:
        try:
            started.append(
                await client.request(
                    c.tool, c.detail, reason=c.reason, timeout=timeout, session=session, params=c.params, caution=c.caution
                )
            )
        except ActionGateError as e:
            started.append(failed(e))
    for item in started:
        if isinstance(item, Verdict):
            out.append(item)
            continue
        action = item
        try:
            if not action.settled:
                action = await client.wait(action.id, max(0.0, deadline - time.monotonic()))
        except TimedOut as e:
            action = await _awithdraw(client, e.action or action)
            if action.status in ("pending", "cancelled"):
                out.append(Verdict(False, f"Not approved: no decision within {wait:g} s.", action))
                continue
        except ActionGateError as e:
            out.append(failed(e))
            continue
        out.append(verdict(action, wait))
    return out


async def _awithdraw(client: AsyncClient, action: Action) -> Action:
    try:
        return await client.cancel(action.id)
    except ActionGateError:
        try:
            return await client.get(action.id)
        except ActionGateError:
            return action
