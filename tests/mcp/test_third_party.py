"""`actiongate mcp proxy` in front of a third-party stdio MCP server: the
reference `mcp-server-time` from PyPI (installed by .ci/mcp-tests into a
venv of its own), driven by the official SDK's client in both eras. Its
tools are gated with allow, ask and deny; the asked calls are decided from
the API and from the CLI (the page decides one in tests/web)."""

import contextlib
import json
import os
import subprocess
import threading

import pytest
from mcp import Client, StdioServerParameters

from conftest import BINARY, MODES, TARGET
from test_daemon import decide_later, text

pytestmark = pytest.mark.anyio

SERVER = TARGET / "mcp-third-party-venv" / "bin" / "mcp-server-time"

PROFILE = {
    "allow": ['tool:mcp__time__get_current_time:\\{"timezone":"UTC"\\}'],
    "deny": ["tool:mcp__time__convert_time:.*Pyongyang.*"],
    "ask": ["tool:mcp__time__.*", "tool:mcp-pin:.*"],
}


@pytest.fixture
def time_profile(daemon):
    assert SERVER.exists(), f"run .ci/mcp-tests to install mcp-server-time: {SERVER}"
    daemon.profile("agent-1", PROFILE)
    yield
    daemon.profile("agent-1", "guarded")


@contextlib.asynccontextmanager
async def time_server(daemon, mode, tmp_path):
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", "/tmp"),
        "ACTIONGATE_URL": daemon.base,
        "ACTIONGATE_KEY": daemon.agent,
    }
    params = StdioServerParameters(
        command=str(BINARY),
        args=["mcp", "proxy", "--name", "time", "--pins", str(tmp_path / "pins.json"),
              "--progress-seconds", "1", "--", str(SERVER), "--local-timezone", "UTC"],
        env=env,
    )
    async with Client(params, mode=mode, cache=None) as client:
        yield client


@pytest.mark.parametrize("mode", MODES)
async def test_allowed_asked_and_denied_calls(daemon, time_profile, mode, tmp_path):
    async with time_server(daemon, mode, tmp_path) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert names == {"get_current_time", "convert_time"}

        # Allowed by the profile: forwarded at once.
        now = await client.call_tool("get_current_time", {"timezone": "UTC"})
        assert not now.is_error, text(now)
        assert json.loads(text(now))["timezone"] == "UTC"

        # Denied by the profile: never forwarded.
        no = await client.call_tool(
            "convert_time",
            {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Pyongyang"},
        )
        assert no.is_error and "denied" in text(no), text(no)

        # Asked, and approved from the API while the call waits.
        seen = []

        async def on_progress(progress, total, message):
            seen.append(message)

        t, out = decide_later(daemon, "mcp__time__get_current_time", "approve",
                              seen=seen, min_progress=1)
        paris = await client.call_tool("get_current_time", {"timezone": "Europe/Paris"},
                                       progress_callback=on_progress)
        t.join(10)
        assert "error" not in out, out
        assert json.loads(text(paris))["timezone"] == "Europe/Paris"
        assert seen, "progress while the call waited"
        action = daemon.action(out["id"])
        assert action["action_string"] == \
            'tool:mcp__time__get_current_time:{"timezone":"Europe/Paris"}'
        assert action["decided_by"].startswith("key:")


@pytest.mark.parametrize("mode", MODES)
async def test_an_asked_call_is_approved_from_the_cli(daemon, time_profile, mode, tmp_path):
    done = {}

    def cli_approve():
        try:
            item = daemon.wait_pending("mcp__time__convert_time")
            done["id"] = item["id"]
            subprocess.run(
                [str(BINARY), "approve", item["id"], "--url", daemon.base, "--key", daemon.operator],
                check=True, capture_output=True, timeout=30,
            )
        except Exception as e:  # reported by the test
            done["error"] = e

    t = threading.Thread(target=cli_approve, daemon=True)
    t.start()
    async with time_server(daemon, mode, tmp_path) as client:
        r = await client.call_tool(
            "convert_time",
            {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"},
        )
    t.join(10)
    assert "error" not in done, done
    assert not r.is_error, text(r)
    assert json.loads(text(r))["target"]["timezone"] == "Asia/Tokyo"
    assert daemon.action(done["id"])["status"] == "approved"
