"""``skylease leases simulate`` beside AccaSim (peer) on the Blue Horizon 30-day SWF, in one run.

AccaSim (an HPC workload-management simulator, a ``bench`` extra) runs EASY backfilling (its
``EASYBackfilling`` dispatcher, ``FirstFit`` allocator) on the same 5,108 jobs as skylease's lease
scheduler in its NOVM-NOSR configuration (the paper's baseline: best-effort leases, no
suspension). Both are timed as whole processes (Python start to exit, the way a user runs them),
paired within each repetition, medians printed.

The models differ, and the timings are about the engines, not the answers. Both see 144 nodes of one
CPU and a job asking the log's requested processors (already nodes in the shipped cut) as that many
nodes, for its requested time, running its run time. AccaSim dispatches them by EASY backfilling
(one reservation for the queue's head, FIFO order otherwise); skylease by Haizea's NOVM-NOSR rules
(best-effort leases in FIFO order with backfilling through its slot table, a lease ending at its
run time rather than its requested time). Neither result is checked against the other's.
AccaSim 1.1.3 (2021) imports ``collections.Mapping``, which Python 3.10 removed: the
benchmark's AccaSim process puts the ``collections.abc`` names back first (nothing else changed).

    python benchmarks/bench_accasim.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SWF = ROOT.parent / "shared" / "data" / "swf" / "blue_30days.swf"
#: The paper's cluster as skylease models it: 144 nodes of 1 CPU. The shipped log's requested
#: processors are already nodes (the Haizea cut divides by 8); AccaSim reads that field and asks one
#: core per processor (its default equivalence), so a job gets as many 1-core nodes as in skylease.
SYSTEM = {"groups": {"node": {"core": 1}}, "resources": {"node": 144},
          "equivalence": {"processor": {"core": 1}}, "start_time": 0}
ACCASIM = """
import collections, collections.abc, sys
# AccaSim 1.1.3 (its last release, 2021) imports collections.Mapping, gone since Python 3.10
for name in ("Mapping", "MutableMapping", "Sequence", "Iterable", "Callable"):
    setattr(collections, name, getattr(collections.abc, name))
from accasim.base.allocator_class import FirstFit
from accasim.base.scheduler_class import EASYBackfilling
from accasim.base.simulator_class import Simulator
sim = Simulator(sys.argv[1], sys.argv[2], EASYBackfilling(FirstFit()), RESULTS_FOLDER_PATH=sys.argv[3],
                scheduling_output=False, statistics_output=False, show_statistics=False,
                pprint_output=False, benchmark_output=False)
sim.start_simulation()
"""


def _wall(cmd: list[str], cwd: Path) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=cwd)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--swf", type=Path, default=SWF)
    a = ap.parse_args()
    try:
        import accasim  # noqa: F401
    except ImportError:
        print("peer AccaSim: not installed (pip install -e '.[bench]'), skipped")
        return
    if not a.swf.exists():
        print(f"the Blue Horizon trace is not here: {a.swf} (skipped)")
        return
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"load average at start {os.getloadavg()[0]:.2f}; {a.swf.name}")
    ours, theirs = [], []
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        cfg = d / "blue_horizon.config"
        cfg.write_text(json.dumps(SYSTEM))
        (d / "results").mkdir()
        for _ in range(a.repeat):
            theirs.append(_wall([sys.executable, "-c", ACCASIM, str(a.swf), str(cfg), str(d / "results")], d))
            ours.append(_wall([sys.executable, "-m", "skylease", "leases", "simulate", "--workload",
                               str(a.swf), "--config", "NOVM-NOSR", "--json"], d))
    o, t = statistics.median(ours), statistics.median(theirs)
    best_t = min(theirs)
    print("| kind | what | whole process (s, median) | best (s) |")
    print("|---|---|---:|---:|")
    print(f"| peer | AccaSim, EASY backfilling (FirstFit), 144 x 1 core | {t:.2f} | {best_t:.2f} |")
    print(f"| (ours) | skylease leases simulate, NOVM-NOSR | {o:.2f} | {min(ours):.2f} |")
    print(f"skylease / AccaSim: {o / t:.2f}x (medians); skylease's median against AccaSim's best: "
          f"{'faster' if o < best_t else 'slower'} ({o:.2f} s vs {best_t:.2f} s)")


if __name__ == "__main__":
    main()
