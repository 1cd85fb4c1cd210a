"""Python client for actiongate, the daemon that gates what AI agents do.

>>> from actiongate import Client
>>> gate = Client()            # ACTIONGATE_URL, ACTIONGATE_KEY
>>> @gate.gate(tool="bash", detail=lambda cmd: cmd, wait=120)
... def sh(cmd): ...

Adapters for agent frameworks are in :mod:`actiongate.openai_agents` and
:mod:`actiongate.langgraph` (optional extras).
"""

from ._core import __version__
from .aio import AsyncClient
from .client import Client
from .errors import ActionGateError, ApiError, Denied, Expired, FieldError, TimedOut, Unreachable
from .models import Action, Decision, Event, Grant, GrantRequest, Person, Plan

__all__ = [
    "__version__",
    "Client",
    "AsyncClient",
    "ActionGateError",
    "ApiError",
    "Unreachable",
    "Denied",
    "Expired",
    "TimedOut",
    "FieldError",
    "Action",
    "Decision",
    "Event",
    "Grant",
    "GrantRequest",
    "Person",
    "Plan",
]
