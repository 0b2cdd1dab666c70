"""ETC batch-mapping heuristics: ours (numba) vs pure Python vs plain C, in the same run.

Heuristics (definitions and tie-breaks: decisions A4.1-A4.3, A4.7 in docs/decisions/thesis.md):
Min-min, Sufferage (simple version) and Low_3 (Mean-Max-Min) with its 11-value lambda sweep.

Three implementations of each, on the same random CVB-like gamma ETC instances:

* ours: ``skylease.planning.mapping`` (numba-jitted). Warmed up once before timing; the first call
  (JIT compile, or numba cache load) is reported separately, and so is a cold JIT compile measured in a
  fresh interpreter with an empty numba cache.
* pure Python: ``benchmarks/mapping_ref/pure.py`` (plain lists and loops), timed once.
* C: ``benchmarks/mapping_ref/mapping_ref.c``, compiled here with the system compiler (``cc -O2``)
  into a temp folder (benchmark-only, never shipped). It reads the ETC from a float64 file, runs the
  algorithm repeatedly and reports the best time measured with CLOCK_MONOTONIC around the algorithm
  only.

Ours and C get the same repeat rule: best of at least ``--reps`` (3) back-to-back runs, repeated until
the runs add up to ``--min-time`` (0.2 s) so that sub-millisecond cases get enough samples on a busy
machine (at most 10000 runs).

Each heuristic has a reference variant (the fastest plain formulation, used for the C column and the
ours/C ratio, to be fair to C) and an "alt" variant printed for context, both in C and pure Python:

* Min-min, Sufferage: reference = incremental (after loading machine j only the tasks whose best
  (or second-best) machine was j are rescanned); alt = textbook rescanning O(n^2 m). A pure-Python
  rescanning run is skipped when a calibration on n/8 tasks predicts more than ``--max-pure-s`` (60 s).
* Low_3: reference = the rescaled score skylease uses (SF / (lam / sum C) = ready_j + w * ETC_j, all 11
  lambdas in one pass, no division in the inner loop); alt = literal Eq. 3.1 (two divisions per entry,
  one pass per lambda). Same argmin in exact arithmetic; the rounding differs, so their agreement is
  reported, not asserted.

The C and pure-Python twins make the same floating-point operations in the same order; the script
asserts that they agree exactly (makespan, assignment and order) on every instance, that the
incremental and rescanning variants agree exactly, and that C and pure Python reproduce the thesis
example (decision A7). Ours is compared on assignment and makespan (ours sums loads in task-index order,
the references in mapping order, so the reference makespan is re-summed the same way before the exact
comparison); any difference is reported, never hidden.

A diagnostics table splits ours into kernel and per-call overhead (input validation + Schedule metrics:
loads, flowtimes), the latter measured through the public ``evaluate()`` on the same schedule.

Targets: ours <= 2x C for every size and heuristic; ours Min-min on 2048x64 < 100 ms.

    python benchmarks/bench_mapping.py [--quick] [--sizes 512x16,2048x64] [--reps 3]
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from skylease.experiments.thesis.paper_mapping import EXAMPLE_ETC

HERE = Path(__file__).resolve().parent
REF = HERE / "mapping_ref"
sys.path.insert(0, str(REF))
import pure  # noqa: E402  (benchmarks/mapping_ref/pure.py)

try:
    from skylease.planning.mapping import low3 as ours_low3
    from skylease.planning.mapping import min_min as ours_min_min
    from skylease.planning.mapping import sufferage as ours_sufferage

    OURS = {"Min-min": ours_min_min, "Sufferage": ours_sufferage, "Low_3": ours_low3}
    OURS_ERR = ""
except ImportError as exc:  # the library is being written; C and pure Python still run
    OURS = {}
    OURS_ERR = f"{type(exc).__name__}: {exc}"
try:  # diagnostics only: per-call overhead (validation + Schedule metrics) of ours
    from skylease.planning.mapping import evaluate as ours_evaluate
except ImportError:
    ours_evaluate = None

SIZES = [(512, 16), (1024, 32), (2048, 64), (4096, 128)]
QUICK = [(512, 16), (1024, 32)]
# -std=c11 (ISO mode) also means -ffp-contract=off: no FMA contraction even with -march=native, so
# the C results stay bit-identical to pure Python (which the benchmark asserts).
CFLAGS = "-O2 -std=c11 -Wall -Wextra"
HEURISTICS = ["Min-min", "Sufferage", "Low_3"]
# heuristic -> (C reference, C alt, pure reference, pure alt, alt is O(n^2 m))
ALGOS = {
    "Min-min": ("minmin", "minmin_rescan", pure.min_min, pure.min_min_rescan, True),
    "Sufferage": ("sufferage", "sufferage_rescan", pure.sufferage, pure.sufferage_rescan, True),
    "Low_3": ("low3_fast", "low3", pure.low3_fast, pure.low3, False),
}

# Thesis example (decision A7, Table 3.3) and its verified results
EX_ETC = EXAMPLE_ETC.tolist()
EX_MINMIN_ORDER = [7, 6, 5, 4, 3, 1, 2, 0]
EX_LOW3_SWEEP = [6080, 4530, 3550, 3000, 2700, 2700, 2350, 2350, 2350, 2350, 2350]


# ---------------------------------------------------------------- instances ---------------------
def cvb_etc(n: int, m: int, seed: int) -> np.ndarray:
    """CVB-like gamma ETC: inconsistent, mu = 1000, V_task = 0.6, V_mach = 0.3."""
    rng = np.random.default_rng(seed)
    q = rng.gamma(1 / 0.6**2, 1000 * 0.6**2, n)
    return rng.gamma(1 / 0.3**2, (q * 0.3**2)[:, None], (n, m))


def seed_of(n: int, m: int) -> int:
    return 1000 * n + m  # fixed per size, independent of which sizes are selected


# ---------------------------------------------------------------- C ------------------------------
MAX_RUNS = 10000  # same cap as mapping_ref.c


@dataclass(frozen=True)
class Repeat:
    """Best of at least ``reps`` runs, and more until the runs add up to ``min_ms`` (same rule in C)."""

    reps: int = 3
    min_ms: float = 200.0


@dataclass
class Result:
    makespan: float
    assign: list[int]
    order: list[int] | None
    extra: int
    ms: float | None = None


def compile_c(cc: str, cflags: list[str], tmp: Path) -> tuple[Path, str]:
    exe = tmp / "mapping_ref"
    cmd = [cc, *cflags, "-o", str(exe), str(REF / "mapping_ref.c"), "-lm"]
    subprocess.run(cmd, check=True)
    version = subprocess.run([cc, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    return exe, version


def run_c(exe: Path, algo: str, etc_path: Path, n: int, m: int, rep: Repeat, tmp: Path) -> Result:
    out = tmp / f"out_{algo}.bin"
    proc = subprocess.run(
        [str(exe), algo, str(n), str(m), str(rep.reps), str(rep.min_ms), str(etc_path), str(out)],
        check=True,
        capture_output=True,
        text=True,
    )
    fields = dict(kv.split("=") for kv in proc.stdout.split())
    arr = np.fromfile(out, dtype=np.int64)
    assign, order = arr[:n].tolist(), arr[n:].tolist()
    checksum = sum((i + 1) * (a + 1) for i, a in enumerate(assign)) % 2**64
    assert checksum == int(fields["checksum"]), f"{algo}: checksum mismatch reading C output"
    return Result(float(fields["makespan"]), assign, order, int(fields["extra"]), float(fields["best_ms"]))


# ---------------------------------------------------------------- pure / ours -------------------
@contextmanager
def no_gc():
    """Collect once, then keep the cyclic GC off while timing (as timeit does)."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def timed(fn, *args):
    t0 = time.perf_counter()
    out = fn(*args)
    return out, (time.perf_counter() - t0) * 1e3


