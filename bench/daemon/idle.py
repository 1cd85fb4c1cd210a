"""Why a loaded machine sits idle, from `perf script -F
comm,pid,tid,cpu,time,event,trace` of sched_switch and sched_wakeup events
recorded on every CPU (see idle.sh).

    python3 idle.py SCRIPT_OUTPUT RATE DAEMON_TIDS

RATE is the load's requests per second; DAEMON_TIDS names the daemon's
threads, one "tid name" per line. Prints the CPUs' idle share during the
window as the trace sees it (the idle task on the CPU: interrupts handled
meanwhile count as idle here, so it reads higher than /proc/stat's idle);
how much of that idle time some thread had been woken and was waiting for
a CPU; and, per kind of thread woken (the daemon's by the names given; oha;
the rest) and what was running on the CPU the kernel put it on, wakeups
per request, how long the woken thread waited before it ran, and the sum
of those waits as a share of the window ("of the time": threads wait side
by side, so the shares add up to more than the idle time).
"""

import re
import sys
from collections import defaultdict

LINE = re.compile(r"^\s*.+?\s+\d+/\d+\s+\[(\d+)\]\s+([\d.]+):\s+sched:(\w+):\s+(.*)$")
SWITCH = re.compile(r"prev_pid=(\d+) .*prev_state=(\S+) ==> next_comm=(.*) next_pid=(\d+)")
STALE = 0.02
WAKEUP = re.compile(r"comm=(.*) pid=(\d+) .*target_cpu=(\d+)")


def main():
    path, rate, tids_path = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    daemon = dict(line.split(None, 1) for line in open(tids_path) if line.strip())
    daemon = {tid: name.strip() for tid, name in daemon.items()}
    events = []
    for line in open(path):
        m = LINE.match(line)
        if m:
            events.append((float(m[2]), int(m[1]), m[3], m[4]))
    if not events:
        sys.exit("no scheduler events recorded")
    events.sort(key=lambda e: e[0])

    def kind_of(tid, comm):
        if tid in daemon:
            return "daemon " + daemon[tid]
        return "oha" if comm == "oha" else "other"

    running = {}  # cpu -> (tid, comm); tid "0" when idle
    woken = {}  # tid -> (time, its kind, the kind of what ran where it was put)
    idle = with_woken = 0.0
    last = events[0][0]
    waits = defaultdict(list)
    for t, cpu, kind, rest in events:
        idle_cpus = sum(1 for tid, _ in running.values() if tid == "0")
        idle += (t - last) * idle_cpus
        # A wakeup whose switch the trace lost would count forever: a wait
        # over 20 ms is taken for one.
        if idle_cpus and any(t - since < STALE for since, _, _ in woken.values()):
            with_woken += (t - last) * idle_cpus
        last = t
        if kind == "sched_switch":
            m = SWITCH.search(rest)
            if not m:
                continue
            prev, state, comm, nxt = m[1], m[2], m[3], m[4]
            running[cpu] = (nxt, comm)
            if nxt in woken:
                since, who, under = woken.pop(nxt)
                waits[(who, under)].append(t - since)
            if prev != "0" and state.startswith("R"):
                # Preempted: runnable, but not a wakeup's wait.
                woken.pop(prev, None)
        elif kind == "sched_wakeup":
            m = WAKEUP.search(rest)
            if not m:
                continue
            comm, tid, target = m[1], m[2], int(m[3])
            if target in running and all(tid != r for r, _ in running.values()):
                there, there_comm = running[target]
                under = "(idle)" if there == "0" else kind_of(there, there_comm)
                woken[tid] = (t, kind_of(tid, comm), under)
    span = events[-1][0] - events[0][0]
    cpus = max(len(running), 1)
    requests = rate * span
    print("trace of %.2f s on %d CPUs: idle task %.1f%% of the time; a woken thread was waiting for a CPU"
          " during %.0f%% of that"
          % (span, cpus, 100 * idle / (span * cpus), 100 * with_woken / max(idle, 1e-9)))
    print("%-22s %-22s %11s %10s %8s %8s %11s"
          % ("woken", "put on a CPU running", "per request", "mean wait", "p50", "p90", "of the time"))
    for (who, under), vals in sorted(waits.items(), key=lambda kv: -sum(kv[1])):
        if len(vals) < requests / 1000:
            continue
        vals.sort()
        n = len(vals)
        print("%-22s %-22s %11.3f %7.0f us %5.0f us %5.0f us %9.0f%%"
              % (who, under, n / requests, 1e6 * sum(vals) / n, 1e6 * vals[n // 2],
                 1e6 * vals[int(n * 0.9)], 100 * sum(vals) / span))


if __name__ == "__main__":
    main()
