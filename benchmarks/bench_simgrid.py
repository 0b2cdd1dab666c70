"""A bag of tasks on volatile hosts, simulated by skylease and by SimGrid (C++ S4U), on the same
instance file (issue 41, item 2).

The scenario (docs/decisions/simgrid-scenario.md; ``skylease.sim.volatile``): N hosts, host i
computing at s_i flop/s (``skylease.sim.dg.workload.node_powers``: Table 4's mean 1000, std 250)
and on during its intervals [on, off) (``skylease.traces.dg.seti_like`` over 4 days; after the
trace a host keeps its last state); M tasks, task j of w_j flops (uniform in [0.5, 1.5] x 3.6e6,
one hour on a mean host), all queued at t = 0, FIFO. A host that is on and idle takes the head of
the queue at once (a worker asking for work, a buffer of one task, no replication) and runs it for
w / s seconds. A host that goes off loses its task, which goes back to the head of the queue at that
moment (its work lost, never dropped or doubled); a host that comes back on asks for work at once.
No network cost. At one instant: completions, then hosts going off, then hosts coming on. Result:
the makespan (the last task's completion), tasks done, tasks interrupted.

Each size: the instance is generated once (seeded) and written to one binary file; then
``python -m skylease.sim.volatile FILE`` (SimEnvironment, its dispatch core, host_down/host_back)
and ``benchmarks/simgrid/masterworkers.cpp`` (compiled here with g++ against Debian's libsimgrid-dev
into a cache folder, again when the source or SimGrid changes) each run it in a process of its own.
Printed per size: both makespans and their relative difference, tasks done and interrupted, the
whole process's wall time and peak RSS (``os.wait4``) and the ratios ours / SimGrid. Sizes:
``--quick`` 50 hosts / 500 tasks and 500 / 5,000 (the agreement test,
tests/sim/test_simgrid_agreement.py); by default 10,000 / 100,000; ``--large`` 100,000 / 1,000,000.

    python benchmarks/bench_simgrid.py [--quick | --large] [--seed S] [--timeout SECONDS] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "simgrid" / "masterworkers.cpp"
SIZES = {"quick": [(50, 500), (500, 5_000)], "default": [(10_000, 100_000)], "large": [(100_000, 1_000_000)]}


class Missing(Exception):
    """What is missing to build the SimGrid side (one line)."""


def _say(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def simgrid_binary(cache: Path | None = None) -> Path:
    """The compiled masterworkers program, built into ``cache`` (default ~/.cache/skylease/bench_simgrid)
    when missing or stale: its name carries a hash of the source, SimGrid's flags and version, and g++'s
    version. Raises :class:`Missing` when g++ or SimGrid's development files are not there."""
    gxx = shutil.which("g++")
    if gxx is None:
        raise Missing("g++ is missing (apt-get install g++)")
    if shutil.which("pkg-config") is None:
        raise Missing("pkg-config is missing (apt-get install pkg-config libsimgrid-dev)")
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "simgrid"], capture_output=True, text=True)
    if flags.returncode != 0:
        raise Missing("SimGrid's development files are missing: `pkg-config simgrid` fails "
                      "(apt-get install libsimgrid-dev)")
    version = subprocess.run(["pkg-config", "--modversion", "simgrid"], capture_output=True, text=True).stdout
    gxx_v = subprocess.run([gxx, "--version"], capture_output=True, text=True).stdout.splitlines()[:1]
    cmd_tail = ["-O2", "-std=c++17", *flags.stdout.split()]
    key = hashlib.sha256(SOURCE.read_bytes() + repr((version, gxx_v, cmd_tail)).encode()).hexdigest()[:16]
    base = cache or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "skylease"
    base = cache or base / "bench_simgrid"
    binary = base / f"masterworkers-{key}"
    if binary.is_file():
        return binary
    base.mkdir(parents=True, exist_ok=True)
    _say(f"compiling {SOURCE.name} against SimGrid {version.strip()} into {base}")
    tmp = base / f".{binary.name}.{os.getpid()}"
    # (the libraries after the source: the linker reads them in order)
    r = subprocess.run([gxx, "-O2", "-std=c++17", str(SOURCE), "-o", str(tmp), *flags.stdout.split()],
                       capture_output=True, text=True)
    if r.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise RuntimeError(f"g++ failed on {SOURCE}:\n{r.stderr[-4000:]}")
    tmp.replace(binary)  # atomic: two runs compiling at once both end with a whole binary
    for old in base.glob("masterworkers-*"):
        if old != binary:
            old.unlink(missing_ok=True)  # stale builds (a run still using one keeps its open file)
    return binary


@dataclass
class Run:
    """One process's result line, its wall time and peak RSS (None values after a timeout)."""

    result: dict[str, Any] | None
    wall_s: float
    rss_mib: float | None
    error: str | None = None


