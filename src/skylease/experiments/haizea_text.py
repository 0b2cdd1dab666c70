"""The text of the Haizea report: ``report.md`` from the tables, the claims and the figures."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from skylease.experiments.haizea import CONFIGS
from skylease.experiments.haizea_numbers import FIG2_TOLERANCE, TABLE1_RHOS
from skylease.experiments.report import md_table

__all__ = ["DIFFERENCES", "markdown"]

DIFFERENCES = (
    "**Which nodes a lease that must be suspended gets.** The paper (decision H9) prefers "
    "the nodes where a lease can run without being suspended; the 2008 code "
    "(`AvailabilityWindow.findPhysNodesForVMs`) keeps "
    "exactly n of them: every node free beyond the suspension point, then the highest ids among those "
    "that stop being free there. Taking the n lowest-id nodes free until the suspension point instead "
    "(our first reading) left NOVM-SR at 30 % with two ARs rejected behind a 140-node lease's planned "
    "resumption (wait 17.20 ks, +15.9 %) and VM-PREDEPLOY at 10 % with a slowdown of 35.31 (−10.8 %). "
    "Full fits, and so NOVM-NOSR and the baseline, are unchanged. RESUME and SUSPEND reservations stay "
    "non-preemptible, as in the 2008 code; the option `preempt_future_resumptions` (ours, off) lets an AR "
    "unschedule a suspended lease's future plan and changes nothing in Table 1.",
    "**VM-MULT and VM-REUSE (image draws).** The original image lists are lost (decision H17); one draw "
    "moves "
    "run time by about ±0.5 pp and wait and slowdown by ±5-10 %, so these rows are compared on the mean of "
    "5 draws and the range is shown. VM-REUSE was not re-simulated (decision H20); its tolerances are "
    "reported, not required.",
    "**Figure 2 (one image draw per workload).** The Table 1 workloads are averaged over 5 image draws; the "
    "other 69 run one draw each. The configurations without images are within ±1.1 pp of the digitised "
    "figure at 90-96 % of the points; those that draw images at 85-88 %, since one draw moves the run "
    "time by up to ±0.7 pp (the ranges in Table 1) on top of the paper's own single draw. The 90 % pass "
    "mark is ours: decision H20 gives tolerances for Table 1 only. The trends of Figure 2 all hold.",
    "**Rejected ARs.** The paper does not report them (decision H22). Under the VM configurations a few ARs "
    "of the high-ρ workloads overlap once their durations get +5 % and +20 s, or their image cannot "
    "arrive by their start (EDF); the per-workload counts are in `fig2.csv`. Two ARs starting in the past "
    "are dropped from each of [25 %/1H/small] and [30 %/1H/small] (decision H16).",
    "**The paper's own errata** (decision H21): the text's '≤ 10 % with suspend/resume' and 'up to 32.97 %' "
    "contradict its Figure 2 (up to 1.14 and 1.43); we check against the figure. 'NOVM-NOSR gives better "
    "average wait and slowdown in most cases' is contradicted by Table 1 and is not checked.",
)



def _table1_md(t1: pd.DataFrame, metric: str) -> str:
    g = t1[t1["metric"] == metric]
    rows = []
    for config in CONFIGS:
        h = g[g["config"] == config].set_index("rho")
        if h.empty:
            continue
        row: dict[str, Any] = {"config": config}
        for rho in TABLE1_RHOS:
            if rho not in h.index:
                row[f"{rho} %"] = "–"
                continue
            x = h.loc[rho]
            ours = f"{x['ours_mean']:.2f}"
            if x["draws"] > 1:
                ours += f" ({x['ours_min']:.2f}–{x['ours_max']:.2f})"
            mark = "" if x["within"] else " ✗"
            resim = "" if math.isnan(x["spec_resim"]) else f" / {x['spec_resim']:.2f}"
            row[f"{rho} %"] = f"{ours}{mark} [{x['paper']:.2f}{resim}]"
        rows.append(row)
    return md_table(pd.DataFrame(rows))


def markdown(base: dict[str, Any], t1: pd.DataFrame, f2: pd.DataFrame, cl: pd.DataFrame,
              figs: dict[str, str], runs: pd.DataFrame, campaign_s: float, seconds: float,
              quick: bool) -> str:
    n_w = runs["workload"].nunique()
    n_c = runs["config"].nunique()
    timing = (f"Campaign {campaign_s:.0f} s on the campaign runner; whole report {seconds:.0f} s."
              if math.isfinite(campaign_s) else f"Report rebuilt from runs.csv in {seconds:.0f} s.")
    lines = [
        "# Haizea (HPDC'08): combining batch execution and leasing, reproduced",
        "",
        f"**{n_w} workloads x {n_c} configurations = {len(runs)} simulations** of the 30-day Blue Horizon "
        f"trace (5,108 best-effort leases on 144 nodes) with injected advance reservations"
        f"{' (quick: the Table 1 workloads only)' if quick else ''}. {timing} "
        "Paper: B. Sotomayor, K. Keahey, I. Foster, \"Combining Batch Execution and Leasing Using Virtual "
        "Machines\", HPDC 2008; our readings of it: `docs/decisions/haizea.md`; command: "
        "`skylease reproduce haizea"
        f"{' --quick' if quick else ''} --out DIR`.",
        "",
        f"**{int(cl['holds'].sum())} of {len(cl)} checks hold.**",
        "",
        "## Checks",
        "",
        md_table(cl, ["claim", "paper", "ours", "holds", "why"]),
        "",
        "## Baseline",
        "",
        f"NOVM-NOSR without ARs: all-best-effort **{base['all_best_effort_s']:,} s** (paper 2,674,265 s), "
        f"{base['events']:,} events in {base['wall_s']:.1f} s. Mean wait "
        f"{base['mean_wait_s'] / 1000:.2f} ks, "
        f"mean bounded slowdown {base['mean_bounded_slowdown']:.2f} (measurements from t = "
        f"{base['clip_time']:,} s on).",
        "",
    ]
    if len(t1):
        lines += ["## Table 1: [ρ/3H/medium]", "",
                  "Each cell: ours [paper / the re-simulation of decision H20]; ✗ marks a cell outside H20's "
                  "tolerance (±1.1 pp run time; ±10 % wait and slowdown, ±15 % at 30 %). Configurations "
                  "that draw images: mean of the draws (range).", ""]
        for metric, title in (("rel_runtime_pct", "Time to complete all best-effort leases, relative to the "
                               "run without ARs (%)"), ("wait_ks", "Mean wait of best-effort leases (ks)"),
                              ("mean_bounded_slowdown", "Mean bounded slowdown")):
            lines += [f"**{title}**", "", _table1_md(t1, metric), ""]
        lines += [f"![Table 1]({figs['table1']})", ""]
    f = f2.dropna(subset=["paper_x"])
    if len(f):
        per = f.groupby("config")["diff"].agg(
            mean_diff_pp=lambda d: d.mean() * 100, mean_abs_pp=lambda d: d.abs().mean() * 100,
            max_abs_pp=lambda d: d.abs().max() * 100,
            within=lambda d: float((d.abs() <= FIG2_TOLERANCE).mean() * 100)).reindex(
            [c for c in CONFIGS if c in set(f["config"])]).reset_index()
        lines += ["## Figure 2: relative running time, every workload", "",
                  "Ours against the values digitised from the paper's figure (decision H19, ±0.003), first "
                  "image draw. Per configuration:", "",
                  md_table(per, headers=["config", "mean diff (pp)", "mean abs diff (pp)",
                                         "max abs diff (pp)", "within ±1.1 pp (%)"]),
                  "", f"![Figure 2]({figs['fig2']})", "",
                  f"![Figure 2, ours vs paper]({figs['scatter']})", ""]
        worst = f.reindex(f["diff"].abs().sort_values(ascending=False).index).head(8)
        lines += ["Largest differences:", "",
                  md_table(worst, ["size", "config", "rho", "delta", "x", "paper_x", "diff",
                                   "ar_rejected"], 3),
                  ""]
    lines += ["## Where we differ, and why", ""] + [f"- {d}" for d in DIFFERENCES] + [""]
    lines += ["## Files", "",
              "`runs.csv` (one row per simulation), `table1.csv`, `fig2.csv`, `claims.csv`, and the PNGs "
              "above.",
              ""]
    return "\n".join(lines)
