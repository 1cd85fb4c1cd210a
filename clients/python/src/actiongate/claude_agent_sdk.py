"""Gate a Claude Agent SDK session (``pip install actiongate[claude-agent-sdk]``).

It is the SDK's own permission callback, ``can_use_tool``::

    from claude_agent_sdk import ClaudeAgentOptions, query
    from actiongate import AsyncClient
    from actiongate.claude_agent_sdk import can_use_tool

    options = ClaudeAgentOptions(can_use_tool=can_use_tool(AsyncClient()))

Tool calls are named as ``actiongate hook claude-code`` names them (``Bash``
is ``bash`` with the command, ``Edit`` is ``file`` ``edit <path>``, MCP tools
are ``mcp`` with ``<server>__<tool> <input as JSON>``), so one profile governs Claude Code
and the SDK. One difference: the hook joins a relative path with the
session's working directory, and the SDK gives ``can_use_tool`` none, so
here a relative path is asked as written (only patterns for relative paths
match it). Allowed: ``PermissionResultAllow`` with the input unchanged;
asked: waits for an operator (bounded by ``wait``); denied, unanswered, a
malformed call or an unreachable gate: ``PermissionResultDeny`` whose
message (the operator's reason) Claude reads.
"""

from __future__ import annotations

import json
import re
from typing import Any, Awaitable, Callable, Dict, List, Optional, Tuple

from ._adapters import ToolCall, Verdict, adecide_all, failed
from ._core import Timeout
from .aio import AsyncClient

__all__ = ["can_use_tool", "claude_tool"]


def _field(name: str, args: Dict[str, Any], key: str) -> str:
    value = args.get(key)
    if not isinstance(value, str):
        raise ValueError(f"the {name} call has no input.{key}")
    return value


def normalize_path(path: str) -> str:
    """A path with ``.``, ``..`` and repeated ``/`` resolved lexically, as the
    hooks do, so ``/repo/../etc/x`` is asked as ``/etc/x``, which a pattern
    allowing ``/repo/.*`` must not cover."""
    absolute = path.startswith("/")
    parts: List[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts and parts[-1] != "..":
                parts.pop()
            elif not absolute:
                parts.append("..")
            continue
        parts.append(part)
    joined = "/".join(parts)
    return f"/{joined}" if absolute else (joined or ".")


def _glob_detail(pattern: str, path: Any) -> str:
    """``Glob``'s detail as the hooks spell it: ``<path>/<pattern>`` unless
    the pattern is absolute, its leading steps up to the first one holding
    a wildcard or an escape resolved as a path is."""
    full = pattern
    if isinstance(path, str) and path and not pattern.startswith("/"):
        full = f"{path.rstrip('/')}/{pattern}"
    literal = 0
    for step in re.findall(r"[^/]*/|[^/]+\Z", full):
        if re.search(r"[*?\[\]{}\\]", step):
            break
        literal += len(step)
    head, rest = full[:literal], full[literal:]
    if not head:
        return full
    resolved = normalize_path(head)
    if not rest:
        return resolved
    if resolved == ".":
        return rest
    return f"{resolved}{rest}" if resolved.endswith("/") else f"{resolved}/{rest}"


def claude_tool(name: str, args: Dict[str, Any]) -> Tuple[str, str]:
    """The gate's tool and detail for a Claude tool call (as the hook maps it)."""
    if name == "Bash":
        return "bash", _field(name, args, "command")
    if name in ("Edit", "MultiEdit"):
        return "file", f"edit {normalize_path(_field(name, args, 'file_path'))}"
    if name == "Write":
        return "file", f"write {normalize_path(_field(name, args, 'file_path'))}"
    if name == "NotebookEdit":
        return "file", f"notebook_edit {normalize_path(_field(name, args, 'notebook_path'))}"
    if name == "Read":
        return "Read", normalize_path(_field(name, args, "file_path"))
    if name == "Glob":
        return "Glob", _glob_detail(_field(name, args, "pattern"), args.get("path"))
    if name == "Grep":
        return "Grep", _field(name, args, "pattern")
    if name == "WebFetch":
        return "WebFetch", _field(name, args, "url")
    if name == "WebSearch":
        return "WebSearch", _field(name, args, "query")
    body = json.dumps(args, separators=(",", ":"), ensure_ascii=False, default=str)
    mcp = re.match(r"mcp__(.+?)__(.+)\Z", name, re.S)
    # MCP tools: the name is the tool, as the MCP proxy and the hooks spell
    # it; a name that is not plain as a tool name keeps server and tool in
    # the detail of the tool `mcp`.
    if mcp and re.fullmatch(r"[A-Za-z0-9_.-]{1,128}", name):
        return name, body
    if mcp:
        return "mcp", f"{mcp.group(1)}__{mcp.group(2)} {body}"
    tool = re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:128] or "tool"
    return tool, body


#: Most bytes of one string of a file call's input shown; the daemon's
#: bound on params is 256 KiB, and :data:`_MAX_SHOWN` stays below it.
_MAX_STRING = 16 * 1024
_MAX_SHOWN = 192 * 1024


def _cut(value: Any) -> Any:
    """``value`` with each string past :data:`_MAX_STRING` bytes cut, saying
    how much is not shown."""
    if isinstance(value, str):
        raw = value.encode("utf-8")
        if len(raw) <= _MAX_STRING:
            return value
        head = raw[:_MAX_STRING].decode("utf-8", "ignore")
        return f"{head}…[{len(raw) - len(head.encode('utf-8'))} more bytes not shown]"
    if isinstance(value, dict):
        return {k: _cut(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_cut(v) for v in value]
    return value


def claude_params(name: str, args: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """What a file call (``Edit``, ``MultiEdit``, ``Write``,
    ``NotebookEdit``) shows the humans who decide, as the hook sends it: its
    input, long strings cut; ``None`` for any other call (its detail is the
    whole call)."""
    if name not in ("Edit", "MultiEdit", "Write", "NotebookEdit"):
        return None
    shown = _cut(args)
    try:
        size = len(json.dumps(shown, ensure_ascii=False).encode("utf-8"))
    except (TypeError, ValueError, RecursionError):
        size = None
    if size is None or size > _MAX_SHOWN:
        return {"not_shown": "the tool's input is too large to show"}
    return dict(shown)


def can_use_tool(
    client: AsyncClient,
    *,
    wait: float = 300,
    timeout: Timeout = None,
    reason: Optional[str] = None,
    session: Optional[str] = None,
) -> Callable[[str, Dict[str, Any], Any], Awaitable[Any]]:
    """The ``can_use_tool`` callback of ``ClaudeAgentOptions``; its calls are
    asked in ``session`` when given (the SDK tells the callback none)."""
    from claude_agent_sdk import PermissionResultAllow, PermissionResultDeny

    async def decide(tool_name: str, tool_input: Dict[str, Any], _context: Any) -> Any:
        try:
            tool, detail = claude_tool(tool_name, tool_input)
            call = ToolCall(
                tool, detail, reason or f"Claude Agent SDK calls {tool_name}", claude_params(tool_name, tool_input)
            )
            verdict: Verdict = (await adecide_all(client, [call], wait, timeout, session))[0]
        except Exception as e:  # fail closed: nothing but a verdict allows
            verdict = failed(e)
        if verdict.approved:
            return PermissionResultAllow(updated_input=tool_input)
        return PermissionResultDeny(message=verdict.message)

    return decide
