"""Whole-process lease simulation beside a peer: ``skylease leases simulate`` and AccaSim's EASY
backfilling on the same SWF log, each as the command a user runs (start-up, reading the log,
simulating, printing), paired in the same run.

Target (issue 25): ``leases simulate`` on the 30-day Blue Horizon log faster than AccaSim's best
whole-process time.

Kind: **peer** (AccaSim 1.1.3, ``pip install accasim``; the ``bench`` extra). Ours runs the default
configuration ``NOVM-NOSR``: no VMs, no suspension, aggressive backfilling (one queued lease holds a
future reservation), the closest to AccaSim's ``EASYBackfilling`` + ``FirstFit``
(``benchmarks/accasim_easy.py``). Both see 144 nodes of one CPU and jobs asking for their
requested-processors field in nodes. Model differences: ours drops the jobs cancelled while queued
(437 of 5,545) and clamps a run time to ``[1, requested]`` (decision H15 in docs/decisions/haizea.md), AccaSim
runs every job for its logged run time; ours is Haizea's lease model (a slot table of reservations, leases
preempted by advance reservations, none here), AccaSim's a job queue over a resource manager; ours
prints the paper's metrics and a per-lease summary, AccaSim (its outputs off) nothing.

Each round runs ours and then AccaSim (paired: about the same machine load for both); the table
gives medians over the rounds of the wall time and of the CPU time (user + system, ``os.wait4``),
AccaSim's best (minimum) wall time, and the ratio AccaSim / ours of each round's wall times.

    python benchmarks/bench_leases_whole.py [--rounds 7] [--log blue_30days.swf]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def data_dir() -> Path:
    env = os.environ.get("SKYLEASE_DATA", "").strip()
    return Path(env) if env else ROOT.parent / "shared" / "data"


def run(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one process (which must succeed)."""
    t = time.perf_counter()
    p = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    err = p.stderr.read().decode(errors="replace") if p.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{' '.join(argv)} failed:\n{err}")
    return wall, usage.ru_utime + usage.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--log", default="blue_30days.swf", help="an SWF file, or a name in the data's swf/")
    args = ap.parse_args()
    if importlib.util.find_spec("accasim") is None:
        sys.exit("AccaSim is not installed: pip install accasim (or the bench extra)")
    log = Path(args.log) if Path(args.log).exists() else data_dir() / "swf" / args.log
    # as installed programs run: bytecode cached (the first, untimed, round writes it)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    cmds = {
        "skylease leases simulate (NOVM-NOSR)": [sys.executable, "-m", "skylease", "leases", "simulate",
                                                 "--workload", str(log)],
        "AccaSim EASYBackfilling + FirstFit": [sys.executable, str(ROOT / "benchmarks" / "accasim_easy.py"),
                                               str(log)],
    }
    for argv in cmds.values():
        run(argv, env)
    walls: dict[str, list[float]] = {k: [] for k in cmds}
    cpus: dict[str, list[float]] = {k: [] for k in cmds}
    for _ in range(args.rounds):
        for k, argv in cmds.items():
            w, c = run(argv, env)
            walls[k].append(w)
            cpus[k].append(c)
    ours, peer = cmds
    ratios = [p / o for o, p in zip(walls[ours], walls[peer], strict=True)]
    load = os.getloadavg()[0]
    print(f"{log.name}, {args.rounds} paired rounds; {platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, load {load:.1f}")
    print("| command | wall s (median) | wall s (best) | CPU s (median) |")
    print("|---|---:|---:|---:|")
    for k in cmds:
        print(f"| {k} | {statistics.median(walls[k]):.3f} | {min(walls[k]):.3f} | "
              f"{statistics.median(cpus[k]):.3f} |")
    best = min(walls[peer])
    print(f"AccaSim / ours, wall, median of the rounds' ratios: {statistics.median(ratios):.2f}x; "
          f"ours (median {statistics.median(walls[ours]):.3f} s) "
          f"{'<' if statistics.median(walls[ours]) < best else '>='} AccaSim's best ({best:.3f} s): "
          f"{'met' if statistics.median(walls[ours]) < best else 'not met'}")


if __name__ == "__main__":
    main()