def run_pure(fn, etc_list: list) -> Result:
    with no_gc():
        (assign, mk, order, extra), ms = timed(fn, etc_list)
    return Result(mk, assign, order, extra, ms)


def estimate_pure_ms(fn, etc_list: list) -> float:
    """Predict an O(n^2 m) pure-Python run from a calibration on the first n/8 tasks (x 64)."""
    n = len(etc_list)
    if n < 1024:
        return 0.0
    with no_gc():
        _, ms = timed(fn, etc_list[: n // 8])
    return ms * 64


def run_ours(fn, etc: np.ndarray, rep: Repeat):
    best, total, runs, sched = float("inf"), 0.0, 0, None
    with no_gc():  # back-to-back calls, like the C program's repeats (no collection in between)
        while runs < rep.reps or (total < rep.min_ms and runs < MAX_RUNS):
            sched, ms = timed(fn, etc)
            best, total, runs = min(best, ms), total + ms, runs + 1
    order = np.asarray(sched.order).tolist()
    lam = getattr(sched, "lam", None)
    extra = -1 if lam is None else round(float(lam) * 10)
    return Result(float(sched.makespan), np.asarray(sched.assignment).tolist(), order, extra, best), sched


def best_of(rep: Repeat, fn, *args) -> float:
    best, total, runs = float("inf"), 0.0, 0
    with no_gc():
        while runs < rep.reps or (total < rep.min_ms and runs < MAX_RUNS):
            ms = timed(fn, *args)[1]
            best, total, runs = min(best, ms), total + ms, runs + 1
    return best


def same(a: Result, b: Result) -> bool:
    return a.makespan == b.makespan and a.assign == b.assign and a.extra == b.extra and a.order == b.order


def canonical_makespan(etc_list: list, assign: list[int]) -> float:
    """Makespan with the loads summed in task-index order (how ours sums them)."""
    loads = [0.0] * len(etc_list[0])
    for i, j in enumerate(assign):
        loads[j] += etc_list[i][j]
    return max(loads)


COLD_JIT = """
import sys, time
import numpy as np
from skylease.planning import mapping
etc = np.fromfile(sys.argv[2]).reshape(int(sys.argv[3]), int(sys.argv[4]))
fn = getattr(mapping, sys.argv[1])
t0 = time.perf_counter()
fn(etc)
print((time.perf_counter() - t0) * 1e3)
"""
OURS_NAMES = {"Min-min": "min_min", "Sufferage": "sufferage", "Low_3": "low3"}


def cold_jit_ms(tmp: Path, n: int, m: int) -> dict[str, float]:
    """First call of each heuristic in a fresh interpreter with an empty numba cache: the JIT compile cost.

    Each heuristic gets its own interpreter and empty NUMBA_CACHE_DIR (inside the temp folder), so each
    figure includes the kernels it shares with the others (Schedule metrics); import time is excluded.
    """
    path = tmp / "jit_probe.bin"
    cvb_etc(n, m, seed_of(n, m)).tofile(path)
    out = {}
    for h, name in OURS_NAMES.items():
        env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp / f"numba_cache_{name}"))
        cmd = [sys.executable, "-c", COLD_JIT, name, str(path), str(n), str(m)]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if proc.returncode == 0:
            out[h] = float(proc.stdout.split()[-1])
        else:
            print(f"cold JIT probe for {h} failed: {proc.stderr.strip().splitlines()[-1:]}")
    return out


