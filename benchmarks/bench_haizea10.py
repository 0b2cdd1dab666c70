"""Haizea 1.0 configurations' speed: a 30-day Blue Horizon run with 10 % ARs, beside the 2008 NOVM-SR run.

Target (issue 22): ``skylease leases simulate --workload blue_30days.swf --inject
work_10-dur_2h-size_2medium.lwf --config haizea-1.0`` (suspend/resume, shutdown and migration
reservations, one transfer link, rescheduling after premature ends) under 60 s here. Haizea 1.0
itself needed 1,964 s for a 30-day Blue Horizon run with ARs under Python 3.11 (the port) and over
50 minutes under Python 2.7 (its published figures; not re-run here).

The reference, in the same run, is the same workload under the paper's NOVM-SR configuration (the
2008 rules the speed work of ``bench_leases.py`` was measured on). Each configuration is timed in
this process through the function the command calls (``simulate_workload``: reading the files,
scheduling, the records), one after the other (one core); then the target command itself runs in
a subprocess (Python's start and imports included).

    python benchmarks/bench_haizea10.py [--no-transfers] [--no-command]
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from skylease.experiments.leases import simulate_workload

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("SKYLEASE_DATA", ROOT.parent / "shared" / "data"))
WORKLOAD = DATA / "swf" / "blue_30days.swf"
INJECT = DATA / "lwf" / "injected" / "30days" / "work_10-dur_2h-size_2medium.lwf"
TARGET_S = 60.0
HAIZEA_PORT_S = 1964  # Haizea 1.0 under Python 3.11 (the port), published
HAIZEA_PY27_S = 50 * 60  # "over 50 minutes" under Python 2.7, published


def timed(config: str) -> tuple[float, dict]:
    """Seconds to simulate the workload under ``config``, and the run's summary."""
    t0 = time.perf_counter()
    sim = simulate_workload(WORKLOAD, INJECT, config)
    sim.records()  # what the command prints from (--json): part of its time
    return time.perf_counter() - t0, sim.summary()


def command_s(config: str) -> float:
    """Wall seconds of the target command itself, in a fresh process."""
    exe = Path(sys.executable).with_name("skylease")
    argv = [str(exe) if exe.exists() else "skylease", "leases", "simulate", "--workload", str(WORKLOAD),
            "--inject", str(INJECT), "--config", config]
    t0 = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-transfers", action="store_true", help="skip the haizea-1.0-transfers row")
    ap.add_argument("--no-command", action="store_true", help="skip the subprocess run of the command")
    args = ap.parse_args()
    print(f"machine: {platform.machine()} {platform.processor() or ''}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}")
    print(f"workload: {WORKLOAD.name} + {INJECT.name}")
    configs = ["NOVM-SR", "haizea-1.0"] + ([] if args.no_transfers else ["haizea-1.0-transfers"])
    print(f"{'config':>22} {'leases':>7} {'events':>7} {'ARs ok/rej':>11} {'all BE done (s)':>16} "
          f"{'seconds':>8}")
    times = {}
    for config in configs:
        s, summary = timed(config)
        times[config] = s
        ars = f"{summary['ar_accepted']}/{summary['ar_rejected']}"
        print(f"{config:>22} {summary['leases']:>7} {summary['events']:>7} {ars:>11} "
              f"{summary['all_best_effort_s']:>16,} {s:>8.2f}", flush=True)
    ours = times["haizea-1.0"]
    print(f"haizea-1.0 / NOVM-SR: {ours / times['NOVM-SR']:.2f}x")
    if not args.no_command:
        ours = command_s("haizea-1.0")
        print(f"the command (haizea-1.0, fresh process): {ours:.2f} s")
    print(f"Haizea 1.0 itself (published): {HAIZEA_PORT_S:,} s under Python 3.11 (the port, "
          f"{HAIZEA_PORT_S / ours:.0f}x ours), over {HAIZEA_PY27_S // 60} min under Python 2.7")
    print(f"target: haizea-1.0 with 10 % ARs under {TARGET_S:.0f} s: {ours:.2f} s, "
          f"{'met' if ours < TARGET_S else 'NOT met'}")


if __name__ == "__main__":
    main()
