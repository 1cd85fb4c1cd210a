"""What the daemon answers, as small read-only objects.

Each object keeps the whole JSON it was built from in ``raw``, so fields this
version does not name are still reachable.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

__all__ = ["Decision", "Action", "GrantRequest", "Grant", "Event", "Person", "Plan"]

# An action is settled when nothing more will happen to it (DESIGN.md, Model).
_SETTLED_HANDLER = frozenset({"completed", "failed", "denied", "expired", "cancelled"})
_SETTLED_DECISION_ONLY = frozenset({"approved", "denied", "expired", "cancelled", "completed", "failed"})


def _str(value: Any) -> Optional[str]:
    return value if isinstance(value, str) else None


@dataclass(frozen=True)
class Decision:
    """The policy's answer: ``result`` is ``allow``, ``ask`` or ``deny``."""

    result: str
    reason: str
    rule: Any = None
    action_string: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, data: Dict[str, Any]) -> "Decision":
        """Builds a decision from the API's ``Decision`` or ``CheckResult``."""
        return cls(
            result=str(data.get("result", "deny")),
            reason=str(data.get("reason", "")),
            rule=data.get("rule"),
            action_string=_str(data.get("action_string")),
            raw=data,
        )

    @property
    def allowed(self) -> bool:
        """True only for ``allow``."""
        return self.result == "allow"


@dataclass(frozen=True)
class Action:
    """An action an agent asked for, and everything decided about it."""

    id: str
    status: str
    decision: Decision
    agent: str = ""
    tool: str = ""
    detail: str = ""
    reason: Optional[str] = None
    decision_note: Optional[str] = None
    decided_by: Optional[str] = None
    deadline: Optional[str] = None
    handler: Optional[str] = None
    action: Optional[str] = None
    params: Optional[Dict[str, Any]] = None
    outcome: Optional[Dict[str, Any]] = None
    #: Approvals collected so far (``{who, by, channel, at}``), oldest first.
    approvals: List[Dict[str, Any]] = field(default_factory=list)
    #: How many approvals from distinct people it needs (a quorum), if set.
    approvals_required: Optional[int] = None
    #: The person (or identity) and channel whose decision settled it.
    decided_person: Optional[str] = None
    decided_channel: Optional[str] = None
    #: An approver changed its params or detail before approving.
    edited: bool = False
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, data: Dict[str, Any]) -> "Action":
        """Builds an action from the API's ``Action``."""
        decision = data.get("decision")
        params = data.get("params")
        outcome = data.get("outcome")
        required = data.get("approvals_required")
        return cls(
            id=str(data.get("id", "")),
            status=str(data.get("status", "")),
            decision=Decision.from_json(decision if isinstance(decision, dict) else {}),
            agent=str(data.get("agent", "")),
            tool=str(data.get("tool", "")),
            detail=str(data.get("detail", "")),
            reason=_str(data.get("reason")),
            decision_note=_str(data.get("decision_note")),
            decided_by=_str(data.get("decided_by")),
            deadline=_str(data.get("deadline")),
            handler=_str(data.get("handler")),
            action=_str(data.get("action")),
            params=params if isinstance(params, dict) else None,
            outcome=outcome if isinstance(outcome, dict) else None,
            approvals=[a for a in data.get("approvals") or [] if isinstance(a, dict)],
            approvals_required=required if isinstance(required, int) else None,
            decided_person=_str(data.get("decided_person")),
            decided_channel=_str(data.get("decided_channel")),
            edited=data.get("edited") is True,
            raw=data,
        )

    @property
    def settled(self) -> bool:
        """Nothing more will happen to it (for decision-only actions,
        ``approved`` is settled: the agent runs it itself)."""
        if self.handler is not None:
            return self.status in _SETTLED_HANDLER
        return self.status in _SETTLED_DECISION_ONLY

    @property
    def was_approved(self) -> bool:
        """A human or the policy approved it (for handler actions: or it
        ran), as asked or as an approver edited it."""
        return self.status in ("approved", "running", "completed")

    @property
    def approved(self) -> bool:
        """The agent may go ahead with the call as it asked: approved and
        not edited. A decision-only action only while ``approved``: once
        ``running`` or ``completed`` the agent has run it (the same
        idempotency key answers with that action again), and running it
        again would be a second run on one approval. A handler action's
        executor runs it, so ``running`` and ``completed`` are go-ahead for
        reading its result."""
        if self.edited:
            return False
        if self.handler is not None:
            return self.was_approved
        return self.status == "approved"

    @property
    def denial_reason(self) -> str:
        """The operator's reason when a human decided, else the policy's."""
        return self.decision_note or self.decision.reason or self.status


