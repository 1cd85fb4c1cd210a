"""What the adapters must never do: run a call an operator edited before
approving as the agent first asked it, or name a path by a spelling that
hides where it leads."""

from actiongate._adapters import verdict
from actiongate.models import Action


def test_an_edited_approval_does_not_run_the_original_call() -> None:
    action = Action.from_json(
        {
            "id": "act_1",
            "status": "approved",
            "tool": "bash",
            "detail": "rm -rf build",
            "edited": True,
            "approved_detail": "cargo build",
        }
    )
    v = verdict(action, 5)
    assert not v.approved
    assert "cargo build" in v.message


def test_an_unedited_approval_runs() -> None:
    action = Action.from_json({"id": "act_2", "status": "approved", "tool": "bash", "detail": "ls"})
    assert verdict(action, 5).approved


def test_the_decorator_refuses_an_edited_approval() -> None:
    import pytest

    from actiongate._core import settle
    from actiongate.errors import Denied

    action = Action.from_json(
        {"id": "act_3", "status": "approved", "tool": "bash", "detail": "rm -rf build", "edited": True}
    )
    with pytest.raises(Denied):
        settle(action)


def test_claude_paths_climbing_out_name_where_they_lead() -> None:
    from actiongate.claude_agent_sdk import claude_tool

    assert claude_tool("Write", {"file_path": "/r/../../etc/cron.d/job"}) == ("file", "write /etc/cron.d/job")
    assert claude_tool("Edit", {"file_path": "/r/./s//../a"}) == ("file", "edit /r/a")
    assert claude_tool("Read", {"file_path": "src/../../x"}) == ("Read", "../x")
    assert claude_tool("Read", {"file_path": "/r/a.rs"}) == ("Read", "/r/a.rs")


def test_claude_globs_are_spelled_as_the_hook_spells_them() -> None:
    from actiongate.claude_agent_sdk import claude_tool

    cases = [
        ({"pattern": "**/*.rs", "path": "/r/"}, "/r/**/*.rs"),
        ({"pattern": "src/../*.rs", "path": "/r"}, "/r/*.rs"),
        ({"pattern": "*/../x", "path": "/r"}, "/r/*/../x"),
        ({"pattern": "/r/../etc/*", "path": "/x"}, "/etc/*"),
        ({"pattern": "**/*.rs"}, "**/*.rs"),
        ({"pattern": "./src/*.rs"}, "src/*.rs"),
        ({"pattern": "a\\*b/../c"}, "a\\*b/../c"),
    ]
    for args, want in cases:
        assert claude_tool("Glob", args) == ("Glob", want), args


def test_an_approved_action_is_go_ahead_only_as_asked_and_once() -> None:
    import pytest

    from actiongate._core import settle
    from actiongate.errors import ActionGateError

    def action(status: str, **more: object) -> Action:
        return Action.from_json({"id": "act_4", "status": status, "tool": "bash", "detail": "ls", **more})

    assert action("approved").approved
    edited = action("approved", edited=True, approved_detail="pwd")
    assert edited.was_approved and not edited.approved
    # A decision-only action the agent reported: what the same idempotency
    # key answers after the run. Running it again is a second run.
    for status in ("running", "completed", "failed"):
        assert not action(status).approved, status
        with pytest.raises(ActionGateError, match="run already"):
            settle(action(status))
    # A handler's action: its executor ran it; the result is read.
    assert action("completed", handler="files").approved


def test_an_input_too_large_for_a_detail_is_asked_cut_and_left_to_an_operator(daemon) -> None:  # type: ignore[no-untyped-def]
    """A framework call whose input is too large for a detail (a file's whole
    body) was refused by the daemon every time; it is asked with its detail
    cut and its input as params, and only an operator allows it."""
    import threading
    import time

    from actiongate import Client
    from actiongate._adapters import ToolMap, decide_all

    name = daemon.agent({"allow": ["tool:write_file:.*"], "ask": [], "deny": []})
    client = Client(daemon.url, daemon.key("agent", name))
    op = Client(daemon.url, daemon.key("operator"))
    call = ToolMap().call("write_file", {"path": "notes.md", "content": "a" * 100_000}, None)
    assert call.caution and call.detail.endswith("[cut: the whole input is in params]")
    out: list = []
    t = threading.Thread(target=lambda: out.extend(decide_all(client, [call], 30, "5m")))
    t.start()
    deadline = time.monotonic() + 20
    while not (mine := [a for a in op.pending() if a.raw.get("agent") == name]) and time.monotonic() < deadline:
        time.sleep(0.05)
    [item] = mine
    assert item.raw["params"]["path"] == "notes.md"
    assert "too large" in item.raw["decision"]["reason"]
    op.approve(item.id)
    t.join(30)
    assert out[0].approved
    small = ToolMap().call("write_file", {"path": "x", "content": "y"}, None)
    assert small.caution is None and decide_all(client, [small], 5, "5m")[0].approved
