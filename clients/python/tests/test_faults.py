"""The clients against fake daemons on loopback that fail as a network can:
a daemon that accepts and never answers. Each fails closed with the client's
own error, within the time the caller asked for."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from typing import Any, Callable, Iterator, List

import pytest

from actiongate import AsyncClient, Client, Unreachable


class Silent:
    """A loopback server that accepts connections, reads, and never answers."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.conns: List[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(c)

    def close(self) -> None:
        for c in self.conns:
            c.close()
        self.sock.close()


@pytest.fixture
def silent() -> Iterator[Silent]:
    s = Silent()
    try:
        yield s
    finally:
        s.close()


def fails_within(seconds: float, call: Callable[[], Any]) -> Unreachable:
    """Runs ``call``, which must raise :class:`Unreachable` saying no answer
    came, in less than ``seconds``."""
    started = time.monotonic()
    with pytest.raises(Unreachable, match="no answer within") as e:
        call()
    took = time.monotonic() - started
    assert took < seconds, f"took {took:.1f} s, more than {seconds} s"
    return e.value


def test_a_daemon_that_never_answers_costs_a_call_its_wait_plus_the_timeout(silent):
    # Slack for the scheduler only: each bound is the wait plus 1 s.
    with Client(silent.url, "agk_x", timeout=1) as c:
        fails_within(3.5, lambda: c.wait("act_1", 2))
        fails_within(3.5, lambda: c.request("bash", "ls", wait=2))
        fails_within(3.5, lambda: c.plan("plan_1", wait=2))
        fails_within(3.5, lambda: c.gate(tool="bash", detail="ls", wait=2)(lambda: pytest.fail("ran"))())
        fails_within(1.5, lambda: c.check("bash", "ls"))
        fails_within(1.5, lambda: c.get("act_1"))


def test_an_async_call_to_a_daemon_that_never_answers_is_bounded_too(silent):
    async def main() -> None:
        async with AsyncClient(silent.url, "agk_x", timeout=1) as c:
            calls = ((c.wait("act_1", 2), 3.5), (c.request("bash", "ls", wait=2), 3.5), (c.check("a", "b"), 1.5))
            for call, bound in calls:
                started = time.monotonic()
                with pytest.raises(Unreachable, match="no answer within"):
                    await call
                assert time.monotonic() - started < bound

    asyncio.run(main())
