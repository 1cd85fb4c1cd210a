"""Exceptions raised by the actiongate client.

Every exception is an :class:`ActionGateError`, so ``except ActionGateError``
catches anything the gate said no to or could not answer. None of them ever
means "go ahead": code that gates an action must treat each as a refusal.
:class:`TimedOut` is also a standard :class:`TimeoutError` and
:class:`Unreachable` a standard :class:`ConnectionError`, so code that
already handles those handles these too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional

if TYPE_CHECKING:  # pragma: no cover
    from .models import Action

__all__ = [
    "ActionGateError",
    "ApiError",
    "Unreachable",
    "Denied",
    "Expired",
    "TimedOut",
    "FieldError",
]


class ActionGateError(Exception):
    """Base class of every error of this package."""


class FieldError:
    """One invalid field of a request, from a problem's ``errors`` list."""

    __slots__ = ("field", "message")

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message

    def __repr__(self) -> str:
        return f"FieldError(field={self.field!r}, message={self.message!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FieldError) and other.field == self.field and other.message == self.message


class ApiError(ActionGateError):
    """The daemon answered with an error (RFC 9457 problem+json).

    ``status`` is the HTTP status, ``code`` the stable machine-readable code
    (``validation``, ``not_found``, ``conflict``, ...), ``title`` and
    ``detail`` the problem's text and ``errors`` the invalid fields of a
    validation error. ``problem`` is the whole body as parsed (empty when the
    body was not problem+json, e.g. from a proxy in between).
    """

    def __init__(
        self,
        status: int,
        code: str,
        title: str,
        detail: str = "",
        errors: Optional[List[FieldError]] = None,
        problem: Optional[Dict[str, Any]] = None,
    ) -> None:
        self.status = status
        self.code = code
        self.title = title
        self.detail = detail
        self.errors: List[FieldError] = list(errors or [])
        self.problem: Dict[str, Any] = dict(problem or {})
        text = f"{title}: {detail}" if detail else title
        super().__init__(f"{text} (HTTP {status})")

    @property
    def current_status(self) -> Optional[str]:
        """For conflicts over an action's state: the status it has now."""
        value = self.problem.get("current_status")
        return value if isinstance(value, str) else None


class Unreachable(ActionGateError, ConnectionError):
    """The daemon could not be reached (refused, reset, DNS, timeout).

    Also a :class:`ConnectionError`, so ``except ConnectionError`` catches it.
    """

    def __init__(self, message: str) -> None:
        # One argument, so that OSError does not read it as (errno, strerror).
        super().__init__(message)


class Denied(ActionGateError):
    """The action was denied, by the policy or by a human, or withdrawn.

    ``reason`` is the operator's reason when a human denied it, else the
    policy's.
    """

    def __init__(self, reason: str, action: Optional["Action"] = None) -> None:
        self.reason = reason
        self.action = action
        super().__init__(f"denied: {reason}")


class Expired(ActionGateError):
    """Nobody decided before the action's deadline (not a denial, not an allow)."""

    def __init__(self, action: Optional["Action"] = None) -> None:
        self.action = action
        super().__init__("expired: nobody decided before the deadline")


class TimedOut(ActionGateError, TimeoutError):
    """The caller's wait ran out while the action was still undecided.

    Also a :class:`TimeoutError`, so ``except TimeoutError`` catches it.
    """

    def __init__(self, message: str, action: Optional["Action"] = None) -> None:
        self.action = action
        super().__init__(message)
