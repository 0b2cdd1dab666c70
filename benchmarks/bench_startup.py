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

With ``--user`` the commands run the way a user runs them (issue 42): from a fresh virtual
environment made in a temporary folder with a plain ``pip install .`` of this checkout (as the
README installs; ``--no-compile``, so that the first call of each command finds no bytecode and
writes it), through the ``skylease`` console script, the baseline being that environment's
``python -c "import numpy"``; the SpeQuloS command as users run it, with a strategy
(``--strategy 9C-C-R --seed 1 --json``), bound 4.5x. The first call of each command is reported
apart (cold bytecode; the trace cache was filled beforehand by this interpreter), the rounds after
it are the warm medians.

    python benchmarks/bench_startup.py [--rounds 9] [--cache-dir DIR] [--user]
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


#: ``--user``: the SpeQuloS command as a user types it (with a strategy), and its bound (issue 42)
USER_SPEQULOS = ["simulate", "spequlos", "--middleware", "boinc", "--trace", "seti", "--bot", "small",
                 "--strategy", "9C-C-R", "--seed", "1", "--json"]
USER_BOUND = 4.5


def user_environment(folder: Path) -> Path:
    """A fresh virtual environment in ``folder`` with this checkout installed plainly (``pip
    install --no-compile .``); its ``bin`` folder. Exits with pip's last lines when it fails."""
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    pip = subprocess.run([str(folder / "bin" / "pip"), "install", "--quiet", "--no-compile", str(ROOT)],
                         capture_output=True, text=True)
    if pip.returncode != 0:
        raise SystemExit("pip install . failed in the fresh environment:\n" + pip.stderr[-2000:])
    return folder / "bin"


def commands(prefix: list[str] = SKYLEASE,
             user: bool = False) -> list[tuple[str, list[str], float | None, float | None]]:
    """(label, argv, bound on the median ratio to the baseline or None, RSS bound in MiB or None);
    ``prefix`` starts each argv (``--user``: the fresh environment's console script)."""
    swf = data_dir() / "swf" / "blue_30days.swf"
    both: list[tuple[str, list[str], float | None, float | None]] = [
        ("skylease --help", [*prefix, "--help"], None, None),
        ("usage error (simulate spequlos --seed x)",
         [*prefix, "simulate", "spequlos", "--middleware", "boinc", "--trace", "seti", "--bot", "small",
          "--seed", "x"], None, None),
    ]
    if user:
        return [*both, ("simulate spequlos ... --strategy 9C-C-R --json", [*prefix, *USER_SPEQULOS],
                        USER_BOUND, 200.0)]
    return [
        *both,
        # a value only the library can judge: the library is imported first (no bound)
        ("library's error (simulate spequlos --bot huge)",
         [*prefix, "simulate", "spequlos", "--middleware", "boinc", "--trace", "seti", "--bot", "huge"],
         None, None),
        ("simulate spequlos boinc seti small (cache warm)",
         [*prefix, "simulate", "spequlos", "--middleware", "boinc", "--trace", "seti", "--bot", "small"],
         5.0, 200.0),
        ("leases simulate blue_30days.swf", [*prefix, "leases", "simulate", "--workload", str(swf)],
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
    ap.add_argument("--user", action="store_true",
                    help="a fresh virtual environment, a plain pip install, the console script (issue 42)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="skylease-bench-cache-") as tmp:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["SKYLEASE_CACHE_DIR"] = str(args.cache_dir or tmp)
        env.pop("SKYLEASE_NO_CACHE", None)
        baseline = BASELINE
        if args.user:
            t = time.perf_counter()
            bin_dir = user_environment(Path(tmp) / "venv")
            print(f"fresh environment: pip install --no-compile . in {time.perf_counter() - t:.0f} s")
            baseline = [str(bin_dir / "python"), "-c", "import numpy"]
            cmds = commands([str(bin_dir / "skylease")], user=True)
            # the trace cache filled by this interpreter: the first call's time is its bytecode's
            subprocess.run([*SKYLEASE, *USER_SPEQULOS], env=env, capture_output=True, check=True)
        else:
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
            bw, brss, _ = run(baseline, env)
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
          f"load {load:.1f}; {args.rounds} paired rounds, medians; "
          + ("a fresh environment, plain install, console script" if args.user
             else "this interpreter, -m skylease"))
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