# ---------------------------------------------------------------- checks ------------------------
def self_test(exe: Path, tmp: Path) -> list[str]:
    """Thesis example (decision A7): pure Python and C must reproduce it exactly (ties included)."""
    notes = []
    mm = pure.min_min(EX_ETC)
    assert mm[1] == 3200 and mm[2] == EX_MINMIN_ORDER, f"pure min_min on thesis example: {mm}"
    assert pure.min_min_rescan(EX_ETC) == mm
    for low in (pure.low3, pure.low3_fast):
        sweep = [low(EX_ETC, [lam])[1] for lam in pure.LAMBDAS]
        assert sweep == EX_LOW3_SWEEP, f"{low.__name__} sweep on thesis example: {sweep}"
        assert low(EX_ETC)[1] == 2350 and low(EX_ETC)[3] == 6
    assert pure.sufferage(EX_ETC) == pure.sufferage_rescan(EX_ETC)
    path = tmp / "example.bin"
    ex = np.array(EX_ETC)
    ex.tofile(path)
    for h, (c_ref, c_alt, p_ref, p_alt, _) in ALGOS.items():
        for c_algo, p_fn in ((c_ref, p_ref), (c_alt, p_alt)):
            ref = run_pure(p_fn, EX_ETC)
            got = run_c(exe, c_algo, path, 8, 4, Repeat(1, 0.0), tmp)
            assert same(got, ref), f"C {c_algo} != pure on thesis example: {got} vs {ref}"
        if h in OURS:
            o, _ = run_ours(OURS[h], ex.copy(), Repeat(1, 0.0))
            ok = o.assign == ref.assign and o.makespan == ref.makespan
            notes.append(
                f"{h} ours makespan {o.makespan:g}, ref {ref.makespan:g}: {'ok' if ok else 'DIFFERS'}"
            )
    return notes


