#!/usr/bin/env python3
"""Prints the median of every criterion benchmark under
$CARGO_TARGET_DIR/criterion (default ../../target/criterion) as a table,
plus actiongate-vs-Cedar ratios for the `cedar_comparison` group."""

import json
import os
import sys
from pathlib import Path

root = Path(os.environ.get("CARGO_TARGET_DIR", "../../target")) / "criterion"
if len(sys.argv) > 1:
    root = Path(sys.argv[1])

medians = {}
for bench in root.rglob("new/benchmark.json"):
    full_id = json.loads(bench.read_text())["full_id"]
    estimates = json.loads((bench.parent / "estimates.json").read_text())
    medians[full_id] = estimates["median"]["point_estimate"]


def fmt(ns):
    if ns < 1_000:
        return f"{ns:.1f} ns"
    if ns < 1_000_000:
        return f"{ns / 1_000:.2f} µs"
    return f"{ns / 1_000_000:.2f} ms"


print("| benchmark | median |")
print("| --- | ---: |")
for full_id in sorted(medians):
    print(f"| `{full_id}` | {fmt(medians[full_id])} |")

print()
print("| request | actiongate | Cedar (request prebuilt) | ratio | Cedar (request built per call) | ratio |")
print("| --- | ---: | ---: | ---: | ---: | ---: |")
prefix = "cedar_comparison/actiongate/"
for full_id in sorted(medians):
    if not full_id.startswith(prefix):
        continue
    case = full_id[len(prefix):]
    ours = medians[full_id]
    cedar = medians.get(f"cedar_comparison/cedar/{case}")
    built = medians.get(f"cedar_comparison/cedar_with_request/{case}")
    if cedar is None or built is None:
        continue
    print(
        f"| `{case}` | {fmt(ours)} | {fmt(cedar)} | {cedar / ours:.0f}x "
        f"| {fmt(built)} | {built / ours:.0f}x |"
    )
