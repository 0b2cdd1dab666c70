"""``skylease run`` beside the tools a user would pick instead, in the same run (issue 25).

Every row names what it compares: *peer* rows put skylease against another tool doing the same
work on the same 2 worker processes; there is no *ablation* row here (skylease's own code with an
optimisation removed), the cold path being the only path since the warm service was retired.

Peers:

1. 2,000 ``true`` commands on 2 workers: ``xargs -P 2`` (each line through ``sh -c``), GNU
   ``parallel -j 2`` (Debian's ``parallel``; skipped with a note when it is not installed) and
   ``skylease run`` (the whole command: Python, its imports, the store, the workers, the report).
   Bound: skylease at most 1.5x xargs.
2. 200 ``sleep 0.05`` commands, the same three. Bound: skylease at most 1.1x xargs.
3. 5,000 no-op Python callables (``math:fabs``) on 2 worker processes: batched Dask
   ``client.map`` (the calls in 16 chunks, one Dask task per chunk, on a LocalCluster of 2
   single-thread worker processes), ``dask.bag`` (16 partitions) and ``skylease run``, each timed
   from its workers being up to its last result (Dask's cluster is started before its clock; ours
   from its first worker up to its last result, read from the run's store). Bound: skylease's
   calls per second at least those of batched ``client.map``.

Each repetition runs every tool once, one after the other; a ratio is taken within a repetition
(paired), and the medians of those ratios are printed, so that the load of a shared machine
cancels as far as it can.

The commands run with their bytecode written (``PYTHONDONTWRITEBYTECODE`` is dropped from their
environment, as a user's has it): a first, untimed ``skylease run`` writes it. With ``--user`` they
run the way a user runs them (issue 42): the ``skylease`` console script of a fresh virtual
environment made with a plain ``pip install .`` of this checkout (see ``bench_startup.py``), its
first call (no bytecode yet) timed and printed apart; the bounds are then issue 42's, 1.35x and
1.08x xargs.

    python benchmarks/bench_run.py [--repeat N] [--user]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SKYLEASE = [sys.executable, "-m", "skylease"]
#: Taken before Dask is imported here: a LocalCluster writes PYTHONHASHSEED and thread counts into
#: its parent's environment. Without PYTHONDONTWRITEBYTECODE: a user's commands find their bytecode.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
CHUNKS = 16


def _wall(cmd: list[str], stdin: Path | None = None, env: dict[str, str] | None = None) -> float:
    t = time.perf_counter()
    with open(stdin or os.devnull, "rb") as f:
        subprocess.run(cmd, stdin=f, check=True, stdout=subprocess.DEVNULL, env=env or ENV)
    return time.perf_counter() - t


def xargs_wall(jobs: Path) -> float:
    return _wall(["xargs", "-d", "\n", "-P", "2", "-I{}", "sh", "-c", "{}"], jobs)


def parallel_wall(jobs: Path) -> float | None:
    if shutil.which("parallel") is None:
        return None
    return _wall(["parallel", "--will-cite", "-j", "2"], jobs)


def skylease_wall(args: list[str], out: Path, prefix: list[str] = SKYLEASE) -> float:
    """``skylease run`` (``prefix``: how skylease is called) of ``args`` on 2 workers, whole command."""
    return _wall([*prefix, "run", *args, "--out", str(out), "--policy", "fixed:2", "--max-workers", "2"])


def skylease_task_phase(out: Path) -> float:
    """Seconds from the first worker up to the last result, from the run's store."""
    with sqlite3.connect(out / "results.sqlite") as db:
        up = db.execute("SELECT MIN(t_s) FROM events WHERE kind = 'up'").fetchone()[0]
        end = db.execute("SELECT MAX(t_s) FROM events WHERE kind IN ('ok', 'failed')").fetchone()[0]
    return float(end - up)


def _fabs_chunk(xs: list[int]) -> list[float]:
    return [math.fabs(x) for x in xs]


def dask_seconds(n: int) -> tuple[float, float] | None:
    """(batched client.map, dask.bag) seconds for ``n`` calls of math.fabs, workers already up."""
    try:
        import dask.bag as db
        from distributed import Client, LocalCluster
    except ImportError:
        return None
    chunks = [list(range(i, n, CHUNKS)) for i in range(CHUNKS)]
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                      silence_logs=50) as cluster, Client(cluster) as client:
        client.wait_for_workers(2)
        client.gather(client.map(_fabs_chunk, [[0]] * 2, pure=False))  # the function shipped once
        t = time.perf_counter()
        client.gather(client.map(_fabs_chunk, chunks, pure=False))
        mapped = time.perf_counter() - t
        t = time.perf_counter()
        db.from_sequence(range(n), npartitions=CHUNKS).map(math.fabs).compute()
        bag = time.perf_counter() - t
    return mapped, bag


