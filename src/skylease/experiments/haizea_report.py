"""``skylease reproduce haizea``: the Haizea paper's baseline, Table 1 and Figure 2, ours beside theirs.

The campaign runs every workload ``[ρ/δH/ν]`` (72) under the six configurations on the campaign
runner (one cell = one simulation), plus, for the configurations that draw VM images, four more
image draws of the three Table 1 workloads (spec 001 §12-M: the original image lists are lost;
average over at least 5 draws). ``quick`` runs the Table 1 workloads only, with one draw.
Checks: the baseline (exact), the trace statistics, Table 1 within the tolerances of the spec's
§11 for the configurations the spec validated, the orderings of §10.1, Figure 2 against the
digitised values of §10.3 and its trends. ``report.md`` says where and why we differ.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
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
from skylease.experiments.report import md_table, save_figure, write_report
from skylease.experiments.store import out_folder
from skylease.experiments.sweep import check_cluster, run_campaign
from skylease.model.errors import UserError

__all__ = ["PAPER_FIG2", "PAPER_TABLE1", "report_from_runs", "reproduce_haizea"]

TABLE1_RHOS = (10, 20, 30)
TABLE1_WORKLOADS = tuple(workload_label(r, 3, "medium") for r in TABLE1_RHOS)
IMAGE_CONFIGS = ("VM-MULT", "VM-REUSE-UNIFORM", "VM-REUSE-SKEWED")
#: Configurations whose Table 1 rows the spec's re-simulation validated (§11).
VALIDATED = ("NOVM-NOSR", "NOVM-SR", "VM-PREDEPLOY", "VM-MULT")
FULL_IMAGE_SEEDS = 5
METRICS = ("rel_runtime_pct", "wait_ks", "mean_bounded_slowdown")

# Table 1 of the paper [P]: (all-BE rel. %, wait ks, bounded slowdown) at rho = 10, 20, 30 %
PAPER_TABLE1: dict[str, tuple[tuple[float, float, float], ...]] = {
    "NOVM-NOSR": ((3.91, 16.91, 60.48), (8.66, 23.91, 71.80), (23.93, 68.95, 296.74)),
    "NOVM-SR": ((-0.76, 6.18, 31.05), (0.10, 8.14, 49.56), (4.14, 14.84, 134.91)),
    "VM-PREDEPLOY": ((-0.27, 8.05, 39.60), (1.58, 12.17, 62.45), (7.19, 22.89, 133.59)),
    "VM-MULT": ((0.60, 15.69, 91.94), (3.95, 34.56, 203.39), (12.21, 78.83, 441.10)),
    "VM-REUSE-UNIFORM": ((0.03, 12.31, 62.24), (3.15, 25.68, 140.42), (10.74, 62.52, 338.60)),
    "VM-REUSE-SKEWED": ((-0.36, 10.69, 50.46), (2.48, 22.85, 115.99), (10.43, 58.44, 309.67)),
}
# The spec's independent re-simulation (§11, B = 12.5 MB/s, one image draw for VM-MULT)
SPEC_RESIM: dict[str, tuple[tuple[float, float, float], ...]] = {
    "NOVM-NOSR": ((3.91, 16.90, 60.33), (8.70, 24.04, 71.39), (22.88, 66.87, 333.96)),
    "NOVM-SR": ((-0.84, 5.99, 32.36), (0.35, 8.26, 50.86), (4.11, 13.60, 128.72)),
    "VM-PREDEPLOY": ((-0.26, 7.81, 39.52), (1.05, 11.80, 60.20), (7.42, 21.04, 124.06)),
    "VM-MULT": ((0.10, 15.21, 85.49), (3.88, 35.50, 208.33), (12.08, 77.38, 433.10)),
}



def _parse_fig2() -> pd.DataFrame:
    text = resources.files("skylease").joinpath("data/papers/haizea_fig2.txt").read_text(encoding="utf-8")
    rows = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        size, config, rest = line.split(" ", 2)
        for rho, cell in zip(RHOS, rest.split("|"), strict=True):
            for delta, v in zip(DELTAS, cell.split(), strict=True):
                rows.append({"size": size, "config": config, "rho": rho, "delta": delta,
                             "paper_x": math.nan if v == "-" else float(v)})
    return pd.DataFrame(rows)


PAPER_FIG2 = _parse_fig2()
FIG2_TOLERANCE = 0.011  # ±1.1 percentage points of run time, as for Table 1 (spec §11)


def _tolerance(metric: str, rho: int) -> float:
    if metric == "rel_runtime_pct":
        return 1.1  # percentage points
    return 0.15 if rho == 30 else 0.10  # relative


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


# -- derived tables ------------------------------------------------------------------------------------
def _with_workload(runs: pd.DataFrame) -> pd.DataFrame:
    parts = runs["workload"].map(parse_workload)
    r = runs.assign(rho=[p[0] for p in parts], delta=[p[1] for p in parts], size=[p[2] for p in parts])
    r["wait_ks"] = r["mean_wait_s"] / 1000
    r["x"] = 1 + r["rel_runtime_pct"] / 100
    r["image_seed"] = r["image_seed"].fillna(0).astype(int)
    return r


def table1(runs: pd.DataFrame) -> pd.DataFrame:
    """Table 1: one row per configuration x rho x metric: ours (first draw), the mean and range over
    image draws, the paper's value, the spec's re-simulation, and whether ours is within tolerance."""
    r = runs[runs["workload"].isin(TABLE1_WORKLOADS)]
    rows = []
    for config in CONFIGS:
        for i, rho in enumerate(TABLE1_RHOS):
            g = r[(r["config"] == config) & (r["rho"] == rho)]
            if g.empty:
                continue
            for j, metric in enumerate(METRICS):
                vals = g.sort_values("image_seed")[metric].to_numpy(float)
                paper = PAPER_TABLE1[config][i][j]
                resim = SPEC_RESIM.get(config, ((math.nan,) * 3,) * 3)[i][j]
                mean = float(vals.mean())
                diff = mean - paper if metric == "rel_runtime_pct" else mean / paper - 1
                tol = _tolerance(metric, rho)
                rows.append({"config": config, "rho": rho, "metric": metric, "ours": float(vals[0]),
                             "ours_mean": mean, "ours_min": float(vals.min()), "ours_max": float(vals.max()),
                             "draws": len(vals), "paper": paper, "spec_resim": resim, "diff": diff,
                             "tolerance": tol, "within": abs(diff) <= tol, "validated": config in VALIDATED,
                             "ar_rejected": float(g["ar_rejected"].mean())})
    return pd.DataFrame(rows)


def fig2_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Figure 2: our relative running time (first image draw) beside the digitised paper's."""
    r = runs[runs["image_seed"] == 0][["size", "config", "rho", "delta", "x", "ar_rejected", "ar_dropped"]]
    m = r.merge(PAPER_FIG2, on=["size", "config", "rho", "delta"], how="left")
    m["diff"] = m["x"] - m["paper_x"]
    return m.sort_values(["size", "config", "rho", "delta"]).reset_index(drop=True)


