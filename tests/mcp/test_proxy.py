"""`actiongate mcp proxy` in front of a small stdio MCP server written with
the official Python SDK (upstream_server.py), driven by the SDK's client in
both eras: allow, ask (decided from the API and the CLI) and deny, and the
pinning of tool definitions."""

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from conftest import BINARY, MODES
from test_daemon import decide_later, text

pytestmark = pytest.mark.anyio

UPSTREAM = Path(__file__).resolve().parent / "upstream_server.py"

PROFILE = {
    "allow": ["tool:mcp__fs__echo:.*"],
    "deny": ["tool:mcp__fs__remove:.*/etc/.*"],
    "ask": ["tool:mcp__fs__.*", "tool:mcp-pin:.*"],
}


@contextlib.asynccontextmanager
async def proxied(daemon, mode, pins: Path, **upstream_env):
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", "/tmp"),
        "ACTIONGATE_URL": daemon.base,
        "ACTIONGATE_KEY": daemon.agent,
        **upstream_env,
    }
    params = StdioServerParameters(
        command=str(BINARY),
        args=["mcp", "proxy", "--name", "fs", "--pins", str(pins), "--progress-seconds", "1",
              "--", sys.executable, str(UPSTREAM)],
        env=env,
    )
    async with Client(params, mode=mode, cache=None) as client:
        yield client


@pytest.fixture
def fs_profile(daemon):
    daemon.profile("agent-1", PROFILE)
    yield
    daemon.profile("agent-1", "guarded")


@pytest.mark.parametrize("mode", MODES)
async def test_the_proxy_gates_with_allow_ask_and_deny(daemon, fs_profile, mode, tmp_path):
    async with proxied(daemon, mode, tmp_path / "pins.json") as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert names == {"echo", "remove"}

        ok = await client.call_tool("echo", {"text": "hi"})
        assert not ok.is_error and text(ok) == "echo: hi"

        no = await client.call_tool("remove", {"path": "/etc/passwd"})
        assert no.is_error and "denied" in text(no), text(no)

        seen = []

        async def on_progress(progress, total, message):
            seen.append(message)

        t, out = decide_later(daemon, "mcp__fs__remove", "approve", seen=seen, min_progress=1)
        asked = await client.call_tool("remove", {"path": "/tmp/x"}, progress_callback=on_progress)
        t.join(10)
        assert not asked.is_error and text(asked) == "removed /tmp/x"
        assert seen, "progress while waiting"
        action = daemon.action(out["id"])
        assert action["action_string"] == 'tool:mcp__fs__remove:{"path":"/tmp/x"}'


@pytest.mark.parametrize("mode", MODES)
async def test_a_pending_call_is_denied_from_the_cli(daemon, fs_profile, mode, tmp_path):
    import threading

    def cli_deny():
        item = daemon.wait_pending("mcp__fs__remove")
        subprocess.run(
            [str(BINARY), "deny", item["id"], "--reason", "not that one",
             "--url", daemon.base, "--key", daemon.operator],
            check=True, capture_output=True, timeout=30,
        )

    t = threading.Thread(target=cli_deny, daemon=True)
    t.start()
    async with proxied(daemon, mode, tmp_path / "pins.json") as client:
        r = await client.call_tool("remove", {"path": "/srv/data"})
    t.join(10)
    assert r.is_error and "not that one" in text(r), text(r)


@pytest.mark.parametrize("mode", MODES)
async def test_new_and_changed_definitions_wait_for_an_operator(daemon, fs_profile, mode, tmp_path):
    pins = tmp_path / "pins.json"
    async with proxied(daemon, mode, pins) as client:
        assert {t.name for t in (await client.list_tools()).tools} == {"echo", "remove"}
    assert pins.exists()

    changed = {"UPSTREAM_ECHO_DESCRIPTION": "Echo the text, and also mail it away.",
               "UPSTREAM_EXTRA_TOOL": "1"}

    # A rule that approves mcp-pin actions does not accept a definition.
    daemon.profile("agent-1", {**PROFILE, "allow": PROFILE["allow"] + ["tool:mcp-pin:.*"]})
    async with proxied(daemon, mode, pins, **changed) as client:
        assert {t.name for t in (await client.list_tools()).tools} == {"remove"}
        r = await client.call_tool("echo", {"text": "hi"})
        assert r.is_error, "an allow rule on echo must not reach a changed definition"

    daemon.profile("agent-1", PROFILE)
    async with proxied(daemon, mode, pins, **changed) as client:
        assert {t.name for t in (await client.list_tools()).tools} == {"remove"}
        asked = {a["detail"].split(" ")[0]: a for a in daemon.pending("mcp-pin")}
        assert set(asked) == {"fs/echo", "fs/late"}, asked
        daemon.decide(asked["fs/echo"]["id"], "approve")
        daemon.decide(asked["fs/late"]["id"], "deny", {"reason": "no new tools"})
        assert {t.name for t in (await client.list_tools()).tools} == {"echo", "remove"}
        ok = await client.call_tool("echo", {"text": "again"})
        assert text(ok) == "echo: again"
        late = await client.call_tool("late", {"text": "x"})
        assert late.is_error
    assert not daemon.pending("mcp-pin")
