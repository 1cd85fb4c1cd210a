"""The API's workflows, written once for the sync and the async client.

Each workflow is a generator that yields :class:`Call` (an HTTP request to
make) or :class:`Sleep` and receives the parsed JSON answer; ``Client`` and
``AsyncClient`` only drive these generators over their own transport. So the
long-poll loops, the fail-closed reading of statuses and the request bodies
exist in one place.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import math
import os
import time
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Callable, Dict, Generator, List, Mapping, Optional, Sequence, Tuple, Union

import httpx

from .errors import ActionGateError, ApiError, Denied, Expired, FieldError, TimedOut, Unreachable
from .models import Action, Decision, Grant, GrantRequest, Person, Plan

__version__ = "0.1.0"

DEFAULT_URL = "http://127.0.0.1:8080"
#: Longest single long-poll the daemon accepts by default
#: (``actions.max_wait_seconds``); longer waits are split into several.
MAX_POLL_SECONDS = 60
#: Pauses between attempts of a retried call, in seconds.
RETRY_DELAYS = (0.25, 0.5, 1.0, 2.0, 4.0)
#: Statuses worth retrying: the daemon (or a proxy) is busy or restarting.
RETRY_STATUSES = frozenset({502, 503, 504})

Timeout = Union[None, int, float, str, timedelta]


@dataclass
class Call:
    """One HTTP request a workflow wants made.

    ``retry``: transport errors and 502/503/504 are retried (only for calls
    that are safe to repeat: reads, checks, writes that make something
    under an idempotency key, and plain decisions, which the daemon
    answers as they stand when sent again). ``best_effort``: any error is
    answered with ``None`` instead of raising (for clean-ups such as
    cancelling). ``wait`` is the
    long-poll time the daemon may hold the request, added to the timeout.
    ``until`` is when the workflow's wait ends (``time.monotonic()``): the
    call, retries and pauses included, ends by it plus the client's timeout
    (default: ``wait`` from now), so a workflow of several calls takes no
    longer than one. ``linked``: the workflow is sent ``(json, more)``,
    where ``more`` says the answer links a next page (``Link: <…>;
    rel="next"``: a page the daemon cut short of its limit for its size).
    """

    method: str
    path: str
    params: Optional[Dict[str, Any]] = None
    json: Any = None
    has_body: bool = False
    retry: bool = False
    best_effort: bool = False
    wait: float = 0.0
    until: Optional[float] = None
    linked: bool = False


@dataclass
class Sleep:
    """A pause a workflow wants taken."""

    seconds: float


Step = Union[Call, Sleep]
Flow = Generator[Step, Any, Any]


@dataclass
class Settings:
    """What both clients are built from."""

    url: str
    key: str
    timeout: float
    headers: Dict[str, str] = field(default_factory=dict)


def settings(url: Optional[str], key: Optional[str], timeout: float) -> Settings:
    """Resolves ``url`` and ``key`` from the arguments or the environment."""
    url = url or os.environ.get("ACTIONGATE_URL") or DEFAULT_URL
    key = key or os.environ.get("ACTIONGATE_KEY")
    if not key:
        raise ActionGateError("no API key: pass key= or set ACTIONGATE_KEY")
    if not url.startswith(("http://", "https://")):
        raise ActionGateError(f"bad url {url!r}: it must start with http:// or https://")
    if timeout <= 0:
        raise ValueError("timeout must be positive")
    return Settings(
        url=url.rstrip("/"),
        key=key,
        timeout=float(timeout),
        headers={
            "authorization": f"Bearer {key}",
            "accept": "application/json",
            "user-agent": f"actiongate-python/{__version__}",
        },
    )


# ---------------------------------------------------------------- transport


def deadline(call: Call, timeout: float) -> float:
    """When ``call`` ends, retries included (``time.monotonic()``): the end
    of its workflow's wait (else its own) plus the client's ``timeout``."""
    until = call.until if call.until is not None else time.monotonic() + call.wait
    return until + timeout


def unreachable(url: str, error: Optional[BaseException], limit: float) -> Unreachable:
    """The :class:`Unreachable` for a failed exchange, caused by ``error``
    (``None``: no time was left for one)."""
    if isinstance(error, (httpx.TimeoutException, asyncio.TimeoutError)):
        err = Unreachable(f"{url}: no answer within {limit:.3g} s")
    elif error is None:
        err = Unreachable(f"{url}: no answer within the call's time")
    else:
        err = Unreachable(f"{url}: {type(error).__name__}: {error}")
    err.__cause__ = error
    return err


# ---------------------------------------------------------------- responses


def problem(response: httpx.Response) -> ApiError:
    """The :class:`ApiError` for an error response (problem+json or not)."""
    body: Any = None
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and ("title" in body or "code" in body):
        code = body.get("code")
        if not isinstance(code, str):
            kind = body.get("type")
            code = kind.rsplit(":", 1)[-1] if isinstance(kind, str) else f"http_{response.status_code}"
        errors = [
            FieldError(str(e.get("field", "")), str(e.get("message", "")))
            for e in body.get("errors") or []
            if isinstance(e, dict)
        ]
        return ApiError(
            status=response.status_code,
            code=code,
            title=str(body.get("title") or response.reason_phrase),
            detail=str(body.get("detail") or ""),
            errors=errors,
            problem=body,
        )
    text = response.text[:200] if response.content else ""
    return ApiError(
        status=response.status_code,
        code=f"http_{response.status_code}",
        title=response.reason_phrase or "HTTP error",
        detail=text,
    )


def parse(response: httpx.Response) -> Any:
    """The JSON of a successful (2xx) response; an :class:`ApiError`
    otherwise. Redirects are not followed, and a 3xx answer's body is no
    answer: it is an error too."""
    if response.status_code >= 400:
        raise problem(response)
    if not 200 <= response.status_code < 300:
        raise ApiError(
            status=response.status_code,
            code="bad_response",
            title="Not an answer",
            detail=f"the daemon answered HTTP {response.status_code}, which is no answer (is the URL right?)",
        )
    if response.status_code == 204 or not response.content:
        return None
    try:
        return response.json()
    except ValueError:
        raise ApiError(
            status=response.status_code,
            code="bad_response",
            title="Not JSON",
            detail="the daemon's answer was not JSON (is the URL right?)",
        ) from None


def answer(call: Call, response: httpx.Response) -> Any:
    """What the workflow that made ``call`` is sent for ``response``:
    :func:`parse`'s JSON, with whether it links a next page when the call
    asks (``linked``)."""
    data = parse(response)
    if not call.linked:
        return data
    links = ", ".join(response.headers.get_list("link"))
    return data, 'rel="next"' in links


def retry_after(response: httpx.Response, default: float) -> float:
    """The pause a 503 asks for (``Retry-After`` seconds), capped at 10 s."""
    value = response.headers.get("retry-after", "")
    try:
        return min(max(float(value), 0.0), 10.0)
    except ValueError:
        return default


def _dict(value: Any) -> Dict[str, Any]:
    if not isinstance(value, dict):
        raise ApiError(200, "bad_response", "Unexpected answer", f"expected an object, got {type(value).__name__}")
    return value


def _same(value: Any, asked: Any) -> Dict[str, Any]:
    """The answer about ``asked`` (an id, or an action, plan or grant request
    the client named by id), refused unless it is that one, with the tool and
    detail known of it: a wrong answer (a buggy proxy, a cache) must never
    pass another action's approval off as this one's."""
    data = _dict(value)
    known = {"id": asked} if isinstance(asked, str) else {k: getattr(asked, k, None) for k in ("id", "tool", "detail")}
    for key, want in known.items():
        if want and data.get(key) != want:
            raise ApiError(
                200,
                "bad_response",
                "Unexpected answer",
                f"asked about {known['id']}; the answer is about another one (its {key} differs)",
            )
    return data


# ------------------------------------------------------------------- inputs


def duration(value: Timeout, name: str) -> Optional[str]:
    """A duration for the API (``"5m"``, ``"90s"``) from str, seconds or timedelta."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ValueError(f"{name} must be a positive number of seconds, a timedelta or a string like '5m'")
    return f"{int(math.ceil(value))}s"


