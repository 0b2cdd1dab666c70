"""``skylease reproduce thesis-mapping``: run the chapter-3 campaigns and write the report."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from skylease.experiments.report import md_table, save_figure, write_report
from skylease.experiments.store import out_folder
from skylease.experiments.sweep import check_cluster, run_campaign
from skylease.experiments.thesis.mapping_study import (
    ENERGY_CLASSES,
    SIZES,
    best_counts_table,
    claims,
    energy_cell,
    energy_curves,
    example_table,
    gain_table,
    ratio_table,
    study_cell,
    study_grid,
)
from skylease.experiments.thesis.paper_mapping import STUDY_HEURISTICS

PROFILE_PANELS = (  # Fig. 3.14 (a)-(f)
    ("512x16", "1.1x0.6", "pc"), ("512x16", "0.6x0.5", "oc"), ("1024x32", "0.4x0.1", "pc"),
    ("1024x32", "1.1x0.6", "oc"), ("2048x64", "0.2x0.1", "oc"), ("2048x64", "1.1x0.6", "oc"),
)
QUICK_INSTANCES = 3
QUICK_ENERGY_INSTANCES = 5
FULL_INSTANCES = 1000
FULL_ENERGY_INSTANCES = 100


@dataclass
class MappingReproduction:
    out: Path
    instances: int
    example: pd.DataFrame
    gains: pd.DataFrame
    counts: pd.DataFrame
    ratios: pd.DataFrame
    energy: pd.DataFrame
    claims: list[dict[str, Any]] = field(default_factory=list)
    failed: int = 0


def reproduce_thesis_mapping(
    out: str | Path,
    *,
    quick: bool = False,
    instances: int | None = None,
    energy_instances: int | None = None,
    sizes: tuple[str, ...] = SIZES,
    scenarios: list[str] | None = None,
    mode: str = "processes",
    workers: int | None = None,
    scheduler: str | None = None,
    progress: bool = True,
) -> MappingReproduction:
    """Run the example, the main study and the energy study; write tables, plots, report.md."""
    check_cluster(scheduler, workers)  # before the folder is made: a mistake leaves nothing
    out = out_folder(out)
    n_inst = instances or (QUICK_INSTANCES if quick else FULL_INSTANCES)
    n_energy = energy_instances or (QUICK_ENERGY_INSTANCES if quick else FULL_ENERGY_INSTANCES)
    example = example_table()
    study = run_campaign(study_cell, study_grid(sizes, scenarios), seeds=n_inst, out=out / "study",
                         mode=mode, workers=workers, scheduler=scheduler, progress=progress,
                         description=f"thesis ch.3 main study, {n_inst} instance(s) per cell")
    energy = run_campaign(energy_cell, {"cls": list(ENERGY_CLASSES)}, seeds=n_energy,
                          out=out / "energy", mode=mode, workers=workers, scheduler=scheduler,
                          progress=progress, description="thesis ch.3 energy study")
    gains = gain_table(study.table)
    rep = MappingReproduction(
        out=out, instances=n_inst, example=example, gains=gains,
        counts=best_counts_table(study.table) if "512x16" in sizes else pd.DataFrame(),
        ratios=ratio_table(study.table), energy=energy_curves(energy.table),
        claims=claims(study.table, gains), failed=len(study.failed) + len(energy.failed),
    )
    for name, df in (("example", rep.example), ("table_3_8_gains", rep.gains),
                     ("tables_3_6_3_7_best_counts", rep.counts), ("ratios", rep.ratios),
                     ("energy_curves", rep.energy)):
        df.to_csv(out / f"{name}.csv", index=False)
    figures = {
        "profiles": _profiles_figure(study.table, out),
        "gains": _gains_figure(gains, out),
        **{cls: _energy_figure(rep.energy, cls, out) for cls in ("f-hihi", "p-hihi", "o-hihi")},
    }
    write_report(out / "report.md", _report_text(rep, figures, n_energy))
    return rep


def _profiles_figure(study: pd.DataFrame, out: Path) -> str:
    from skylease.planning.mapping.metrics import performance_profile, performance_ratios

    fig, axes = plt.subplots(2, 3, figsize=(13, 7), sharey=True, layout="constrained")
    taus = np.linspace(1.0, 2.0, 201)
    for ax, (size, scen, cons), letter in zip(axes.flat, PROFILE_PANELS, "abcdef", strict=True):
        sub = study[(study["size"] == size) & (study["scenario"] == scen)
                    & (study["consistency"] == cons)]
        ax.set_title(f"({letter}) {cons.upper()} {scen} @ {size}", fontsize=10)
        if sub.empty:
            ax.text(0.5, 0.5, "not run", ha="center", transform=ax.transAxes)
            continue
        ratios = performance_ratios(sub[[f"mk_{h}" for h in STUDY_HEURISTICS]].to_numpy())
        for i, h in enumerate(STUDY_HEURISTICS):
            ax.step(taus, performance_profile(ratios[:, i], taus), where="post", label=h)
        ax.set_xlim(1.0, 1.3)
        ax.set_xlabel("τ")
    axes[0, 0].set_ylabel("P(γ ≤ τ)")
    axes[1, 0].set_ylabel("P(γ ≤ τ)")
    drawn = [ax for ax in axes.flat if ax.get_legend_handles_labels()[0]]
    if drawn:
        drawn[0].legend(fontsize=8, loc="lower right")
    fig.suptitle("Performance profiles (thesis Fig. 3.14 panels), ours")
    return save_figure(fig, out / "profiles.png")


def _gains_figure(gains: pd.DataFrame, out: Path) -> str:
    fig, ax = plt.subplots(figsize=(6, 6))
    for cons, marker in (("fc", "s"), ("pc", "^"), ("oc", "o")):
        g = gains[gains["consistency"] == cons]
        ax.errorbar(g["thesis_gain"], g["gain"], yerr=g["gain_sd"] / np.sqrt(g["instances"]),
                    fmt=marker, label=cons.upper(), alpha=0.8, ms=5)
    lim = [min(-2, np.nanmin(gains[["gain", "thesis_gain"]].to_numpy()) - 1),
           np.nanmax(gains[["gain", "thesis_gain"]].to_numpy()) + 1]
    ax.plot(lim, lim, "k-", lw=0.8)
    ax.fill_between(lim, [lim[0] - 2, lim[1] - 2], [lim[0] + 2, lim[1] + 2], color="0.9",
                    label="±2 pp")
    ax.set_xlabel("thesis %Gain (Table 3.8)")
    ax.set_ylabel("our %Gain (mean ± s.e.)")
    ax.set_title("Low_3 over Luo_1, mean SPT flowtime")
    ax.legend()
    return save_figure(fig, out / "table_3_8_gains.png")


def _energy_figure(curves: pd.DataFrame, cls: str, out: Path) -> str:
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8), sharey=True, layout="constrained")
    sub = curves[curves["cls"] == cls]
    for ax, metric in zip(axes, ("makespan", "flowtime", "energy"), strict=True):
        for h in ("low1", "low2", "low3"):
            c = sub[sub["heuristic"] == h].sort_values("lam")
            ax.plot(c["lam"], c[f"n_{metric}"], marker="o", ms=3, label=h)
        mm = sub[sub["heuristic"] == "min-min"][f"n_{metric}"]
        if len(mm):
            ax.axhline(float(mm.iloc[0]), color="k", ls="--", lw=1, label="min-min")
        ax.set_title(f"{cls}: normalised {metric}")
        ax.set_xlabel("λ")
    axes[0].legend(fontsize=8)
    return save_figure(fig, out / f"energy_{cls}.png")


def _report_text(rep: MappingReproduction, figures: dict[str, str], n_energy: int) -> str:
    ex = rep.example
    g = rep.gains
    oc = g[g["consistency"] == "oc"].dropna(subset=["thesis_gain"])
    within = (oc["diff_pp"].abs() <= 2).mean() if len(oc) else float("nan")
    parts = [
        "# Thesis chapter 3 reproduced: energy-aware batch-mode mapping",
        "",
        "Source: C. O. Diaz, PhD thesis, Univ. Luxembourg 2014, chapter 3; the decisions that read it "
        "(A1-A10) are in `docs/decisions/thesis.md`. Generated by `skylease reproduce thesis-mapping`.",
        "",
        f"Instances per (size, scenario, consistency) cell: **{rep.instances}** (the thesis used "
        f"1000). Energy study: {n_energy} instances per class (thesis: 100). PC matrices use the "
        "P-half procedure (decision A6.2); flowtime is SPT per machine; Luo_2 uses the row-SD rule; "
        "the Low heuristics keep the best of λ = 0, 0.1, ..., 1 per instance.",
        "",
        "## Section 3.4: the numerical example (exact)",
        "",
        f"Optimum by exhaustive search over 4^8 assignments: {ex.attrs.get('optimum', 2130):.0f} "
        "(the thesis does not print it). Low heuristics at λ = 0.8.",
        "",
        md_table(ex, ["heuristic", "order", "makespan", "thesis_makespan", "deviation_pct",
                      "thesis_deviation_pct"], digits=1),
        "",
        "Deviation = (C − C_opt) / C, the reading that reproduces the thesis's percentages. The "
        "printed Table 3.4 swaps the Low_1 and Low_2 columns (decision A4.2); the makespans above "
        "follow Algorithms 2-4.",
        "",
        "## Table 3.8: %Gain of Low_3's mean flowtime over Luo_1's",
        "",
        f"OC cells within 2 percentage points of the thesis: **{within:.0%}** "
        f"({int((oc['diff_pp'].abs() <= 2).sum())} of {len(oc)}).",
        "",
        f"![gains]({figures['gains']})",
        "",
        md_table(g, ["size", "scenario", "consistency", "instances", "gain", "gain_sd",
                     "gain_of_means", "thesis_gain", "diff_pp"]),
        "",
        "Where we differ: FC cells come out lower than the thesis and PC cells depend on how the "
        "partially consistent matrices are built, which the thesis does not say (decision A6.2: "
        "P-half is the closest of three candidates, none matches exactly). With few instances "
        "per cell the standard error (gain_sd / sqrt(instances)) is the first suspect of any gap.",
        "",
    ]
    if not rep.counts.empty:
        cols = ["scenario", "instances"] + [f"{k}_{h}" for h in STUDY_HEURISTICS for k in ("B", "EB")]
        cols += ["best_of_low"]
        parts += [
            "## Tables 3.6 and 3.7: best (B) and equal-best (EB) counts, 512x16, OC",
            "",
            md_table(rep.counts, [c for c in cols if c in rep.counts.columns], digits=0),
            "",
            "The thesis's Low_2 and Low_3 tie for best in 489-895 of 1000 instances while Low_1 "
            "never wins; on continuous random ETCs exact ties between different heuristics are "
            "rare, so we treat B/EB qualitatively (decision A9.3) and add `best_of_low`: instances "
            "where some Low heuristic is best. Thesis columns (per 1000 instances) are in "
            "`tables_3_6_3_7_best_counts.csv`.",
            "",
        ]
    parts += [
        "## Text claims (decision A9)",
        "",
        md_table(pd.DataFrame(rep.claims), ["claim", "ours", "holds"]),
        "",
        "## Performance profiles (Fig. 3.14)",
        "",
        f"![profiles]({figures['profiles']})",
        "",
        "## Mean approximation factor ρ = C_max / LB and run time (ms) per heuristic",
        "",
        md_table(rep.ratios, ["size", "scenario", "consistency"]
                 + [f"rho_{h}" for h in STUDY_HEURISTICS] + [f"ms_{h}" for h in STUDY_HEURISTICS],
                 digits=3),
        "",
        "## Energy study (section 3.7, Figs. 3.18-3.20)",
        "",
        "512x16, μ_task = 100, one of the three voltage sets per machine at random; values are "
        "means over instances, divided per class and metric by the maximum over all heuristics "
        "and λ.",
        "",
    ]
    for cls in ("f-hihi", "p-hihi", "o-hihi"):
        parts += [f"![{cls}]({figures[cls]})", ""]
    at08 = rep.energy[(rep.energy["lam"] == 0.8) | rep.energy["heuristic"].eq("min-min")]
    parts += [
        "At λ = 0.8 against min-min (normalised values; the thesis: \"as well as min-min for all "
        "three metrics\"):",
        "",
        md_table(at08, ["cls", "heuristic", "lam", "n_makespan", "n_flowtime", "n_energy"],
                 digits=3),
        "",
    ]
    if rep.failed:
        parts += [f"**{rep.failed} cell(s) failed**; see cells.jsonl in study/ and energy/.", ""]
    return "\n".join(parts)
