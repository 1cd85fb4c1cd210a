"""Summaries of bench/daemon/run.sh results.

  summary.py one FILE   one oha JSON result on a line
  summary.py table DIR  a Markdown table of every round in DIR, with ratios
"""

import json
import pathlib
import re
import sys


def oha(path):
    d = json.loads(pathlib.Path(path).read_text())
    statuses = {int(k): v for k, v in d["statusCodeDistribution"].items()}
    ok = sum(v for k, v in statuses.items() if 200 <= k < 300)
    seconds = d["summary"]["total"]
    return {
        "ok_per_s": ok / seconds,
        # `-z` ends the run by aborting the requests still in flight; those are
        # not failures of the daemon.
        "not_ok": sum(statuses.values())
        - ok
        + sum(v for k, v in d.get("errorDistribution", {}).items() if k != "aborted due to deadline"),
        "p50_ms": d["metrics"]["latency_ms"]["p50"],
        "p99_ms": d["metrics"]["latency_ms"]["p99"],
        "statuses": statuses,
    }


def one(path):
    r = oha(path)
    return (
        f"{r['ok_per_s']:,.0f} 2xx/s, p50 {r['p50_ms']:.2f} ms, p99 {r['p99_ms']:.2f} ms, "
        f"statuses {r['statuses']}, not 2xx or failed: {r['not_ok']}"
    )


def table(out):
    out = pathlib.Path(out)
    runs = sorted(
        {m.groups() for f in out.iterdir() if (m := re.match(r"r(\d+)-(\w+)-whoami\.json$", f.name))},
        key=lambda g: (int(g[0]), g[1]),
    )
    lines = [
        "| round | durability | whoami 2xx/s | check 2xx/s (p99 ms) | actions 2xx/s (p99 ms) "
        "| check / whoami | actions / check | approval→waiter p50 / p99 ms (1,000 polls) "
        "| RSS idle → 10,000 polls MiB |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for rnd, dur in runs:
        base = out / f"r{rnd}-{dur}"
        w = oha(f"{base}-whoami.json")
        c = oha(f"{base}-check.json")
        a = oha(f"{base}-actions.json")
        lat = json.loads(pathlib.Path(f"{base}-latency.json").read_text())
        idle = json.loads(pathlib.Path(f"{base}-idle.json").read_text())
        bad = w["not_ok"] + c["not_ok"] + a["not_ok"]
        lines.append(
            f"| {rnd} | {dur} | {w['ok_per_s']:,.0f} | {c['ok_per_s']:,.0f} ({c['p99_ms']:.1f}) "
            f"| {a['ok_per_s']:,.0f} ({a['p99_ms']:.1f}) "
            f"| {c['ok_per_s'] / w['ok_per_s']:.2f} | {a['ok_per_s'] / c['ok_per_s']:.2f} "
            f"| {lat['p50']:.2f} / {lat['p99']:.2f} "
            f"| {idle['rss_before_mib']:.0f} → {idle['rss_with_polls_mib']:.0f} "
            f"({idle['long_polls']:,} open) |"
            + (f" **{bad} requests not 2xx**" if bad else "")
        )
    return "\n".join(lines)


if __name__ == "__main__":
    mode, arg = sys.argv[1], sys.argv[2]
    print(one(arg) if mode == "one" else table(arg))