def seconds(value: Optional[float], name: str) -> float:
    """A wait in seconds (0 when not given)."""
    if value is None:
        return 0.0
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ValueError(f"{name} must be a non-negative number of seconds")
    return float(value)


def _poll(remaining: float) -> int:
    return max(0, min(MAX_POLL_SECONDS, int(math.ceil(remaining))))


def _remember(remember: Union[None, str, Mapping[str, Any]]) -> Optional[Dict[str, Any]]:
    if remember is None:
        return None
    if isinstance(remember, str):
        return {"expires": remember}
    return dict(remember)


# ---------------------------------------------------------------- workflows


def check(tool: str, detail: str, session: Optional[str] = None) -> Flow:
    """``POST /v1/check``: the decision, nothing stored."""
    body: Dict[str, Any] = {"tool": tool, "detail": detail}
    if session is not None:
        body["session"] = session
    data = yield Call("POST", "/v1/check", json=body, has_body=True, retry=True)
    return Decision.from_json(_dict(data))


def _new_action(body: Dict[str, Any], wait: float) -> Flow:
    # One idempotency key for every attempt: a retry after a dropped
    # connection gets the action the first attempt made, never a second one.
    body.setdefault("idempotency_key", uuid.uuid4().hex)
    deadline = time.monotonic() + wait
    first = _poll(wait)
    data = yield Call(
        "POST",
        "/v1/actions",
        params={"wait": first} if first else None,
        json=body,
        has_body=True,
        retry=True,
        wait=first,
        until=deadline,
    )
    action = Action.from_json(_dict(data))
    if wait > 0 and not action.settled:
        action = yield from _poll_action(action, deadline)
    return action