def run_process(cmd: list[str], timeout: float) -> Run:
    """Run ``cmd``; its JSON line, wall time and peak RSS (its own, by ``os.wait4``). Killed (its
    process group, which it leads) after ``timeout`` seconds."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL, start_new_session=True)
        expired = threading.Event()

        def kill() -> None:
            expired.set()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)

        watchdog = threading.Timer(timeout, kill)
        watchdog.start()
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        watchdog.cancel()
        p.returncode = os.waitstatus_to_exitcode(status)
        if expired.is_set():
            # (its peak RSS until it was killed)
            return Run(None, wall, usage.ru_maxrss / 1024, f"timeout after {timeout:.0f} s")
        out.seek(0)
        err.seek(0)
        lines = [ln for ln in out.read().splitlines() if ln.startswith("{")]
        if p.returncode != 0 or not lines:
            return Run(None, wall, usage.ru_maxrss / 1024,
                       f"exit {p.returncode}: {err.read()[-2000:].strip() or 'no result line'}")
        return Run(json.loads(lines[-1]), wall, usage.ru_maxrss / 1024)


def run_case(hosts: int, tasks: int, seed: int, folder: Path, binary: Path | None, timeout: float,
             trace: str = "seti") -> dict[str, Any]:
    """Generate one instance, run both simulators on it; one row (see :func:`row_text`)."""
    from skylease.sim.volatile import make_instance, write_instance

    _say(f"{hosts:,} hosts / {tasks:,} tasks: generating the instance (seed {seed}, {trace})")
    inst = make_instance(hosts, tasks, trace=trace, seed=seed)
    path = folder / f"instance-{hosts}-{tasks}-{seed}.bin"
    write_instance(path, inst)
    row: dict[str, Any] = {"hosts": hosts, "tasks": tasks, "seed": seed, "trace": trace,
                           "intervals": len(inst.starts), "file_mib": path.stat().st_size / 2**20}
    del inst
    _say(f"{hosts:,} hosts / {tasks:,} tasks: skylease")
    row["ours"] = run_process([sys.executable, "-m", "skylease.sim.volatile", str(path)], timeout).__dict__
    if binary is not None:
        _say(f"{hosts:,} hosts / {tasks:,} tasks: SimGrid")
        row["simgrid"] = run_process([str(binary), str(path)], timeout).__dict__
    path.unlink()
    ours, sg = row["ours"], row.get("simgrid")
    if ours["result"] and sg and sg["result"]:
        a, b = ours["result"]["makespan"], sg["result"]["makespan"]
        row["makespan_rel_diff"] = abs(a - b) / max(abs(b), 1e-300)
        row["wall_ratio"] = ours["wall_s"] / sg["wall_s"]
        row["rss_ratio"] = ours["rss_mib"] / sg["rss_mib"]
    return row


def _side(r: dict[str, Any] | None) -> tuple[str, str, str, str, str]:
    if r is None:
        return ("-",) * 5  # type: ignore[return-value]
    if r["result"] is None:
        rss = "-" if r["rss_mib"] is None else f"{r['rss_mib']:,.0f}"
        return (r["error"].splitlines()[0][:60], "-", "-", f"{r['wall_s']:.1f}", rss)
    res = r["result"]
    return (f"{res['makespan']:,.1f}", f"{res['done']:,}", f"{res['interrupted']:,}", f"{r['wall_s']:.2f}",
            f"{r['rss_mib']:,.0f}")


def row_text(row: dict[str, Any]) -> str:
    o, s = _side(row["ours"]), _side(row.get("simgrid"))
    diff = f"{100 * row['makespan_rel_diff']:.4f} %" if "makespan_rel_diff" in row else "-"
    wr = f"{row['wall_ratio']:.2f}x" if "wall_ratio" in row else "-"
    rr = f"{row['rss_ratio']:.2f}x" if "rss_ratio" in row else "-"
    return (f"| {row['hosts']:,} / {row['tasks']:,} | {o[0]} | {s[0]} | {diff} | {o[1]} / {s[1]} "
            f"| {o[2]} / {s[2]} | {o[3]} | {s[3]} | {wr} | {o[4]} | {s[4]} | {rr} |")


HEADER = ("| hosts / tasks | makespan ours (s) | makespan SimGrid (s) | difference | done ours / SimGrid "
          "| interrupted ours / SimGrid | wall ours (s) | wall SimGrid (s) | wall ratio ours/SimGrid "
          "| peak RSS ours (MiB) | peak RSS SimGrid (MiB) | RSS ratio ours/SimGrid |\n"
          "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="50/500 and 500/5,000 (a few seconds; the test)")
    size.add_argument("--large", action="store_true", help="100,000 hosts / 1,000,000 tasks")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--trace", choices=("seti", "nd"), default="seti")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per simulator and size")
    ap.add_argument("--cache", type=Path, default=None, help="where the compiled SimGrid program is kept")
    ap.add_argument("--no-simgrid", action="store_true", help="run ours only")
    ap.add_argument("--json", action="store_true", help="one JSON line per size instead of the table")
    args = ap.parse_args(argv)
    sizes = SIZES["quick" if args.quick else "large" if args.large else "default"]
    binary = None
    if not args.no_simgrid:
        try:
            binary = simgrid_binary(args.cache)
        except Missing as exc:
            print(f"bench_simgrid: {exc}", file=sys.stderr)
            return 3
    if not args.json:
        print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
              f"{platform.platform()}")
        print(HEADER, flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-simgrid-") as tmp:
        for hosts, tasks in sizes:
            row = run_case(hosts, tasks, args.seed, Path(tmp), binary, args.timeout, args.trace)
            print(json.dumps(row) if args.json else row_text(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
