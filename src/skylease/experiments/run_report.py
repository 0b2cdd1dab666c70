"""``report.md`` of a real run: what ran, what it cost, and three plots (tasks, workers, cost over time)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from skylease.experiments.report import md_table, save_figure, write_report


def _timeline(store: Any) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Events, hosts and segments, with times on one axis (seconds since the first segment)."""
    seg = pd.DataFrame([dict(r) for r in store.query("SELECT * FROM segments ORDER BY segment")])
    ev = pd.DataFrame([dict(r) for r in store.query("SELECT * FROM events")])
    hosts = pd.DataFrame([dict(r) for r in store.query("SELECT * FROM hosts")])
    if seg.empty:
        return ev, hosts, seg
    shift = dict(zip(seg["segment"], seg["started_unix"] - seg["started_unix"].min(), strict=True))
    for df, cols in ((ev, ["t_s"]), (hosts, ["requested_s", "up_s", "released_s"])):
        if not df.empty:
            off = df["segment"].map(shift)
            for c in cols:
                df[c] = df[c] + off
    return ev, hosts, seg


def write_run_report(out: Path, store: Any, summary: dict[str, Any]) -> None:
    """Write ``report.md`` and its PNGs into ``out`` (rebuilt from the store after every segment)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ev, hosts, seg = _timeline(store)
    figs = {}
    if not ev.empty:
        fig, ax = plt.subplots(figsize=(7, 3.2))
        for kind, style in (("ok", "-"), ("failed", "--")):
            t = np.sort(ev.loc[ev["kind"] == kind, "t_s"].to_numpy(float))
            if len(t):
                ax.step(t, np.arange(1, len(t) + 1), style, where="post", label=f"tasks {kind}")
        ax.set_xlabel("time (s)")
        ax.set_ylabel("tasks finished")
        ax.legend(loc="upper left")
        figs["tasks"] = save_figure(fig, out / "tasks_over_time.png")
        plt.close(fig)
    if not hosts.empty:
        end = float(max(hosts["released_s"].max(skipna=True) if hosts["released_s"].notna().any() else 0,
                        ev["t_s"].max() if not ev.empty else 0))
        fig, ax = plt.subplots(figsize=(7, 3.2))
        grid = np.linspace(0, max(end, 1e-9), 400)
        for pool, g in hosts.groupby("pool"):
            rel = g["released_s"].fillna(end).to_numpy(float)
            req = g["requested_s"].to_numpy(float)
            n = ((req[None, :] <= grid[:, None]) & (grid[:, None] < rel[None, :])).sum(axis=1)
            ax.step(grid, n, where="post", label=f"{pool} (rented)")
        ax.set_xlabel("time (s)")
        ax.set_ylabel("workers")
        ax.legend(loc="upper right")
        figs["workers"] = save_figure(fig, out / "workers_over_time.png")
        plt.close(fig)
        rel_ev = ev[ev["kind"] == "release"].sort_values("t_s") if not ev.empty else ev
        if len(rel_ev):
            fig, ax = plt.subplots(figsize=(7, 3.2))
            ax.step(rel_ev["t_s"], rel_ev["value"].cumsum(), where="post", label="charged (released hosts)")
            if summary.get("budget") is not None:
                ax.axhline(summary["budget"], color="red", ls=":", label="budget")
            ax.set_xlabel("time (s)")
            ax.set_ylabel("money")
            ax.legend(loc="lower right")
            figs["cost"] = save_figure(fig, out / "cost_over_time.png")
            plt.close(fig)
    keys = ("job", "policy", "tail_qos", "outcome", "tasks", "ok", "failed", "left", "wall_s", "cost",
            "budget", "hosts", "peak_hosts", "lost", "retried", "max_release_lag_s")
    rows = [(k, summary.get(k)) for k in keys]
    table = pd.DataFrame(rows, columns=["", "value"]).astype({"value": object})
    lines = [f"# Run of {summary.get('job')}", "", md_table(table, digits=2), ""]
    if len(seg) > 1:
        lines += [f"The run was resumed {len(seg) - 1} time(s); segments:", "",
                  md_table(seg[["segment", "outcome", "spent"]], digits=3), ""]
    for key, title in (("tasks", "Tasks finished over time"), ("workers", "Workers rented over time"),
                       ("cost", "Money charged over time")):
        if key in figs:
            lines += [f"## {title}", "", f"![{title}]({figs[key]})", ""]
    failed = summary.get("failed_tasks") or []
    if failed:
        lines += ["## Failed tasks (after every retry)", "",
                  md_table(pd.DataFrame(failed)[["task", "exit_code", "attempt"]]), ""]
    write_report(out / "report.md", "\n".join(lines))