def _poll_settled(item: Any, path: str, parse: Callable[[Dict[str, Any]], Any], deadline: float) -> Flow:
    """Long-polls ``{path}/{item.id}`` (an action or a plan, read by
    ``parse``) until it is settled or ``deadline`` passes."""
    while not item.settled:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        w = _poll(remaining)
        data = yield Call("GET", f"{path}/{item.id}", params={"wait": w}, retry=True, wait=w, until=deadline)
        item = parse(_same(data, item))
    return item


def _poll_action(action: Action, deadline: float) -> Flow:
    return (yield from _poll_settled(action, "/v1/actions", Action.from_json, deadline))


def request(
    tool: str,
    detail: str,
    reason: Optional[str],
    timeout: Timeout,
    wait: Optional[float],
    idempotency_key: Optional[str],
    session: Optional[str] = None,
    params: Optional[Mapping[str, Any]] = None,
    caution: Optional[str] = None,
) -> Flow:
    """``POST /v1/actions`` for a decision-only action, waiting up to ``wait`` s;
    ``params`` is the tool call's input, shown to the humans who decide;
    ``caution`` why only an operator's approval may allow it."""
    body: Dict[str, Any] = {"tool": tool, "detail": detail}
    if params is not None:
        body["params"] = dict(params)
    if caution is not None:
        body["caution"] = caution
    _extra(body, reason, timeout, idempotency_key, session)
    return (yield from _new_action(body, seconds(wait, "wait")))


def run(
    handler: str,
    action: str,
    params: Mapping[str, Any],
    reason: Optional[str],
    timeout: Timeout,
    wait: Optional[float],
    idempotency_key: Optional[str],
    session: Optional[str] = None,
) -> Flow:
    """``POST /v1/actions`` for a handler action, waiting up to ``wait`` s."""
    body: Dict[str, Any] = {"handler": handler, "action": action, "params": dict(params)}
    _extra(body, reason, timeout, idempotency_key, session)
    return (yield from _new_action(body, seconds(wait, "wait")))


def _extra(
    body: Dict[str, Any], reason: Optional[str], timeout: Timeout, key: Optional[str], session: Optional[str] = None
) -> None:
    if session is not None:
        body["session"] = session
    if reason is not None:
        body["reason"] = reason
    t = duration(timeout, "timeout")
    if t is not None:
        body["timeout"] = t
    if key is not None:
        body["idempotency_key"] = key


def get(action_id: str, wait: float = 0, until: Optional[float] = None) -> Flow:
    """``GET /v1/actions/{id}``; ``until`` as for :class:`Call`."""
    w = _poll(wait)
    params = {"wait": w} if w else None
    data = yield Call("GET", f"/v1/actions/{action_id}", params=params, retry=True, wait=w, until=until)
    return Action.from_json(_same(data, action_id))


def wait(action_id: str, timeout: float) -> Flow:
    """Waits until the action is settled; :class:`TimedOut` if it is not in time."""
    total = seconds(timeout, "timeout")
    deadline = time.monotonic() + total
    action = yield from get(action_id, min(total, MAX_POLL_SECONDS), deadline)
    action = yield from _poll_action(action, deadline)
    if not action.settled:
        raise TimedOut(f"action {action_id} still {action.status} after {total:g} s", action)
    return action


