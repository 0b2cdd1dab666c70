"""Parallel efficiency of a campaign on 2 workers: the demo's cells, inline against processes.

Rows (issue 25):

* *ablation*: ``mode="inline"``, the same cells one after the other in this process (the campaign
  runner without its workers);
* the campaign on 2 local worker processes (``mode="processes"``, the default): efficiency =
  inline time / (2 x its time), start-up of its workers included;
* the machine's own parallelism at that moment, measured beside it: the same cells split in two
  halves on an already-started pool of 2 processes (``concurrent.futures``); on a shared machine
  two processes do not always get two cores, and this row says how much the machine gave.

Each repetition runs the three one after the other; the medians are printed.

    python benchmarks/bench_campaign.py [--cells 8000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from concurrent.futures import ProcessPoolExecutor

from skylease.experiments.demo import DEMO_GRID, fixed_pool_cell, run_fixed_pool_demo


def _half(seeds: range) -> float:
    t = time.perf_counter()
    for s in seeds:
        for p in DEMO_GRID["pool_size"]:
            fixed_pool_cell(p, s)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", type=int, default=8000, help="Cells (a multiple of the 5 pool sizes).")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    seeds = a.cells // len(DEMO_GRID["pool_size"])
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"load average at start {os.getloadavg()[0]:.2f}; {seeds * 5:,} demo cells, 2 workers")
    inline, procs, ideal = [], [], []
    with ProcessPoolExecutor(2) as pool:
        pool.submit(_half, range(1)).result()
        for _ in range(a.repeat):
            t = time.perf_counter()
            run_fixed_pool_demo(None, seeds=seeds, mode="inline", progress=False)
            inline.append(time.perf_counter() - t)
            t = time.perf_counter()
            r = run_fixed_pool_demo(None, seeds=seeds, mode="processes", workers=2, progress=False)
            procs.append(time.perf_counter() - t)
            assert len(r.table) == seeds * 5 and not r.failed
            t = time.perf_counter()
            list(pool.map(_half, [range(0, seeds // 2), range(seeds // 2, seeds)]))
            ideal.append(time.perf_counter() - t)
    i, p, d = (statistics.median(x) for x in (inline, procs, ideal))
    eff = [a_ / (2 * b) for a_, b in zip(inline, procs, strict=True)]
    cap = [a_ / (2 * b) for a_, b in zip(inline, ideal, strict=True)]
    print("| kind | what | seconds (median) | parallel efficiency (median of pairs) |")
    print("|---|---|---:|---:|")
    print(f"| ablation | inline: the cells one by one in this process | {i:.2f} | |")
    e = statistics.median(eff)
    print(f"| (ours) | campaign, 2 local worker processes, start-up included | {p:.2f} | "
          f"{e:.0%} (bound >= 90 %: {'MET' if e >= 0.9 else 'MISSED'}) |")
    print(f"| (machine) | the same cells in two halves on 2 started processes | {d:.2f} | "
          f"{statistics.median(cap):.0%} (what the machine gave) |")
    rel = statistics.median(x / c for x, c in zip(eff, cap, strict=True))
    print(f"campaign efficiency relative to the machine's: {rel:.0%}")


if __name__ == "__main__":
    main()
