"""People and quorum (docs/teams.md) through the client, against the real daemon."""

from __future__ import annotations

import asyncio
import uuid

import pytest

import actiongate
from actiongate import ApiError, AsyncClient, Client, Person


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _operator(daemon, name: str):
    """A new operator key named ``name``: (secret, id)."""
    k = daemon.call("POST", "/v1/keys", {"role": "operator", "name": name})
    return k["key"], k["id"]


def test_people_are_created_read_replaced_and_removed(daemon):
    _, key_id = _operator(daemon, _name("laptop"))
    name = _name("ann")
    with Client(daemon.url, daemon.admin) as admin:
        ann = admin.create_person(name, groups=["dba"], keys=[key_id], chat={"slack": f"U{uuid.uuid4().hex[:8].upper()}"})
        assert isinstance(ann, Person)
        assert (ann.name, ann.groups, ann.keys) == (name, ["dba"], [key_id])
        assert ann.chat["slack"].startswith("U")
        assert admin.get_person(ann.id) == ann
        assert name in [p.name for p in admin.people()]
        # Each identity is one person's.
        with pytest.raises(ApiError) as e:
            admin.create_person(_name("bob"), keys=[key_id])
        assert e.value.status == 409
        replaced = admin.update_person(ann.id, name, groups=["sre"])
        assert (replaced.groups, replaced.keys, replaced.chat) == (["sre"], [], {})
        admin.delete_person(ann.id)
        with pytest.raises(ApiError) as e:
            admin.get_person(ann.id)
        assert e.value.status == 404
    # Operators do not keep people.
    op_key, _ = _operator(daemon, _name("op"))
    with Client(daemon.url, op_key) as op:
        with pytest.raises(ApiError) as e:
            op.people()
        assert e.value.status == 403


def test_a_quorum_of_two_people_and_an_approver_rule(daemon):
    ann, bea, carl = _name("rel-ann"), _name("rel-bea"), _name("carl")
    profile = {
        "allow": [],
        "ask": ["(?s).*"],
        "approvals": [{"pattern": "tool:deploy:prod.*", "count": 2, "approvers": ["rel-*"]}],
    }
    agent = daemon.agent(profile)
    agent_key = daemon.key("agent", agent)
    made = {n: _operator(daemon, n) for n in (ann, bea, carl)}
    keys = {n: k for n, (k, _) in made.items()}
    nobody_key, _ = _operator(daemon, _name("rel-nobody"))
    # Only people count toward a quorum: each key is its own person's, of
    # the same name, which the approver rule matches.
    with Client(daemon.url, daemon.admin) as admin:
        for n, (_, i) in made.items():
            admin.create_person(n, keys=[i])
    who = {n: n for n in made}
    with Client(daemon.url, agent_key) as bot:
        action = bot.request("deploy", "prod eu", timeout="5m")
    assert action.status == "pending"
    with Client(daemon.url, keys[carl]) as c:
        with pytest.raises(ApiError) as e:
            c.approve(action.id)
        assert e.value.status == 403
        assert "approvals rule #0" in e.value.detail
    with Client(daemon.url, keys[ann]) as a:
        one = a.approve(action.id, note="ok")
        assert one.status == "pending"
        assert one.approvals_required == 2
        assert [x["who"] for x in one.approvals] == [who[ann]]
        # Ann's approval sent again stands, and counts once.
        again = a.approve(action.id)
        assert again.status == "pending"
        assert [x["who"] for x in again.approvals] == [who[ann]]
    # A key that is nobody's could be Ann's second: it does not count.
    with Client(daemon.url, nobody_key) as n:
        with pytest.raises(ApiError) as e:
            n.approve(action.id)
        assert e.value.status == 403
        assert "belongs to no person" in e.value.detail
    with Client(daemon.url, keys[bea]) as b:
        two = b.approve(action.id)
    assert two.status == "approved"
    assert [x["who"] for x in two.approvals] == [who[ann], who[bea]]
    assert two.decided_person == who[bea]
    assert two.decided_channel == "api"


def test_an_approver_edits_the_detail_before_approving(daemon):
    agent = daemon.agent({"allow": [], "ask": ["(?s).*"], "deny": ["tool:bash:rm .*"]})
    agent_key = daemon.key("agent", agent)
    op_key, _ = _operator(daemon, _name("editor"))
    with Client(daemon.url, agent_key) as bot:
        action = bot.request("bash", "make deploy-all", timeout="5m")
    with Client(daemon.url, op_key) as op:
        # An edit the profile denies is refused, and it stays pending.
        with pytest.raises(ApiError) as e:
            op.approve(action.id, detail="rm -rf /srv")
        assert e.value.status == 422
        assert op.get(action.id).status == "pending"
        done = op.approve(action.id, detail="make deploy-eu")
    assert done.status == "approved" and done.edited
    assert done.raw["approved_detail"] == "make deploy-eu"


def test_the_async_client_has_the_same_calls(daemon):
    name = _name("async")

    async def main():
        async with AsyncClient(daemon.url, daemon.admin) as admin:
            p = await admin.create_person(name, groups=["g"])
            assert (await admin.get_person(p.id)).name == name
            assert name in [x.name for x in await admin.people()]
            assert (await admin.update_person(p.id, name)).groups == []
            await admin.delete_person(p.id)

    asyncio.run(main())
    assert actiongate.Person is Person
