"""``skylease demo``: a short tour of what has landed, on the simulator and the campaign runner."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from skylease.control.fixed import FixedPool
from skylease.experiments.sweep import CampaignResult, run_campaign, summarize
from skylease.model.catalog import InstanceType
from skylease.sim.env import simulate
from skylease.traces.synthetic import gamma_bag

# The render-like workload of the A2HA study: 256 tasks, 220 +- 125 s; hosts boot in 5 min and
# are billed per started hour at $0.10.
DEMO_TASKS = 256
DEMO_MEAN_S = 220.0
DEMO_SD_S = 125.0
DEMO_VM = InstanceType("vm", boot_time=300.0, billing_unit=3600.0, price=0.10)
DEMO_GRID = {"pool_size": [4, 8, 16, 32, 64]}


def fixed_pool_cell(pool_size: int, seed: int) -> dict[str, Any]:
    """One run: a fixed pool of ``pool_size`` hosts on a fresh draw of the render-like bag."""
    bag = gamma_bag(DEMO_TASKS, DEMO_MEAN_S, DEMO_SD_S, seed)
    r = simulate(FixedPool(pool_size), bag, [DEMO_VM])
    busy = sum(rec.end - rec.start for rec in r.records)
    paid = r.charged_units * DEMO_VM.billing_unit
    return {**r.summary(), "utilisation": busy / paid}


def run_fixed_pool_demo(out: str | Path | None, *, seeds: int = 5, mode: str = "processes",
                        workers: int | None = 2, scheduler: str | None = None,
                        progress: bool = True) -> CampaignResult:
    return run_campaign(fixed_pool_cell, DEMO_GRID, seeds=seeds, out=out, mode=mode,
                        workers=workers, scheduler=scheduler, progress=progress,
                        description="fixed pools on the simulator")


def fixed_pool_table(result: CampaignResult) -> pd.DataFrame:
    """Mean over seeds per pool size: the trade-off a user faces when guessing a pool size."""
    s = summarize(result.table, ["pool_size"], ["makespan_s", "cost", "charged_units", "utilisation"])
    return s[["pool_size", "makespan_s_mean", "makespan_s_std", "cost_mean", "charged_units_mean",
              "utilisation_mean"]]
