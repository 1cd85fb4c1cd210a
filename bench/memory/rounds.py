"""Does memory come back after a burst of long-polls? (bench/memory/run.sh)

Creates N pending actions, then ROUNDS times: opens N long-polls
(GET /v1/actions/{id}?wait=60) at once, waits until the daemon's gauge
says all are waiting, reads the daemon's VmRSS ("with polls"), again
after HOLD seconds with them still open and idle ("polls held"; 0: at
once), closes every connection,
waits SETTLE seconds for the daemon to notice and free them, and reads
VmRSS again ("idle"). Prints one JSON object per round and a summary:
idle RSS of each round against the first's.

Usage: python3 rounds.py --base URL --agent-key K --pid PID
       [-n 10000] [--rounds 3] [--settle 10] [--hold 0]
"""

import argparse
import asyncio
import json
import re
import time

import aiohttp


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


async def gauge(session, base):
    async with session.get(f"{base}/metrics") as r:
        text = await r.text()
    m = re.search(r"^actiongate_long_polls_waiting (\S+)$", text, re.M)
    return int(float(m.group(1))) if m else 0


async def create_pending(base, key, n):
    ids = []
    sem = asyncio.Semaphore(64)
    headers = {"authorization": f"Bearer {key}"}
    async with aiohttp.ClientSession() as session:

        async def one(i):
            async with sem:
                body = {"tool": "deploy", "detail": f"service-{i}", "timeout": "60m"}
                async with session.post(f"{base}/v1/actions", json=body, headers=headers) as r:
                    a = await r.json()
                    if r.status != 201 or a["status"] != "pending":
                        raise RuntimeError(f"expected a pending action, got {r.status} {a}")
                    ids.append(a["id"])

        await asyncio.gather(*(one(i) for i in range(n)))
    return ids


async def burst(base, key, ids, pid, settle, hold):
    headers = {"authorization": f"Bearer {key}"}
    conn = aiohttp.TCPConnector(limit=0, force_close=True)
    session = aiohttp.ClientSession(connector=conn, timeout=aiohttp.ClientTimeout(total=120))

    async def poll(i):
        try:
            async with session.get(f"{base}/v1/actions/{i}?wait=60", headers=headers) as r:
                await r.read()
        except (asyncio.CancelledError, aiohttp.ClientError):
            pass

    tasks = [asyncio.create_task(poll(i)) for i in ids]
    async with aiohttp.ClientSession() as probe:
        deadline = time.monotonic() + 90
        while await gauge(probe, base) < len(ids):
            if time.monotonic() > deadline:
                raise RuntimeError("not every long-poll registered in 90 s")
            await asyncio.sleep(0.2)
        loaded = rss_kib(pid)
        # The same polls after `hold` seconds open and idle: what the burst
        # itself left behind (its requests' transient buffers) has been
        # purged by then (jemalloc's decay is 10 s).
        await asyncio.sleep(hold)
        held = rss_kib(pid)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await session.close()
        deadline = time.monotonic() + 60
        while await gauge(probe, base) > 0:
            if time.monotonic() > deadline:
                raise RuntimeError("long-polls still registered 60 s after closing")
            await asyncio.sleep(0.2)
    await asyncio.sleep(settle)
    return loaded, held, rss_kib(pid)


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("--base", required=True)
    p.add_argument("--agent-key", required=True)
    p.add_argument("--pid", type=int, required=True)
    p.add_argument("-n", type=int, default=10000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--settle", type=float, default=10)
    p.add_argument("--hold", type=float, default=0)
    a = p.parse_args()
    ids = await create_pending(a.base, a.agent_key, a.n)
    await asyncio.sleep(a.settle)
    before = rss_kib(a.pid)
    print(json.dumps({"round": 0, "idle_mib": round(before / 1024, 1)}), flush=True)
    idles = []
    for r in range(1, a.rounds + 1):
        loaded, held, idle = await burst(a.base, a.agent_key, ids, a.pid, a.settle, a.hold)
        idles.append(idle)
        print(json.dumps({"round": r, "with_polls_mib": round(loaded / 1024, 1),
                          "polls_held_mib": round(held / 1024, 1),
                          "idle_mib": round(idle / 1024, 1)}), flush=True)
    worst = max(idles) / idles[0]
    print(json.dumps({"summary": "idle RSS after each round, MiB",
                      "before": round(before / 1024, 1),
                      "idle": [round(i / 1024, 1) for i in idles],
                      "worst_vs_first": round(worst, 3),
                      "within_20_percent": worst <= 1.2}), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
