#!/usr/bin/env python3
"""Cross-node wake for bench/cluster/run.sh: an agent long-polls an action
on daemon A, an operator approves it on daemon B; the time from the
approval to the long-poll's answer, over ROUNDS rounds.

    wake.py BASE_A BASE_B AGENT_KEY_FILE OPERATOR_KEY_FILE ROUNDS

Prints one line per round ("sent_ms answered_ms": the wake measured from
when the approval was sent and from when its answer arrived) and a summary
line. Standard library only; keys are read from files, never argv.
"""
import http.client
import json
import sys
import threading
import time
import urllib.parse


def call(base, method, path, key, body=None):
    url = urllib.parse.urlparse(base)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
    headers = {"authorization": "Bearer " + key}
    data = None
    if body is not None:
        data = json.dumps(body)
        headers["content-type"] = "application/json"
    conn.request(method, path, body=data, headers=headers)
    resp = conn.getresponse()
    raw = resp.read()
    conn.close()
    if resp.status // 100 != 2:
        sys.exit(f"{method} {base}{path}: {resp.status} {raw[:300]!r}")
    return json.loads(raw)


def pct(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, max(0, int(round(p / 100 * len(s) + 0.5)) - 1))]


def main():
    base_a, base_b, agent_file, operator_file, rounds = sys.argv[1:6]
    agent = open(agent_file).read().strip()
    operator = open(operator_file).read().strip()
    sent, answered = [], []
    for i in range(int(rounds)):
        action = call(base_a, "POST", "/v1/actions", agent, {"tool": "bash", "detail": f"make {i}"})
        assert action["status"] == "pending", action
        woke = {}

        def wait():
            got = call(base_a, "GET", f"/v1/actions/{action['id']}?wait=30", agent)
            woke["at"] = time.perf_counter()
            woke["status"] = got["status"]

        waiter = threading.Thread(target=wait)
        waiter.start()
        time.sleep(0.1)  # the long-poll is registered on A
        t_sent = time.perf_counter()
        call(base_b, "POST", f"/v1/actions/{action['id']}/approve", operator)
        t_answered = time.perf_counter()
        waiter.join()
        assert woke["status"] == "approved", woke
        sent.append((woke["at"] - t_sent) * 1000)
        answered.append((woke["at"] - t_answered) * 1000)
        print(f"{sent[-1]:.2f} {answered[-1]:.2f}")
    print(
        f"cross-node wake over {len(sent)} rounds: from the approval sent p50 "
        f"{pct(sent, 50):.1f} ms, p99 {pct(sent, 99):.1f} ms; from its answer p50 "
        f"{pct(answered, 50):.1f} ms, p99 {pct(answered, 99):.1f} ms"
    )


if __name__ == "__main__":
    main()
