"""Test helpers: an operator that answers from another thread, and a TCP
relay between client and daemon that a test can cut."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any, Callable, List, Optional

from actiongate import Action, Client


def wait_pending(op: Client, agent: str, count: int = 1, timeout: float = 20) -> List[Action]:
    """The agent's pending actions, once there are ``count`` of them."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        mine = [a for a in op.pending() if a.agent == agent]
        if len(mine) >= count:
            return mine
        time.sleep(0.05)
    raise AssertionError(f"no {count} pending action(s) of {agent} within {timeout} s")


class Operator(threading.Thread):
    """Answers the agent's next pending action(s) from another thread."""

    def __init__(self, op: Client, agent: str, answer: Callable[[Client, Action], Any], count: int = 1) -> None:
        super().__init__(daemon=True)
        self.op = op
        self.agent = agent
        self.answer = answer
        self.count = count
        self.answered: List[Action] = []
        self.error: Optional[BaseException] = None
        self.start()

    def run(self) -> None:
        try:
            while len(self.answered) < self.count:
                for a in wait_pending(self.op, self.agent):
                    self.answered.append(self.answer(self.op, a))
        except BaseException as e:  # reported by finish()
            self.error = e

    def finish(self) -> List[Action]:
        self.join(30)
        if self.error:
            raise self.error
        return self.answered


class Relay:
    """A loopback TCP relay to ``upstream``: ``cut()`` closes every open
    connection; ``refuse`` closes new ones at once; ``drop_first_post``
    forwards the first HTTP POST upstream and then closes the connection
    without relaying the answer (as a network failure after the daemon acted).
    Every request's head is recorded in ``heads``."""

    def __init__(self, upstream_port: int, drop_first_post: bool = False) -> None:
        self.upstream = upstream_port
        self.drop_first_post = drop_first_post
        self.dropped = 0
        self.refuse = False
        self.heads: List[str] = []
        self.bodies: List[bytes] = []
        self._conns: List[socket.socket] = []
        self._lock = threading.Lock()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            if self.refuse:
                c.close()
                continue
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c: socket.socket) -> None:
        try:
            u = socket.create_connection(("127.0.0.1", self.upstream))
        except OSError:
            c.close()
            return
        with self._lock:
            self._conns += [c, u]
        threading.Thread(target=self._pipe, args=(u, c, False), daemon=True).start()
        self._pipe(c, u, True)

    def _pipe(self, src: socket.socket, dst: socket.socket, requests: bool) -> None:
        buf = b""
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if not requests:
                    dst.sendall(data)
                    continue
                buf += data
                # Forward whole requests only (head, then body by content-length).
                while b"\r\n\r\n" in buf:
                    head, rest = buf.split(b"\r\n\r\n", 1)
                    n = 0
                    for line in head.split(b"\r\n"):
                        if line.lower().startswith(b"content-length:"):
                            n = int(line.split(b":")[1])
                    if len(rest) < n:
                        break
                    req = head + b"\r\n\r\n" + rest[:n]
                    self.heads.append(head.decode("latin-1"))
                    self.bodies.append(rest[:n])
                    buf = rest[n:]
                    if self.drop_first_post and not self.dropped and head.startswith(b"POST "):
                        self.dropped += 1
                        # The daemon gets it and answers; the client never
                        # hears back: its connection is reset.
                        with socket.create_connection(("127.0.0.1", self.upstream)) as side:
                            side.sendall(req)
                            side.settimeout(10)
                            side.recv(65536)
                        self._close(src, dst)
                        return
                    dst.sendall(req)
        except OSError:
            pass
        self._close(src, dst)

    def _close(self, *socks: socket.socket) -> None:
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def cut(self) -> None:
        """Closes every open connection."""
        with self._lock:
            conns, self._conns = self._conns, []
        self._close(*conns)

    def close(self) -> None:
        self.cut()
        self.sock.close()
