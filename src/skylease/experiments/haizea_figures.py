"""Figures of ``skylease reproduce haizea``: Figure 2 (ours beside the digitised paper's) and Table 1."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from skylease.experiments.haizea import CONFIGS, DELTAS, WORKLOAD_SIZES
from skylease.experiments.haizea_numbers import FIG2_TOLERANCE, METRICS, TABLE1_RHOS
from skylease.experiments.report import save_figure

__all__ = ["COLORS", "plot_fig2", "plot_fig2_scatter", "plot_table1"]

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