# -- checks --------------------------------------------------------------------------------------------
def _claim(claim: str, paper: Any, ours: Any, holds: bool, why: str = "") -> dict[str, Any]:
    return {"claim": claim, "paper": paper, "ours": ours, "holds": bool(holds), "why": why}


def baseline_claims(base: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        _claim("NOVM-NOSR baseline, no ARs (all-best-effort, s)", "2,674,265",
               f"{base['all_best_effort_s']:,}", base["all_best_effort_s"] == 2_674_265),
        _claim("5 % clipping time (s)", "161,761", f"{base['clip_time']:,}", base["clip_time"] == 161_761),
        _claim("trace: jobs after the filter / after dropping cancelled", "5,545 / 5,108",
               f"{base['swf_jobs']:,} / {base['requests']:,}",
               base["swf_jobs"] == 5545 and base["requests"] == 5108),
        _claim("trace: share requesting <= 1 h / <= 4 nodes", "66.86 % / 64.10 %",
               f"{base['short_share'] * 100:.2f} % / {base['small_share'] * 100:.2f} %",
               round(base["short_share"] * 100, 2) == 66.86 and round(base["small_share"] * 100, 2) == 64.10),
    ]


def table1_claims(t1: pd.DataFrame) -> list[dict[str, Any]]:
    out = []
    for config in CONFIGS:
        g = t1[t1["config"] == config]
        if g.empty:
            continue
        bad = g[~g["within"]]
        where = "; ".join(f"{r.metric.replace('_', ' ')} at {r.rho} %: {_fmt_diff(r)}"
                          for r in bad.itertuples())
        label = "validated by the spec" if config in VALIDATED else "not re-simulated by the spec"
        draws = int(g["draws"].max())
        mean = f" (mean of {draws} image draws)" if draws > 1 else ""
        out.append(_claim(f"Table 1 {config}{mean} within ±1.1 pp / ±10 % (±15 % at 30 %) [{label}]",
                          f"{len(g)} cells", f"{len(g) - len(bad)} of {len(g)} cells", bad.empty, where))
    return out


