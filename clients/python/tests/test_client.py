"""The blocking client against the real daemon."""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest
from helpers import Operator, Relay, wait_pending

import actiongate
from actiongate import ActionGateError, ApiError, Client, Denied, Expired, TimedOut, Unreachable


@pytest.fixture
def agent_client(daemon, agent_key):
    with Client(daemon.url, agent_key) as c:
        yield c


@pytest.fixture
def op(daemon, operator_key):
    with Client(daemon.url, operator_key) as c:
        yield c


def test_env_gives_url_and_key(daemon, agent_key, monkeypatch):
    monkeypatch.setenv("ACTIONGATE_URL", daemon.url)
    monkeypatch.setenv("ACTIONGATE_KEY", agent_key)
    with Client() as c:
        assert c.whoami()["role"] == "agent"


def test_no_key_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("ACTIONGATE_KEY", raising=False)
    with pytest.raises(ActionGateError, match="ACTIONGATE_KEY"):
        Client("http://127.0.0.1:1")


def test_check_answers_allow_ask_deny(agent_client):
    allow = agent_client.check("echo", "hi")
    assert (allow.result, allow.allowed) == ("allow", True)
    assert allow.rule["pattern"] == "tool:echo:.*"
    assert allow.action_string == "tool:echo:hi"
    assert agent_client.check("bash", "make").result == "ask"
    deny = agent_client.check("danger", "x")
    assert deny.result == "deny" and deny.reason


def test_request_waits_for_the_operator(agent_client, op, agent):
    answer = Operator(op, agent, lambda o, a: o.approve(a.id, note="fine"))
    action = agent_client.request("bash", "make test", reason="run the tests", wait=30)
    assert answer.finish()[0].id == action.id
    assert action.status == "approved" and action.approved
    assert action.decision.result == "ask"
    assert action.reason == "run the tests"


def test_request_without_wait_returns_pending(agent_client, op, agent):
    action = agent_client.request("bash", "ls", timeout="5m")
    assert action.status == "pending" and not action.settled
    with pytest.raises(TimedOut):
        agent_client.wait(action.id, 1)
    op.deny(action.id, "not now")
    settled = agent_client.wait(action.id, 10)
    assert settled.status == "denied" and settled.decision_note == "not now"


def test_approve_names_the_version_read(agent_client, op):
    action = agent_client.request("bash", "make dist", timeout="5m")
    # Nobody edited it: an approval of an edited version is refused.
    with pytest.raises(ApiError) as e:
        op.approve(action.id, seen="edited")
    assert e.value.status == 409 and "nobody edited" in (e.value.detail or "")
    assert op.approve(action.id, seen="asked").status == "approved"


def test_a_policy_allow_settles_at_once(agent_client):
    action = agent_client.request("echo", "hello", wait=5)
    assert action.status == "approved" and action.decided_by == "policy"


def test_bad_request_is_an_api_error_with_the_field(agent_client):
    with pytest.raises(ApiError) as e:
        agent_client.request("not a tool!", "x")
    assert e.value.status == 422
    assert e.value.code
    assert any(f.field == "tool" for f in e.value.errors), e.value.errors


def test_wrong_key_is_a_401(daemon):
    with Client(daemon.url, "agk_nope") as c, pytest.raises(ApiError) as e:
        c.check("echo", "x")
    assert e.value.status == 401


def test_decorator_runs_the_function_once_approved(agent_client, op, agent):
    ran = []

    @agent_client.gate(tool="bash", detail=lambda path: f"rm -rf {path}", wait=30)
    def remove(path):
        ran.append(path)
        return "removed"

    answer = Operator(op, agent, lambda o, a: o.approve(a.id))
    assert remove("build") == "removed"
    [approved] = answer.finish()
    assert ran == ["build"]
    assert approved.detail == "rm -rf build"
    # The outcome was reported on the action.
    after = op.get(approved.id)
    assert after.outcome and after.outcome["status"] == "completed"


def test_decorator_raises_denied_with_the_operators_reason(agent_client, op, agent):
    ran = []

    @agent_client.gate(tool="bash", detail="git push --force", wait=30)
    def push():
        ran.append(1)

    answer = Operator(op, agent, lambda o, a: o.deny(a.id, "not on a Friday"))
    with pytest.raises(Denied) as e:
        push()
    answer.finish()
    assert e.value.reason == "not on a Friday"
    assert ran == []