def request_permission(
    permission: str,
    reason: str,
    timeout_minutes: int,
    handler: Optional[str],
    scope: Optional[Mapping[str, Any]],
    expires: Optional[str],
) -> Flow:
    """Asks a human for a permission and waits (seed 004).

    Without ``handler`` it is the same item the MCP tool
    ``request_permission`` makes: a decision-only action
    ``tool:permission:<permission>``, decided by the agent's profile or a
    human. With ``handler`` it is a grant request for that handler's
    permission (``POST /v1/grant-requests``), which grants it on approval.
    True only when approved as asked; approved as an approver edited it,
    denied, expired or still pending when the wait ran out is False.
    """
    if isinstance(timeout_minutes, bool) or not isinstance(timeout_minutes, int) or not 1 <= timeout_minutes <= 60:
        raise ValueError("timeout_minutes must be an integer from 1 to 60")
    if handler is None:
        if not permission or not reason:
            raise ValueError("permission and reason must not be empty")
        deadline = time.monotonic() + timeout_minutes * 60 + 5
        action = yield from _new_action(
            {"tool": "permission", "detail": permission, "reason": reason, "timeout": f"{timeout_minutes}m"},
            deadline - time.monotonic(),
        )
        # Granted as an approver edited it is not what was asked.
        return action.status in ("approved", "completed") and not action.edited
    body: Dict[str, Any] = {
        "handler": handler,
        "permission": permission,
        "reason": reason,
        "timeout": f"{timeout_minutes}m",
    }
    if scope is not None:
        body["scope"] = dict(scope)
    if expires is not None:
        body["expires"] = expires
    # One key for every attempt: a retry after a 503 or a dropped connection
    # answers the request the first attempt made, never a second one.
    body["idempotency_key"] = uuid.uuid4().hex
    # The daemon expires the request at its deadline; wait a little past it
    # so the answer is the settled one.
    deadline = time.monotonic() + timeout_minutes * 60 + 5
    w = _poll(deadline - time.monotonic())
    data = yield Call(
        "POST", "/v1/grant-requests", params={"wait": w}, json=body, has_body=True, retry=True, wait=w, until=deadline
    )
    req = GrantRequest.from_json(_dict(data))
    while not req.settled:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        w = _poll(remaining)
        path = f"/v1/grant-requests/{req.id}"
        data = yield Call("GET", path, params={"wait": w}, retry=True, wait=w, until=deadline)
        req = GrantRequest.from_json(_same(data, req))
    # Granted with another scope than asked (an approver narrowed it) is not
    # what was asked either: the agent would plan on what it lacks.
    grant = req.raw.get("grant")
    return (
        req.status == "approved"
        and isinstance(grant, dict)
        and grant.get("scope", {}) == req.raw.get("scope", {})
    )


def request_plan(
    steps: List[Mapping[str, Any]],
    session: str,
    reason: Optional[str],
    runtime: Optional[str],
    timeout: float,
    idempotency_key: Optional[str] = None,
) -> Flow:
    """``POST /v1/plans``, then waits up to ``timeout`` seconds for the
    decision (``GET /v1/plans/{id}?wait=``); the plan as it then stands
    (still ``pending`` when nobody decided in time). Retried under one
    idempotency key, so a plan whose answer was lost is asked once."""
    total = seconds(timeout, "timeout")
    if not session:
        raise ValueError("session must not be empty")
    if not steps:
        raise ValueError("a plan has at least one step")
    body: Dict[str, Any] = {"session": session, "steps": [dict(s) for s in steps]}
    if reason is not None:
        body["reason"] = reason
    if runtime is not None:
        body["runtime"] = runtime
    body["idempotency_key"] = idempotency_key or uuid.uuid4().hex
    deadline = time.monotonic() + total
    data = yield Call("POST", "/v1/plans", json=body, has_body=True, retry=True, until=deadline)
    plan = Plan.from_json(_dict(data))
    return (yield from _poll_plan(plan, deadline))


def get_plan(plan_id: str, wait: float) -> Flow:
    """``GET /v1/plans/{id}``, waiting up to ``wait`` seconds for its decision."""
    deadline = time.monotonic() + seconds(wait, "wait")
    data = yield Call("GET", f"/v1/plans/{plan_id}", retry=True, until=deadline)
    return (yield from _poll_plan(Plan.from_json(_same(data, plan_id)), deadline))


