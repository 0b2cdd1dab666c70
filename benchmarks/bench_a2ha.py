"""A2HA speed and agreement: skylease's policy on the event simulator vs a plain reference simulator.

Target (issue 5): a 200-ordering run of the OutSystems-like workload (1480 tasks) in under 10 s on
one core. The reference (``a2ha_ref.py``) is a standalone heap-based simulator of decision ALG
(docs/decisions/a2ha.md) written
independently, without skylease: it is what a researcher would hand-write for one experiment. Ours
runs the same policy object that drives real workers, through the Environment protocol.

Both run in this process, one core, same workloads and parameters (conservative 0.5/0.5). The two
draw different orderings, so agreement is statistical: means of hosts, wall time and charged hours
over the orderings, printed side by side.

    python benchmarks/bench_a2ha.py [--orderings 200] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from a2ha_ref import run_orderings as ref_orderings
from skylease.experiments.a2ha import make_policy, run_orderings, workload
from skylease.traces.bot import a2ha_workload

TARGET_S = 10.0


def ours(name: str, orderings: int, seed: int) -> tuple[float, list[dict]]:
    t = time.perf_counter()
    rows = run_orderings(make_policy("a2ha:conservative"), workload(name), orderings, seed)
    return time.perf_counter() - t, rows


def reference(name: str, orderings: int, seed: int) -> tuple[float, list[dict]]:
    if name in ("image", "outsystems"):
        src = np.array([t.work for t in a2ha_workload(name).tasks])
    else:
        def src(s: int) -> np.ndarray:
            return np.array([t.work for t in a2ha_workload(name, seed=s).tasks])
    t = time.perf_counter()
    rows = ref_orderings(src, orderings, seed, cr0=0.5, ir=0.5)
    return time.perf_counter() - t, rows


def stat(rows: list[dict], key: str, scale: float = 1.0) -> str:
    v = np.array([r[key] for r in rows], float) * scale
    return f"{v.mean():7.2f} ± {v.std():6.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--orderings", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}; load average {os.getloadavg()[0]:.2f}")
    print(f"\nSpeed: {a.orderings} orderings of the OutSystems-like workload (1480 tasks), one core, "
          f"best of {a.repeat}")
    t_ours = min(ours("outsystems", a.orderings, s)[0] for s in range(a.repeat))
    t_ref = min(reference("outsystems", a.orderings, s)[0] for s in range(a.repeat))
    print(f"  skylease (policy via Environment protocol on the event kernel): {t_ours:6.2f} s")
    print(f"  plain reference simulator (a2ha_ref.py, decision ALG only):     {t_ref:6.2f} s")
    print(f"  ratio reference/skylease: {t_ref / t_ours:.2f}x")
    print(f"  target < {TARGET_S:.0f} s: {'MET' if t_ours < TARGET_S else 'NOT MET'} ({t_ours:.2f} s)")

    print(f"\nAgreement, {a.orderings} orderings each (mean ± sd):")
    print(f"  {'workload':<11} {'impl':<9} {'hosts':>16} {'wall (min)':>16} {'charged (h)':>16} "
          f"{'interrupted':>16}")
    for name in ("synthetic", "image", "outsystems"):
        for label, fn in (("skylease", ours), ("reference", reference)):
            _, rows = fn(name, a.orderings, 1)
            print(f"  {name:<11} {label:<9} {stat(rows, 'hosts'):>16} {stat(rows, 'wall_s', 1 / 60):>16} "
                  f"{stat(rows, 'charged_hours'):>16} {stat(rows, 'interrupted_tasks'):>16}")


if __name__ == "__main__":
    main()