# ---------------------------------------------------------------- main ---------------------------
@dataclass
class Row:
    size: str
    heuristic: str
    c: Result
    c_alt: Result
    py: Result
    py_alt: Result | None
    py_alt_note: str = ""
    ref_canon_mk: float = 0.0
    ours: Result | None = None
    ours_first_ms: float | None = None
    ours_jit_ms: float | None = None
    ours_eval_ms: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def ratio(self) -> float | None:
        return None if self.ours is None else self.ours.ms / self.c.ms

    def agree(self) -> str:
        if self.ours is None:
            return "C=py; ours n/a"
        diff = sum(a != b for a, b in zip(self.ours.assign, self.c.assign, strict=True))
        if diff == 0 and self.ours.makespan == self.ref_canon_mk:
            return "yes"
        rel = (self.ours.makespan - self.ref_canon_mk) / self.ref_canon_mk
        return f"NO ({diff} tasks differ, makespan {rel:+.1e})"


def fmt_ms(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:.1f}" if x >= 100 else (f"{x:.2f}" if x >= 1 else f"{x:.3f}")


def machine_info(cc_version: str, cflags: list[str]) -> list[tuple[str, str]]:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        import numba

        numba_v = numba.__version__
    except ImportError:
        numba_v = "not installed"
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return [
        ("CPU", cpu),
        ("cores", f"{os.cpu_count()} logical, {usable} usable (all timings single-threaded)"),
        ("OS", platform.platform()),
        ("Python", platform.python_version()),
        ("numpy", np.__version__),
        ("numba", numba_v),
        ("C compiler", cc_version),
        ("C flags", " ".join(cflags)),
        ("load avg at start", loadavg()),
    ]


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3]) + " (1/5/15 min)"
    except OSError:
        return "?"


def parse_sizes(text: str) -> list[tuple[int, int]]:
    try:
        out = [tuple(int(x) for x in part.lower().strip().split("x")) for part in text.split(",")]
    except ValueError:
        out = []
    if not out or any(len(t) != 2 or min(t) < 1 for t in out):
        raise argparse.ArgumentTypeError(f"expected NxM[,NxM...], e.g. 512x16,2048x64; got {text!r}")
    return out


