"""The figures of ``skylease reproduce spequlos`` (Figs. 2, 6, 7, 8 and 9 of the paper, from our runs)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from skylease.control.qos.strategy import STRATEGIES
from skylease.experiments.report import save_figure
from skylease.experiments.spequlos import MIDDLEWARES
from skylease.sim.dg.workload import BOT_CATEGORIES


def _ecdf(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = np.sort(x[np.isfinite(x)])
    return x, np.arange(1, len(x) + 1) / max(len(x), 1)


# -- figures --------------------------------------------------------------------------------------
def pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_fig2(base: pd.DataFrame, out: Path) -> str:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4))
    for mw, g in base.groupby("middleware"):
        x, y = _ecdf(g["tail_slowdown"].to_numpy(float))
        ax.step(x, y, where="post", label=f"{mw} (all BoTs)")
        h = g[g["bot"] != "RANDOM"]
        x, y = _ecdf(h["tail_slowdown"].to_numpy(float))
        ax.step(x, y, where="post", ls="--", label=f"{mw} (SMALL + BIG)")
    for v, lab in ((1.33, "1.33"), (2, "2"), (4, "4"), (10, "10")):
        ax.axvline(v, color="grey", lw=0.6, ls=":")
        ax.text(v, 0.02, lab, fontsize=7, color="grey")
    ax.set_xscale("log")
    ax.set_xlabel("tail slowdown T / T_ideal (no QoS)")
    ax.set_ylabel("fraction of executions")
    ax.set_title("Fig. 2: tail slowdown CDF (paper: half ≤ 1.33; p95 4 XW, 10 BOINC)")
    ax.legend(fontsize=8)
    return save_figure(fig, out / "fig2_slowdown_cdf.png")


def plot_fig6(q: pd.DataFrame, out: Path) -> str:
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(13, 4), sharey=True)
    for ax, (how, title) in zip(
        axes, (("F", "6a Flat"), ("R", "6b Reschedule"), ("D", "6c Cloud Duplication")), strict=True
    ):
        for s in [x for x in STRATEGIES if x.endswith("-" + how)]:
            t = q.loc[q["strategy"] == s, "tre"].dropna().to_numpy(float)
            if not len(t):
                continue
            grid = np.linspace(0, 1, 101)
            ax.plot(
                grid * 100,
                [(t >= g - 1e-9).mean() for g in grid],
                label=s[:-2],
                ls="-" if s.startswith("9A") else "--" if s.startswith("9C") else ":",
            )
        ax.set_title(f"Fig. {title}")
        ax.set_xlabel("tail removal efficiency (%)")
        ax.legend(fontsize=8)
    axes[0].set_ylabel("fraction of executions with TRE ≥ x")
    return save_figure(fig, out / "fig6_tre_ccdf.png")


def plot_fig7(st: pd.DataFrame, out: Path) -> str:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 3.8))
    colors = {"F": "tab:blue", "R": "tab:orange", "D": "tab:green"}
    ax.bar(st["strategy"], st["credits_pct"], color=[colors[s[-1]] for s in st["strategy"]])
    ax.axhline(25, color="grey", ls=":", lw=0.8)
    ax.set_ylabel("credits spent (% of ordered)")
    ax.set_title("Fig. 7: credits spent per strategy (paper: mostly < 25 %; D < F < R)")
    ax.tick_params(axis="x", rotation=60, labelsize=8)
    return save_figure(fig, out / "fig7_credits.png")


def plot_fig8(f8: pd.DataFrame, out: Path) -> str:
    """Fig. 8: mean completion per trace, without QoS and with 9C-C-R, one panel per middleware and
    BoT. Bars start at zero on a linear axis in hours (a log axis not starting at zero made 1 %
    differences look like halvings); each 9C-C-R bar is labelled with its change; the legend sits
    below the panels, off the data."""
    plt = pyplot()
    from matplotlib.ticker import MaxNLocator

    fig, axes = plt.subplots(2, 3, figsize=(13, 7), sharey=False, layout="constrained")
    handles: dict[str, Any] = {}
    for i, mw in enumerate(MIDDLEWARES):
        for j, bot in enumerate(BOT_CATEGORIES):
            ax = axes[i][j]
            g = f8[(f8["middleware"] == mw) & (f8["bot"] == bot)].reset_index(drop=True)
            x = np.arange(len(g))
            without, with_ = g["without_s"] / 3600, g["with_s"] / 3600
            handles["without SpeQuloS"] = ax.bar(x - 0.2, without, 0.4, color="tab:blue")
            handles["with 9C-C-R"] = ax.bar(x + 0.2, with_, 0.4, color="tab:orange")
            for k in range(len(g)):
                change = with_[k] / without[k] - 1 if without[k] > 0 else math.nan
                if math.isfinite(change):
                    label = ("±0%" if abs(change) < 5e-4 else f"{change:+.1%}" if abs(change) < 0.01
                             else f"{change:+.0%}")
                    ax.annotate(label, (x[k] + 0.2, with_[k]), xytext=(0, 2),
                                textcoords="offset points", ha="center", va="bottom", fontsize=7)
            paper = g["paper_without_s"].notna().to_numpy()
            if paper.any():
                handles["paper, without"] = ax.plot(x[paper] - 0.2, g["paper_without_s"][paper] / 3600, "kx",
                                                    ls="none")[0]
                handles["paper, with 9C-C-R"] = ax.plot(x[paper] + 0.2, g["paper_with_s"][paper] / 3600,
                                                        "k+", ls="none")[0]
            ax.set_xticks(x, g["trace"], fontsize=8, rotation=30 if len(g) > 4 else 0)
            ax.set_ylim(0, max(1e-9, float(np.nanmax([*without, *with_, *(g["paper_without_s"] / 3600)])))
                        * 1.15)
            ax.yaxis.set_major_locator(MaxNLocator(5))
            ax.tick_params(axis="y", labelsize=8)
            ax.set_title(f"{mw} / {bot}", fontsize=9)
            if j == 0:
                ax.set_ylabel("mean completion (h)")
    fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncol=len(handles),
               fontsize=8, frameon=False)
    fig.suptitle("Fig. 8: mean completion time with and without SpeQuloS (9C-C-R); labels: change with it")
    return save_figure(fig, out / "fig8_completion.png")


def plot_fig9(stab: pd.DataFrame, out: Path) -> str:
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
    for ax, mw in zip(axes, MIDDLEWARES, strict=True):
        for s, lab in (("none", "without SpeQuloS"), ("9C-C-R", "9C-C-R")):
            x, y = _ecdf(
                stab.loc[(stab["middleware"] == mw) & (stab["strategy"] == s), "normalized"].to_numpy(float)
            )
            ax.step(x, y, where="post", label=lab)
        ax.set_title(f"Fig. 9: {mw}")
        ax.set_xlabel("completion / environment mean")
        ax.legend(fontsize=8)
    axes[0].set_ylabel("fraction of executions")
    return save_figure(fig, out / "fig9_stability.png")
