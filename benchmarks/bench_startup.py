"""Whole-process cost of short commands beside starting Python with numpy, in the same run.

Targets (issue 25):

* ``skylease --help`` and a command's argument error well under 0.3 s;
* ``skylease simulate spequlos --middleware boinc --trace seti --bot small``, second call (the
  generated trace is in the cache): at most 5x ``python -c "import numpy"`` and a peak RSS under
  200 MiB;
* ``skylease leases simulate --workload blue_30days.swf`` (the 30-day Blue Horizon trace): reported
  beside the start-up, so the share of start-up in a whole run shows.

Each round runs the baseline and then every command once, one after the other (paired: the
machine's load is about the same for all of them); the table gives medians over the rounds of the
wall time, of each command's time divided by the same round's baseline, and the peak RSS of each
process (``os.wait4``, one process each). The commands run as an installed skylease runs: with
their bytecode cached (``PYTHONDONTWRITEBYTECODE`` is dropped from their environment) and with a
trace cache of their own (a temporary folder unless ``--cache-dir``), filled by one untimed call
first. Kind of comparison: none of these is a peer; the baseline is the floor any numpy-based
command pays.

    python benchmarks/bench_startup.py [--rounds 9] [--cache-dir DIR]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE = [sys.executable, "-c", "import numpy"]
SKYLEASE = [sys.executable, "-m", "skylease"]


def data_dir() -> Path:
    env = os.environ.get("SKYLEASE_DATA", "").strip()
    return Path(env) if env else ROOT.parent / "shared" / "data"


def commands() -> list[tuple[str, list[str], float | None, float | None]]:
    """(label, argv, bound on the median ratio to the baseline or None, RSS bound in MiB or None)."""
    swf = data_dir() / "swf" / "blue_30days.swf"
    return [
        ("skylease --help", [*SKYLEASE, "--help"], None, None),
        ("usage error (simulate spequlos --seed x)",
         [*SKYLEASE, "simulate", "spequlos", "--middleware", "boinc", "--trace", "seti", "--bot", "small",
          "--seed", "x"], None, None),
        # a value only the library can judge: the library is imported first (no bound)
        ("library's error (simulate spequlos --bot huge)",
         [*SKYLEASE, "simulate", "spequlos", "--middleware", "boinc", "--trace", "seti", "--bot", "huge"],
         None, None),
        ("simulate spequlos boinc seti small (cache warm)",
         [*SKYLEASE, "simulate", "spequlos", "--middleware", "boinc", "--trace", "seti", "--bot", "small"],
         5.0, 200.0),
        ("leases simulate blue_30days.swf", [*SKYLEASE, "leases", "simulate", "--workload", str(swf)],
         None, None),
    ]


def run(argv: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """Wall seconds, peak RSS (MiB) and exit code of one process."""
    t = time.perf_counter()
    p = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_maxrss / 1024, p.returncode


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--cache-dir", type=Path, default=None,
                    help="trace cache of the commands (default: a new temporary folder)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="skylease-bench-cache-") as tmp:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["SKYLEASE_CACHE_DIR"] = str(args.cache_dir or tmp)
        env.pop("SKYLEASE_NO_CACHE", None)
        cmds = commands()
        cold = {}
        for label, argv, _, _ in cmds:  # bytecode written, trace cached: what a second call finds
            cold[label] = run(argv, env)
        walls: dict[str, list[float]] = {label: [] for label, *_ in cmds}
        ratios: dict[str, list[float]] = {label: [] for label, *_ in cmds}
        rss: dict[str, list[float]] = {label: [] for label, *_ in cmds}
        base_w: list[float] = []
        base_rss: list[float] = []
        codes: dict[str, set[int]] = {label: set() for label, *_ in cmds}
        for _ in range(args.rounds):
            bw, brss, _ = run(BASELINE, env)
            base_w.append(bw)
            base_rss.append(brss)
            for label, argv, _, _ in cmds:
                w, r, code = run(argv, env)
                walls[label].append(w)
                ratios[label].append(w / bw)
                rss[label].append(r)
                codes[label].add(code)
    load = os.getloadavg()[0]
    print(f"Python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} cores, "
          f"load {load:.1f}; {args.rounds} paired rounds, medians")
    print(f"{'command':50} {'s':>7} {'x numpy':>8} {'RSS MiB':>8} {'first call s':>13}  exit  target")
    base = 'python -c "import numpy" (baseline)'
    print(f"{base:50} {statistics.median(base_w):7.3f} {1.0:8.2f} {statistics.median(base_rss):8.1f}")
    for label, _, bound, rss_bound in cmds:
        ratio = statistics.median(ratios[label])
        mem = statistics.median(rss[label])
        target = ""
        if bound is not None:
            ok = ratio <= bound and (rss_bound is None or mem < rss_bound)
            target = f"<= {bound:g}x, < {rss_bound:g} MiB: {'met' if ok else 'NOT MET'}"
        elif label.startswith(("skylease --help", "usage error")):
            target = f"< 0.3 s: {'met' if statistics.median(walls[label]) < 0.3 else 'NOT MET'}"
        print(f"{label:50} {statistics.median(walls[label]):7.3f} {ratio:8.2f} {mem:8.1f} "
              f"{cold[label][0]:13.3f}  {','.join(map(str, sorted(codes[label]))):4}  {target}")


if __name__ == "__main__":
    main()