def _poll_plan(plan: Plan, deadline: float) -> Flow:
    return (yield from _poll_settled(plan, "/v1/plans", Plan.from_json, deadline))


def gate_request(
    tool: str,
    detail: str,
    reason: Optional[str],
    timeout: Timeout,
    wait: float,
) -> Flow:
    """The decorator's question: the approved action, or an exception.

    Fails closed: denied raises :class:`Denied`, expired :class:`Expired`,
    still pending after ``wait`` :class:`TimedOut` (the pending action is
    withdrawn), any other status :class:`ActionGateError`.
    """
    # Asking, withdrawing and reading back end together: by the wait plus
    # the client's timeout.
    until = time.monotonic() + wait
    action = yield from request(tool, detail, reason, timeout, wait, None)
    if action.status == "pending":
        yield Call("POST", f"/v1/actions/{action.id}/cancel", best_effort=True, until=until)
        # Read it back: an operator may have decided just before the cancel.
        data = yield Call("GET", f"/v1/actions/{action.id}", retry=True, until=until)
        action = Action.from_json(_same(data, action))
        if action.status in ("pending", "cancelled"):
            raise TimedOut(f"no decision within {wait:g} s; the request was withdrawn", action)
    return settle(action, wait)


def settle(action: Action, wait: float = 0) -> Action:
    """Returns the action if it may go ahead, else raises the matching error."""
    if action.was_approved and action.edited:
        # Approved as an approver edited it, not as called: the original
        # call must not run.
        raise Denied("an operator changed this call before approving it; it does not run as asked", action)
    if action.approved:
        return action
    if action.was_approved or action.status == "failed":
        # Decision-only and reported: what the same idempotency key answers
        # after the agent ran it. One approval runs once.
        raise ActionGateError(f"action {action.id} was run already ({action.status}); it does not run again")
    if action.status == "denied":
        raise Denied(action.denial_reason, action)
    if action.status == "expired":
        raise Expired(action)
    if action.status == "cancelled":
        raise Denied(action.decision_note or "cancelled", action)
    if action.status == "pending":
        raise TimedOut(f"no decision within {wait:g} s; the request was withdrawn", action)
    raise ActionGateError(f"action {action.id} is {action.status!r}, not approved")


def outcome(action_id: str, error: Optional[BaseException]) -> Flow:
    """Reports how a gated function went (best effort: it already ran)."""
    body: Dict[str, Any] = {"status": "completed"}
    if error is not None:
        body = {"status": "failed", "error": f"{type(error).__name__}: {error}"[:4096]}
    yield Call("POST", f"/v1/actions/{action_id}/outcome", json=body, has_body=True, best_effort=True)


def cancel(action_id: str) -> Flow:
    """``POST /v1/actions/{id}/cancel``."""
    # A cancel sent again is answered as the action stands: safe to retry.
    data = yield Call("POST", f"/v1/actions/{action_id}/cancel", retry=True)
    return Action.from_json(_same(data, action_id))


def report(action_id: str, status: str, result: Any, error: Optional[str]) -> Flow:
    """``POST /v1/actions/{id}/outcome``."""
    body: Dict[str, Any] = {"status": status}
    if result is not None:
        body["result"] = result
    if error is not None:
        body["error"] = error
    # The same report sent again is answered as the action stands.
    data = yield Call("POST", f"/v1/actions/{action_id}/outcome", json=body, has_body=True, retry=True)
    return Action.from_json(_same(data, action_id))


def report_run(
    tool: str, detail: str, session: Optional[str], runtime: Optional[str], action: Optional[str]
) -> Flow:
    """``POST /v1/runs``: whether a decision covered what ran."""
    body: Dict[str, Any] = {"tool": tool, "detail": detail}
    for key, value in (("session", session), ("runtime", runtime), ("action", action)):
        if value is not None:
            body[key] = value
    data = yield Call("POST", "/v1/runs", json=body, has_body=True)
    return bool(_dict(data).get("decided"))


# ---------------------------------------------------------------- operators


