"""The report's section "SpeQuloS vs BOINC batch acceleration": BOINC's own answer to the tail beside
9C-C-R, on the BOINC environments."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from skylease.control.qos.strategy import parse_plan
from skylease.experiments.report import md_table, save_figure
from skylease.experiments.spequlos import TRACES, tail_removal
from skylease.experiments.spequlos_figures import pyplot
from skylease.model.errors import UserError
from skylease.sim.dg.workload import BOT_CATEGORIES

#: The strategies of the section "SpeQuloS vs BOINC batch acceleration" (run on BOINC only).
BATCH_ACCEL = ("9C-C-R", "batch-accel", "batch-accel+9C-C-R")


def batch_accel_strategies() -> tuple[str, ...]:
    """The strategies of the batch-acceleration section (checked by the run names' parser), or ()
    if one were unknown (the section is then skipped with a note)."""
    try:
        for s in BATCH_ACCEL:
            parse_plan(s)
    except UserError:
        return ()
    return BATCH_ACCEL


# -- SpeQuloS vs BOINC batch acceleration ----------------------------------------------------------
def batch_accel_table(runs: pd.DataFrame, strategies: Sequence[str] = BATCH_ACCEL) -> pd.DataFrame:
    """Side by side per (trace, BoT): each strategy of ``strategies`` and the baseline, on BOINC.

    ``runs`` holds the baseline (``none``) and the strategies' runs, paired on ``run_seed``. Columns:
    mean completion time, mean tail slowdown, mean TRE against the paired baseline (S16), mean extra
    results created (``extra_results``, batch acceleration's extra replicas; NaN when the rows do
    not carry it) and mean credits spent.
    """
    b = runs[(runs["middleware"] == "boinc") & runs["strategy"].isin(["none", *strategies])].copy()
    if b.empty:
        return pd.DataFrame()
    key = ["middleware", "trace", "bot", "run_seed"]
    base = b[b["strategy"] == "none"].set_index(key)[["completion_s", "ideal_s"]].add_prefix("base_")
    b = b.join(base, on=key)
    b["tre"] = [tail_removal(a, c, d) if s != "none" else math.nan
                for s, a, c, d in zip(b["strategy"], b["completion_s"], b["base_completion_s"],
                                      b["base_ideal_s"], strict=True)]
    b["tre"] = b["tre"].astype(float)
    if "extra_results" not in b.columns:
        b["extra_results"] = math.nan
    order = {t: i for i, t in enumerate((*TRACES, *BOT_CATEGORIES, "none", *strategies))}
    t = (b.groupby(["trace", "bot", "strategy"])
         .agg(runs=("completion_s", "size"), completion_s=("completion_s", "mean"),
              tail_slowdown=("tail_slowdown", "mean"), tre=("tre", "mean"),
              extra_results=("extra_results", "mean"), credits_used=("credits_used", "mean"))
         .reset_index())
    return t.sort_values(["trace", "bot", "strategy"], key=lambda c: c.map(lambda v: order.get(v, 99))
                         ).reset_index(drop=True)


def _fig_batch_accel(t: pd.DataFrame, out: Path) -> str:
    """Mean completion per (trace, BoT) for the baseline and each strategy, one panel per BoT."""
    plt = pyplot()
    bots = [b for b in BOT_CATEGORIES if b in set(t["bot"])]
    strategies = [s for s in dict.fromkeys(t["strategy"])]
    fig, axes = plt.subplots(1, len(bots), figsize=(4.5 * len(bots), 4), squeeze=False, layout="constrained")
    width = 0.8 / max(len(strategies), 1)
    for ax, bot in zip(axes[0], bots, strict=True):
        g = t[t["bot"] == bot]
        traces = list(dict.fromkeys(g["trace"]))
        x = np.arange(len(traces))
        for k, s in enumerate(strategies):
            h = g[g["strategy"] == s].set_index("trace").reindex(traces)
            ax.bar(x + (k - (len(strategies) - 1) / 2) * width, h["completion_s"] / 3600, width,
                   label="no QoS" if s == "none" else s)
        ax.set_xticks(x, traces, fontsize=8)
        ax.set_title(f"BOINC / {bot}", fontsize=9)
        ax.set_ylabel("mean completion (h)")
    axes[0][0].legend(fontsize=7)
    fig.suptitle("SpeQuloS (9C-C-R) vs BOINC batch acceleration: mean completion time")
    return save_figure(fig, out / "batch_accel_completion.png")


def batch_accel_section(runs: pd.DataFrame, out: Path, strategies: Sequence[str] = BATCH_ACCEL
                        ) -> tuple[pd.DataFrame, list[str]]:
    """The report's section "SpeQuloS vs BOINC batch acceleration": the table of
    :func:`batch_accel_table` (also written as ``batch_accel.csv``), its plot and its text; when the
    runs hold none of the batch-acceleration strategies, an empty table and a note saying why."""
    head = ["## SpeQuloS vs BOINC batch acceleration", ""]
    ba = [s for s in strategies if s != "9C-C-R"]
    t = batch_accel_table(runs, strategies)
    if t.empty or not set(ba) & set(t["strategy"]):
        return pd.DataFrame(), [*head, "Skipped: the strategy parser (`skylease.control.qos.parse_strategy`) "
                                "does not know `batch-accel` in this build, so no batch-acceleration run was "
                                "made.", ""]
    t.to_csv(out / "batch_accel.csv", index=False)
    fig = _fig_batch_accel(t, out)
    extra = "" if t["extra_results"].notna().any() else (
        " (the runs carry no `extra_results` column, so that column is empty)")
    return t, [
        *head,
        "BOINC's server has its own answer to the tail since late 2025: **batch acceleration** (BOINC PRs "
        "#6643, #6682, #6894). A batch at least 85 % done (or with fewer than 20 jobs left) is "
        "accelerated: its unfinished work units go high priority, are sent only to hosts with a low "
        "recent turnaround, and get one more result when theirs in progress are older than that "
        "turnaround. It needs no cloud and no credits. Per trace and BoT, on BOINC, the same seeds as "
        "the rest of the report: mean completion (s), mean tail slowdown, mean TRE against the paired "
        f"run without QoS, extra results created and credits spent{extra}:",
        "",
        md_table(t, digits=2),
        "",
        f"![SpeQuloS vs batch acceleration]({fig})",
        "",
    ]
