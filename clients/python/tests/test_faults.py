"""The clients against fake daemons on loopback that fail as a network or a
proxy can: a daemon that accepts and never answers, an answer about another
action. Each fails closed with the client's own error, within the time the
caller asked for."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Dict, Iterator, List

import pytest

from actiongate import ApiError, AsyncClient, Client, Unreachable


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


class Wrong:
    """A loopback daemon that answers a new action with ``mine`` (pending)
    and every read with ``read``."""

    mine: Dict[str, Any] = {
        "id": "act_mine",
        "status": "pending",
        "tool": "bash",
        "detail": "ls",
        "agent": "a",
        "decision": {"result": "ask", "reason": "asked"},
    }

    def __init__(self) -> None:
        self.read: Dict[str, Any] = {**self.mine, "id": "act_other", "status": "approved"}
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                n = int(self.headers.get("content-length", "0"))
                self.rfile.read(n)
                new = self.command == "POST" and self.path.split("?")[0] == "/v1/actions"
                out = json.dumps(outer.mine if new else outer.read).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            do_GET = do_POST = _answer  # noqa: N815 (http.server's names)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_an_answer_about_another_action_is_refused():
    wrong = Wrong()
    refused = "another one"
    try:
        with Client(wrong.url, "agk_x", timeout=2) as c:
            with pytest.raises(ApiError, match=refused):
                c.get("act_mine")
            with pytest.raises(ApiError, match=refused):
                c.wait("act_mine", 1)
            with pytest.raises(ApiError, match=refused):
                c.request("bash", "ls", wait=1)
            with pytest.raises(ApiError, match=refused):
                c.approve("act_mine")
            with pytest.raises(ApiError, match=refused):
                c.cancel("act_mine")
            # Its id, but another call: refused too.
            wrong.read = {**Wrong.mine, "status": "approved", "detail": "rm -rf /"}
            with pytest.raises(ApiError, match=refused):
                c.request("bash", "ls", wait=1)
            wrong.read = {"id": "plan_other", "status": "approved", "steps": []}
            with pytest.raises(ApiError, match=refused):
                c.plan("plan_mine")
            # The action asked about is taken.
            wrong.read = {**Wrong.mine, "status": "approved"}
            assert c.request("bash", "ls", wait=1).status == "approved"
    finally:
        wrong.close()