@dataclass(frozen=True)
class GrantRequest:
    """An agent's request for a permission (seed 004)."""

    id: str
    status: str
    handler: str = ""
    permission: str = ""
    deny_reason: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, data: Dict[str, Any]) -> "GrantRequest":
        """Builds a grant request from the API's ``GrantRequest``."""
        return cls(
            id=str(data.get("id", "")),
            status=str(data.get("status", "")),
            handler=str(data.get("handler", "")),
            permission=str(data.get("permission", "")),
            deny_reason=_str(data.get("deny_reason")),
            raw=data,
        )

    @property
    def settled(self) -> bool:
        """Approved, denied or expired."""
        return self.status != "pending"


@dataclass(frozen=True)
class Plan:
    """A task's steps asked for at once (``docs/sessions.md``): once
    approved, each approved step runs once in the plan's session without
    another question; a step in ``asks`` asks a human when it runs (an
    approvals rule governs it, or the session is tainted)."""

    id: str
    status: str
    session: str = ""
    steps: List[Dict[str, Any]] = field(default_factory=list, compare=False)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, data: Dict[str, Any]) -> "Plan":
        """Builds a plan from the API's ``Plan``."""
        steps = data.get("steps")
        return cls(
            id=str(data.get("id", "")),
            status=str(data.get("status", "")),
            session=str(data.get("session", "")),
            steps=[s for s in steps if isinstance(s, dict)] if isinstance(steps, list) else [],
            raw=data,
        )

    @property
    def settled(self) -> bool:
        """Approved, denied or expired."""
        return self.status != "pending"

    @property
    def approved_steps(self) -> List[int]:
        """The steps (from 0) that run once without another question."""
        if self.status != "approved":
            return []
        return [i for i, s in enumerate(self.steps) if s.get("approved") is True]

    @property
    def asks(self) -> Dict[int, str]:
        """The steps that ask a human when they run, and why."""
        return {i: str(s["asks"]) for i, s in enumerate(self.steps) if isinstance(s.get("asks"), str)}


@dataclass(frozen=True)
class Grant:
    """A standing permission given by a human."""

    id: str
    active: bool
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, data: Dict[str, Any]) -> "Grant":
        """Builds a grant from the API's ``GrantRecord``/``CreatedGrant``."""
        return cls(id=str(data.get("id", "")), active=bool(data.get("active")), raw=data)


@dataclass(frozen=True)
class Event:
    """One event of ``GET /v1/events``.

    ``type`` is ``reset`` (and ``seq`` is None) when the id resumed from is
    older than the daemon's retained log: events were lost, ``data`` says
    from where (``oldest_seq``).
    """

    seq: Optional[int]
    type: str
    data: Dict[str, Any]

    @property
    def action_id(self) -> Optional[str]:
        """The action the event is about, if any."""
        return _str(self.data.get("action_id"))

    @property
    def resource(self) -> Any:
        """The resource after the change (the event's ``data``)."""
        return self.data.get("data")


@dataclass(frozen=True)
class Person:
    """An operator as a person (``docs/teams.md``): approver rules match
    their ``name`` and ``groups``; their operator keys and chat identities
    decide as them."""

    id: str
    name: str
    groups: List[str] = field(default_factory=list)
    keys: List[str] = field(default_factory=list)
    #: Chat identities: ``telegram``, ``slack``, ``discord``, ``whatsapp``.
    chat: Dict[str, str] = field(default_factory=dict)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, data: Dict[str, Any]) -> "Person":
        """Builds a person from the API's ``Person``."""
        chat = data.get("chat")
        return cls(
            id=str(data.get("id", "")),
            name=str(data.get("name", "")),
            groups=[g for g in data.get("groups") or [] if isinstance(g, str)],
            keys=[k for k in data.get("keys") or [] if isinstance(k, str)],
            chat={k: v for k, v in (chat or {}).items() if isinstance(v, str)} if isinstance(chat, dict) else {},
            raw=data,
        )
