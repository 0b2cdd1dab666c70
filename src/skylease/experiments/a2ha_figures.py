"""The A2HA reproduction's figures: each takes our tables (and the paper's values) and saves a PNG."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from skylease.experiments.a2ha_numbers import GRID_WORKLOADS, PAPER_OPTIMUM, PAPER_TABLE2, SEED
from skylease.experiments.report import save_figure


def grid_figure(grid: pd.DataFrame, wl: str, out: Path) -> str:
    g = grid[grid["workload"] == wl]
    irs = sorted(g["ir"].unique())
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
    for k, ir in enumerate(irs):
        s = g[g["ir"] == ir].sort_values("cr0")
        dx = (k - (len(irs) - 1) / 2) * 0.02
        axes[0].errorbar(s["cr0"] + dx, s["hosts_mean"], yerr=s["hosts_sd"], marker="o", capsize=3,
                         label=f"ir = {ir:g}")
        axes[1].errorbar(s["cr0"] + dx, s["wall_min_mean"], yerr=s["wall_min_sd"], marker="o", capsize=3,
                         label=f"ir = {ir:g}")
    axes[0].axhline(PAPER_OPTIMUM[wl], color="k", ls="--", lw=1, label=f"optimum {PAPER_OPTIMUM[wl]}")
    axes[0].set_ylabel("hosts created (mean ± sd)")
    axes[1].set_ylabel("job time, min (mean ± sd)")
    for ax in axes:
        ax.set_xlabel("initial creationRatio cr0")
        ax.legend(fontsize=8)
    n = int(g["orderings"].iloc[0])
    fig.suptitle(f"{GRID_WORKLOADS[wl]} ({wl}): cr0 x ir, {n} orderings per cell")
    return save_figure(fig, out / f"{GRID_WORKLOADS[wl].lower().replace('. ', '')}_{wl}.png")



def fig12_figure(f: pd.DataFrame, out: Path) -> str:
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), layout="constrained")
    rng = np.random.default_rng(SEED)
    for ax, wl in zip(axes, ("image", "synthetic"), strict=True):
        w = f[f["workload"] == wl]
        for preset, marker in (("conservative", "o"), ("aggressive", "^")):
            p = w[w["preset"] == preset]
            ax.scatter(p["hosts"] + rng.uniform(-0.2, 0.2, len(p)), p["speedup"], s=12, alpha=0.5,
                       marker=marker, label=preset)
        hi = float(w["hosts"].max()) + 1
        xs = np.array([0.0, hi])
        ax.plot(xs, xs, "k-", lw=0.8, label="speedup = hosts")
        ax.plot(xs, xs * 55 / 60, "k:", lw=0.8, label="55/60 of hosts")
        ax.plot(xs, xs * 0.5, color="0.6", ls="-.", lw=0.8, label="50 % efficiency")
        ax.axvline(PAPER_OPTIMUM[wl], color="k", ls="--", lw=1, label=f"optimum {PAPER_OPTIMUM[wl]}")
        if wl == "synthetic":
            ax.add_patch(plt.Rectangle((12.6, 9), 0.8, 1, fill=False, color="r", lw=1.2))
            ax.annotate("paper: 13 hosts -> 9-10", (13.4, 10), fontsize=8, color="r")
        ax.set_xlim(0, hi)
        ax.set_ylim(0, float(w["speedup"].max()) + 2)
        ax.set_xlabel("hosts created")
        ax.set_ylabel("speedup")
        ax.set_title(wl)
        ax.legend(fontsize=7, loc="upper left")
    fig.suptitle("Fig. 12: speedup against hosts created, one point per ordering")
    return save_figure(fig, out / "fig12_speedup_vs_hosts.png")



def trajectory_figure(df: pd.DataFrame, info: dict[str, Any], out: Path) -> str:
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.3), layout="constrained")
    u = df[df["run"].str.startswith("undamped")]
    d = df[df["run"].str.startswith("damped")]
    ax = axes[0]
    ax.step(u["finished"], u["open_loop_total"], where="post",
            label="round(N·T̄/H), T̄ over completed tasks")
    s = df[df["run"] == "submission order"]
    ax.step(s["finished"], s["open_loop_total"], where="post", label="the same, T̄ over the first k submitted")
    ax.step(u["finished"], u["predicted_total"], where="post", label="Fig. 3: necessary + hosts alive")
    ax.axhline(info["final"], color="k", ls="--", lw=1, label=f"final value {info['final']} (round(Σd/H))")
    ax.axhline(23, color="r", ls=":", lw=1, label="paper's first value 23")
    ax2 = ax.twinx()
    ax2.plot(u["finished"], u["mean_task_s"], color="0.6", lw=0.8)
    ax2.set_ylabel("running mean task time T̄ (s)", color="0.5")
    ax.set_xlim(0, 100)
    ax.set_xlabel("completed tasks")
    ax.set_ylabel("hosts")
    ax.set_title(f"Fig. 4b: image, undamped, H = 60 min (ordering seed {info['seed']})", fontsize=10)
    ax.legend(fontsize=7, loc="upper right")
    ax = axes[1]
    ax.step(d["finished"], d["predicted_total"], where="post", label="predicted total (necessary + alive)")
    ax.step(d["finished"], d["created_cum"], where="post", label="hosts created after t = 0 (cumulative)")
    ax.step(u["finished"], u["created_cum"], where="post", ls="--", label="the same, undamped")
    ax.axhline(9, color="r", ls=":", lw=1, label="paper: 9 created at the first completion")
    ax2 = ax.twinx()
    ax2.plot(d["finished"], d["creation_ratio"], color="0.5", lw=1)
    ax2.set_ylim(0, 1.05)
    ax2.set_ylabel("creationRatio", color="0.5")
    ax.set_xlim(0, 40)
    ax.set_xlabel("completed tasks")
    ax.set_title("Fig. 6b: damped, cr0 = 0.4, ir = 0.5, same ordering", fontsize=10)
    ax.legend(fontsize=7, loc="lower right")
    return save_figure(fig, out / "fig4b_6b_trajectories.png")



def billing_figure(b: pd.DataFrame, out: Path) -> str:
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
    for ax, wl in zip(axes, ("synthetic", "image"), strict=True):
        w = b[b["workload"] == wl]
        ax.errorbar(w["wall_min_mean"], w["charged_h_mean"], xerr=w["wall_min_sd"], yerr=w["charged_h_sd"],
                    fmt="none", ecolor="0.6")
        for r in w.itertuples(index=False):
            ax.scatter(r.wall_min_mean, r.charged_h_mean, s=40, label=r.policy)
        ax.set_yscale("log")
        ax.set_xlabel("job time, min")
        ax.set_ylabel("charged hours (log)")
        ax.set_title(wl)
        ax.legend(fontsize=8)
    fig.suptitle("What billing awareness buys: job time against charged hours (mean ± sd)")
    return save_figure(fig, out / "billing_awareness.png")



def table2_figure(raw: pd.DataFrame, out: Path) -> str:
    fig, ax = plt.subplots(figsize=(7, 4.5), layout="constrained")
    for label, p in PAPER_TABLE2.items():
        d = raw[raw["row"] == label]
        if label == "serial":
            continue
        (line,) = ax.plot(d["wall_h"].mean(), d["payment_h"].mean(), "o", ms=7, label=f"{label} (ours)")
        ax.errorbar(d["wall_h"].mean(), d["payment_h"].mean(), xerr=d["wall_h"].std(),
                    yerr=d["payment_h"].std(), color=line.get_color(), capsize=3)
        assert p[1] is not None and p[3] is not None
        ax.plot(p[1][0], p[3][0], marker="x", ms=9, color=line.get_color())
    ax.set_xlabel("wall time, h")
    ax.set_ylabel("payment, h")
    ax.set_title("Table 2 (long tasks): ours (o, mean ± sd) vs the paper (x)")
    ax.legend(fontsize=7)
    return save_figure(fig, out / "table2_long_tasks.png")