def bench_one(
    h: str,
    n: int,
    m: int,
    etc: np.ndarray,
    etc_list: list,
    etc_path: Path,
    args,
    tmp: Path,
    exe: Path,
    first_ms: dict[str, float],
) -> Row:
    size = f"{n}x{m}"
    c_ref, c_alt, p_ref, p_alt, alt_quadratic = ALGOS[h]
    rep = Repeat(args.reps, args.min_time * 1e3)
    c = run_c(exe, c_ref, etc_path, n, m, rep, tmp)
    c_alt_res = run_c(exe, c_alt, etc_path, n, m, Repeat(args.reps, 0.0), tmp)  # context only
    py = run_pure(p_ref, etc_list)
    py_alt, note = None, ""
    est = estimate_pure_ms(p_alt, etc_list) if alt_quadratic else 0.0
    if est > args.max_pure_s * 1e3:
        note = f"skipped (>{args.max_pure_s:g} s, est. {est / 1e3:.0f} s)"
    else:
        py_alt = run_pure(p_alt, etc_list)
    # honesty checks: the C and pure-Python twins give exactly the same schedule
    assert same(c, py), f"{size} {h}: C and pure Python disagree: {c.makespan!r} vs {py.makespan!r}"
    assert py_alt is None or same(c_alt_res, py_alt), f"{size} {h}: C and pure-Python alt variants disagree"
    row = Row(size, h, c, c_alt_res, py, py_alt, note, canonical_makespan(etc_list, c.assign))
    if alt_quadratic:  # incremental and rescanning are the same algorithm: exactly the same schedule
        assert same(c, c_alt_res), f"{size} {h}: incremental and rescanning variants disagree"
    else:
        diff = sum(a != b for a, b in zip(c.assign, c_alt_res.assign, strict=True))
        rel = (c_alt_res.makespan - c.makespan) / c.makespan
        row.notes.append(
            f"{size} {h}: literal Eq. 3.1 vs rescaled score: "
            + ("identical schedules" if diff == 0 else f"{diff} tasks differ, makespan {rel:+.1e}")
            + f" (best lambda {c_alt_res.extra / 10:g} vs {c.extra / 10:g})"
        )
    if h in OURS:
        row.ours_first_ms = first_ms.pop(h, None)  # reported on the first size only
        row.ours, sched = run_ours(OURS[h], etc, rep)
        if ours_evaluate is not None:
            row.ours_eval_ms = best_of(rep, ours_evaluate, etc, sched.assignment, sched.order)
        if row.agree() != "yes":
            lit = row.ours.assign == c_alt_res.assign
            row.notes.append(
                f"{size} {h}: ours differs from the C reference"
                + (" but equals the literal Eq. 3.1 schedule" if lit and h == "Low_3" else "")
                + (f"; ours best lambda {row.ours.extra / 10:g}, C {c.extra / 10:g}" if h == "Low_3" else "")
            )
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="sizes 512x16 and 1024x32 only")
    ap.add_argument("--sizes", type=parse_sizes, help="comma-separated NxM list, e.g. 512x16,2048x64")
    ap.add_argument("--reps", type=int, default=3, help="minimum best-of runs for ours and C (default 3)")
    ap.add_argument(
        "--min-time",
        type=float,
        default=0.2,
        help="keep repeating ours and C until the runs add up to this many seconds (default 0.2)",
    )
    ap.add_argument("--max-pure-s", type=float, default=60.0, help="skip pure-Python rescans above this")
    ap.add_argument("--cc", default=os.environ.get("CC") or shutil.which("cc") or "gcc")
    ap.add_argument("--cflags", default=CFLAGS, help=f"C compiler flags (default {CFLAGS!r})")
    ap.add_argument("--no-cold-jit", action="store_true", help="skip the cold-cache JIT compile probe")
    args = ap.parse_args(argv)
    sizes = args.sizes or (QUICK if args.quick else SIZES)

    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="bench_mapping_") as tmpdir:
        tmp = Path(tmpdir)
        cflags = args.cflags.split()
        exe, cc_version = compile_c(args.cc, cflags, tmp)
        info = machine_info(cc_version, cflags)
        for k, v in info:
            print(f"{k:>10}: {v}")
        print(f"{'ours':>10}: {'skylease.planning.mapping' if OURS else 'not available (' + OURS_ERR + ')'}")
        print()
        # warm-up of ours, before anything else calls it: first call in this process
        first_ms = {h: timed(fn, cvb_etc(*sizes[0], seed_of(*sizes[0])))[1] for h, fn in OURS.items()}
        jit = cold_jit_ms(tmp, *sizes[0]) if OURS and not args.no_cold_jit else {}
        for h in OURS:
            cold = f"{jit[h]:.0f} ms" if h in jit else "not measured"
            print(
                f"ours {h}: first call in this process {first_ms[h]:.1f} ms; cold JIT compile"
                f" (empty NUMBA_CACHE_DIR, fresh interpreter) {cold}"
            )
        for note in self_test(exe, tmp):
            print("thesis example:", note)
        print("thesis example: C and pure Python reproduce decision A7 (Min-min 3200, Low_3 sweep): ok")
        print()

        for n, m in sizes:
            etc = cvb_etc(n, m, seed_of(n, m))
            assert np.isfinite(etc).all() and (etc > 0).all()
            etc_path = tmp / f"etc_{n}x{m}.bin"
            np.ascontiguousarray(etc, dtype="<f8").tofile(etc_path)
            etc_list = etc.tolist()  # pure Python's native input (conversion not timed)
            for h in HEURISTICS:
                row = bench_one(h, n, m, etc, etc_list, etc_path, args, tmp, exe, first_ms)
                row.ours_jit_ms = jit.pop(h, None)
                rows.append(row)
                print(
                    f"  {row.size:>9} {h:<9} ours {fmt_ms(row.ours.ms if row.ours else None):>8} ms"
                    f" | py {fmt_ms(row.py.ms):>9} ms | C {fmt_ms(row.c.ms):>8} ms"
                    f" | makespan {row.c.makespan:.6f} | {row.agree()}",
                    flush=True,
                )

    info.append(("load avg at end", loadavg()))
    print_report(rows, info, args)
    return 0


