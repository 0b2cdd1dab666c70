"""VM placement speed: the thesis's full chapter-6 grid, skylease against a plain pure-Python reading.

Target (issue 9): the full reproduction grid, 6 users shares x 10 sizes x 30 instances x 5
heuristics (FF, FFD, BF, Sorting, similar times) = 9,000 placements with their Model C energy, in
under 60 s on this 2-core machine.

The reference is ``tests/planning/placement_reference.py``: the heuristics written straight from
the pseudo-code in pure Python (lists, ``sorted`` with tuple keys, the desktop list re-sorted after
every Sorting placement, Eq. 6.10 as a loop). Both run in this process, one core, on the same
pre-drawn instances, and the script asserts that every placement is identical and every energy
equal (relative 1e-9). Then it times ours end to end: the reproduction's campaign (instance
generation, placement, energy, result table) as ``skylease reproduce thesis-placement`` runs it.

    python benchmarks/bench_placement.py [--repeat 3] [--instances 30]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "planning"))
from placement_reference import ref_energy, ref_place  # noqa: E402

from skylease.experiments.sweep import run_campaign  # noqa: E402
from skylease.experiments.thesis.paper_placement import STUDY_ALGORITHMS  # noqa: E402
from skylease.experiments.thesis.placement_study import N_VMS, USERS, study_cell, study_instance  # noqa: E402
from skylease.planning.placement import energy, place  # noqa: E402

TARGET_S = 60.0


def grid_cell(users: float, n_vms: int, rep: int, seed: int = 0) -> list[dict]:
    """The issue's grid cell: the five heuristics, Model C only."""
    return study_cell(users, n_vms, rep, seed, algorithms=STUDY_ALGORITHMS, models=("c",))


def instances(n_inst: int) -> list[tuple]:
    return [study_instance(u, n, r) for u in USERS for n in N_VMS for r in range(n_inst)]


def ours(cases: list[tuple]) -> tuple[float, list[tuple[list[int], float]]]:
    out = []
    t = time.perf_counter()
    for vms, lab in cases:
        for a in STUDY_ALGORITHMS:
            p = place(a, vms, lab)
            out.append((p.desktop, energy(p, vms, lab, "c").total_wh))
    return time.perf_counter() - t, [(d.tolist(), e) for d, e in out]


def reference(plain: list[tuple]) -> tuple[float, list[tuple[list[int], float]]]:
    out = []
    t = time.perf_counter()
    for cores, minutes, dcores, duser, umin in plain:
        for a in STUDY_ALGORITHMS:
            d = ref_place(a, cores, minutes, dcores, duser)
            out.append((d, ref_energy(d, cores, minutes, dcores, umin, "c")))
    return time.perf_counter() - t, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--instances", type=int, default=30)
    a = ap.parse_args()
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, numpy {np.__version__}; "
          f"load average {os.getloadavg()[0]:.2f}")
    cases = instances(a.instances)
    plain = [(v.cores.tolist(), v.minutes.tolist(), d.cores.tolist(), d.user.tolist(),
              d.user_minutes.tolist()) for v, d in cases]
    n = len(cases) * len(STUDY_ALGORITHMS)
    ours(cases[:5])  # numba compiles (or loads its cache) outside the timing
    t_ours, res_ours = min((ours(cases) for _ in range(a.repeat)), key=lambda x: x[0])
    t_ref, res_ref = min((reference(plain) for _ in range(a.repeat)), key=lambda x: x[0])
    same = all(d1 == d2 for (d1, _), (d2, _) in zip(res_ours, res_ref, strict=True))
    close = all(np.isclose(e1, e2, rtol=1e-9) for (_, e1), (_, e2) in zip(res_ours, res_ref, strict=True))
    assert same, "placements differ from the reference"
    assert close, "energies differ from the reference"
    print(f"\nPlacement + Model C energy, {len(USERS)} users shares x {len(N_VMS)} sizes x {a.instances} "
          f"instances x {len(STUDY_ALGORITHMS)} heuristics = {n:,} placements, best of {a.repeat}:")
    print(f"  skylease (numba heuristics and energy):    {t_ours:7.2f} s  ({1e6 * t_ours / n:6.0f} µs each)")
    print(f"  plain pure-Python reference:               {t_ref:7.2f} s  ({1e6 * t_ref / n:6.0f} µs each)")
    print(f"  ratio reference/skylease: {t_ref / t_ours:.1f}x; placements identical: {same}; "
          f"energies equal: {close}")

    times = []
    for _ in range(a.repeat):
        t = time.perf_counter()
        r = run_campaign(grid_cell, {"users": list(USERS), "n_vms": list(N_VMS)}, seeds=a.instances,
                         mode="inline", progress=False)
        times.append(time.perf_counter() - t)
        assert not r.failed and len(r.table) == n
    best = min(times)
    print(f"\nEnd to end, the reproduction's campaign (draw instances, place, energy, table), one process: "
          f"{best:.2f} s (runs: {', '.join(f'{x:.2f}' for x in times)})")
    print(f"  target < {TARGET_S:.0f} s: {'MET' if best < TARGET_S else 'NOT MET'}")


if __name__ == "__main__":
    main()