def _fmt_diff(r: Any) -> str:
    if r.metric == "rel_runtime_pct":
        return f"{r.ours_mean:+.2f} % vs {r.paper:+.2f} % ({r.diff:+.2f} pp)"
    return f"{r.ours_mean:.2f} vs {r.paper:.2f} ({r.diff:+.1%})"


def _cell(t1: pd.DataFrame, config: str, rho: int, metric: str) -> float:
    g = t1[(t1["config"] == config) & (t1["rho"] == rho) & (t1["metric"] == metric)]
    return float(g["ours_mean"].iloc[0]) if len(g) else math.nan


def ordering_claims(t1: pd.DataFrame) -> list[dict[str, Any]]:
    """The orderings of spec §10.1 that the paper's own Table 1 supports."""
    out = []
    rhos = [r for r in TABLE1_RHOS if r in set(t1["rho"])]
    have = set(t1["config"])
    if "NOVM-NOSR" in have and len(have) > 1:
        worst = [all(_cell(t1, "NOVM-NOSR", r, "rel_runtime_pct") >= _cell(t1, c, r, "rel_runtime_pct")
                     for c in have if c != "NOVM-NOSR") for r in rhos]
        out.append(_claim("Run time: NOVM-NOSR is the worst configuration in every Table 1 column",
                          "3 of 3 columns", f"{sum(worst)} of {len(worst)} columns", all(worst)))
    chain = [c for c in ("NOVM-SR", "VM-PREDEPLOY", "VM-REUSE-SKEWED", "VM-REUSE-UNIFORM", "VM-MULT")
             if c in have]
    if len(chain) > 1:
        ok, tot, fails = 0, 0, []
        for metric in ("wait_ks", "mean_bounded_slowdown"):
            for r in rhos:
                pairs = list(itertools.pairwise(chain))
                if metric == "mean_bounded_slowdown" and r == 30:  # the paper's own exception
                    pairs = [p for p in pairs if p != ("NOVM-SR", "VM-PREDEPLOY")]
                for a, b in pairs:
                    tot += 1
                    if _cell(t1, a, r, metric) < _cell(t1, b, r, metric):
                        ok += 1
                    else:
                        fails.append(f"{a} !< {b} ({metric.replace('_', ' ')}, {r} %)")
        out.append(_claim("Wait and slowdown: NOVM-SR < VM-PREDEPLOY < VM-REUSE-SKEWED < VM-REUSE-UNIFORM "
                          "< VM-MULT (except SR vs PREDEPLOY for the 30 % slowdown)",
                          f"{tot} of {tot} pairs", f"{ok} of {tot} pairs", ok == tot, "; ".join(fails)))
    if {"VM-MULT", "VM-REUSE-UNIFORM", "VM-REUSE-SKEWED"} <= have:
        ok, tot, fails = 0, 0, []
        for metric in METRICS:
            for r in rhos:
                for a, b in (("VM-REUSE-UNIFORM", "VM-MULT"), ("VM-REUSE-SKEWED", "VM-REUSE-UNIFORM")):
                    tot += 1
                    if _cell(t1, a, r, metric) < _cell(t1, b, r, metric):
                        ok += 1
                    else:
                        fails.append(f"{a} !< {b} ({metric.replace('_', ' ')}, {r} %)")
        out.append(_claim("Image reuse helps (REUSE-UNIFORM < MULT) and a skewed draw helps more "
                          "(REUSE-SKEWED < REUSE-UNIFORM), on all three metrics", f"{tot} of {tot}",
                          f"{ok} of {tot}", ok == tot, "; ".join(fails)))
    return out


