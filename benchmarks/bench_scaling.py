"""How the cost per event (BOINC model) and per lease (lease scheduler) grows with the size of a run.

Target (issue 25): both flat within 10 % from the smallest to the largest size; the fitted exponent
``b`` of ``cost = a * size**b`` is printed (1.0 is linear).

* BOINC, no QoS, on ``nd`` (183 nodes: always saturated, so only the number of tasks grows) and on
  ``seti`` (30,300 nodes: 3 replicas of 2,500 tasks keep 7,500 hosts busy, of 80,000 all of them, so
  the set of concurrent events grows too): homogeneous bags of 2,500 to 80,000 tasks of 60,000
  operations, seed 1.
* The SimGrid scenario of ``bench_simgrid.py`` (``skylease.sim.volatile``: the kernel and the
  dispatch core; seti-like hosts, 10 tasks a host, seed 1) and ``skylease simulate spequlos
  --middleware boinc --trace seti --nodes N --days 14 --bot M:3600`` with its default strategy
  (9C-C-R; the run with QoS), both at 1,000 hosts / 10,000 tasks, 10,000 / 100,000 and 100,000 /
  1,000,000 (issue 41: flat within 10 % from 10k to 1M tasks).
* Lease scheduler, NOVM-NOSR: (a) the first 15, 30, 45 and 60 days of ``blue_60days.swf`` (the mix
  of jobs changes along the log: later days queue more, so each lease is tried more often), and
  (b) the first 15 days repeated 1 to 4 times, each copy 15 days after the previous one (the same
  work per lease at every size: what the scheduler's own data structures cost).

Times are this process's CPU seconds (``time.process_time``), one run after the other: the machine
is shared, and CPU time is what a run costs. BOINC: each size is run ``--repeat`` times (default 3)
and the least CPU time is kept (a run at 2,500 tasks lasts 40 ms, and another process on the same
cores evicts its caches). Leases: ``--repeat`` rounds in which the sizes alternate; the least and the
median of each size's runs are printed, each with its verdict (the 15-day run's CPU time is bimodal
here, 113-117 or 131-138 us a lease, so the least alone flatters the smallest size).
Kind: ablation-free self-measurement (no peer).

With ``--instructions`` the BOINC, SimGrid-scenario and SpeQuloS rows are also counted in
instructions per event under valgrind (about 12, 25 and 40 minutes)
(deterministic): where those stay flat and the CPU time per event grows, the growth is the
memory hierarchy (more clients busy at once, more state out of the caches), not the algorithm.

    python benchmarks/bench_scaling.py [--only boinc|volatile|spequlos|leases] [--repeat N] [--instructions]
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("SKYLEASE_DATA", ROOT.parent / "shared" / "data"))
TASKS = (2_500, 10_000, 40_000, 80_000)
VOLATILE = ((1_000, 10_000), (10_000, 100_000), (100_000, 1_000_000))  # (hosts, tasks)
SPEQULOS = VOLATILE  # (nodes, tasks)
DAY = 86400


def exponent(sizes: list[float], costs: list[float]) -> float:
    """Least-squares slope of log(total cost) on log(size)."""
    return float(np.polyfit(np.log(sizes), np.log(costs), 1)[0])


def report(title: str, unit: str, rows: list[tuple[str, float, float]],
           medians: list[float] | None = None) -> None:
    """rows: (label, size, total CPU seconds: the least of the runs); medians: each size's median CPU
    seconds over the same runs, printed as a second verdict."""
    print(f"\n{title}")
    w = max(24, *(len(r[0]) for r in rows))
    print(f"{'size':>{w}} {'CPU s':>8} {unit:>12}")
    per = []
    for label, size, cpu in rows:
        per.append(cpu / size * 1e6)
        print(f"{label:>{w}} {cpu:8.3f} {per[-1]:12.2f}")
    b = exponent([r[1] for r in rows], [r[2] for r in rows])
    growth = per[-1] / per[0] - 1
    verdict = "flat within 10 %: met" if abs(growth) <= 0.10 else "NOT flat within 10 %"
    print(f"{'':>{w}} fitted exponent {b:.3f}; largest vs smallest {growth:+.1%} ({verdict})")
    if medians is not None:
        mper = [m / r[1] * 1e6 for m, r in zip(medians, rows, strict=True)]
        mg = mper[-1] / mper[0] - 1
        mverdict = "flat within 10 %: met" if abs(mg) <= 0.10 else "NOT flat within 10 %"
        print(f"{'':>{w}} medians {' '.join(f'{x:.2f}' for x in mper)} {unit}; largest vs smallest "
              f"{mg:+.1%} ({mverdict})")


def boinc_run(name: str, n: int, run: bool = True) -> tuple[int, float]:
    """One BOINC run of ``n`` homogeneous tasks on ``name``: its events and CPU seconds
    (``run=False``: build the run only, for :func:`boinc_instructions`)."""
    from skylease.experiments.spequlos import submission_time, trace_for
    from skylease.sim.dg.env import DesktopGridEnv
    from skylease.sim.dg.workload import DGBot

    flat = trace_for(name)  # built once per process
    env = DesktopGridEnv("boinc", flat, DGBot.homogeneous(n, 60_000.0, "BIG"),
                         submit_at=submission_time(flat, 1), seed=1)
    if not run:
        return 0, 0.0
    t = time.process_time()
    events = env.run().events
    return events, time.process_time() - t


def boinc(repeat: int = 3) -> None:
    from skylease.experiments.spequlos import trace_for

    for name in ("nd", "seti"):
        rows = []
        for n in TASKS:
            runs = [boinc_run(name, n) for _ in range(repeat)]
            events = runs[0][0]
            rows.append((f"{n:,} tasks, {events:,} ev", events, min(cpu for _, cpu in runs)))
        nodes = trace_for(name).n_nodes
        report(f"BOINC on {name} ({nodes:,} nodes), no QoS: CPU per event, least of {repeat} runs",
               "us/event", rows)


def _instructions(valgrind: str, name: str, n: int, run: bool, tasks: int = 0) -> tuple[int, int]:
    """Instructions of a child process doing :func:`boinc_run` (``name`` a trace) or
    :func:`volatile_run` (``name`` "volatile", ``n`` hosts) under valgrind, and its events."""
    p = subprocess.run([valgrind, "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
                        sys.executable, __file__, "--child", name, str(n), "run" if run else "build",
                        str(tasks)],
                       capture_output=True, text=True, check=True)
    ir = re.search(r"I\s+refs:\s+([\d,]+)", p.stderr)
    if ir is None:
        raise RuntimeError(f"no instruction count from valgrind: {p.stderr[-500:]}")
    return int(ir.group(1).replace(",", "")), int(p.stdout.split()[-1])


def boinc_instructions() -> None:
    """Instructions per event of ``env.run()`` of BOINC without QoS on each trace, at each of
    ``TASKS`` (see :func:`scenario_instructions`)."""
    for name in ("nd", "seti"):
        scenario_instructions(f"BOINC on {name}, no QoS", name, tuple((n, 0) for n in TASKS))


def volatile_run(hosts: int, tasks: int, run: bool = True) -> tuple[int, float]:
    """The SimGrid scenario (``skylease.sim.volatile``, seti-like, seed 1) at one size: its events
    and CPU seconds (``run=False``: generate and set up only, for :func:`scenario_instructions`)."""
    from skylease.sim.volatile import make_instance, volatile_env

    env = volatile_env(make_instance(hosts, tasks, seed=1))
    if not run:
        return 0, 0.0
    t = time.process_time()
    env.kernel.run()
    return env.result().events, time.process_time() - t


def volatile(repeat: int = 1) -> None:
    rows = []
    for hosts, tasks in VOLATILE:
        runs = [volatile_run(hosts, tasks) for _ in range(repeat)]
        rows.append((f"{hosts:,} h / {tasks:,} t, {runs[0][0]:,} ev", runs[0][0], min(c for _, c in runs)))
    report(f"The SimGrid scenario (bench_simgrid.py), seti-like: CPU per event, least of {repeat} runs",
           "us/event", rows)


class _Built(Exception):
    """Raised once a SpeQuloS run is built (``run=False`` of :func:`spequlos_run`)."""


def spequlos_run(nodes: int, tasks: int, run: bool = True) -> tuple[int, float]:
    """``skylease simulate spequlos --middleware boinc --trace seti --nodes NODES --days 14 --bot
    TASKS:3600`` with its default strategy (9C-C-R), the run with QoS only: its events and CPU
    seconds (``run=False``: the trace, the bag and the simulator built, not run)."""
    from skylease.experiments.spequlos import run_once

    def built(policy):
        if not run:
            raise _Built
        return policy

    t = time.process_time()
    try:
        row = run_once("boinc", "seti", f"{tasks}:3600", "9C-C-R", 1, nodes=nodes, days=14.0, wrap=built)
    except _Built:
        return 0, 0.0
    return row["events"], time.process_time() - t


def spequlos(repeat: int = 1) -> None:
    from skylease.experiments.spequlos import trace_for

    rows = []
    for nodes, tasks in SPEQULOS:
        trace_for("seti", n_nodes=nodes, duration_s=14 * DAY)  # generated (and cached) before the clock
        runs = [spequlos_run(nodes, tasks) for _ in range(repeat)]
        rows.append((f"{nodes:,} n / {tasks:,} t, {runs[0][0]:,} ev", runs[0][0], min(c for _, c in runs)))
    report(f"simulate spequlos, BOINC, 9C-C-R, generated seti grids: CPU per event (with the trace read and "
           f"the bag built), least of {repeat} runs", "us/event", rows)


def scenario_instructions(title: str, name: str, sizes: tuple[tuple[int, int], ...]) -> None:
    """Instructions per event of the run at each (hosts, tasks) of ``sizes`` (``name``: "volatile"
    or "spequlos", the child's run; a trace's name, with (tasks, 0) sizes, for BOINC without QoS),
    counted by valgrind: deterministic, so neither the machine's load nor its caches move them.
    Each size runs twice in its own process, once building the run only: the difference is the
    run's own instructions."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        print("\n--instructions needs valgrind (Debian: apt-get install valgrind)")
        return
    print(f"\n{title}: instructions of the run per event (valgrind --tool=cachegrind)")
    print(f"{'size':>34} {'run instructions':>18} {'per event':>10}")
    per = []
    for hosts, tasks in sizes:
        total, events = _instructions(valgrind, name, hosts, True, tasks)
        setup, _ = _instructions(valgrind, name, hosts, False, tasks)
        per.append((total - setup) / events)
        size = f"{hosts:,} tasks" if not tasks else f"{hosts:,} h / {tasks:,} t"
        print(f"{f'{size}, {events:,} ev':>34} {total - setup:18,} {per[-1]:10,.0f}", flush=True)
    growth = per[-1] / per[0] - 1
    verdict = "flat within 10 %" if abs(growth) <= 0.10 else "NOT flat within 10 %"
    print(f"{'':>34} largest vs smallest {growth:+.1%} ({verdict})")