def pending() -> Flow:
    """Every pending action, oldest first (all pages)."""
    items: List[Action] = []
    cursor: Optional[str] = None
    while True:
        params: Dict[str, Any] = {"status": "pending", "limit": 200}
        if cursor:
            params["cursor"] = cursor
        page = _dict((yield Call("GET", "/v1/actions", params=params, retry=True)))
        items.extend(Action.from_json(a) for a in page.get("items") or [] if isinstance(a, dict))
        cursor = page.get("next_cursor")
        if not cursor:
            break
    items.reverse()
    return items


def approve(
    action_id: str,
    remember: Union[None, str, Mapping[str, Any]],
    note: Optional[str],
    params: Optional[Mapping[str, Any]] = None,
    detail: Optional[str] = None,
    seen: Optional[str] = None,
) -> Flow:
    """``POST /v1/actions/{id}/approve``, optionally granting (``remember``)
    or editing first (``params`` of a handler action, ``detail`` of a
    decision-only one); ``seen`` names the version read."""
    body: Dict[str, Any] = {}
    if seen is not None:
        body["seen"] = seen
    if note is not None:
        body["note"] = note
    if params is not None:
        body["params"] = dict(params)
    if detail is not None:
        body["detail"] = detail
    r = _remember(remember)
    if r is not None:
        body["remember"] = r
    # A plain approval sent again is answered as it stands (the daemon
    # recognises its own decider's), so it is retried after a 503 or a
    # dropped connection; one that grants or edits is sent once.
    plain = r is None and params is None and detail is None
    data = yield Call("POST", f"/v1/actions/{action_id}/approve", json=body, has_body=True, retry=plain)
    return Action.from_json(_same(data, action_id))


def deny(action_id: str, reason: Optional[str]) -> Flow:
    """``POST /v1/actions/{id}/deny``; the agent sees ``reason``."""
    body = {"reason": reason} if reason is not None else {}
    data = yield Call("POST", f"/v1/actions/{action_id}/deny", json=body, has_body=True, retry=True)
    return Action.from_json(_same(data, action_id))


def grant(fields: Dict[str, Any]) -> Flow:
    """``POST /v1/grants``."""
    body = {k: v for k, v in fields.items() if v is not None}
    # One key for every attempt: a retry after a 503 or a dropped connection
    # answers the grant the first attempt made, never a second one.
    body.setdefault("idempotency_key", uuid.uuid4().hex)
    data = yield Call("POST", "/v1/grants", json=body, has_body=True, retry=True)
    return Grant.from_json(_dict(data))


def revoke(grant_id: str) -> Flow:
    """``DELETE /v1/grants/{id}``."""
    data = yield Call("DELETE", f"/v1/grants/{grant_id}")
    return Grant.from_json(_dict(data))


def _after_pages(path: str, status: Optional[str], limit: int) -> Flow:
    """Every item of a listing paged by ``after`` (in ``status`` when
    given), oldest first, ``limit`` a page: a page shorter than that is the
    last, unless the daemon cut it short for its size and linked the next."""
    items: List[Dict[str, Any]] = []
    after: Optional[str] = None
    while True:
        params: Dict[str, Any] = {"order": "oldest", "limit": limit}
        if status:
            params["status"] = status
        if after:
            params["after"] = after
        data, more = yield Call("GET", path, params=params, retry=True, linked=True)
        page = [r for r in data or [] if isinstance(r, dict)]
        items.extend(page)
        if not page or (len(page) < limit and not more):
            return items
        after = page[-1].get("id")


def grant_requests(status: Optional[str]) -> Flow:
    """``GET /v1/grant-requests``: every one (in ``status`` when given),
    oldest first, page after page."""
    items = yield from _after_pages("/v1/grant-requests", status, 500)
    return [GrantRequest.from_json(r) for r in items]


def plans(status: Optional[str]) -> Flow:
    """``GET /v1/plans``: every one (in ``status`` when given), oldest
    first, page after page."""
    items = yield from _after_pages("/v1/plans", status, 200)
    return [Plan.from_json(p) for p in items]


def answer_plan(plan_id: str, approve: bool, steps: Optional[Sequence[int]]) -> Flow:
    """Approves a plan (the steps at ``steps``, indices from 0, or all of
    them) or denies it."""
    if not approve:
        data = yield Call("POST", f"/v1/plans/{plan_id}/deny", retry=True)
        return Plan.from_json(_dict(data))
    body: Dict[str, Any] = {}
    if steps is not None:
        chosen = list(steps)
        if not chosen or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in chosen):
            raise ValueError("steps must be indices of the plan's steps (0, 1, ...), at least one")
        body["steps"] = chosen
    data = yield Call("POST", f"/v1/plans/{plan_id}/approve", json=body, has_body=True, retry=True)
    return Plan.from_json(_dict(data))


