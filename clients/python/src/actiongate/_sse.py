"""An incremental Server-Sent Events parser (the WHATWG event-stream rules).

Text arrives in chunks cut anywhere, also between ``\\r`` and ``\\n``; the
parser keeps what is not yet a whole line and yields each message when its
blank line arrives.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Iterator, List, Optional

from .models import Event

__all__ = ["Message", "SseParser", "to_event", "Backoff"]


@dataclass
class Message:
    """One dispatched message: its ``id``, ``event`` and joined ``data``."""

    id: Optional[str]
    event: str
    data: str


class SseParser:
    """Feed it text chunks; it yields whole messages."""

    def __init__(self) -> None:
        self._buf = ""
        self._data: List[str] = []
        self._event = ""
        self._id: Optional[str] = None

    def feed(self, chunk: str) -> Iterator[Message]:
        """Yields the messages the chunk completes."""
        self._buf += chunk
        while True:
            i = _line_end(self._buf)
            if i < 0:
                return
            line = self._buf[:i]
            step = 2 if self._buf.startswith("\r\n", i) else 1
            self._buf = self._buf[i + step :]
            msg = self._line(line)
            if msg is not None:
                yield msg

    def _line(self, line: str) -> Optional[Message]:
        if line == "":
            if not self._data and not self._event:
                self._id = None
                return None
            msg = Message(self._id, self._event or "message", "\n".join(self._data))
            self._data, self._event, self._id = [], "", None
            return msg
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._id = value
        return None


def _line_end(buf: str) -> int:
    n = buf.find("\n")
    r = buf.find("\r")
    if r < 0:
        return n
    if r == len(buf) - 1:
        # A trailing \r may be the first half of \r\n: wait for more.
        return n if 0 <= n < r else -1
    return r if n < 0 or r < n else n


def to_event(msg: Message) -> Optional[Event]:
    """The :class:`Event` of a message, or None for one that carries none."""
    try:
        data = json.loads(msg.data) if msg.data else {}
    except ValueError:
        data = {"text": msg.data}
    if not isinstance(data, dict):
        data = {"value": data}
    if msg.event == "reset":
        return Event(seq=None, type="reset", data=data)
    if msg.id is None:
        return None
    try:
        seq = int(msg.id)
    except ValueError:
        return None
    kind = data.get("type")
    return Event(seq=seq, type=kind if isinstance(kind, str) else msg.event, data=data)


class Backoff:
    """Reconnection pauses: 0.25 s doubling to 10 s, reset once data flows."""

    def __init__(self, first: float = 0.25, cap: float = 10.0) -> None:
        self.first = first
        self.cap = cap
        self.current = first

    def next(self) -> float:
        """The pause before the next attempt."""
        value = self.current
        self.current = min(self.current * 2, self.cap)
        return value

    def reset(self) -> None:
        """Data arrived: the next drop starts again from the first pause."""
        self.current = self.first
