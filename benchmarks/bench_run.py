"""Overhead of ``skylease run`` on real workers, beside the plain tools, in the same run.

Targets (issue 8):

1. 2,000 trivial shell commands (``true``) on 2 workers: ``skylease run`` (the whole command, start-up
   of its scheduler and workers included) against ``xargs -P 2`` running each line with ``sh -c``;
   our wall time at most 2x xargs'. Measured three ways: warm (the usual case: the warm service of
   :mod:`skylease.service.warm` is up, as after any earlier run in the last 10 minutes), cold (the
   service is stopped first, so this run imports Python, Dask, pandas and matplotlib in its own
   process and starts the service as it ends; the warm run waits until the service answers) and
   without the service (``SKYLEASE_NO_SERVER=1``: everything in the command's own process).
2. 5,000 no-op Python callables (``math:fabs``) on 2 worker processes: ``skylease run`` against plain
   Dask ``client.map`` on a LocalCluster of 2 single-thread worker processes; our throughput at
   least 0.5x Dask's. Both are timed from the moment the workers are up (Dask's cluster is started
   before its clock starts; ours from its first worker up to its last result, from the run's store).

    python benchmarks/bench_run.py [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SKYLEASE = [sys.executable, "-m", "skylease"]
#: The environment of our runs, taken before Dask is imported here: a LocalCluster sets
#: PYTHONHASHSEED (and thread counts) in its parent's environment, and a run with another
#: PYTHONHASHSEED is another warm service's.
ENV = dict(os.environ)


def xargs_wall(jobs: Path) -> float:
    t = time.perf_counter()
    subprocess.run(["xargs", "-d", "\n", "-P", "2", "-I{}", "sh", "-c", "{}"], stdin=jobs.open(),
                   check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def skylease_wall(args: list[str], out: Path, server: bool = True) -> float:
    env = dict(ENV)
    env.pop("SKYLEASE_NO_SERVER", None)
    if not server:
        env["SKYLEASE_NO_SERVER"] = "1"
    t = time.perf_counter()
    subprocess.run([*SKYLEASE, "run", *args, "--out", str(out), "--policy", "fixed:2", "--workers", "2"],
                   check=True, stdout=subprocess.DEVNULL, env=env)
    return time.perf_counter() - t


def stop_service() -> None:
    subprocess.run([*SKYLEASE, "server", "stop"], check=True, stdout=subprocess.DEVNULL, env=ENV)


def wait_for_service(timeout: float = 120.0) -> None:
    """Until the service the cold run started has its imports done (it answers then)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = subprocess.run([*SKYLEASE, "server", "status", "--json"], check=True, capture_output=True,
                           text=True, env=ENV)
        if any(s.get("current") and "pid" in s for s in json.loads(r.stdout)):
            return
        time.sleep(0.2)
    raise SystemExit("the warm service did not come up")


def skylease_task_phase(out: Path) -> float:
    """Seconds from the first worker up to the last result, from the run's store."""
    with sqlite3.connect(out / "results.sqlite") as db:
        up = db.execute("SELECT MIN(t_s) FROM events WHERE kind = 'up'").fetchone()[0]
        end = db.execute("SELECT MAX(t_s) FROM events WHERE kind IN ('ok', 'failed')").fetchone()[0]
    return float(end - up)


def dask_map_seconds(n: int) -> float:
    import math

    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                      silence_logs=50) as cluster, Client(cluster) as client:
        client.wait_for_workers(2)
        t = time.perf_counter()
        client.gather(client.map(math.fabs, range(n), pure=False))
        return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=1, help="Repetitions (the best of each is kept).")
    ap.add_argument("--shell", type=int, default=2000)
    ap.add_argument("--calls", type=int, default=5000)
    a = ap.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        jobs = d / "true.txt"
        jobs.write_text("true\n" * a.shell)
        args = d / "args.json"
        args.write_text(json.dumps(list(range(a.calls))))
        xa, ours, dm, ours_calls, ours_phase, cold, alone, paired = [], [], [], [], [], [], [], []
        for r in range(a.repeat):
            stop_service()
            xa.append(xargs_wall(jobs))
            cold.append(skylease_wall([str(jobs)], d / f"cold{r}"))
            wait_for_service()
            xa.append(xargs_wall(jobs))
            ours.append(skylease_wall([str(jobs)], d / f"sh{r}"))
            paired.append(ours[-1] / xa[-1])  # each warm run against the xargs run just before it
            ours_phase.append(skylease_task_phase(d / f"sh{r}"))
            alone.append(skylease_wall([str(jobs)], d / f"alone{r}", server=False))
            dm.append(dask_map_seconds(a.calls))
            skylease_wall(["math:fabs", "--args", str(args)], d / f"py{r}")
            ours_calls.append(skylease_task_phase(d / f"py{r}"))
        x, o = min(xa), min(ours)
        print(f"{a.shell} shell commands, 2 workers: xargs -P 2 {x:.2f} s, skylease run {o:.2f} s "
              f"(whole command, warm service): ratio {o / x:.2f}x (target <= 2x) "
              f"{'OK' if o <= 2 * x else 'MISSED'}; "
              f"its task phase (first worker up to last result) {min(ours_phase):.2f} s, "
              f"{min(ours_phase) / x:.2f}x xargs")
        print(f"  paired warm runs (each against the xargs run just before it): ratios "
              f"{', '.join(f'{p:.2f}' for p in paired)}; median {statistics.median(paired):.2f}x")
        print(f"  the same, cold (in its own process; it starts the warm service as it ends): "
              f"{min(cold):.2f} s, "
              f"{min(cold) / x:.2f}x; "
              f"without the service (SKYLEASE_NO_SERVER=1): {min(alone):.2f} s, {min(alone) / x:.2f}x")
        m, c = min(dm), min(ours_calls)
        tm, tc = a.calls / m, a.calls / c
        print(f"{a.calls} no-op callables, 2 worker processes: Dask client.map {m:.2f} s ({tm:,.0f}/s), "
              f"skylease run {c:.2f} s ({tc:,.0f}/s): throughput {tc / tm:.2f}x Dask's (target >= 0.5x) "
              f"{'OK' if tc >= 0.5 * tm else 'MISSED'}")


if __name__ == "__main__":
    main()