def md_table(head: list[str], body: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(head) + " |"]
    out.append("|" + "|".join("---" if i < 2 else "---:" for i in range(len(head))) + "|")
    out += ["| " + " | ".join(b) + " |" for b in body]
    return out


def text_table(head: list[str], body: list[list[str]]) -> list[str]:
    widths = [max(len(x) for x in col) for col in zip(head, *body, strict=True)]
    out = ["  ".join(h.rjust(w) for h, w in zip(head, widths, strict=True))]
    out.append("  ".join("-" * w for w in widths))
    out += ["  ".join(x.rjust(w) for x, w in zip(b, widths, strict=True)) for b in body]
    return out


def main_table(rows: list[Row]) -> tuple[list[str], list[list[str]]]:
    head = [
        "size",
        "heuristic",
        "ours ms",
        "ours 1st call ms",
        "ours cold JIT ms",
        "pure-Py ms",
        "pure-Py alt ms",
        "C ms",
        "C alt ms",
        "ours/C",
        "makespans agree",
    ]
    body = [
        [
            r.size,
            r.heuristic,
            fmt_ms(r.ours.ms) if r.ours else "not available",
            fmt_ms(r.ours_first_ms),
            fmt_ms(r.ours_jit_ms),
            fmt_ms(r.py.ms),
            fmt_ms(r.py_alt.ms) if r.py_alt is not None else r.py_alt_note,
            fmt_ms(r.c.ms),
            fmt_ms(r.c_alt.ms),
            f"{r.ratio:.2f}" if r.ratio is not None else "-",
            r.agree(),
        ]
        for r in rows
    ]
    return head, body


def diag_table(rows: list[Row]) -> tuple[list[str], list[list[str]]]:
    head = [
        "size",
        "heuristic",
        "ours ms",
        "evaluate() ms",
        "ours - evaluate() ms",
        "C ms",
        "(ours - evaluate())/C",
    ]
    body = []
    for r in rows:
        if r.ours is None or r.ours_eval_ms is None:
            continue
        k = r.ours.ms - r.ours_eval_ms
        body.append(
            [
                r.size,
                r.heuristic,
                fmt_ms(r.ours.ms),
                fmt_ms(r.ours_eval_ms),
                fmt_ms(k),
                fmt_ms(r.c.ms),
                f"{k / r.c.ms:.2f}",
            ]
        )
    return head, body