def leases(repeat: int = 1) -> None:
    from skylease.control.leases import SchedulerConfig
    from skylease.sim.leases import be_leases, simulate_leases
    from skylease.traces.swf import best_effort_requests, read_swf

    req = best_effort_requests(read_swf(DATA / "swf" / "blue_60days.swf"))

    def cost(ls) -> float:
        t = time.process_time()
        simulate_leases(ls, config=SchedulerConfig.novm_nosr())
        return time.process_time() - t

    def rounds(title: str, workloads: list[tuple[str, list]]) -> None:
        # the sizes alternate within a round, so that a slow moment of a shared machine hits all
        # of them alike; a size's runs are bimodal here (a 0.36 s run moves by 15 %), hence the
        # median beside the least
        cpus: list[list[float]] = [[] for _ in workloads]
        for _ in range(repeat):
            for i, (_, ls) in enumerate(workloads):
                cpus[i].append(cost(ls))
        rows = [(f"{label}, {len(ls):,} leases", len(ls), min(c)) for (label, ls), c in zip(workloads, cpus,
                                                                                          strict=True)]
        report(f"{title}: CPU per lease, least of {repeat} runs", "us/lease", rows,
               [statistics.median(c) for c in cpus] if repeat > 1 else None)

    rounds("Lease scheduler, NOVM-NOSR, blue_60days.swf cut at 15-60 days",
           [(f"{days} days", be_leases(req[req["submit"] < days * DAY].reset_index(drop=True)))
            for days in (15, 30, 45, 60)])

    import pandas as pd

    first = req[req["submit"] < 15 * DAY]
    workloads = []
    for k in (1, 2, 3, 4):
        copies = []
        for c in range(k):
            part = first.copy()
            part["submit"] = part["submit"] + c * 15 * DAY
            part["job"] = part["job"] + c * (int(first["job"].max()) + 1)
            copies.append(part)
        workloads.append((f"15 days x {k}", be_leases(pd.concat(copies).reset_index(drop=True))))
    rounds("Lease scheduler, NOVM-NOSR, the first 15 days repeated 1-4 times", workloads)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", choices=("boinc", "volatile", "spequlos", "leases"), default=None)
    ap.add_argument("--repeat", type=int, default=3,
                    help="runs per size, the least CPU time kept (leases: alternating rounds, median too)")
    ap.add_argument("--instructions", action="store_true",
                    help="also count instructions per event under valgrind (BOINC about 12 minutes, the "
                         "SimGrid scenario 25, simulate spequlos 40)")
    ap.add_argument("--child", nargs=4, metavar=("TRACE", "SIZE", "WHAT", "TASKS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:  # one run under valgrind (--instructions)
        name, size, run, tasks = args.child[0], int(args.child[1]), args.child[2] == "run", int(args.child[3])
        child = {"volatile": volatile_run, "spequlos": spequlos_run}.get(name)
        print((child(size, tasks, run) if child else boinc_run(name, size, run))[0])
        return
    print(f"Python {platform.python_version()}, {platform.machine()}, load {os.getloadavg()[0]:.1f}; "
          f"CPU time of this process")
    if args.only in (None, "boinc"):
        boinc(max(1, args.repeat))
        if args.instructions:
            boinc_instructions()
    if args.only in (None, "volatile"):
        volatile(max(1, args.repeat))
        if args.instructions:
            scenario_instructions("The SimGrid scenario, seti-like", "volatile", VOLATILE)
    if args.only in (None, "spequlos"):
        spequlos(max(1, args.repeat))
        if args.instructions:
            scenario_instructions("simulate spequlos, BOINC, 9C-C-R", "spequlos", SPEQULOS)
    if args.only in (None, "leases"):
        leases(max(1, args.repeat))


if __name__ == "__main__":
    main()
