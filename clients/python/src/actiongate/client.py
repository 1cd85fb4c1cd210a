"""The blocking client, :class:`Client`.

It drives the workflows of ``_core`` over an ``httpx.Client``; retries,
long-polls and the event stream's reconnection live here and in ``_core``.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import time
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, TypeVar, Union

import httpx

from . import _core
from ._core import Call, Flow, Sleep, Timeout
from ._sse import Backoff, SseParser, to_event
from .errors import ActionGateError
from .models import Action, Decision, Event, Grant, GrantRequest, Person, Plan

__all__ = ["Client"]

F = TypeVar("F", bound=Callable[..., Any])
Detail = Union[None, str, Callable[..., str]]


class Client:
    """A blocking client for one daemon and one key.

    ``url`` and ``key`` default to ``ACTIONGATE_URL`` (else
    ``http://127.0.0.1:8080``) and ``ACTIONGATE_KEY``. ``timeout`` bounds each
    call in seconds, retries included; a call that waits gets its wait on
    top of it.
    """

    def __init__(
        self,
        url: Optional[str] = None,
        key: Optional[str] = None,
        timeout: float = 30.0,
        *,
        transport: Optional[httpx.BaseTransport] = None,
    ) -> None:
        self._settings = _core.settings(url, key, timeout)
        self._http = httpx.Client(
            base_url=self._settings.url,
            headers=self._settings.headers,
            timeout=self._settings.timeout,
            transport=transport,
            follow_redirects=False,
        )

    @property
    def url(self) -> str:
        """The daemon's base URL."""
        return self._settings.url

    def close(self) -> None:
        """Closes the connections."""
        self._http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ transport

    def _send(self, call: Call) -> Any:
        # One deadline for the call, retries and pauses included: a daemon
        # that hangs costs the caller its wait plus the timeout, not that
        # once per attempt.
        deadline = _core.deadline(call, self._settings.timeout)
        attempts = len(_core.RETRY_DELAYS) + 1 if call.retry else 1
        last: Optional[BaseException] = None
        for attempt in range(attempts):
            pause = _core.RETRY_DELAYS[attempt - 1] if attempt else 0.0
            if time.monotonic() + pause >= deadline:
                break
            time.sleep(pause)
            limit = min(self._settings.timeout + call.wait, deadline - time.monotonic())
            try:
                response = self._http.request(
                    call.method,
                    call.path,
                    params=call.params,
                    json=call.json if call.has_body else None,
                    timeout=limit,
                )
            except httpx.TransportError as e:
                last = _core.unreachable(self._settings.url, e, limit)
                continue
            if call.retry and response.status_code in _core.RETRY_STATUSES and attempt + 1 < attempts:
                last = _core.problem(response)
                pause = _core.retry_after(response, 0.0)
                if time.monotonic() + pause >= deadline:
                    break
                time.sleep(pause)
                continue
            return _core.answer(call, response)
        raise last or _core.unreachable(self._settings.url, None, 0.0)

    def _drive(self, flow: Flow) -> Any:
        value: Any = None
        try:
            while True:
                step = flow.send(value)
                if isinstance(step, Sleep):
                    time.sleep(step.seconds)
                    value = None
                elif step.best_effort:
                    try:
                        value = self._send(step)
                    except ActionGateError:
                        value = None
                else:
                    value = self._send(step)
        except StopIteration as stop:
            return stop.value

    # --------------------------------------------------------------- agents

    def check(self, tool: str, detail: str, *, session: Optional[str] = None) -> Decision:
        """What the policy would answer now (nothing is stored)."""
        return self._drive(_core.check(tool, detail, session))  # type: ignore[no-any-return]

    def request(
        self,
        tool: str,
        detail: str,
        reason: Optional[str] = None,
        timeout: Timeout = None,
        wait: Optional[float] = None,
        idempotency_key: Optional[str] = None,
        *,
        session: Optional[str] = None,
        params: Optional[Mapping[str, Any]] = None,
        caution: Optional[str] = None,
    ) -> Action:
        """Asks to do something (a decision-only action) and returns the action.

        ``timeout`` is how long a human has to decide (``"5m"``, seconds or a
        timedelta); ``wait`` how many seconds to block for the settled answer
        (split into long-polls). The action may still be ``pending`` when the
        wait runs out; check ``.status`` or ``.approved``. Dropped
        connections are retried with one idempotency key, so a retry never
        makes a second action. ``session`` names the task it belongs to
        (session grants and plans apply within it; see docs/sessions.md).
        ``params`` is the tool call's input (a file write's content, an
        edit's old and new text), shown to the humans who decide; the policy
        reads only ``tool`` and ``detail``. ``caution`` (1-500 printable
        characters) says why the caller cannot vouch that the call does only
        what its tool and detail say: then no rule or grant allows it, only
        an operator's approval.
        """
        return self._drive(_core.request(tool, detail, reason, timeout, wait, idempotency_key, session, params, caution))  # type: ignore[no-any-return]

    def run(
        self,
        handler: str,
        action: str,
        params: Mapping[str, Any],
        wait: Optional[float] = None,
        *,
        reason: Optional[str] = None,
        timeout: Timeout = None,
        idempotency_key: Optional[str] = None,
        session: Optional[str] = None,
    ) -> Action:
        """Asks for a handler action (run by its executor once allowed)."""
        return self._drive(_core.run(handler, action, params, reason, timeout, wait, idempotency_key, session))  # type: ignore[no-any-return]

    def get(self, action_id: str) -> Action:
        """The action as it stands."""
        return self._drive(_core.get(action_id))  # type: ignore[no-any-return]

    def wait(self, action_id: str, timeout: float) -> Action:
        """Blocks until the action is settled; raises :class:`TimedOut` if it
        is not within ``timeout`` seconds."""
        return self._drive(_core.wait(action_id, timeout))  # type: ignore[no-any-return]

    def cancel(self, action_id: str) -> Action:
        """Withdraws a pending action."""
        return self._drive(_core.cancel(action_id))  # type: ignore[no-any-return]

    def report(self, action_id: str, status: str, result: Any = None, error: Optional[str] = None) -> Action:
        """Reports how an approved decision-only action went (``completed``/``failed``)."""
        return self._drive(_core.report(action_id, status, result, error))  # type: ignore[no-any-return]

    def report_run(
        self,
        tool: str,
        detail: str,
        *,
        session: Optional[str] = None,
        runtime: Optional[str] = None,
        action: Optional[str] = None,
    ) -> bool:
        """Reports what actually ran (as a post-tool hook saw it); ``True``
        when an allow or approval covered it. A run nothing covered raises
        the ``action.undecided`` event for the operators."""
        return self._drive(_core.report_run(tool, detail, session, runtime, action))  # type: ignore[no-any-return]

    def request_permission(
        self,
        permission: str,
        reason: str,
        timeout_minutes: int = 15,
        *,
        handler: Optional[str] = None,
        scope: Optional[Mapping[str, Any]] = None,
        expires: Optional[str] = None,
    ) -> bool:
        """Asks a human for a permission and blocks until they answer.

        Without ``handler`` it is the item the MCP tool makes, a pending
        action ``tool:permission:<permission>`` (the agent's profile may
        allow or deny it at once); with ``handler=`` it is a grant request
        for that handler's permission, granted on approval. True when
        approved; False when denied, expired or unanswered after
        ``timeout_minutes`` (1-60).
        """
        return self._drive(  # type: ignore[no-any-return]
            _core.request_permission(permission, reason, timeout_minutes, handler, scope, expires)
        )

    def request_plan(
        self,
        steps: List[Mapping[str, Any]],
        *,
        session: str,
        reason: Optional[str] = None,
        runtime: Optional[str] = None,
        timeout: float = 300,
        idempotency_key: Optional[str] = None,
    ) -> Plan:
        """Asks a human to approve a task's steps at once (``{"tool",
        "detail"}`` or ``{"handler", "action", "params"}`` each) and waits
        up to ``timeout`` seconds for the decision. Once approved, each step
        in ``plan.approved_steps`` runs once in ``session`` without another
        question; the steps in ``plan.asks`` still ask when they run. A plan
        nobody decided in time comes back ``pending``: follow it with
        :meth:`plan`. It is sent again on a 503 or a dropped connection
        under one ``idempotency_key`` (made up when not given), so a plan
        whose answer was lost asks once."""
        return self._drive(_core.request_plan(steps, session, reason, runtime, timeout, idempotency_key))  # type: ignore[no-any-return]

    def plan(self, plan_id: str, wait: float = 0) -> Plan:
        """The plan, waiting up to ``wait`` seconds for its decision."""
        return self._drive(_core.get_plan(plan_id, wait))  # type: ignore[no-any-return]

    def events(self, since: Union[None, int, str] = None, types: Optional[str] = None) -> Iterator[Event]:
        """Follows ``GET /v1/events`` for ever.

        A dropped stream (or a 5xx, or a 429 while the key holds its most
        streams) is reconnected with backoff (0.25 s doubling to 10 s) and
        resumed with ``Last-Event-ID`` (before any event arrived, from where
        the stream started), so no event is missed or repeated. ``since`` is the seq to resume after; ``types``
        a filter like ``"action.*,grant.created"``. A refused key (4xx)
        raises :class:`ApiError`.
        """
        last = None if since is None else str(since)
        backoff = Backoff()
        params = {"types": types} if types else None
        read = httpx.Timeout(self._settings.timeout, read=max(45.0, self._settings.timeout))
        while True:
            headers = {"accept": "text/event-stream"}
            if last is not None:
                headers["last-event-id"] = last
            try:
                with self._http.stream("GET", "/v1/events", params=params, headers=headers, timeout=read) as r:
                    if r.status_code >= 400:
                        r.read()
                        err = _core.problem(r)
                        # 429: the key holds as many streams as it may; one may close.
                        if r.status_code < 500 and r.status_code != 429:
                            raise err
                    else:
                        # Where this stream starts: a drop before any event
                        # resumes there, not from the newest at reconnection.
                        resume = r.headers.get("actiongate-resume-after")
                        if resume is not None and resume.isdigit():
                            last = resume
                        parser = SseParser()
                        for chunk in r.iter_text():
                            for msg in parser.feed(chunk):
                                backoff.reset()
                                event = to_event(msg)
                                if event is None:
                                    continue
                                if event.seq is not None:
                                    last = str(event.seq)
                                yield event
            except httpx.TransportError:
                pass
            time.sleep(backoff.next())

    # ------------------------------------------------------------ operators

    def pending(self) -> List[Action]:
        """Every pending action, oldest first (operator key)."""
        return self._drive(_core.pending())  # type: ignore[no-any-return]

    def approve(
        self,
        action_id: str,
        remember: Union[None, str, Mapping[str, Any]] = None,
        note: Optional[str] = None,
        *,
        params: Optional[Mapping[str, Any]] = None,
        detail: Optional[str] = None,
        seen: Optional[str] = None,
    ) -> Action:
        """Approves a pending action. ``remember`` also grants: an expiry
        (``"1h"``) or ``{expires, scope?, pattern?, agent?}``. ``params``
        (handler actions) or ``detail`` (decision-only ones) edit it first,
        with the first approval. An action needing a quorum stays
        ``pending`` until enough distinct people approved (``approvals``,
        ``approvals_required``). ``seen`` (``"asked"``, the default, or
        ``"edited"``) says which version was read: the approval is refused
        (409) when the action is otherwise by then, so approving an action
        another approver edited takes ``seen="edited"``."""
        return self._drive(_core.approve(action_id, remember, note, params, detail, seen))  # type: ignore[no-any-return]

    def deny(self, action_id: str, reason: Optional[str] = None) -> Action:
        """Denies a pending action; the agent sees ``reason``."""
        return self._drive(_core.deny(action_id, reason))  # type: ignore[no-any-return]

    def grant(
        self,
        *,
        handler: Optional[str] = None,
        permission: Optional[str] = None,
        scope: Optional[Mapping[str, Any]] = None,
        tool: Optional[str] = None,
        pattern: Optional[str] = None,
        expires: str = "1h",
        agent: Optional[str] = None,
        note: Optional[str] = None,
        session: Optional[str] = None,
        uses: Optional[int] = None,
        idempotency_key: Optional[str] = None,
    ) -> Grant:
        """Grants ``{handler, permission, scope}`` or ``{tool, pattern}`` until
        ``expires`` (``1h``, ``today``, ``indefinite``, RFC 3339); ``session``
        keeps it to one session (void once it ends), ``uses`` to that many
        allowed actions. It is sent again on a 503 or a dropped connection
        under one ``idempotency_key`` (made up when not given), so a grant
        whose answer was lost is made once."""
        fields = _core.grant_fields(
            handler, permission, scope, tool, pattern, expires, agent, note, session, uses, idempotency_key
        )
        return self._drive(_core.grant(fields))  # type: ignore[no-any-return]

    def revoke(self, grant_id: str) -> Grant:
        """Revokes a grant."""
        return self._drive(_core.revoke(grant_id))  # type: ignore[no-any-return]

    def grant_requests(self, status: Optional[str] = "pending") -> List[GrantRequest]:
        """Every grant request, oldest first (pending ones by default), page
        after page."""
        return self._drive(_core.grant_requests(status))  # type: ignore[no-any-return]

    def approve_grant_request(
        self, request_id: str, scope: Optional[Mapping[str, Any]] = None, expires: Optional[str] = None
    ) -> GrantRequest:
        """Approves a grant request, optionally narrower or shorter than asked."""
        body: Dict[str, Any] = {"scope": dict(scope) if scope is not None else None, "expires": expires}
        return self._drive(_core.answer_grant_request(request_id, True, body))  # type: ignore[no-any-return]

    def deny_grant_request(self, request_id: str, reason: Optional[str] = None) -> GrantRequest:
        """Denies a grant request; the agent sees ``reason``."""
        return self._drive(_core.answer_grant_request(request_id, False, {"reason": reason}))  # type: ignore[no-any-return]

    def plans(self, status: Optional[str] = "pending") -> List[Plan]:
        """Every plan, oldest first (pending ones by default; ``None`` for
        all), page after page."""
        return self._drive(_core.plans(status))  # type: ignore[no-any-return]

    def approve_plan(self, plan_id: str, steps: Optional[Sequence[int]] = None) -> Plan:
        """Approves a plan: every step, or those at ``steps`` (indices from
        0). Each approved step may then run once in the plan's session."""
        return self._drive(_core.answer_plan(plan_id, True, steps))  # type: ignore[no-any-return]

    def deny_plan(self, plan_id: str) -> Plan:
        """Denies a plan."""
        return self._drive(_core.answer_plan(plan_id, False, None))  # type: ignore[no-any-return]

    def people(self) -> List[Person]:
        """Every person, by name (admin key)."""
        return self._drive(_core.people())  # type: ignore[no-any-return]

    def create_person(
        self,
        name: str,
        *,
        groups: Optional[List[str]] = None,
        keys: Optional[List[str]] = None,
        chat: Optional[Mapping[str, str]] = None,
    ) -> Person:
        """Adds a person (admin key): ``groups`` for approver rules
        (``group:<name>``), operator ``keys`` ids and ``chat`` identities
        (``telegram``, ``slack``, ``discord``, ``whatsapp``) that decide as
        them."""
        body = _core.person_body(name, groups, keys, chat)
        return self._drive(_core.create_person(body))  # type: ignore[no-any-return]

    def get_person(self, person_id: str) -> Person:
        """One person (admin key)."""
        return self._drive(_core.get_person(person_id))  # type: ignore[no-any-return]

    def update_person(
        self,
        person_id: str,
        name: str,
        *,
        groups: Optional[List[str]] = None,
        keys: Optional[List[str]] = None,
        chat: Optional[Mapping[str, str]] = None,
    ) -> Person:
        """Replaces a person (admin key); what is left out is cleared."""
        body = _core.person_body(name, groups, keys, chat)
        return self._drive(_core.update_person(person_id, body))  # type: ignore[no-any-return]

    def delete_person(self, person_id: str) -> None:
        """Removes a person (admin key)."""
        self._drive(_core.delete_person(person_id))

    def whoami(self) -> Dict[str, Any]:
        """The caller's key id, name, role and agent."""
        return self._drive(_core.whoami())  # type: ignore[no-any-return]

    # --------------------------------------------------------------- gating

    def gate(
        self,
        tool: Optional[str] = None,
        detail: Detail = None,
        wait: float = 60,
        *,
        reason: Optional[str] = None,
        timeout: Timeout = None,
        report: bool = True,
    ) -> Callable[[F], F]:
        """Decorates a function so it runs only once the gate allows it.

        ``tool`` defaults to the function's name; ``detail`` is a string or a
        callable given the function's arguments. The call blocks up to
        ``wait`` seconds for a human; :class:`Denied` (with the operator's
        reason), :class:`Expired`, :class:`TimedOut` or any other error means
        the function did not run. Async functions are gated too (the wait
        runs in a worker thread). With ``report`` the outcome (completed, or
        failed with the exception) is recorded on the action.
        """

        def decorate(fn: F) -> F:
            name = tool or fn.__name__

            def ask(args: Any, kwargs: Any) -> Action:
                text = _core.gate_detail(detail, fn, args, kwargs)
                return self._drive(_core.gate_request(name, text, reason, timeout, _core.seconds(wait, "wait")))  # type: ignore[no-any-return]

            def done(action: Action, error: Optional[BaseException]) -> None:
                if report:
                    self._drive(_core.outcome(action.id, error))

            if inspect.iscoroutinefunction(fn):

                @functools.wraps(fn)
                async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                    action = await asyncio.to_thread(ask, args, kwargs)
                    try:
                        result = await fn(*args, **kwargs)
                    except BaseException as e:
                        await asyncio.to_thread(done, action, e)
                        raise
                    await asyncio.to_thread(done, action, None)
                    return result

                return async_wrapper  # type: ignore[return-value]

            @functools.wraps(fn)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                action = ask(args, kwargs)
                try:
                    result = fn(*args, **kwargs)
                except BaseException as e:
                    done(action, e)
                    raise
                done(action, None)
                return result

            return wrapper  # type: ignore[return-value]

        return decorate