def targets_of(rows: list[Row]) -> list[str]:
    if not any(r.ours for r in rows):
        return ["ours: not available - targets not evaluated"]
    ratios = [(r.ratio, r) for r in rows if r.ratio is not None]
    worst, wr = max(ratios, key=lambda t: t[0])
    ok = all(x <= 2.0 for x, _ in ratios) and len(ratios) == len(rows)
    out = [
        f"ours <= 2x C for every size and heuristic: {'MET' if ok else 'NOT MET'}"
        f" (worst {worst:.2f}x: {wr.heuristic} {wr.size})"
    ]
    mm = [r for r in rows if r.size == "2048x64" and r.heuristic == "Min-min" and r.ours]
    if mm:
        t = mm[0].ours.ms
        out.append(f"Min-min 2048x64 < 100 ms: {'MET' if t < 100 else 'NOT MET'} ({t:.1f} ms)")
    else:
        out.append("Min-min 2048x64 < 100 ms: not measured (size not selected)")
    return out


LEGEND = [
    "ours and C: best of >= {reps} back-to-back runs, repeated until they add up to {min_time:g} s"
    " (C alt: best of {reps}); pure Python: one run. 'ours 1st call' = the warm-up call in this process"
    " (a load from numba's on-disk cache when it is warm, a full compile otherwise); 'ours cold JIT' ="
    " the first call in a fresh interpreter with an empty NUMBA_CACHE_DIR (full JIT compile, import"
    " excluded).",
    "numba compiles for the host CPU (like -march=native); the C column uses the flags shown below."
    " -std=c11 (ISO C) keeps GCC from contracting a*b+c into FMA, so C stays bit-identical to Python.",
    "Kinds (issue 25): the C columns are peers (what a user who needs speed writes by hand, with the"
    " same algorithmic help); the pure-Python columns are ablations (our algorithms without numba).",
    "C / pure-Py = reference variant (C column = the fairest C): incremental Min-min and Sufferage; Low_3"
    " with the rescaled score ready_j + w*ETC_j, all 11 lambdas in one pass (the formulation ours uses).",
    "C alt / pure-Py alt: textbook rescanning O(n^2 m) Min-min and Sufferage; literal Eq. 3.1 Low_3"
    " (two divisions per entry, one pass per lambda).",
    "C and pure Python are asserted to agree exactly (makespan, assignment, order) on every instance;"
    " 'makespans agree' = ours has the same assignment and the same makespan (loads summed in task order).",
    "Instances: CVB-like gamma ETC, mu = 1000, V_task = 0.6, V_mach = 0.3 (inconsistent), seed = 1000*n + m.",
]


def print_report(rows: list[Row], info: list[tuple[str, str]], args) -> None:
    head, body = main_table(rows)
    dhead, dbody = diag_table(rows)
    targets = targets_of(rows)
    notes = [note for r in rows for note in r.notes]
    legend = [x.format(reps=args.reps, min_time=args.min_time) for x in LEGEND]
    print()
    print("\n".join(text_table(head, body)))
    print()
    for t in targets:
        print("TARGET", t)
    if dbody:
        print()
        print("Diagnostics: ours = kernel + per-call overhead (validation, Schedule metrics);")
        print("evaluate() on the same schedule approximates that overhead.")
        print("\n".join(text_table(dhead, dbody)))
    if notes:
        print()
        print("\n".join(notes))
    print()
    print("```markdown")
    print("\n".join(md_table(head, body)))
    print()
    for t in targets:
        print(f"- **{t}**")
    for x in legend:
        print(f"- {x}")
    if dbody:
        print()
        print("Per-call overhead of ours (validation + Schedule metrics, approximated by `evaluate()`):")
        print()
        print("\n".join(md_table(dhead, dbody)))
    if notes:
        print()
        for x in notes:
            print(f"- {x}")
    print()
    print("Machine: " + "; ".join(f"{k}: {v}" for k, v in info) + ".")
    print("```")


if __name__ == "__main__":
    raise SystemExit(main())
