"""The thesis-mapping reproduction's figures (Fig. 3.14's profiles, Table 3.8's gains, Figs. 3.18-3.20)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from skylease.experiments.report import save_figure
from skylease.experiments.thesis.paper_mapping import STUDY_HEURISTICS

PROFILE_PANELS = (  # Fig. 3.14 (a)-(f)
    ("512x16", "1.1x0.6", "pc"), ("512x16", "0.6x0.5", "oc"), ("1024x32", "0.4x0.1", "pc"),
    ("1024x32", "1.1x0.6", "oc"), ("2048x64", "0.2x0.1", "oc"), ("2048x64", "1.1x0.6", "oc"),
)


def profiles_figure(study: pd.DataFrame, out: Path) -> str:
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


def gains_figure(gains: pd.DataFrame, out: Path) -> str:
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


def energy_figure(curves: pd.DataFrame, cls: str, out: Path) -> str:
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