def _median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else math.nan


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="Paired repetitions (medians are printed).")
    ap.add_argument("--shell", type=int, default=2000)
    ap.add_argument("--sleeps", type=int, default=200)
    ap.add_argument("--calls", type=int, default=5000)
    ap.add_argument("--user", action="store_true",
                    help="a fresh virtual environment, a plain pip install, the console script (issue 42)")
    a = ap.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"load average at start {os.getloadavg()[0]:.2f}")
    if shutil.which("parallel") is None:
        print("GNU parallel: not installed (Debian's `parallel`), its rows are skipped")
    t: dict[str, list[float]] = {}
    r: dict[str, list[float]] = {}

    def add(d: dict[str, list[float]], k: str, v: float | None) -> None:
        if v is not None:
            d.setdefault(k, []).append(v)

    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        true, sleep = d / "true.txt", d / "sleep.txt"
        true.write_text("true\n" * a.shell)
        sleep.write_text("sleep 0.05\n" * a.sleeps)
        args = d / "args.json"
        args.write_text(json.dumps(list(range(a.calls))))
        prefix = SKYLEASE
        if a.user:
            from bench_startup import user_environment

            t0 = time.perf_counter()
            prefix = [str(user_environment(d / "venv") / "skylease")]
            print(f"fresh environment: pip install --no-compile . in {time.perf_counter() - t0:.0f} s")
        first = skylease_wall([str(true)], d / "first", prefix)  # writes the bytecode: not in the rounds
        what = "no bytecode yet" if a.user else "a warm-up, not in the rounds"
        print(f"first skylease run of {a.shell:,} `true` ({what}): {first:.2f} s")
        for i in range(a.repeat):
            for name, jobs in (("true", true), ("sleep", sleep)):
                x, p = xargs_wall(jobs), parallel_wall(jobs)
                s = skylease_wall([str(jobs)], d / f"{name}{i}", prefix)
                add(t, f"{name} xargs", x)
                add(t, f"{name} parallel", p)
                add(t, f"{name} skylease", s)
                add(r, f"{name} skylease/xargs", s / x)
                add(r, f"{name} parallel/xargs", None if p is None else p / x)
            dk = dask_seconds(a.calls)
            whole = skylease_wall(["math:fabs", "--args", str(args)], d / f"py{i}", prefix)
            ours = skylease_task_phase(d / f"py{i}")
            add(t, "calls skylease", ours)
            add(t, "calls skylease whole", whole)
            if dk is not None:
                add(t, "calls dask map", dk[0])
                add(t, "calls dask bag", dk[1])
                add(r, "calls skylease/map", dk[0] / ours)  # throughput ratio: their time / ours
                add(r, "calls skylease/bag", dk[1] / ours)
    m = {k: _median(v) for k, v in t.items()}
    q = {k: _median(v) for k, v in r.items()}
    print(f"\nmedians of {a.repeat} paired repetitions (s; ratio = skylease / peer, paired):\n")
    print("| kind | work | peer | peer (s) | skylease run (s) | ratio (median of pairs) | bound |")
    print("|---|---|---|---:|---:|---:|---|")
    bounds = (1.35, 1.08) if a.user else (1.5, 1.1)  # issue 42's in a user's environment
    for name, work, bound in (("true", f"{a.shell:,} `true`, 2 workers", bounds[0]),
                              ("sleep", f"{a.sleeps:,} `sleep 0.05`, 2 workers", bounds[1])):
        ratio = q[f"{name} skylease/xargs"]
        print(f"| peer | {work} | xargs -P 2 | {m[f'{name} xargs']:.2f} | {m[f'{name} skylease']:.2f} | "
              f"{ratio:.2f}x | <= {bound}x: {'MET' if ratio <= bound else 'MISSED'} |")
        if f"{name} parallel" in m:
            print(f"| peer | {work} | GNU parallel -j 2 | {m[f'{name} parallel']:.2f} | "
                  f"{m[f'{name} skylease']:.2f} | {m[f'{name} skylease'] / m[f'{name} parallel']:.2f}x "
                  f"(parallel / xargs {q[f'{name} parallel/xargs']:.2f}x) | |")
    if "calls dask map" in m:
        n = a.calls
        tm, tb, to = n / m["calls dask map"], n / m["calls dask bag"], n / m["calls skylease"]
        sm, sb = q["calls skylease/map"], q["calls skylease/bag"]
        print(f"| peer | {n:,} no-op callables, 2 worker processes (calls/s, workers up to last result) | "
              f"Dask client.map, batched ({CHUNKS} chunks) | {tm:,.0f}/s | {to:,.0f}/s | "
              f"{sm:.2f}x the throughput | >= 1.0x: {'MET' if sm >= 1.0 else 'MISSED'} |")
        print(f"| peer | the same | dask.bag ({CHUNKS} partitions) | {tb:,.0f}/s | {to:,.0f}/s | "
              f"{sb:.2f}x the throughput | |")
    else:
        print("Dask: not importable, the callables' peer rows are skipped")
    print(f"\nskylease run of the callables, whole command: {m['calls skylease whole']:.2f} s (median)")
    print("\nthe three ratios: "
          f"{a.shell:,} true {q['true skylease/xargs']:.2f}x xargs (bound {bounds[0]}x); "
          f"{a.sleeps:,} sleep {q['sleep skylease/xargs']:.2f}x xargs (bound {bounds[1]}x); "
          f"callables {q.get('calls skylease/map', math.nan):.2f}x batched Dask client.map (bound >= 1.0x)")


if __name__ == "__main__":
    main()