def test_decorator_default_names_the_tool_and_arguments(agent_client, op, agent):
    @agent_client.gate(wait=5)
    def echo(text, loud=False):
        return text.upper() if loud else text

    assert echo("hi", loud=True) == "HI"
    [action] = agent_client_actions(op, agent)
    assert (action.tool, action.detail) == ("echo", '{"text":"hi","loud":true}')


def test_decorator_policy_deny_never_runs(agent_client):
    ran = []

    @agent_client.gate(tool="danger", wait=5)
    def boom():
        ran.append(1)

    with pytest.raises(Denied):
        boom()
    assert ran == []


def test_decorator_times_out_and_withdraws(agent_client, op, agent):
    ran = []

    @agent_client.gate(tool="bash", detail="sleep 1", wait=1)
    def nap():
        ran.append(1)

    with pytest.raises(TimedOut) as e:
        nap()
    assert ran == []
    assert e.value.action is not None
    assert op.get(e.value.action.id).status == "cancelled"
    assert [a for a in op.pending() if a.agent == agent] == []


def test_decorator_expired_never_runs(agent_client):
    ran = []

    @agent_client.gate(tool="slow", detail="x", wait=20, timeout="1s")
    def never():
        ran.append(1)

    with pytest.raises(Expired):
        never()
    assert ran == []


def test_decorator_reports_a_failure(agent_client, op, agent):
    @agent_client.gate(tool="echo", detail="fail", wait=5)
    def fails():
        raise ValueError("bad input")

    with pytest.raises(ValueError):
        fails()
    [action] = [a for a in agent_client_actions(op, agent) if a.detail == "fail"]
    assert action.outcome["status"] == "failed"
    assert action.outcome["error"] == "ValueError: bad input"


def agent_client_actions(op, agent):
    """Every action of the agent, whatever its status (one page is plenty)."""
    data = op._http.get("/v1/actions", params={"agent": agent}).json()
    return [actiongate.Action.from_json(a) for a in data["items"]]


def test_unreachable_gate_fails_closed(monkeypatch):
    monkeypatch.setattr(actiongate._core, "RETRY_DELAYS", (0.01, 0.01))
    ran = []
    with Client("http://127.0.0.1:9", "agk_x", timeout=2) as c:

        @c.gate(tool="bash", detail="ls")
        def ls():
            ran.append(1)

        with pytest.raises(Unreachable):
            ls()
    assert ran == []


def test_errors_are_the_standard_timeout_and_connection_errors():
    assert issubclass(TimedOut, TimeoutError) and issubclass(TimedOut, ActionGateError)
    assert issubclass(Unreachable, ConnectionError) and issubclass(Unreachable, ActionGateError)
    e = TimedOut("no decision within 1 s", None)
    assert str(e) == "no decision within 1 s" and e.args == ("no decision within 1 s",)
    assert e.action is None
    assert str(Unreachable("http://x: refused")) == "http://x: refused"


def test_except_connection_error_catches_an_unreachable_daemon(monkeypatch):
    monkeypatch.setattr(actiongate._core, "RETRY_DELAYS", (0.01, 0.01))
    with Client("http://127.0.0.1:9", "agk_x", timeout=2) as c:
        with pytest.raises(ConnectionError) as e:
            c.request("bash", "ls")
    assert isinstance(e.value, Unreachable)


def test_except_timeout_error_catches_a_wait_that_runs_out(agent_client):
    action = agent_client.request("bash", "ls", timeout="5m")
    try:
        with pytest.raises(TimeoutError) as e:
            agent_client.wait(action.id, 1)
        assert isinstance(e.value, TimedOut) and e.value.action.id == action.id
    finally:
        agent_client.cancel(action.id)


def test_dropped_connection_is_retried_with_one_idempotency_key(daemon, agent_key, op, agent):
    port = int(daemon.url.rsplit(":", 1)[1])
    relay = Relay(port, drop_first_post=True)
    try:
        with Client(relay.url, agent_key) as c:
            action = c.request("echo", "once", wait=5)
        assert relay.dropped == 1
        posts = [json.loads(b) for h, b in zip(relay.heads, relay.bodies) if h.startswith("POST /v1/actions")]
        assert len(posts) == 2, relay.heads
        assert posts[0]["idempotency_key"] == posts[1]["idempotency_key"]
    finally:
        relay.close()
    assert action.status == "approved"
    mine = agent_client_actions(op, agent)
    assert [a.id for a in mine] == [action.id]


