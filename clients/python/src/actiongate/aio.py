"""The asyncio client, :class:`AsyncClient`: the same methods as coroutines.

It drives the same workflows as :class:`~actiongate.Client` (``_core``) over
an ``httpx.AsyncClient``.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import time
from typing import Any, AsyncIterator, Callable, Dict, List, Mapping, Optional, Sequence, TypeVar, Union

import httpx

from . import _core
from ._core import Call, Flow, Sleep, Timeout
from ._sse import Backoff, SseParser, to_event
from .errors import ActionGateError
from .models import Action, Decision, Event, Grant, GrantRequest, Person, Plan

__all__ = ["AsyncClient"]

F = TypeVar("F", bound=Callable[..., Any])
Detail = Union[None, str, Callable[..., str]]


class AsyncClient:
    """An asyncio client for one daemon and one key; use it with ``async with``.

    Arguments and defaults are those of :class:`~actiongate.Client`.
    """

    def __init__(
        self,
        url: Optional[str] = None,
        key: Optional[str] = None,
        timeout: float = 30.0,
        *,
        transport: Optional[httpx.AsyncBaseTransport] = None,
    ) -> None:
        self._settings = _core.settings(url, key, timeout)
        self._http = httpx.AsyncClient(
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

    async def aclose(self) -> None:
        """Closes the connections."""
        await self._http.aclose()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # ------------------------------------------------------------ transport

    async def _send(self, call: Call) -> Any:
        # As Client._send: one deadline for the call and its retries. Here
        # it also bounds each attempt as a whole, not each read.
        deadline = _core.deadline(call, self._settings.timeout)
        attempts = len(_core.RETRY_DELAYS) + 1 if call.retry else 1
        last: Optional[BaseException] = None
        for attempt in range(attempts):
            pause = _core.RETRY_DELAYS[attempt - 1] if attempt else 0.0
            if time.monotonic() + pause >= deadline:
                break
            await asyncio.sleep(pause)
            limit = min(self._settings.timeout + call.wait, deadline - time.monotonic())
            try:
                response = await asyncio.wait_for(
                    self._http.request(
                        call.method,
                        call.path,
                        params=call.params,
                        json=call.json if call.has_body else None,
                        timeout=limit,
                    ),
                    limit,
                )
            except (httpx.TransportError, asyncio.TimeoutError) as e:
                last = _core.unreachable(self._settings.url, e, limit)
                continue
            if call.retry and response.status_code in _core.RETRY_STATUSES and attempt + 1 < attempts:
                last = _core.problem(response)
                pause = _core.retry_after(response, 0.0)
                if time.monotonic() + pause >= deadline:
                    break
                await asyncio.sleep(pause)
                continue
            return _core.answer(call, response)
        raise last or _core.unreachable(self._settings.url, None, 0.0)

    async def _drive(self, flow: Flow) -> Any:
        value: Any = None
        try:
            while True:
                step = flow.send(value)
                if isinstance(step, Sleep):
                    await asyncio.sleep(step.seconds)
                    value = None
                elif step.best_effort:
                    try:
                        value = await self._send(step)
                    except ActionGateError:
                        value = None
                else:
                    value = await self._send(step)
        except StopIteration as stop:
            return stop.value

    # --------------------------------------------------------------- agents

    async def check(self, tool: str, detail: str, *, session: Optional[str] = None) -> Decision:
        """What the policy would answer now (nothing is stored)."""
        return await self._drive(_core.check(tool, detail, session))  # type: ignore[no-any-return]

    async def request(
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
        """See :meth:`actiongate.Client.request`."""
        return await self._drive(_core.request(tool, detail, reason, timeout, wait, idempotency_key, session, params, caution))  # type: ignore[no-any-return]

    async def run(
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
        """See :meth:`actiongate.Client.run`."""
        return await self._drive(_core.run(handler, action, params, reason, timeout, wait, idempotency_key, session))  # type: ignore[no-any-return]

    async def get(self, action_id: str) -> Action:
        """The action as it stands."""
        return await self._drive(_core.get(action_id))  # type: ignore[no-any-return]

    async def wait(self, action_id: str, timeout: float) -> Action:
        """See :meth:`actiongate.Client.wait`."""
        return await self._drive(_core.wait(action_id, timeout))  # type: ignore[no-any-return]

    async def cancel(self, action_id: str) -> Action:
        """Withdraws a pending action."""
        return await self._drive(_core.cancel(action_id))  # type: ignore[no-any-return]

    async def report(self, action_id: str, status: str, result: Any = None, error: Optional[str] = None) -> Action:
        """See :meth:`actiongate.Client.report`."""
        return await self._drive(_core.report(action_id, status, result, error))  # type: ignore[no-any-return]

    async def report_run(
        self,
        tool: str,
        detail: str,
        *,
        session: Optional[str] = None,
        runtime: Optional[str] = None,
        action: Optional[str] = None,
    ) -> bool:
        """See :meth:`actiongate.Client.report_run`."""
        return await self._drive(_core.report_run(tool, detail, session, runtime, action))  # type: ignore[no-any-return]

    async def request_permission(
        self,
        permission: str,
        reason: str,
        timeout_minutes: int = 15,
        *,
        handler: Optional[str] = None,
        scope: Optional[Mapping[str, Any]] = None,
        expires: Optional[str] = None,
    ) -> bool:
        """See :meth:`actiongate.Client.request_permission`."""
        return await self._drive(  # type: ignore[no-any-return]
            _core.request_permission(permission, reason, timeout_minutes, handler, scope, expires)
        )

    async def request_plan(
        self,
        steps: List[Mapping[str, Any]],
        *,
        session: str,
        reason: Optional[str] = None,
        runtime: Optional[str] = None,
        timeout: float = 300,
        idempotency_key: Optional[str] = None,
    ) -> Plan:
        """See :meth:`actiongate.Client.request_plan`."""
        return await self._drive(_core.request_plan(steps, session, reason, runtime, timeout, idempotency_key))  # type: ignore[no-any-return]

    async def plan(self, plan_id: str, wait: float = 0) -> Plan:
        """See :meth:`actiongate.Client.plan`."""
        return await self._drive(_core.get_plan(plan_id, wait))  # type: ignore[no-any-return]

    async def events(self, since: Union[None, int, str] = None, types: Optional[str] = None) -> AsyncIterator[Event]:
        """See :meth:`actiongate.Client.events`."""
        last = None if since is None else str(since)
        backoff = Backoff()
        params = {"types": types} if types else None
        read = httpx.Timeout(self._settings.timeout, read=max(45.0, self._settings.timeout))
        while True:
            headers = {"accept": "text/event-stream"}
            if last is not None:
                headers["last-event-id"] = last
            try:
                async with self._http.stream("GET", "/v1/events", params=params, headers=headers, timeout=read) as r:
                    if r.status_code >= 400:
                        await r.aread()
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
                        async for chunk in r.aiter_text():
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
            await asyncio.sleep(backoff.next())

    # ------------------------------------------------------------ operators

    async def pending(self) -> List[Action]:
        """Every pending action, oldest first (operator key)."""
        return await self._drive(_core.pending())  # type: ignore[no-any-return]

    async def approve(
        self,
        action_id: str,
        remember: Union[None, str, Mapping[str, Any]] = None,
        note: Optional[str] = None,
        *,
        params: Optional[Mapping[str, Any]] = None,
        detail: Optional[str] = None,
        seen: Optional[str] = None,
    ) -> Action:
        """See :meth:`actiongate.Client.approve`."""
        return await self._drive(_core.approve(action_id, remember, note, params, detail, seen))  # type: ignore[no-any-return]

    async def deny(self, action_id: str, reason: Optional[str] = None) -> Action:
        """Denies a pending action; the agent sees ``reason``."""
        return await self._drive(_core.deny(action_id, reason))  # type: ignore[no-any-return]

    async def grant(
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
        """See :meth:`actiongate.Client.grant`."""
        fields = _core.grant_fields(
            handler, permission, scope, tool, pattern, expires, agent, note, session, uses, idempotency_key
        )
        return await self._drive(_core.grant(fields))  # type: ignore[no-any-return]

    async def revoke(self, grant_id: str) -> Grant:
        """Revokes a grant."""
        return await self._drive(_core.revoke(grant_id))  # type: ignore[no-any-return]

    async def grant_requests(self, status: Optional[str] = "pending") -> List[GrantRequest]:
        """Every grant request, oldest first (pending ones by default), page
        after page."""
        return await self._drive(_core.grant_requests(status))  # type: ignore[no-any-return]

    async def approve_grant_request(
        self, request_id: str, scope: Optional[Mapping[str, Any]] = None, expires: Optional[str] = None
    ) -> GrantRequest:
        """Approves a grant request, optionally narrower or shorter than asked."""
        body: Dict[str, Any] = {"scope": dict(scope) if scope is not None else None, "expires": expires}
        return await self._drive(_core.answer_grant_request(request_id, True, body))  # type: ignore[no-any-return]

    async def deny_grant_request(self, request_id: str, reason: Optional[str] = None) -> GrantRequest:
        """Denies a grant request; the agent sees ``reason``."""
        return await self._drive(_core.answer_grant_request(request_id, False, {"reason": reason}))  # type: ignore[no-any-return]

    async def plans(self, status: Optional[str] = "pending") -> List[Plan]:
        """Every plan, oldest first (pending ones by default; ``None`` for
        all), page after page."""
        return await self._drive(_core.plans(status))  # type: ignore[no-any-return]

    async def approve_plan(self, plan_id: str, steps: Optional[Sequence[int]] = None) -> Plan:
        """Approves a plan: every step, or those at ``steps`` (indices from
        0). Each approved step may then run once in the plan's session."""
        return await self._drive(_core.answer_plan(plan_id, True, steps))  # type: ignore[no-any-return]

    async def deny_plan(self, plan_id: str) -> Plan:
        """Denies a plan."""
        return await self._drive(_core.answer_plan(plan_id, False, None))  # type: ignore[no-any-return]

    async def people(self) -> List[Person]:
        """Every person, by name (admin key)."""
        return await self._drive(_core.people())  # type: ignore[no-any-return]

    async def create_person(
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
        return await self._drive(_core.create_person(body))  # type: ignore[no-any-return]

    async def get_person(self, person_id: str) -> Person:
        """One person (admin key)."""
        return await self._drive(_core.get_person(person_id))  # type: ignore[no-any-return]

    async def update_person(
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
        return await self._drive(_core.update_person(person_id, body))  # type: ignore[no-any-return]

    async def delete_person(self, person_id: str) -> None:
        """Removes a person (admin key)."""
        await self._drive(_core.delete_person(person_id))

    async def whoami(self) -> Dict[str, Any]:
        """The caller's key id, name, role and agent."""
        return await self._drive(_core.whoami())  # type: ignore[no-any-return]

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
        """Decorates an async function so it runs only once the gate allows
        it; see :meth:`actiongate.Client.gate`."""

        def decorate(fn: F) -> F:
            if not inspect.iscoroutinefunction(fn):
                raise TypeError("AsyncClient.gate decorates async functions; use Client.gate for others")
            name = tool or fn.__name__

            @functools.wraps(fn)
            async def wrapper(*args: Any, **kwargs: Any) -> Any:
                text = _core.gate_detail(detail, fn, args, kwargs)
                action: Action = await self._drive(
                    _core.gate_request(name, text, reason, timeout, _core.seconds(wait, "wait"))
                )
                try:
                    result = await fn(*args, **kwargs)
                except BaseException as e:
                    if report:
                        await self._drive(_core.outcome(action.id, e))
                    raise
                if report:
                    await self._drive(_core.outcome(action.id, None))
                return result

            return wrapper  # type: ignore[return-value]

        return decorate
