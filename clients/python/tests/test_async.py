"""AsyncClient against the real daemon (asyncio.run: no plugin needed)."""

from __future__ import annotations

import asyncio

import pytest

from actiongate import ApiError, AsyncClient, Denied


def test_twenty_concurrent_requests_each_answered(daemon, agent_key, operator_key, agent):
    async def main():
        async with AsyncClient(daemon.url, agent_key) as c, AsyncClient(daemon.url, operator_key) as op:

            async def operator():
                seen = set()
                while len(seen) < 20:
                    for a in await op.pending():
                        if a.agent == agent and a.id not in seen:
                            seen.add(a.id)
                            n = int(a.detail.split()[-1])
                            if n % 2:
                                await op.deny(a.id, f"odd {n}")
                            else:
                                await op.approve(a.id)
                    await asyncio.sleep(0.05)

            worker = asyncio.ensure_future(operator())
            actions = await asyncio.wait_for(
                asyncio.gather(*(c.request("bash", f"job {i}", wait=30) for i in range(20))), 60
            )
            await worker
            return actions

    actions = asyncio.run(main())
    assert len({a.id for a in actions}) == 20
    for i, a in enumerate(actions):
        assert a.detail == f"job {i}"
        if i % 2:
            assert (a.status, a.decision_note) == ("denied", f"odd {i}")
        else:
            assert a.status == "approved"


def test_async_check_and_api_error(daemon, agent_key):
    async def main():
        async with AsyncClient(daemon.url, agent_key) as c:
            d = await c.check("echo", "x")
            with pytest.raises(ApiError) as e:
                await c.check("echo", "x" * 70000)
            return d, e.value

    d, err = asyncio.run(main())
    assert d.result == "allow"
    assert err.status == 422 and any(f.field == "detail" for f in err.errors)


def test_async_gate_decorator(daemon, agent_key, operator_key, agent):
    ran = []

    async def main():
        async with AsyncClient(daemon.url, agent_key) as c, AsyncClient(daemon.url, operator_key) as op:

            @c.gate(tool="bash", detail=lambda name: f"deploy {name}", wait=30)
            async def deploy(name):
                ran.append(name)
                return name

            async def deny_it():
                while True:
                    mine = [a for a in await op.pending() if a.agent == agent]
                    if mine:
                        return await op.deny(mine[0].id, "freeze week")
                    await asyncio.sleep(0.05)

            task = asyncio.ensure_future(deny_it())
            with pytest.raises(Denied) as e:
                await deploy("web")
            await task
            assert e.value.reason == "freeze week"
            assert await deploy.__wrapped__("direct") == "direct"  # the undecorated function

            # Allowed by policy: runs at once.
            @c.gate(tool="echo", detail="hi")
            async def hello():
                ran.append("hello")

            await hello()

    asyncio.run(main())
    assert ran == ["direct", "hello"]


def test_sync_client_gates_async_functions(daemon, agent_key):
    from actiongate import Client

    ran = []
    with Client(daemon.url, agent_key) as c:

        @c.gate(tool="danger", detail="x")
        async def bad():
            ran.append(1)

        @c.gate(tool="echo", detail="x")
        async def good():
            ran.append(2)
            return "ok"

        with pytest.raises(Denied):
            asyncio.run(bad())
        assert asyncio.run(good()) == "ok"
    assert ran == [2]


def test_async_gate_refuses_sync_functions(daemon, agent_key):
    async def main():
        async with AsyncClient(daemon.url, agent_key) as c:
            with pytest.raises(TypeError):

                @c.gate(tool="echo")
                def sync():
                    pass

    asyncio.run(main())


def test_report_run_async(daemon, agent_key):
    async def main():
        async with AsyncClient(daemon.url, agent_key) as c:
            allowed = await c.request("echo", "async covered", wait=5)
            return (
                await c.report_run("echo", "async covered", action=allowed.id),
                await c.report_run("bash", "make clean", runtime="pytest"),
            )

    assert asyncio.run(main()) == (True, False)


def test_a_plan_asked_without_waiting_is_pending_and_followed(daemon, agent_key, operator_key):
    async def main():
        async with AsyncClient(daemon.url, agent_key) as agent, AsyncClient(daemon.url, operator_key) as op:
            plan = await agent.request_plan([{"tool": "bash", "detail": "make"}], session="aio-task", timeout=0)
            assert plan.status == "pending" and plan.approved_steps == []
            waiting = asyncio.ensure_future(agent.plan(plan.id, wait=20))
            await asyncio.sleep(0.3)
            assert not waiting.done()
            r = await op._http.post(f"/v1/plans/{plan.id}/approve", json={})
            assert r.status_code == 200
            done = await asyncio.wait_for(waiting, 25)
            assert done.status == "approved" and done.approved_steps == [0] and done.asks == {}

    asyncio.run(main())


def test_plans_are_listed_and_decided(daemon, operator_key):
    key = daemon.key("agent", daemon.agent())
    steps = [{"tool": "bash", "detail": "make build"}, {"tool": "bash", "detail": "make test"}]
    made = []
    for session in ("aio-plans-a", "aio-plans-b"):
        r = daemon.http.post("/v1/plans", json={"session": session, "steps": steps},
                             headers={"authorization": f"Bearer {key}"})
        assert r.status_code == 201, r.text
        made.append(r.json()["id"])

    async def main():
        async with AsyncClient(daemon.url, operator_key) as op:
            listed = [p.id for p in await op.plans() if p.id in made]
            approved = await op.approve_plan(made[0])
            denied = await op.deny_plan(made[1])
            return listed, approved, denied

    listed, approved, denied = asyncio.run(main())
    assert listed == made
    assert (approved.status, approved.approved_steps) == ("approved", [0, 1])
    assert denied.status == "denied"
