"""SpeQuloS simulation speed: events and wall time per run, a naive reference, and the full campaign.

Targets (issue 6): a single BOINC + SMALL run under 1 s, and the full evaluation campaign (2
middleware x 6 traces x 3 BoTs x (18 strategies + none) x 10 seeds = 6,840 runs) in under 60
minutes on this 2-core machine.

The reference is the naive simulator of ``tests/sim/dg_reference.py``: every keep-alive, back-off
retry, OFF and ON of every node is an event (what a direct transcription of the middleware's
behaviour does). Its histories are tested to be identical to ours. It is only feasible on the
small ``nd`` trace (183 nodes); on ``seti`` (30,300 nodes) its event count, which grows with
simulated time x nodes, is out of reach, so there we report ours alone.

    python benchmarks/bench_spequlos.py [--seeds 3] [--no-campaign] [--campaign-seeds 10]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "sim"))
from dg_reference import ref_boinc, ref_xwhep  # noqa: E402

from skylease.control.qos import STRATEGIES  # noqa: E402
from skylease.experiments.spequlos import TRACES, environment_cell, run_once, submission_time, trace_for  # noqa: E402
from skylease.sim.dg import DesktopGridEnv  # noqa: E402
from skylease.sim.dg.workload import make_bot  # noqa: E402

SINGLE_TARGET_S = 1.0
CAMPAIGN_TARGET_S = 3600.0


def data_dir() -> str | None:
    d = ROOT.parent / "shared" / "data"
    return str(d) if d.is_dir() else None


def ours_vs_reference(trace: str, seeds: int) -> None:
    flat = trace_for(trace, data_dir())
    print(
        f"\n{trace} ({flat.n_nodes} nodes), no QoS: skylease vs the naive reference, mean over {seeds} seeds"
    )
    print(
        f"{'mw':6} {'bot':6} {'events':>9} {'ref events':>11} {'ours s':>8} {'ref s':>8} {'ref/ours':>9} same"
    )
    for mw in ("boinc", "xwhep"):
        for cat in ("SMALL", "BIG", "RANDOM"):
            ev, rev, w, rw, same = [], [], [], [], True
            for k in range(seeds):
                bot = make_bot(cat, seed=k)
                kw = dict(submit_at=submission_time(flat, k), seed=k)
                t = time.perf_counter()
                res = DesktopGridEnv(mw, flat, bot, **kw).run()
                w.append(time.perf_counter() - t)
                ev.append(res.events)
                env = DesktopGridEnv(mw, flat, bot, **kw)
                ref = ref_xwhep if mw == "xwhep" else ref_boinc
                t = time.perf_counter()
                rc, _ = ref(env)
                rw.append(time.perf_counter() - t)
                rev.append(getattr(env, "ref_events", np.nan))
                same &= bool(np.allclose(np.sort(rc), res.completion_times, atol=1e-6))
            print(
                f"{mw:6} {cat:6} {np.mean(ev):9.0f} {np.nanmean(rev) if rev else float('nan'):11.0f} "
                f"{np.mean(w):8.3f} {np.mean(rw):8.3f} {np.mean(rw) / np.mean(w):8.1f}x "
                f"{'yes' if same else 'NO'}"
            )


def ours_per_run(trace: str, seeds: int) -> dict[tuple[str, str, str], float]:
    flat = trace_for(trace, data_dir())
    print(f"\n{trace} ({flat.n_nodes} nodes): skylease per run, mean over {seeds} seeds")
    print(f"{'mw':6} {'bot':6} {'qos':7} {'events':>8} {'wall s':>8} {'max s':>7}")
    out = {}
    for mw in ("boinc", "xwhep"):
        for cat in ("small", "big", "random"):
            for s in ("none", "9C-C-R"):
                rows = [run_once(mw, trace, cat, s, k, data_dir=data_dir()) for k in range(seeds)]
                walls = [r["wall_s"] for r in rows]
                out[(mw, cat, s)] = max(walls)
                print(
                    f"{mw:6} {cat:6} {s:7} {np.mean([r['events'] for r in rows]):8.0f} "
                    f"{np.mean(walls):8.3f} {max(walls):7.3f}"
                )
    return out


def campaign(seeds: int, workers: int) -> float:
    from skylease.experiments.sweep import run_campaign

    envs = [(mw, t, b) for t in TRACES for mw in ("boinc", "xwhep") for b in ("small", "big", "random")]
    for t in TRACES:  # fail fast when a data set is missing
        trace_for(t, data_dir())
    grid = {"environment": [f"{mw}/{t}/{b}" for mw, t, b in envs], "data_dir": [data_dir()]}
    t0 = time.perf_counter()
    res = run_campaign(_cell, grid, seeds=seeds, workers=workers, progress=sys.stderr.isatty())
    wall = time.perf_counter() - t0
    n = len(res.table)
    print(
        f"\nfull campaign: {len(envs)} environments x {seeds} seeds x 19 runs = {n} runs "
        f"({len(res.failed)} failed cells) in {wall:.0f} s on {workers} worker processes: "
        f"{n / wall:.1f} runs/s"
    )
    ok = wall < CAMPAIGN_TARGET_S and not res.failed
    print(f"target < {CAMPAIGN_TARGET_S / 60:.0f} min: {'MET' if ok else 'NOT MET'} ({wall / 60:.1f} min)")
    return wall


def _cell(environment: str, data_dir: str | None, seed: int, rep: int) -> list[dict]:
    del seed
    mw, t, b = environment.split("/")
    rows = environment_cell(mw, t, b, STRATEGIES, rep, data_dir)
    for r in rows:
        r["run_seed"] = r.pop("seed")
        for k in ("middleware", "trace", "bot"):
            r[f"run_{k}"] = r.pop(k)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3, help="seeds per row of the per-run tables")
    ap.add_argument("--campaign", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--campaign-seeds", type=int, default=10)
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}; load average {os.getloadavg()[0]:.2f}"
    )
    t = time.perf_counter()
    seti = trace_for("seti", data_dir())
    print(
        f"seti-like trace: {seti.n_nodes} nodes, generated and flattened in {time.perf_counter() - t:.1f} s "
        "(once per process)"
    )
    ours_vs_reference("nd", a.seeds)
    walls = ours_per_run("seti", a.seeds)
    single = max(walls[("boinc", "small", "none")], walls[("boinc", "small", "9C-C-R")])
    print(
        f"\nsingle BOINC + SMALL run on seti (slowest of {2 * a.seeds}, with and without QoS): "
        f"{single:.3f} s; "
        f"target < {SINGLE_TARGET_S:.0f} s: {'MET' if single < SINGLE_TARGET_S else 'NOT MET'}"
    )
    slowest = max(walls.values())
    print(f"slowest single run on seti: {slowest:.3f} s")
    if a.campaign:
        campaign(a.campaign_seeds, a.workers)


if __name__ == "__main__":
    main()
