"""An approval an operator edited before approving is for the edited call:
the adapters must not run the original one (docs/teams.md)."""

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