def answer_grant_request(request_id: str, approve: bool, body: Dict[str, Any]) -> Flow:
    """Approves or denies a grant request."""
    verb = "approve" if approve else "deny"
    body = {k: v for k, v in body.items() if v is not None}
    # Denied, or approved as asked, a retry is answered as it stands;
    # narrowed (scope, expires), it is sent once.
    retry = not approve or not body
    data = yield Call("POST", f"/v1/grant-requests/{request_id}/{verb}", json=body, has_body=True, retry=retry)
    return GrantRequest.from_json(_dict(data))


def people() -> Flow:
    """``GET /v1/people``."""
    data = _dict((yield Call("GET", "/v1/people", retry=True)))
    return [Person.from_json(p) for p in data.get("items") or [] if isinstance(p, dict)]


def person_body(
    name: str,
    groups: Optional[List[str]],
    keys: Optional[List[str]],
    chat: Optional[Mapping[str, str]],
) -> Dict[str, Any]:
    """The body of ``POST /v1/people`` and ``PUT /v1/people/{id}``."""
    body: Dict[str, Any] = {"name": name}
    if groups is not None:
        body["groups"] = list(groups)
    if keys is not None:
        body["keys"] = list(keys)
    if chat is not None:
        body["chat"] = dict(chat)
    return body


def create_person(body: Dict[str, Any]) -> Flow:
    """``POST /v1/people``."""
    data = yield Call("POST", "/v1/people", json=body, has_body=True)
    return Person.from_json(_dict(data))


def get_person(person_id: str) -> Flow:
    """``GET /v1/people/{id}``."""
    return Person.from_json(_dict((yield Call("GET", f"/v1/people/{person_id}", retry=True))))


def update_person(person_id: str, body: Dict[str, Any]) -> Flow:
    """``PUT /v1/people/{id}``: replaces the person."""
    data = yield Call("PUT", f"/v1/people/{person_id}", json=body, has_body=True)
    return Person.from_json(_dict(data))


def delete_person(person_id: str) -> Flow:
    """``DELETE /v1/people/{id}``."""
    yield Call("DELETE", f"/v1/people/{person_id}")
    return None


def whoami() -> Flow:
    """``GET /v1/whoami``."""
    return _dict((yield Call("GET", "/v1/whoami", retry=True)))


def grant_fields(
    handler: Optional[str],
    permission: Optional[str],
    scope: Optional[Mapping[str, Any]],
    tool: Optional[str],
    pattern: Optional[str],
    expires: str,
    agent: Optional[str],
    note: Optional[str],
    session: Optional[str] = None,
    uses: Optional[int] = None,
    idempotency_key: Optional[str] = None,
) -> Dict[str, Any]:
    """The body of a grant: ``{handler, permission, scope}`` or ``{tool, pattern}``."""
    if (tool is None) == (handler is None):
        raise ValueError("grant either handler= and permission= or tool= and pattern=")
    return {
        "handler": handler,
        "permission": permission,
        "scope": dict(scope) if scope is not None else None,
        "tool": tool,
        "pattern": pattern,
        "expires": expires,
        "agent": agent,
        "note": note,
        "session": session,
        "uses": uses,
        "idempotency_key": idempotency_key,
    }


# ------------------------------------------------------------------ gating


def gate_detail(
    detail: Union[None, str, Callable[..., str]],
    fn: Callable[..., Any],
    args: Tuple[Any, ...],
    kwargs: Dict[str, Any],
) -> str:
    """The detail of a gated call: a fixed string, computed from the
    arguments, or by default the arguments by name as compact JSON
    (``{"path":"build"}``, as the Claude Code hook spells MCP tools)."""
    if detail is None:
        try:
            bound = inspect.signature(fn).bind(*args, **kwargs)
            named: Any = dict(bound.arguments)
        except (TypeError, ValueError):
            named = {"args": list(args), "kwargs": kwargs}
        return json.dumps(named, separators=(",", ":"), ensure_ascii=False, default=repr)
    if callable(detail):
        value = detail(*args, **kwargs)
        if not isinstance(value, str):
            raise TypeError("the detail callable must return a string")
        return value
    return detail