def fig2_claims(f2: pd.DataFrame) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    f = f2.dropna(subset=["paper_x"])
    if f.empty:
        return out
    within = (f["diff"].abs() <= FIG2_TOLERANCE)
    out.append(_claim(f"Figure 2: points within ±{FIG2_TOLERANCE * 100:.1f} pp of the digitised paper",
                      "all", f"{int(within.sum())} of {len(f)} ({within.mean():.0%}); median abs. diff "
                      f"{f['diff'].abs().median() * 100:.2f} pp", bool(within.mean() >= 0.9),
                      "pass mark: 90 % of the points"))
    piv = f2.pivot_table(index=["size", "rho", "delta"], columns="config", values="x")
    sr = [c for c in ("NOVM-SR", "VM-PREDEPLOY", "VM-MULT", "VM-REUSE-UNIFORM", "VM-REUSE-SKEWED")
          if c in piv.columns]
    if "NOVM-NOSR" in piv.columns and sr:
        paper = PAPER_FIG2.pivot_table(index=["size", "rho", "delta"], columns="config", values="paper_x")
        p_beat = (paper[sr].max(axis=1) < paper["NOVM-NOSR"]).loc[piv.index]
        o_beat = piv[sr].max(axis=1) < piv["NOVM-NOSR"]
        out.append(_claim("Suspend/resume (any configuration) runs shorter than NOVM-NOSR (text: 'in every "
                          "case'; spec §12-B(vi): near-ties at 5 %)", f"{int(p_beat.sum())} of {len(p_beat)}",
                          f"{int(o_beat.sum())} of {len(o_beat)}", bool(o_beat.sum() >= p_beat.sum() - 2),
                          "pass mark: at most 2 fewer workloads than the paper's figure"))
        worst1, p_worst1 = [], []
        for (size, rho), g in f2[f2["config"] == "NOVM-NOSR"].groupby(["size", "rho"]):
            if rho >= 15:
                worst1.append(g.set_index("delta")["x"].idxmax() == 1)
                pg = PAPER_FIG2[(PAPER_FIG2["config"] == "NOVM-NOSR") & (PAPER_FIG2["size"] == size)
                                & (PAPER_FIG2["rho"] == rho)]
                p_worst1.append(pg.set_index("delta")["paper_x"].idxmax() == 1)
        if worst1:
            out.append(_claim("NOVM-NOSR is worst with 1 h ARs (rho >= 15 %)",
                              f"{sum(p_worst1)} of {len(p_worst1)} (size x rho)",
                              f"{sum(worst1)} of {len(worst1)}", sum(worst1) >= len(worst1) - 1,
                              "pass mark: all but one"))
        nosr = f2[f2["config"] == "NOVM-NOSR"]
        if ((nosr["rho"] == 30) & (nosr["delta"] == 1)).any():
            top = nosr["x"].max()
            out.append(_claim("NOVM-NOSR's largest slowdown of run time (text 32.97 %; figure ≈ 43 %)",
                              "1.43", f"{top:.3f}", abs(top - 1.433) <= 0.05))
    bands = {"NOVM-SR": (0.98, 1.06), "VM-PREDEPLOY": (0.98, 1.11), "VM-MULT": (0.98, 1.15),
             "VM-REUSE-UNIFORM": (0.98, 1.15), "VM-REUSE-SKEWED": (0.98, 1.15)}
    for c, (lo, hi) in bands.items():
        if c in piv.columns:
            x = piv[c]
            out.append(_claim(f"{c} stays in {lo:.2f}-{hi:.2f}", f"{lo:.2f}-{hi:.2f}",
                              f"{x.min():.3f}-{x.max():.3f}",
                              bool(x.min() >= lo - 0.005 and x.max() <= hi + 0.005),
                              "±0.005 for digitisation"))
    order = [c for c in ("VM-MULT", "VM-REUSE-UNIFORM", "VM-REUSE-SKEWED", "VM-PREDEPLOY", "NOVM-SR")
             if c in piv.columns]
    high = f2[f2["rho"] >= 25]
    hi_rho = high.groupby("config")["x"].mean()
    n_high = len(high[["size", "delta", "rho"]].drop_duplicates())  # 24 in the full campaign
    if len(order) > 1 and all(c in hi_rho.index for c in order):
        vals = [hi_rho[c] for c in order]
        ok = all(a >= b - 0.005 for a, b in itertools.pairwise(vals))
        what = "workload" if n_high == 1 else "workloads"
        out.append(_claim(f"At high rho (25-30 %, mean of {n_high} {what}): MULT > REUSE-UNIFORM ≳ "
                          "REUSE-SKEWED > PREDEPLOY > NOVM-SR", " > ".join(order),
                          " ≥ ".join(f"{v:.3f}" for v in vals), ok, "'≳': within 0.005"))
    return out


