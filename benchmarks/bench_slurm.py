"""``skylease run`` on a Slurm pool against the local pool, in the same run (issue 24).

A one-node Slurm is started here as the tests start it (``tests/runtime/slurm_local.py``: Debian's
slurm-wlm and munge, ``slurmctld``/``slurmd``/``munged`` with their configuration in a temporary
folder). Measured, paired and alternating so that the load of a shared machine hits both:

1. rent to worker up on Slurm: from the rent request (``sbatch``) to the job's start as Slurm reports
   it (the queue wait, not billed), and from that start to the Dask worker connected (the boot);
2. 2,000 short shell tasks (``true``) with ``--policy fixed:2``: wall time of the whole run (pools
   started and stopped included), and the tasks' span (first worker up to last result), on a Slurm
   pool and on the local pool.

    python benchmarks/bench_slurm.py [--repeat N] [--tasks N]
"""

from __future__ import annotations

import argparse
import json
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.runtime import slurm_local  # noqa: E402

from skylease.experiments.run import run_job  # noqa: E402
from skylease.experiments.run_options import RunOptions  # noqa: E402


def _pools(folder: Path, partition: str) -> Path:
    p = folder / "pools.toml"
    p.write_text(f'[pools.hpc]\ncluster = "dask_jobqueue.SLURMCluster"\nbilling_unit = 60\nmax_count = 2\n'
                 f'[pools.hpc.kwargs]\ncores = 1\nmemory = "1GB"\nprocesses = 1\nqueue = "{partition}"\n'
                 f'walltime = "00:10:00"\n')
    return p


def _one(folder: Path, job: Path, pools: Path | None) -> dict[str, float | list]:
    out = folder / f"o-{time.monotonic_ns()}"
    t = time.perf_counter()
    s = run_job(str(job), RunOptions(out=out, policy="fixed:2", pools_file=pools, max_workers=2))
    wall = time.perf_counter() - t
    assert s["left"] == 0 and s["failed"] == 0, s
    with sqlite3.connect(out / "results.sqlite") as db:
        hosts = db.execute("SELECT (SELECT MIN(t_s) FROM events e WHERE e.host = h.host AND "
                           "e.kind = 'acquire'), requested_s, up_s FROM hosts h").fetchall()
        last = db.execute("SELECT MAX(ended_s) FROM results").fetchone()[0]
    first_up = min(up for *_, up in hosts)
    return {"wall_s": wall, "span_s": last - first_up,
            "queue_s": [start - asked for asked, start, _ in hosts],
            "up_s": [up - asked for asked, _, up in hosts],
            "boot_s": [up - start for _, start, up in hosts]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tasks", type=int, default=2000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        cluster = slurm_local.start(folder / "slurm")
        try:
            job = folder / "jobs.txt"
            job.write_text("true\n" * args.tasks)
            pools = _pools(folder, cluster.partition)
            rows: dict[str, list] = {"slurm": [], "local": []}
            for _ in range(args.repeat):
                rows["slurm"].append(_one(folder, job, pools))
                rows["local"].append(_one(folder, job, None))
        finally:
            slurm_local.stop(cluster)
    med = statistics.median
    report = {
        "machine": f"{platform.node()} {platform.machine()}, {platform.python_version()}",
        "tasks": args.tasks, "repeat": args.repeat,
        "slurm_rent_to_worker_up_s": med([u for r in rows["slurm"] for u in r["up_s"]]),
        # Slurm's start is a whole second (floored): this split is good to a second
        "slurm_rent_to_start_s": med([q for r in rows["slurm"] for q in r["queue_s"]]),
        "slurm_start_to_worker_up_s": med([b for r in rows["slurm"] for b in r["boot_s"]]),
        "local_rent_to_worker_up_s": med([u for r in rows["local"] for u in r["up_s"]]),
    }
    for kind in ("slurm", "local"):
        report[f"{kind}_wall_s"] = med([r["wall_s"] for r in rows[kind]])
        report[f"{kind}_span_s"] = med([r["span_s"] for r in rows[kind]])
        report[f"{kind}_tasks_per_s"] = args.tasks / report[f"{kind}_span_s"]
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
