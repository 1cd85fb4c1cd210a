"""events(): the SSE stream, resumed with Last-Event-ID after a drop."""

from __future__ import annotations

import asyncio
import queue
import threading
import time

import pytest
from helpers import Relay

from actiongate import ApiError, AsyncClient, Client
from actiongate._sse import SseParser, to_event


def test_parser_handles_chunks_cut_anywhere():
    text = (
        "retry: 1000\r\n\r\n: heartbeat\r\n\r\n"
        'id: 7\r\nevent: action.enqueued\r\ndata: {"seq":7,"type":"action.enqueued","action_id":"a"}\r\n\r\n'
        'id: 8\nevent: action.approved\ndata: {"seq":8,\ndata: "type":"action.approved"}\n\n'
        'event: reset\rdata: {"oldest_seq":3}\r\r: hb\n'
    )
    for size in (1, 2, 3, 7, len(text)):
        p = SseParser()
        msgs = [m for i in range(0, len(text), size) for m in p.feed(text[i : i + size])]
        events = [e for e in map(to_event, msgs) if e is not None]
        assert [(e.seq, e.type) for e in events] == [
            (7, "action.enqueued"),
            (8, "action.approved"),
            (None, "reset"),
        ], size
        assert events[0].action_id == "a"
        assert events[2].data == {"oldest_seq": 3}


def _collect(it, out: "queue.Queue"):
    try:
        for e in it:
            out.put(e)
    except BaseException as e:  # surfaced by the test
        out.put(e)


def _next(out: "queue.Queue", kind: str, detail: str, timeout: float = 20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        e = out.get(timeout=max(0.01, deadline - time.monotonic()))
        if isinstance(e, BaseException):
            raise e
        if e.type == kind and (e.resource or {}).get("detail") == detail:
            return e
    raise AssertionError(f"no {kind} for {detail}")


def test_events_resume_after_a_dropped_stream(daemon, agent_key):
    port = int(daemon.url.rsplit(":", 1)[1])
    relay = Relay(port)
    out: "queue.Queue" = queue.Queue()
    agent = Client(daemon.url, agent_key)
    watcher = Client(relay.url, agent_key)
    try:
        agent.request("echo", "before")
        # A new agent's history starts with that action: follow it from 0.
        threading.Thread(target=_collect, args=(watcher.events(since=0, types="action.*"), out), daemon=True).start()
        first = _next(out, "action.approved", "before")

        # Drop the stream and keep it down while events happen.
        relay.refuse = True
        relay.cut()
        missed = [agent.request("echo", f"missed {i}") for i in range(3)]
        time.sleep(0.5)
        relay.refuse = False

        got = [_next(out, "action.approved", f"missed {i}") for i in range(3)]
        assert [e.action_id for e in got] == [a.id for a in missed]
        assert all(e.seq > first.seq for e in got)
        # The reconnection asked to resume after the last event it had.
        resumed = [h for h in relay.heads if h.startswith("GET /v1/events")]
        assert len(resumed) >= 2
        assert f"last-event-id: {first.seq}" in resumed[-1].lower()

        # Nothing twice: a later event comes next, not a replay.
        agent.request("echo", "after")
        last = _next(out, "action.approved", "after")
        seqs = [first.seq] + [e.seq for e in got] + [last.seq]
        assert seqs == sorted(set(seqs))
    finally:
        relay.close()
        agent.close()


def test_events_without_since_lose_nothing_when_dropped_before_the_first_event(daemon, agent_key):
    """Followed live (no ``since``), a stream cut before any event arrived
    resumes from where it started (its ``actiongate-resume-after``), not
    from the newest event at reconnection: what happened meanwhile comes."""
    port = int(daemon.url.rsplit(":", 1)[1])
    relay = Relay(port)
    out: "queue.Queue" = queue.Queue()
    agent = Client(daemon.url, agent_key)
    watcher = Client(relay.url, agent_key)
    try:
        threading.Thread(target=_collect, args=(watcher.events(types="action.*"), out), daemon=True).start()
        deadline = time.time() + 10
        while not [h for h in relay.heads if h.startswith("GET /v1/events")] and time.time() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        relay.refuse = True
        relay.cut()
        missed = agent.request("echo", "while down")
        time.sleep(0.5)
        relay.refuse = False
        got = _next(out, "action.approved", "while down")
        assert got.action_id == missed.id
    finally:
        relay.close()
        agent.close()


def test_events_since_replays_from_that_seq(daemon, agent_key):
    with Client(daemon.url, agent_key) as c:
        a = c.request("echo", "replay one")
        b = c.request("echo", "replay two")
        # From the start of the log this new agent sees its own events only.
        it = c.events(since=0)
        first = next(it)
        it.close()
        assert first.action_id == a.id
        later = [e for e in _take(c.events(since=first.seq), 1)]
        assert later[0].seq > first.seq and later[0].action_id in (a.id, b.id)
        # Resuming after the last one of a's events gives b's.
        seqs = [e for e in _take(c.events(since=0), 10, until=b.id)]
        last_a = max(e.seq for e in seqs if e.action_id == a.id)
        [nxt] = _take(c.events(since=last_a), 1)
        assert nxt.action_id == b.id


def _take(it, n, until=None):
    out = []
    for e in it:
        out.append(e)
        if len(out) >= n or (until and e.action_id == until):
            break
    it.close()
    return out


def test_events_with_a_refused_key_raise(daemon):
    with Client(daemon.url, "agk_nope") as c, pytest.raises(ApiError) as e:
        next(c.events())
    assert e.value.status == 401


def test_async_events_resume(daemon, agent_key):
    port = int(daemon.url.rsplit(":", 1)[1])
    relay = Relay(port)

    async def main():
        async with AsyncClient(relay.url, agent_key) as w, AsyncClient(daemon.url, agent_key) as c:
            a = await c.request("echo", "async one")
            # A new agent's history starts with this action: replay it all.
            it = w.events(since=0, types="action.approved")
            async for e in it:
                if e.action_id == a.id:
                    break
            relay.refuse = True
            relay.cut()
            b = await c.request("echo", "async two")
            relay.refuse = False
            async for e in it:
                if e.action_id == b.id:
                    await it.aclose()
                    return True
        return False

    try:
        assert asyncio.run(asyncio.wait_for(main(), 30))
    finally:
        relay.close()
