"""``skylease reproduce haizea``: the Haizea paper's baseline, Table 1 and Figure 2, ours beside theirs.

The campaign runs every workload ``[ρ/δH/ν]`` (72) under the six configurations on the campaign
runner (one cell = one simulation), plus, for the configurations that draw VM images, four more
image draws of the three Table 1 workloads (decision H17 in docs/decisions/haizea.md: the original
image lists are lost; average over at least 5 draws). ``quick`` runs the Table 1 workloads only,
with one draw. The report is split by purpose: the paper's numbers
(:mod:`~skylease.experiments.haizea_numbers`, read from ``data/papers/``), the tables and claim
checks (:mod:`~skylease.experiments.haizea_checks`: the baseline exactly, the trace statistics,
Table 1 within the tolerances of decision H20, the orderings its Table 1 supports, Figure 2 against
its digitised values), the figures (:mod:`~skylease.experiments.haizea_figures`) and the text
(:mod:`~skylease.experiments.haizea_text`: ``report.md``, where and why we differ).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from skylease.experiments.haizea import (
    CONFIGS,
    DELTAS,
    RHOS,
    WORKLOAD_SIZES,
    baseline,
    haizea_cell,
    parse_workload,
    workload_label,
)
from skylease.experiments.haizea_checks import (
    _with_workload,
    baseline_claims,
    fig2_claims,
    fig2_table,
    ordering_claims,
    table1,
    table1_claims,
)
from skylease.experiments.haizea_figures import plot_fig2, plot_fig2_scatter, plot_table1
from skylease.experiments.haizea_numbers import PAPER_FIG2, PAPER_TABLE1, TABLE1_WORKLOADS
from skylease.experiments.haizea_text import markdown
from skylease.experiments.report import write_report
from skylease.experiments.store import out_folder
from skylease.experiments.sweep import check_cluster, run_campaign
from skylease.model.errors import UserError

__all__ = ["PAPER_FIG2", "PAPER_TABLE1", "fig2_claims", "plot_fig2", "report_from_runs", "reproduce_haizea"]

IMAGE_CONFIGS = ("VM-MULT", "VM-REUSE-UNIFORM", "VM-REUSE-SKEWED")
FULL_IMAGE_SEEDS = 5


# -- the campaign --------------------------------------------------------------------------------------
def reproduce_haizea(out: str | Path, *, quick: bool = False, workloads: Sequence[str] | None = None,
                     configs: Sequence[str] | None = None, image_seeds: int | None = None,
                     mode: str = "processes", workers: int | None = None, scheduler: str | None = None,
                     data_dir: str | Path | None = None, progress: bool = False) -> dict[str, Any]:
    """Run the campaign and write ``report.md``, ``runs.csv``, tables and figures into ``out``."""
    t0 = time.perf_counter()
    out = Path(out)
    wls = list(workloads) if workloads is not None else (
        list(TABLE1_WORKLOADS) if quick else
        [workload_label(r, d, s) for s in WORKLOAD_SIZES for r in RHOS for d in DELTAS])
    for w in wls:
        parse_workload(w)
    cfgs = list(configs) if configs is not None else list(CONFIGS)
    for c in cfgs:
        if c not in CONFIGS:
            raise UserError(f"unknown configuration {c!r}; known: {', '.join(CONFIGS)}", field="configs")
    n_img = image_seeds if image_seeds is not None else (1 if quick else FULL_IMAGE_SEEDS)
    if n_img < 1:
        raise UserError(f"image seeds must be >= 1, got {n_img}", field="image-seeds")
    dd = None if data_dir is None else str(data_dir)
    base = baseline(dd)  # also fails fast on missing data, before starting workers
    check_cluster(scheduler, workers)  # before the folder is made: a mistake leaves nothing
    out = out_folder(out)
    # longest cells first (high rho, short ARs, image transfers) so that the workers finish together
    wls.sort(key=lambda w: (-parse_workload(w)[0], parse_workload(w)[1]))
    kw = {"mode": mode, "workers": workers, "scheduler": scheduler, "progress": progress}
    camps = [run_campaign(haizea_cell, {"workload": wls, "config": cfgs, "data_dir": [dd]}, seeds=[0],
                          description=f"Haizea: {len(wls)} workloads x {len(cfgs)} configurations", **kw)]
    extra_w = [w for w in TABLE1_WORKLOADS if w in wls]
    extra_c = [c for c in IMAGE_CONFIGS if c in cfgs]
    if n_img > 1 and extra_w and extra_c:
        camps.append(run_campaign(haizea_cell, {"workload": extra_w, "config": extra_c, "data_dir": [dd]},
                                  seeds=list(range(1, n_img)),
                                  description=f"Haizea: {n_img - 1} more image draws", **kw))
    failed = [f for c in camps for f in c.failed]
    if failed:
        raise RuntimeError(f"{len(failed)} cells failed; first: {failed[0].get('error')}")
    runs = pd.concat([c.table for c in camps], ignore_index=True)
    runs = runs.drop(columns=[c for c in ("data_dir", "key", "seed", "rep") if c in runs.columns])
    campaign_s = sum(c.elapsed_s for c in camps)
    return report_from_runs(runs, out, base=base, campaign_s=campaign_s, started=t0, quick=quick)



def report_from_runs(runs: pd.DataFrame | str | Path, out: str | Path, *, base: dict[str, Any] | None = None,
                     campaign_s: float = math.nan, started: float | None = None,
                     quick: bool = False, data_dir: str | Path | None = None) -> dict[str, Any]:
    """Derive the tables, figures and checks from the runs (a frame or ``runs.csv``) and write them."""
    t0 = time.perf_counter() if started is None else started
    out = out_folder(out)
    if not isinstance(runs, pd.DataFrame):
        runs = pd.read_csv(runs)
    if base is None:
        base = baseline(None if data_dir is None else str(data_dir))
    runs = runs.sort_values(["workload", "config", "image_seed"], na_position="first").reset_index(drop=True)
    runs.to_csv(out / "runs.csv", index=False)
    r = _with_workload(runs)
    t1 = table1(r)
    f2 = fig2_table(r)
    claims = baseline_claims(base)
    if len(t1):
        claims += table1_claims(t1) + ordering_claims(t1)
    claims += fig2_claims(f2)
    cl = pd.DataFrame(claims)
    cl.to_csv(out / "claims.csv", index=False)
    t1.to_csv(out / "table1.csv", index=False)
    f2.to_csv(out / "fig2.csv", index=False)
    figs = {"fig2": plot_fig2(f2, out / "fig2_relative_runtime.png"),
            "scatter": plot_fig2_scatter(f2, out / "fig2_scatter.png")}
    if len(t1):
        figs["table1"] = plot_table1(t1, out / "table1.png")
    seconds = time.perf_counter() - t0
    held = int(cl["holds"].sum())
    text = markdown(base, t1, f2, cl, figs, runs, campaign_s, seconds, quick)
    write_report(out / "report.md", text)
    return {"claims": claims, "held": held, "checked": len(cl), "runs": len(runs), "seconds": seconds,
            "campaign_s": campaign_s, "out": str(out)}
