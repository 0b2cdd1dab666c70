"""``skylease reproduce thesis-placement``: the chapter-6 grid, the online variant, and the report."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from skylease.experiments.report import write_report
from skylease.experiments.store import atomic_write_bytes_via, out_folder
from skylease.experiments.sweep import check_cluster, run_campaign
from skylease.experiments.thesis.paper_placement import (
    RELATED,
    STUDY_ALGORITHMS,
)
from skylease.experiments.thesis.placement_figures import grid_figure, online_figure, savings_figure
from skylease.experiments.thesis.placement_online import (
    ONLINE_DAYS,
    ONLINE_INSTANCES,
    ONLINE_PERIODS,
    ONLINE_USERS,
    online_cell,
    online_summary,
    survival_table,
)
from skylease.experiments.thesis.placement_study import (
    DONE_WHEN_SAVING,
    INSTANCES,
    N_VMS,
    USERS,
    claims,
    example_table,
    model_table,
    savings_table,
    study_cell,
    study_grid,
    summary_table,
)
from skylease.experiments.thesis.placement_text import PlacementReproduction, report_text

QUICK_INSTANCES = 5
QUICK_N_VMS = (40, 70, 100, 130)
QUICK_ONLINE_INSTANCES = 2
QUICK_ONLINE_DAYS = 4.0




def reproduce_thesis_placement(
    out: str | Path,
    *,
    quick: bool = False,
    instances: int | None = None,
    n_vms: tuple[int, ...] | None = None,
    online: bool = True,
    online_instances: int | None = None,
    mode: str = "inline",
    workers: int | None = None,
    scheduler: str | None = None,
    progress: bool = True,
) -> PlacementReproduction:
    """Run the worked example, the Figs. 6.2-6.3 grid and the online variant; write the report."""
    check_cluster(scheduler, workers)  # before the folder is made: a mistake leaves nothing
    out = out_folder(out)
    n_inst = instances or (QUICK_INSTANCES if quick else INSTANCES)
    sizes = n_vms or (QUICK_N_VMS if quick else N_VMS)
    t0 = time.perf_counter()
    study = run_campaign(study_cell, study_grid(USERS, sizes), seeds=n_inst, out=out / "study", mode=mode,
                         workers=workers, scheduler=scheduler, progress=progress,
                         description=f"thesis ch.6 grid, {n_inst} instance(s) per cell")
    grid_s = time.perf_counter() - t0
    summary = summary_table(study.table)
    online_runs = pd.DataFrame()
    online_s = 0.0
    failed = len(study.failed)
    if online:
        t0 = time.perf_counter()
        grid = {"users": list(ONLINE_USERS), "period": list(ONLINE_PERIODS),
                "days": [QUICK_ONLINE_DAYS if quick else ONLINE_DAYS]}
        n_online = online_instances or (QUICK_ONLINE_INSTANCES if quick else ONLINE_INSTANCES)
        res = run_campaign(online_cell, grid, seeds=n_online,
                           out=out / "online", mode=mode, workers=workers, scheduler=scheduler,
                           progress=progress, description="placement over time")
        online_s = time.perf_counter() - t0
        online_runs = res.table
        failed += len(res.failed)
    on = online_summary(online_runs) if len(online_runs) else pd.DataFrame()
    days = QUICK_ONLINE_DAYS if quick else ONLINE_DAYS
    rep = PlacementReproduction(
        out=out, instances=n_inst, example=example_table(), summary=summary, claims=claims(summary),
        models=model_table(summary), online=on,
        survival=survival_table(on, summary) if len(on) else pd.DataFrame(),
        grid_s=grid_s, online_s=online_s, online_days=days, done_when=done_when(summary), failed=failed)
    for name, df in (("example", rep.example), ("summary", rep.summary),
                     ("energy_savings", savings_table(summary, "energy_wh")),
                     ("desktop_savings", savings_table(summary, "desktops_used")),
                     ("claims", pd.DataFrame(rep.claims)), ("models", rep.models),
                     ("online", rep.online), ("online_survival", rep.survival)):
        atomic_write_bytes_via(out / f"{name}.csv", lambda tmp, df=df: df.to_csv(tmp, index=False))
    figures = {"desktops": grid_figure(summary, "desktops_used", "desktops used", 1.0,
                                        out / "fig_6_2_desktops.png"),
               "energy": grid_figure(summary, "energy_wh", "energy (MWh, Model C)", 1e-6,
                                      out / "fig_6_3_energy.png"),
               "savings": savings_figure(summary, out / "sorting_savings.png")}
    if len(on):
        figures["online"] = online_figure(on, out / "online.png")
    write_report(out / "report.md", report_text(rep, figures, sizes))
    return rep


def done_when(summary: pd.DataFrame) -> dict[str, Any]:
    """The issue's bar: Sorting's savings at 50 % busy and the largest size; 50 % below 0 % for all."""
    big = int(summary["n_vms"].max())
    sv = savings_table(summary, "energy_wh")
    at = sv[np.isclose(sv["users"], 0.5) & (sv["n_vms"] == big)]
    e = summary[summary["algorithm"].isin(STUDY_ALGORITHMS)].pivot_table(
        index=["algorithm", "n_vms"], columns="users", values="energy_wh")
    savings = {a: float(at[a].iloc[0]) for a in RELATED} if len(at) else {}
    lower = e[0.5] < e[0.0] if {0.0, 0.5} <= set(e.columns) else pd.Series(dtype=bool)
    return {"n_vms": big, "savings": savings,
            "savings_hold": bool(savings) and min(savings.values()) >= DONE_WHEN_SAVING,
            "lower_at_50": int(lower.sum()), "cells": len(lower),
            "lower_hold": bool(len(lower)) and bool(lower.all())}
