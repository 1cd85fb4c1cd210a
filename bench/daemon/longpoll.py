"""Long-poll load client for the actiongate daemon (loopback only).

Two measurements, each bounded in count and time:

  latency  N agents' actions wait for a human, N long-polls
           (GET /v1/actions/{id}?wait=60) are open on them, and an operator
           approves them one after another. For each, the latency is the
           time from sending the approval to the waiting request receiving
           its answer. Reports p50/p90/p99/max.

  idle     N long-polls held open at once on N pending actions; reports the
           daemon's resident memory (VmRSS of --pid) before and with them
           open, read once the daemon's long-poll gauge says all are waiting.

Usage: python longpoll.py latency|idle --base URL --agent-key K
       --operator-key K --pid PID [-n N]
"""

import argparse
import asyncio
import json
import re
import statistics
import sys
import time

import aiohttp

TIMEOUT = aiohttp.ClientTimeout(total=120)


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


async def waiting(session, base):
    async with session.get(f"{base}/metrics") as r:
        text = await r.text()
    m = re.search(r"^actiongate_long_polls_waiting (\S+)$", text, re.M)
    return int(float(m.group(1))) if m else 0


async def create_pending(session, base, key, n, concurrency=64):
    """N pending actions (the agent's profile asks about everything)."""
    ids = []
    sem = asyncio.Semaphore(concurrency)
    headers = {"authorization": f"Bearer {key}"}

    async def one(i):
        async with sem:
            body = {"tool": "deploy", "detail": f"service-{i}", "timeout": "30m"}
            async with session.post(f"{base}/v1/actions", json=body, headers=headers) as r:
                a = await r.json()
                if r.status != 201 or a["status"] != "pending":
                    raise RuntimeError(f"expected a pending action, got {r.status} {a}")
                ids.append(a["id"])

    await asyncio.gather(*(one(i) for i in range(n)))
    return ids


async def poll(session, base, key, action_id, done_at):
    headers = {"authorization": f"Bearer {key}"}
    async with session.get(f"{base}/v1/actions/{action_id}?wait=60", headers=headers) as r:
        a = await r.json()
        done_at[action_id] = (time.perf_counter(), r.status, a.get("status"))


async def wait_for_waiters(session, base, n, limit_s=60):
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if await waiting(session, base) >= n:
            return
        await asyncio.sleep(0.1)
    raise RuntimeError(f"fewer than {n} long-polls registered after {limit_s}s")


def percentile(sorted_values, p):
    k = max(0, min(len(sorted_values) - 1, round(p / 100 * len(sorted_values) + 0.5) - 1))
    return sorted_values[k]


async def latency(args):
    connector = aiohttp.TCPConnector(limit=0, force_close=False)
    async with aiohttp.ClientSession(connector=connector, timeout=TIMEOUT) as session:
        ids = await create_pending(session, args.base, args.agent_key, args.n)
        done_at = {}
        polls = [asyncio.create_task(poll(session, args.base, args.agent_key, i, done_at)) for i in ids]
        await wait_for_waiters(session, args.base, args.n)
        sent_at = {}
        headers = {"authorization": f"Bearer {args.operator_key}"}
        for action_id in ids:
            sent_at[action_id] = time.perf_counter()
            async with session.post(
                f"{args.base}/v1/actions/{action_id}/approve", headers=headers
            ) as r:
                if r.status != 200:
                    raise RuntimeError(f"approve answered {r.status}: {await r.text()}")
                await r.read()
            # Let the waiter's answer be read before the next approval, so
            # each latency is one approval's, not a queue's.
            while action_id not in done_at:
                await asyncio.sleep(0)
        await asyncio.gather(*polls)
    bad = [v for v in done_at.values() if v[1] != 200 or v[2] != "approved"]
    if bad:
        raise RuntimeError(f"{len(bad)} long-polls did not end approved: {bad[:3]}")
    ms = sorted((done_at[i][0] - sent_at[i]) * 1000 for i in ids)
    return {
        "measure": "approval_to_waiter_ms",
        "long_polls": args.n,
        "p50": round(statistics.median(ms), 2),
        "p90": round(percentile(ms, 90), 2),
        "p99": round(percentile(ms, 99), 2),
        "max": round(ms[-1], 2),
    }


async def idle(args):
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector, timeout=TIMEOUT) as session:
        ids = await create_pending(session, args.base, args.agent_key, args.n)
        await asyncio.sleep(1)
        before = rss_kib(args.pid)
        done_at = {}
        polls = [asyncio.create_task(poll(session, args.base, args.agent_key, i, done_at)) for i in ids]
        await wait_for_waiters(session, args.base, args.n)
        await asyncio.sleep(1)
        with_polls = rss_kib(args.pid)
        open_now = await waiting(session, args.base)
        # Cancel them all by deciding: deny every action, which answers each poll.
        headers = {"authorization": f"Bearer {args.operator_key}"}
        sem = asyncio.Semaphore(64)

        async def deny(action_id):
            async with sem:
                async with session.post(
                    f"{args.base}/v1/actions/{action_id}/deny", headers=headers
                ) as r:
                    await r.read()

        await asyncio.gather(*(deny(i) for i in ids))
        await asyncio.gather(*polls)
    return {
        "measure": "idle_long_polls",
        "long_polls": open_now,
        "rss_before_mib": round(before / 1024, 1),
        "rss_with_polls_mib": round(with_polls / 1024, 1),
        "per_poll_kib": round((with_polls - before) / max(1, args.n), 2),
    }


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["latency", "idle"])
    p.add_argument("--base", required=True)
    p.add_argument("--agent-key", required=True)
    p.add_argument("--operator-key", required=True)
    p.add_argument("--pid", type=int, required=True)
    p.add_argument("-n", type=int, default=1000)
    args = p.parse_args()
    if not re.match(r"^http://(127\.\d+\.\d+\.\d+|localhost|\[::1\])(:\d+)?$", args.base):
        sys.exit("loopback addresses only")
    run = latency if args.mode == "latency" else idle
    result = asyncio.run(asyncio.wait_for(run(args), timeout=300))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
