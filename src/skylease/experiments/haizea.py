"""The Haizea experiments (decisions H14-H22 in docs/decisions/haizea.md): the Blue Horizon best-effort
trace with injected advance
reservations, under the paper's six configurations.

One cell is one workload ``[ρ/δH/ν]`` under one configuration with one image draw
(:func:`haizea_cell`); the no-AR baseline is :func:`baseline`. The best-effort trace is read once
per process (every cell of a campaign shares it).
"""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import Any

import pandas as pd

from skylease.control.leases import PAPER_CONFIGURATIONS, paper_configuration
from skylease.model.errors import UserError
from skylease.sim.leases import ar_leases, assign_images, be_leases, simulate_leases
from skylease.traces import datasets
from skylease.traces.ar_injection import SIZES, injection_name
from skylease.traces.lwf import read_plain_lwf
from skylease.traces.swf import best_effort_requests, read_swf

__all__ = ["BASELINE_S", "CONFIGS", "DELTAS", "RHOS", "WORKLOAD_SIZES", "baseline", "haizea_cell",
           "parse_workload", "workload_label"]

#: The paper's all-best-effort time without ARs (NOVM-NOSR), seconds.
BASELINE_S = 2_674_265
CONFIGS = tuple(PAPER_CONFIGURATIONS)
RHOS = (5, 10, 15, 20, 25, 30)
DELTAS = (1, 2, 3, 4)
WORKLOAD_SIZES = tuple(SIZES)


def workload_label(rho: int, delta_h: int, size: str) -> str:
    """``10/3/medium`` for ``[10 %/3H/medium]``."""
    return f"{rho}/{delta_h}/{size}"


def parse_workload(label: str) -> tuple[int, int, str]:
    """The inverse of :func:`workload_label`, checked against the 72 workloads."""
    try:
        r, d, s = label.split("/")
        rho, delta = int(r), int(d)
    except ValueError:
        raise UserError(f"{label!r} is not RHO/DELTA/SIZE (e.g. 10/3/medium)", field="workload") from None
    if rho not in RHOS or delta not in DELTAS or s not in SIZES:
        raise UserError(f"{label!r}: rho in {RHOS}, delta in {DELTAS}, size in {WORKLOAD_SIZES}",
                        field="workload")
    return rho, delta, s


@functools.lru_cache(maxsize=2)
def _be_requests(swf: str) -> pd.DataFrame:
    return best_effort_requests(read_swf(swf))


def _swf(data_dir: str | None) -> Path:
    return datasets.locate("swf-blue", None if data_dir is None else Path(data_dir)) / "blue_30days.swf"


def injected_ars(label: str, data_dir: str | None = None) -> tuple[pd.DataFrame, int]:
    """The ARs of a workload and how many were dropped for starting in the past (decision H16 [R]:
    two ARs in each of [25 %/1H/small] and [30 %/1H/small])."""
    rho, delta, size = parse_workload(label)
    folder = datasets.locate("lwf-injected", None if data_dir is None else Path(data_dir))
    rows = read_plain_lwf(folder / "30days" / injection_name(rho, delta, size))
    keep = rows[rows["start"] >= 0].reset_index(drop=True)
    return keep, len(rows) - len(keep)


def _summarise(run: Any, wall: float) -> dict[str, Any]:
    s = run.summary()
    return {"all_best_effort_s": int(run.all_best_effort),
            "rel_runtime_pct": (run.all_best_effort / BASELINE_S - 1) * 100,
            "mean_wait_s": s["mean_wait_s"], "mean_bounded_slowdown": s["mean_bounded_slowdown"],
            "ar_accepted": s["ar_accepted"], "ar_rejected": s["ar_rejected"], "events": s["events"],
            "wall_s": wall}


def haizea_cell(workload: str, config: str, data_dir: str | None = None, seed: int = 0,
                rep: int = 0) -> dict[str, Any]:
    """One run: the BE trace plus the workload's ARs under ``config``; ``rep`` is the image-draw seed
    (configurations that transfer images only; the campaign's own ``seed`` is not used)."""
    t0 = time.perf_counter()
    cfg, images = paper_configuration(config)
    be = be_leases(_be_requests(str(_swf(data_dir))))
    ars, dropped = injected_ars(workload, data_dir)
    leases = be + ar_leases(ars, len(be))
    if images is not None:
        assign_images(leases, images, seed=rep)
    run = simulate_leases(leases, config=cfg)
    return {**_summarise(run, time.perf_counter() - t0), "ar_dropped": dropped,
            "image_seed": rep if images is not None else None}


def baseline(data_dir: str | None = None) -> dict[str, Any]:
    """The BE trace alone under NOVM-NOSR, and the trace statistics of acceptance test (a)."""
    t0 = time.perf_counter()
    swf = _swf(data_dir)
    raw = read_swf(swf)
    req = _be_requests(str(swf))
    run = simulate_leases(be_leases(req))
    out = _summarise(run, time.perf_counter() - t0)
    out.update(clip_time=run.clip_time, requests=len(req),
               short_share=float((req["requested"] <= 3600).mean()),
               small_share=float((req["nodes"] <= 4).mean()), swf_jobs=len(raw))
    return out