# -- plots ---------------------------------------------------------------------------------------------
COLORS = {"NOVM-NOSR": "#d62728", "NOVM-SR": "#1f77b4", "VM-PREDEPLOY": "#2ca02c", "VM-MULT": "#9467bd",
          "VM-REUSE-UNIFORM": "#ff7f0e", "VM-REUSE-SKEWED": "#8c564b"}


def plot_fig2(f2: pd.DataFrame, path: Path) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [s for s in WORKLOAD_SIZES if s in set(f2["size"])]
    deltas = [d for d in DELTAS if d in set(f2["delta"])]
    # The legend goes below the panels (constrained layout keeps it off them): above, it covered the
    # panel title of the one-panel --quick figure. A figure of few panels is made wide enough for it.
    ncol = 6 if len(deltas) >= 3 else 3
    fig, axes = plt.subplots(len(sizes), len(deltas), figsize=(max(7.0, 3.2 * len(deltas)),
                                                                 2.6 * len(sizes) + 1.2),
                             sharex=True, sharey=True, squeeze=False, layout="constrained")
    for i, size in enumerate(sizes):
        for j, delta in enumerate(deltas):
            ax = axes[i][j]
            for c in CONFIGS:
                g = f2[(f2["size"] == size) & (f2["delta"] == delta) & (f2["config"] == c)].sort_values("rho")
                if g.empty:
                    continue
                ax.plot(g["rho"], g["x"], "-o", ms=3, color=COLORS[c], label=c)
                ax.plot(g["rho"], g["paper_x"], ":", marker="x", ms=3, color=COLORS[c], alpha=0.7)
            ax.axhline(1.0, color="grey", lw=0.5)
            ax.set_title(f"{size}, {delta} h ARs", fontsize=9)
            if i == len(sizes) - 1:
                ax.set_xlabel("ρ (% of the cluster in ARs)")
            if j == 0:
                ax.set_ylabel("relative running time")
    h, lab = axes[0][0].get_legend_handles_labels()
    fig.legend(h, lab, loc="outside lower center", ncol=ncol, fontsize=8, frameon=False,
               title="solid ●: ours; dotted ×: paper (digitised)", title_fontsize=8)
    fig.suptitle("Figure 2: time to complete all best-effort leases, relative to no ARs", fontsize=10)
    return save_figure(fig, path)


def plot_fig2_scatter(f2: pd.DataFrame, path: Path) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 5))
    for c in CONFIGS:
        g = f2[f2["config"] == c]
        if len(g):
            ax.scatter(g["paper_x"], g["x"], s=10, color=COLORS[c], label=c)
    lo = float(np.nanmin([f2["x"].min(), f2["paper_x"].min()])) - 0.01
    hi = float(np.nanmax([f2["x"].max(), f2["paper_x"].max()])) + 0.01
    ax.plot([lo, hi], [lo, hi], "k-", lw=0.6)
    tol = FIG2_TOLERANCE
    ax.fill_between([lo, hi], [lo - tol, hi - tol], [lo + tol, hi + tol], color="grey", alpha=0.15,
                    label="±1.1 pp")
    ax.set_xlabel("paper (digitised Figure 2)")
    ax.set_ylabel("ours")
    ax.set_title("Relative running time, every workload")
    ax.legend(fontsize=7)
    return save_figure(fig, path)


