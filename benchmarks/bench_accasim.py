"""``skylease leases simulate`` beside AccaSim (peer) on the Blue Horizon 30-day SWF, in one run.

AccaSim (an HPC workload-management simulator, a ``bench`` extra) runs EASY backfilling (its
``EASYBackfilling`` dispatcher, ``FirstFit`` allocator) on the same 5,108 jobs as skylease's lease
scheduler in its NOVM-NOSR configuration (the paper's baseline: best-effort leases, no
suspension). Both are timed as whole processes (Python start to exit, the way a user runs them),
paired within each repetition, medians printed.

The models differ, and the timings are about the engines, not the answers: AccaSim sees the SWF's
processors as 1-core requests placed on 144 nodes of 8 cores (its default SWF mapping); skylease
maps each job to a lease of whole nodes and schedules it with Haizea's rules (a job waits for the
nodes its processors need; backfilling through its slot table). Neither result is checked against
the other's.

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
#: Blue Horizon: 144 nodes of 8 processors; an SWF processor is a 1-core request (AccaSim's default).
SYSTEM = {"groups": {"bh": {"core": 8}}, "resources": {"bh": 144},
          "equivalence": {"processor": {"core": 1}}, "start_time": 0}
ACCASIM = """
import sys
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
    print(f"| peer | AccaSim, EASY backfilling (FirstFit), 144 x 8 cores | {t:.2f} | {best_t:.2f} |")
    print(f"| (ours) | skylease leases simulate, NOVM-NOSR | {o:.2f} | {min(ours):.2f} |")
    print(f"skylease / AccaSim: {o / t:.2f}x (medians); skylease's median against AccaSim's best: "
          f"{'faster' if o < best_t else 'slower'} ({o:.2f} s vs {best_t:.2f} s)")


if __name__ == "__main__":
    main()
