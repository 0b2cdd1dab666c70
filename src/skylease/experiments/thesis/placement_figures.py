"""The thesis-placement reproduction's figures (Figs. 6.2-6.3, Sorting's savings, the online study)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from skylease.experiments.report import save_figure
from skylease.experiments.thesis.paper_placement import (
    ENERGY_SAVED_0,
    ENERGY_SAVED_50,
    RELATED,
    STUDY_ALGORITHMS,
)
from skylease.experiments.thesis.placement_study import (
    LABELS,
    savings_table,
)


def grid_figure(summary: pd.DataFrame, metric: str, label: str, scale: float, path: Path) -> str:
    shares = sorted(summary["users"].unique())
    fig, axes = plt.subplots(2, 3, figsize=(13, 7), sharex=True, sharey=True, layout="constrained")
    for ax, users in zip(axes.flat, shares, strict=False):
        sub = summary[np.isclose(summary["users"], users)]
        for a in STUDY_ALGORITHMS:
            c = sub[sub["algorithm"] == a].sort_values("n_vms")
            ax.plot(c["n_vms"], c[metric] * scale, marker="o", ms=3, label=LABELS[a])
        ax.set_title(f"{users:.0%} of desktops with a user", fontsize=10)
        ax.set_xlabel("VMs")
        ax.grid(alpha=0.3)
    for ax in axes[:, 0]:
        ax.set_ylabel(label)
    for ax in list(axes.flat)[len(shares):]:
        ax.set_visible(False)
    axes.flat[0].legend(fontsize=8)
    number = "6.2" if metric == "desktops_used" else "6.3"
    fig.suptitle(f"{label}, mean over instances (ours; thesis Fig. {number})")
    return save_figure(fig, path)


def savings_figure(summary: pd.DataFrame, path: Path) -> str:
    big = int(summary["n_vms"].max())
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), layout="constrained")
    panels = (("energy_wh", "energy (Model C)"), ("desktops_used", "desktops used"))
    for ax, (metric, title) in zip(axes, panels, strict=True):
        sv = savings_table(summary, metric)
        for a, color in zip(RELATED, ("C0", "C1", "C2"), strict=True):
            at_big = sv[sv["n_vms"] == big].sort_values("users")
            ax.plot(100 * at_big["users"], at_big[a], marker="o", color=color,
                    label=f"vs {a.upper()}, {big} VMs")
            best = sv.groupby("users")[a].max()
            ax.plot(100 * best.index, best.to_numpy(), ls=":", color=color,
                    label=f"vs {a.upper()}, best size")
            if metric == "energy_wh":
                ax.scatter([0, 50], [ENERGY_SAVED_0[a], ENERGY_SAVED_50[a]], marker="*", s=120,
                           color=color, edgecolor="k", zorder=3, label=f"thesis vs {a.upper()}")
        ax.set_xlabel("% of desktops with a user")
        ax.set_ylabel(f"Sorting saves (%), {title}")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7, ncol=2)
    return save_figure(fig, path)


def online_figure(on: pd.DataFrame, path: Path) -> str:
    fig, ax = plt.subplots(figsize=(9, 4), layout="constrained")
    groups = [(u, p) for u in sorted(on["users"].unique()) for p in sorted(on["period"].unique())]
    width = 0.8 / len(STUDY_ALGORITHMS)
    for k, a in enumerate(STUDY_ALGORITHMS):
        vals = [float(on[(on["users"] == u) & (on["period"] == p) & (on["algorithm"] == a)]
                      ["energy_wh"].mean()) for u, p in groups]
        ax.bar(np.arange(len(groups)) + k * width, np.array(vals) / 1e6, width, label=LABELS[a])
    ax.set_xticks(np.arange(len(groups)) + 0.4 - width / 2,
                  [f"busy {u:.0%}, {'immediate' if p == 0 else f'every {p:g} min'}" for u, p in groups])
    ax.set_ylabel("energy (MWh) until the last VM ends")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=len(STUDY_ALGORITHMS))
    ax.set_title("Placement over time: arrivals, departures, users coming and going")
    return save_figure(fig, path)


# -- the report ------------------------------------------------------------------------------------