def plot_table1(t1: pd.DataFrame, path: Path) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    titles = {"rel_runtime_pct": "all-best-effort vs no ARs (%)", "wait_ks": "mean wait (ks)",
              "mean_bounded_slowdown": "mean bounded slowdown"}
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.8))
    configs = [c for c in CONFIGS if c in set(t1["config"])]
    w = 0.8 / max(len(configs), 1)
    for ax, metric in zip(axes, METRICS, strict=True):
        for k, c in enumerate(configs):
            g = t1[(t1["config"] == c) & (t1["metric"] == metric)].sort_values("rho")
            xs = np.arange(len(g)) + (k - (len(configs) - 1) / 2) * w
            ax.bar(xs, g["ours_mean"], w, color=COLORS[c], label=c,
                   yerr=[g["ours_mean"] - g["ours_min"], g["ours_max"] - g["ours_mean"]], capsize=2)
            ax.scatter(xs, g["paper"], marker="_", s=120, color="black", zorder=3,
                       label="paper" if k == 0 else None)
        ax.set_xticks(range(len(TABLE1_RHOS)), [f"{r} %" for r in TABLE1_RHOS])
        ax.set_title(titles[metric], fontsize=10)
    axes[0].legend(fontsize=7)
    fig.suptitle("Table 1: [ρ/3H/medium] (bars: ours, range over image draws; black: paper)", fontsize=10)
    fig.tight_layout()
    return save_figure(fig, path)


# -- the report ----------------------------------------------------------------------------------------
DIFFERENCES = (
    "**Which nodes a lease that must be suspended gets.** The spec (§6.3 step C) says `find_nodes` keeps "
    "the nodes that stay free longest; the 2008 code (`AvailabilityWindow.findPhysNodesForVMs`) keeps "
    "exactly n of them: every node free beyond the suspension point, then the highest ids among those "
    "that stop being free there. Taking the n lowest-id nodes free until the suspension point instead "
    "(our first reading) left NOVM-SR at 30 % with two ARs rejected behind a 140-node lease's planned "
    "resumption (wait 17.20 ks, +15.9 %) and VM-PREDEPLOY at 10 % with a slowdown of 35.31 (−10.8 %). "
    "Full fits, and so NOVM-NOSR and the baseline, are unchanged. RESUME and SUSPEND reservations stay "
    "non-preemptible, as in the 2008 code; the option `preempt_future_resumptions` (ours, off) lets an AR "
    "unschedule a suspended lease's future plan and changes nothing in Table 1.",
    "**VM-MULT and VM-REUSE (image draws).** The original image lists are lost (spec §12-M); one draw moves "
    "run time by about ±0.5 pp and wait and slowdown by ±5-10 %, so these rows are compared on the mean of "
    "5 draws and the range is shown. VM-REUSE was not re-simulated by the spec; its tolerances are "
    "reported, not required.",
    "**Figure 2 (one image draw per workload).** The Table 1 workloads are averaged over 5 image draws; the "
    "other 69 run one draw each. The configurations without images are within ±1.1 pp of the digitised "
    "figure at 90-96 % of the points; those that draw images at 85-88 %, since one draw moves the run "
    "time by up to ±0.7 pp (the ranges in Table 1) on top of the paper's own single draw. The 90 % pass "
    "mark is ours: the spec gives tolerances for Table 1 only. The trends the spec lists all hold.",
    "**Rejected ARs.** The paper does not report them (spec §12-N). Under the VM configurations a few ARs "
    "of the high-ρ workloads overlap once their durations get +5 % and +20 s, or their image cannot "
    "arrive by their start (EDF); the per-workload counts are in `fig2.csv`. Two ARs starting in the past "
    "are dropped from each of [25 %/1H/small] and [30 %/1H/small] (spec §8.2 [R]).",
    "**The paper's own errata** (spec §12-B): the text's '≤ 10 % with suspend/resume' and 'up to 32.97 %' "
    "contradict its Figure 2 (up to 1.14 and 1.43); we check against the figure. 'NOVM-NOSR gives better "
    "average wait and slowdown in most cases' is contradicted by Table 1 and is not checked.",
)


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
    text = _markdown(base, t1, f2, cl, figs, runs, campaign_s, seconds, quick)
    write_report(out / "report.md", text)
    return {"claims": claims, "held": held, "checked": len(cl), "runs": len(runs), "seconds": seconds,
            "campaign_s": campaign_s, "out": str(out)}


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


def _markdown(base: dict[str, Any], t1: pd.DataFrame, f2: pd.DataFrame, cl: pd.DataFrame,
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
        "Machines\", HPDC 2008; command: `skylease reproduce haizea"
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
                  "Each cell: ours [paper / the spec's re-simulation]; ✗ marks a cell outside the spec's "
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
                  "Ours against the values digitised from the paper's figure (spec §10.3, ±0.003), first "
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