def test_operator_grant_and_revoke(agent_client, op, agent):
    assert agent_client.check("bash", "cargo build").result == "ask"
    g = op.grant(tool="bash", pattern="cargo build.*", expires="1h", agent=agent)
    assert g.active and g.id
    assert agent_client.check("bash", "cargo build --release").result == "allow"
    assert op.revoke(g.id).active is False
    assert agent_client.check("bash", "cargo build").result == "ask"


class LossyProxy:
    """A proxy in front of the daemon that passes every request on but
    answers the first POST with 503 (what it made was made, its answer
    lost), as a busy daemon or a proxy may; ``keys`` are the idempotency
    keys POSTed."""

    def __init__(self, daemon) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        keys = self.keys = []

        class Lossy(BaseHTTPRequestHandler):
            def _pass(self) -> None:
                n = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(n) if n else None
                if self.command == "POST":
                    keys.append(json.loads(body or b"{}").get("idempotency_key"))
                r = httpx.request(
                    self.command,
                    daemon.url + self.path,
                    content=body,
                    headers={"authorization": self.headers["authorization"], "content-type": "application/json"},
                    timeout=60,
                )
                lost = self.command == "POST" and len(keys) == 1
                status, out = (503, b'{"title":"busy","status":503}') if lost else (r.status_code, r.content)
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("retry-after", "0")
                self.send_header("content-length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            do_GET = do_POST = _pass  # noqa: N815 (http.server's names)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Lossy)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_grant_whose_answer_was_lost_is_sent_again_and_made_once(daemon, operator_key, agent):
    """The first grant reaches the daemon but its answer is a 503; the
    client sends it again under the same key and gets that grant, not a
    second."""
    proxy = LossyProxy(daemon)
    try:
        with Client(proxy.url, operator_key) as c:
            g = c.grant(tool="bash", pattern="make once", agent=agent)
    finally:
        proxy.close()
    assert len(proxy.keys) == 2 and proxy.keys[0] == proxy.keys[1]
    made = [x for x in daemon.call("GET", f"/v1/grants?agent={agent}") if x["pattern"] == "make once"]
    assert [x["id"] for x in made] == [g.id]
    # A key given is the key sent: the same key for another grant is a 409.
    with Client(daemon.url, operator_key) as c:
        c.grant(tool="bash", pattern="make twice", agent=agent, idempotency_key="py-grant-key")
        with pytest.raises(ApiError) as e:
            c.grant(tool="bash", pattern="make thrice", agent=agent, idempotency_key="py-grant-key")
    assert e.value.status == 409


def test_a_plan_whose_answer_was_lost_is_sent_again_and_asked_once(daemon):
    name = daemon.agent({"allow": [], "ask": ["(?s).*"], "deny": []})
    key = daemon.key("agent", name)
    proxy = LossyProxy(daemon)
    try:
        with Client(proxy.url, key) as c:
            plan = c.request_plan([{"tool": "bash", "detail": "make dist"}], session="py-lost", timeout=0)
    finally:
        proxy.close()
    assert plan.status == "pending"
    assert len(proxy.keys) == 2 and proxy.keys[0] == proxy.keys[1]
    asked = [p for p in daemon.call("GET", "/v1/plans?status=pending") if p["agent"] == name]
    assert [p["id"] for p in asked] == [plan.id]
    daemon.call("POST", f"/v1/plans/{plan.id}/deny", {})


def test_decisions_whose_answers_were_lost_are_sent_again_and_made_once(daemon, operator_key, agent_client, agent_key):
    yes = agent_client.request("bash", "lost yes", wait=0)
    no = agent_client.request("bash", "lost no", wait=0)
    plan = agent_client.request_plan([{"tool": "bash", "detail": "lost plan"}], session="py-lost-decisions", timeout=0)

    def decide(f, key=operator_key):
        proxy = LossyProxy(daemon)
        try:
            with Client(proxy.url, key) as c:
                answer = f(c)
        finally:
            proxy.close()
        # The first answer was lost, and the decision sent again.
        assert len(proxy.keys) == 2
        return answer

    approved = decide(lambda c: c.approve(yes.id, note="once"))
    assert approved.status == "approved"
    assert len(approved.raw["approvals"]) == 1
    denied = decide(lambda c: c.deny(no.id, reason="once"))
    assert denied.status == "denied" and denied.raw["decision_note"] == "once"
    assert decide(lambda c: c.approve_plan(plan.id)).status == "approved"
    # Another decision on what is decided is still refused.
    with Client(daemon.url, operator_key) as c:
        with pytest.raises(ApiError) as e:
            c.deny(yes.id)
    assert e.value.status == 409
    assert len(daemon.call("GET", f"/v1/actions/{yes.id}")["approvals"]) == 1
    # The agent's own: a report and a cancel.
    reported = decide(lambda c: c.report(yes.id, "completed", result={"ok": True}), agent_key)
    assert reported.status == "completed"
    gone = agent_client.request("bash", "lost cancel", wait=0)
    assert decide(lambda c: c.cancel(gone.id), agent_key).status == "cancelled"


def test_a_grant_of_one_session_and_one_use(agent_client, op, agent):
    g = op.grant(tool="bash", pattern="make docs", expires="1h", agent=agent, session="py-g1", uses=1)
    assert g.active and g.id
    assert g.raw["session"] == "py-g1" and g.raw["uses"] == 1
    other = agent_client.request("bash", "make docs", session="py-g2", wait=0)
    assert other.status == "pending"
    assert agent_client.request("bash", "make docs", session="py-g1", wait=0).status == "approved"
    again = agent_client.request("bash", "make docs", session="py-g1", wait=0)
    assert again.status == "pending"
    for a in (other, again):
        agent_client.cancel(a.id)


def test_approve_with_remember_grants(agent_client, op, agent):
    answer = Operator(op, agent, lambda o, a: o.approve(a.id, remember="1h"))
    assert agent_client.request("bash", "make lint", wait=30).approved
    answer.finish()
    assert agent_client.check("bash", "make lint").result == "allow"


def test_run_a_handler_action(daemon, handler, agent_client, op, agent):
    answer = Operator(op, agent, lambda o, a: o.approve(a.id))
    action = agent_client.run(handler, "write", {"path": "/notes/a.txt", "text": "hi"}, wait=30)
    answer.finish()
    assert action.status == "completed", action
    assert action.handler == handler and action.detail == "write /notes/a.txt"
    assert action.raw["outcome"]["result"]["ran"] == "write"


def _ask(daemon, handler, made, per_agent, path):
    """Pending grant requests, ``per_agent[n]`` from each of fresh agents
    (at most 100 pending each), of scope ``{"path": path(n, i)}``; each id
    goes to ``made`` as it is made."""
    for n, count in enumerate(per_agent):
        key = daemon.key("agent", daemon.agent())
        with httpx.Client(base_url=daemon.url, headers={"authorization": f"Bearer {key}"}) as c:
            for i in range(count):
                r = c.post(
                    "/v1/grant-requests",
                    json={"handler": handler, "permission": "notes.write", "reason": "paging",
                          "scope": {"path": path(n, i)}, "timeout": "10m"},
                )
                assert r.status_code == 201, r.text
                made.append(r.json()["id"])


def test_grant_requests_reads_every_page_oldest_first(daemon, handler, op):
    # 501 pending requests (one page is 500); denied at the end so other
    # tests see none.
    made = []
    try:
        _ask(daemon, handler, made, [84] * 5 + [81], lambda n, i: f"/p/{n}/{i}")
        listed = [r.id for r in op.grant_requests() if r.id in set(made)]
        assert listed == made
    finally:
        for rid in made:
            daemon.http.post(f"/v1/grant-requests/{rid}/deny", json={})


def test_grant_requests_follow_a_page_cut_short_for_its_size(daemon, handler, op):
    # 140 requests of about 15 KB each: past the 2 MiB a page of the
    # listing holds, so the first page is cut short of its 500 and links
    # the next.
    made = []
    try:
        _ask(daemon, handler, made, [70, 70], lambda n, i: f"/p/{n}/{i}/" + "x" * 15_000)
        first = daemon.http.get("/v1/grant-requests", params={"status": "pending", "order": "oldest", "limit": 500})
        assert 'rel="next"' in first.headers.get("link", ""), first.headers
        listed = [r.id for r in op.grant_requests() if r.id in set(made)]
        assert listed == made
    finally:
        for rid in made:
            daemon.http.post(f"/v1/grant-requests/{rid}/deny", json={})


def _plan(daemon, key, session, details):
    """A pending plan of ``details`` (tool ``bash``) asked with ``key``."""
    steps = [{"tool": "bash", "detail": d} for d in details]
    r = daemon.http.post("/v1/plans", json={"session": session, "steps": steps},
                         headers={"authorization": f"Bearer {key}"})
    assert r.status_code == 201, r.text
    return r.json()["id"]


def test_plans_listed_approved_step_by_step_and_denied(daemon, op):
    key = daemon.key("agent", daemon.agent())
    first = _plan(daemon, key, "py-plans-a", ["make build", "make test", "make deploy"])
    second = _plan(daemon, key, "py-plans-b", ["rm -rf build"])
    pending = [p.id for p in op.plans() if p.id in (first, second)]
    assert pending == [first, second]
    for bad in ([], [-1], ["0"]):
        with pytest.raises(ValueError):
            op.approve_plan(first, steps=bad)
    approved = op.approve_plan(first, steps=[0, 2])
    assert (approved.id, approved.status, approved.approved_steps) == (first, "approved", [0, 2])
    denied = op.deny_plan(second)
    assert (denied.id, denied.status) == (second, "denied")
    assert not [p for p in op.plans() if p.id in (first, second)]
    assert {p.id: p.status for p in op.plans(None) if p.id in (first, second)} == {
        first: "approved",
        second: "denied",
    }
    # Decided already: the daemon's 409.
    with pytest.raises(ApiError) as e:
        op.deny_plan(first)
    assert e.value.status == 409


def test_request_permission_approved_and_denied(daemon, handler, agent_client, op):
    results = []

    def ask():
        results.append(
            agent_client.request_permission("notes.write", "save notes", 1, handler=handler, scope={"path": "/notes/*"})
        )

    for verdict in ("approve", "deny", "narrow"):
        t = threading.Thread(target=ask)
        t.start()
        deadline = time.monotonic() + 20
        while not (reqs := op.grant_requests()) and time.monotonic() < deadline:
            time.sleep(0.05)
        [req] = reqs
        assert req.permission == "notes.write"
        if verdict == "approve":
            op.approve_grant_request(req.id)
        elif verdict == "deny":
            op.deny_grant_request(req.id, "no notes today")
        else:
            # Granted narrower than asked: not as asked.
            op.approve_grant_request(req.id, scope={"path": "/notes/today.md"})
        t.join(30)
    assert results == [True, False, False]


def test_a_grant_request_whose_answer_was_lost_is_sent_again_and_asked_once(daemon, handler, op):
    """Approved while the first request waits, its answer lost: the retry
    under the same key answers that request, approved, not a second."""
    name = daemon.agent()
    key = daemon.key("agent", name)
    proxy = LossyProxy(daemon)
    results = []

    def ask():
        with Client(proxy.url, key) as c:
            results.append(c.request_permission("notes.write", "lost notes", 1, handler=handler))

    t = threading.Thread(target=ask)
    t.start()
    try:
        deadline = time.monotonic() + 20
        while not (reqs := [r for r in op.grant_requests() if r.raw["agent"] == name]) and time.monotonic() < deadline:
            time.sleep(0.05)
        [req] = reqs
        op.approve_grant_request(req.id)
        t.join(30)
    finally:
        proxy.close()
    assert results == [True]
    assert len(proxy.keys) == 2 and proxy.keys[0] == proxy.keys[1]
    assert [r.id for r in op.grant_requests(status=None) if r.raw["agent"] == name] == [req.id]


def test_request_permission_without_a_handler_is_a_pending_item(agent_client, op, agent):
    # Seed 004's request_permission(permission, reason, timeout_minutes):
    # the same item the MCP tool makes, tool:permission:<permission>.
    for verdict, expected in ((lambda o, a: o.approve(a.id), True), (lambda o, a: o.deny(a.id, "not now"), False)):
        answer = Operator(op, agent, verdict)
        assert agent_client.request_permission("deploy.production", "ship the fix", 1) is expected
        [decided] = answer.finish()
        assert decided.tool == "permission" and decided.detail == "deploy.production", decided


def test_request_permission_edited_by_the_approver_is_not_granted_as_asked(agent_client, op, agent):
    # Approved as edited is a permission other than the one asked for.
    answer = Operator(op, agent, lambda o, a: o.approve(a.id, detail="deploy.staging"))
    assert agent_client.request_permission("deploy.production", "ship the fix", 1) is False
    [decided] = answer.finish()
    assert decided.edited


def test_request_permission_checks_its_arguments(agent_client):
    with pytest.raises(ValueError):
        agent_client.request_permission("", "why")
    with pytest.raises(ValueError):
        agent_client.request_permission("notes.write", "why", timeout_minutes=0)


def test_pending_lists_oldest_first(agent_client, op, agent):
    a = agent_client.request("bash", "one")
    b = agent_client.request("bash", "two")
    mine = wait_pending(op, agent, 2)
    assert [x.id for x in mine] == [a.id, b.id]
    for x in mine:
        op.deny(x.id, "cleanup")


def test_report_run_says_whether_a_decision_covered_it(agent_client, op):
    allowed = agent_client.request("echo", "covered", wait=5, session="task-r")
    again = agent_client.request("echo", "covered", wait=5, session="task-r")
    assert allowed.status == again.status == "approved"
    assert agent_client.report_run("echo", "covered", session="task-r", runtime="pytest") is True
    assert agent_client.report_run("echo", "covered", action=allowed.id) is True
    # Two decisions cover two runs: a third run of it was decided by nobody.
    assert agent_client.report_run("echo", "covered", session="task-r") is False
    # Nothing allowed this one: the operators see an action.undecided event.
    assert agent_client.report_run("bash", "rm -rf build", session="task-r") is False
    for e in op.events(since=0, types="action.undecided"):
        if e.resource.get("detail") == "rm -rf build":
            assert e.resource["session"] == "task-r"
            break


def test_a_plan_is_asked_once_and_its_steps_then_run_unasked(daemon, op):
    agent = daemon.agent({"allow": [], "ask": ["(?s).*"], "approvals": [{"pattern": "tool:deploy:prod.*", "count": 2}]})
    key = daemon.key("agent", agent)
    steps = [{"tool": "bash", "detail": "make dist"}, {"tool": "deploy", "detail": "prod web"}]
    results = []
    with Client(daemon.url, key) as agent_client:

        def ask():
            results.append(agent_client.request_plan(steps, session="py-task", reason="release", timeout=30))

        t = threading.Thread(target=ask)
        t.start()
        deadline = time.monotonic() + 20
        pending = []
        while not pending and time.monotonic() < deadline:
            pending = [p for p in op._http.get("/v1/plans", params={"status": "pending"}).json() if p["agent"] == agent]
            time.sleep(0.05)
        [plan] = pending
        assert op._http.post(f"/v1/plans/{plan['id']}/approve", json={}).status_code == 200
        t.join(30)
        [got] = results
        assert got.status == "approved" and got.id == plan["id"] and got.session == "py-task"
        assert got.approved_steps == [0]
        assert list(got.asks) == [1] and "approvals rule #0" in got.asks[1]
        assert agent_client.plan(got.id).status == "approved"
        # The approved step runs once without a question; the governed one asks.
        assert agent_client.check("bash", "make dist", session="py-task").result == "allow"
        assert agent_client.check("deploy", "prod web", session="py-task").result == "ask"

        # Nobody decides: the plan comes back pending when the wait runs out.
        started = time.monotonic()
        late = agent_client.request_plan([{"tool": "bash", "detail": "make docs"}], session="py-task", timeout=1)
        assert late.status == "pending" and not late.settled
        assert time.monotonic() - started < 10
        assert agent_client.plan(late.id, wait=0).status == "pending"
        with pytest.raises(ValueError):
            agent_client.request_plan([], session="py-task")
        with pytest.raises(ApiError) as bad:
            agent_client.request_plan([{"tool": "bash"}], session="py-task", timeout=0)
        assert bad.value.status == 422


def test_a_redirect_is_no_answer():
    # A 3xx's body (here one saying "approved") is never read as the answer.
    import http.server
    import threading

    class Redirecting(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's name)
            body = b'{"id":"act_1","status":"approved","tool":"deploy","detail":"prod"}'
            self.send_response(302)
            self.send_header("Location", "http://127.0.0.1:9/")
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Redirecting)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with actiongate.Client(f"http://127.0.0.1:{server.server_address[1]}", "agk_x") as c:
            with pytest.raises(actiongate.ApiError) as e:
                c.request("deploy", "prod")
        assert e.value.status == 302
    finally:
        server.shutdown()
