"""Each example in ../examples runs against the real daemon and a fake model
on loopback, approved and then denied by an operator in the test."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from fake_model import FakeModel
from helpers import Operator

from actiongate import Client

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture
def op(daemon, operator_key):
    with Client(daemon.url, operator_key) as c:
        yield c


def run_example(name, args, daemon, agent_key, model=None):
    env = dict(os.environ)
    env.update(ACTIONGATE_URL=daemon.url, ACTIONGATE_KEY=agent_key, GATE_WAIT="30")
    if model is not None:
        env.update(OPENAI_BASE_URL=model.url, OPENAI_API_KEY="sk-fake", MODEL="fake-model")
    return subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_decorator_example(daemon, agent_key, op, agent, tmp_path):
    target = tmp_path / "build"
    target.mkdir()
    (target / "out.o").write_text("x")

    answer = Operator(op, agent, lambda o, a: o.deny(a.id, "keep the build for now"))
    p = run_example("decorator.py", [str(target)], daemon, agent_key)
    [denied] = answer.finish()
    assert denied.detail == f"rm -rf {target}"
    assert (p.returncode, p.stdout.strip()) == (1, "denied: keep the build for now"), p.stderr
    assert target.exists()

    answer = Operator(op, agent, lambda o, a: o.approve(a.id))
    p = run_example("decorator.py", [str(target)], daemon, agent_key)
    answer.finish()
    assert (p.returncode, p.stdout.strip()) == (0, f"removed {target}"), p.stderr
    assert not target.exists()


@pytest.mark.parametrize("example", ["openai_agents_agent.py", "langgraph_agent.py"])
def test_agent_example_approved_and_denied(example, daemon, agent_key, op, agent, tmp_path):
    doomed = tmp_path / "old-report.txt"
    doomed.write_text("old")
    model = FakeModel([("delete_file", {"path": str(doomed)})])
    try:
        answer = Operator(op, agent, lambda o, a: o.deny(a.id, "that report is still needed"))
        p = run_example(example, [f"delete {doomed}"], daemon, agent_key, model)
        [denied] = answer.finish()
        assert p.returncode == 0, p.stderr
        assert denied.tool == "file" and denied.detail == f"delete {doomed}"
        assert doomed.exists()
        # The model got the rejection with the operator's reason as the tool result.
        assert "that report is still needed" in p.stdout, p.stdout

        answer = Operator(op, agent, lambda o, a: o.approve(a.id))
        p = run_example(example, [f"delete {doomed}"], daemon, agent_key, model)
        answer.finish()
        assert p.returncode == 0, p.stderr
        assert not doomed.exists()
        assert f"deleted {doomed}" in p.stdout, p.stdout
    finally:
        model.close()


def test_pydantic_ai_example_approved_and_denied(daemon, agent_key, op, agent):
    pytest.importorskip("pydantic_ai")
    answer = Operator(op, agent, lambda o, a: o.approve(a.id))
    p = run_example("pydantic_ai_agent.py", ["build/"], daemon, agent_key)
    [approved] = answer.finish()
    assert approved.detail == '{"path":"build/"}'
    assert p.returncode == 0 and "deleted build/" in p.stdout, p.stderr

    answer = Operator(op, agent, lambda o, a: o.deny(a.id, "keep the build"))
    p = run_example("pydantic_ai_agent.py", ["build/"], daemon, agent_key)
    answer.finish()
    assert p.returncode == 0 and "keep the build" in p.stdout and "deleted" not in p.stdout, p.stderr
