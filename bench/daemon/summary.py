"""Summaries of bench/daemon/run.sh results.

  summary.py one FILE...  one load's oha JSON results (its windows) on a line
  summary.py table DIR    a Markdown table of every round in DIR, with ratios

A load measured in several windows counts as one run of their total length:
its throughput is all 2xx answers over all windows' seconds, its p50 the
median of the windows' and its p99 the highest of them.
"""

import json
import pathlib
import re
import statistics
import sys


def oha(path):
    d = json.loads(pathlib.Path(path).read_text())
    statuses = {int(k): v for k, v in d["statusCodeDistribution"].items()}
    ok = sum(v for k, v in statuses.items() if 200 <= k < 300)
    return {
        "ok": ok,
        "seconds": d["summary"]["total"],
        # `-z` ends the run by aborting the requests still in flight; those are
        # not failures of the daemon.
        "not_ok": sum(statuses.values())
        - ok
        + sum(v for k, v in d.get("errorDistribution", {}).items() if k != "aborted due to deadline"),
        "p50_ms": d["metrics"]["latency_ms"]["p50"],
        "p99_ms": d["metrics"]["latency_ms"]["p99"],
        "statuses": statuses,
    }


def windows(paths):
    """One load's windows (oha JSON files) taken together."""
    runs = [oha(p) for p in paths]
    statuses = {}
    for r in runs:
        for k, v in r["statuses"].items():
            statuses[k] = statuses.get(k, 0) + v
    return {
        "ok_per_s": sum(r["ok"] for r in runs) / sum(r["seconds"] for r in runs),
        "by_window": [r["ok"] / r["seconds"] for r in runs],
        "not_ok": sum(r["not_ok"] for r in runs),
        "p50_ms": statistics.median(r["p50_ms"] for r in runs),
        "p99_ms": max(r["p99_ms"] for r in runs),
        "statuses": statuses,
    }


def one(paths):
    r = windows(paths)
    return (
        f"{r['ok_per_s']:,.0f} 2xx/s in {len(paths)} window(s), p50 {r['p50_ms']:.2f} ms, "
        f"p99 {r['p99_ms']:.2f} ms, "
        f"statuses {r['statuses']}, not 2xx or failed: {r['not_ok']}"
    )


def window_files(out, prefix, name):
    """`<prefix>-<name>-w<n>.json` in `out`, by `n`."""
    files = out.glob(f"{prefix}-{name}-w*.json")
    return sorted(files, key=lambda f: int(re.search(r"-w(\d+)\.json$", f.name).group(1)))


def table(out):
    out = pathlib.Path(out)
    runs = sorted(
        {m.groups() for f in out.iterdir() if (m := re.match(r"r(\d+)-(\w+)-whoami-w1\.json$", f.name))},
        key=lambda g: (int(g[0]), g[1]),
    )
    lines = [
        "| round | durability | whoami 2xx/s | check 2xx/s (p99 ms) | actions 2xx/s (p99 ms) "
        "| check / whoami | actions / check (by window) "
        "| approval→waiter p50 / p99 ms (1,000 polls) | RSS idle → 10,000 polls MiB |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for rnd, dur in runs:
        base = out / f"r{rnd}-{dur}"
        w, c, a = (windows(window_files(out, base.name, name)) for name in ("whoami", "check", "actions"))
        by_window = [y / x for x, y in zip(c["by_window"], a["by_window"])]
        lat = json.loads(pathlib.Path(f"{base}-latency.json").read_text())
        idle = json.loads(pathlib.Path(f"{base}-idle.json").read_text())
        bad = w["not_ok"] + c["not_ok"] + a["not_ok"]
        lines.append(
            f"| {rnd} | {dur} | {w['ok_per_s']:,.0f} | {c['ok_per_s']:,.0f} ({c['p99_ms']:.1f}) "
            f"| {a['ok_per_s']:,.0f} ({a['p99_ms']:.1f}) "
            f"| {c['ok_per_s'] / w['ok_per_s']:.2f} "
            f"| {a['ok_per_s'] / c['ok_per_s']:.2f} ({min(by_window):.2f}-{max(by_window):.2f}) "
            f"| {lat['p50']:.2f} / {lat['p99']:.2f} "
            f"| {idle['rss_before_mib']:.0f} → {idle['rss_with_polls_mib']:.0f} "
            f"({idle['long_polls']:,} open) |"
            + (f" **{bad} requests not 2xx**" if bad else "")
        )
    return "\n".join(lines)


if __name__ == "__main__":
    mode, args = sys.argv[1], sys.argv[2:]
    print(one(args) if mode == "one" else table(args[0]))
