"""``report.md`` of a real run: what ran, what it cost, and one plot of three panels on one time axis
(tasks finished, workers rented, money charged).

One figure, drawn once (no tight bounding box, which draws twice): the report is on the path of every
``skylease run``, and three separate figures cost about 0.4 s more than the job of a short run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from skylease.experiments.report import md_table, write_report
from skylease.experiments.store import atomic_write_bytes_via


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
    """Write ``report.md`` and its plot into ``out`` (rebuilt from the store after every segment)."""
    ev, hosts, seg = _timeline(store)
    figs = {}
    if not ev.empty or not hosts.empty:
        figs["run"] = _plot_run(out / "run_over_time.png", ev, hosts, summary.get("budget"))
    keys = ("job", "policy", "tail_qos", "outcome", "tasks", "ok", "failed", "left", "wall_s", "cost",
            "budget", "hosts", "peak_hosts", "lost", "retried", "max_release_lag_s")
    rows = [(k, summary.get(k)) for k in keys]
    table = pd.DataFrame(rows, columns=["", "value"]).astype({"value": object})
    lines = [f"# Run of {summary.get('job')}", "", md_table(table, digits=2), ""]
    if len(seg) > 1:
        lines += [f"The run was resumed {len(seg) - 1} time(s); segments:", "",
                  md_table(seg[["segment", "outcome", "spent"]], digits=3), ""]
    if "run" in figs:
        title = "Tasks finished, workers rented and money charged over time"
        lines += [f"## {title}", "", f"![{title}]({figs['run']})", ""]
    failed = summary.get("failed_tasks") or []
    if failed:
        lines += ["## Failed tasks (after every retry)", "",
                  md_table(pd.DataFrame(failed)[["task", "exit_code", "attempt"]]), ""]
    write_report(out / "report.md", "\n".join(lines))


def _plot_run(path: Path, ev: pd.DataFrame, hosts: pd.DataFrame, budget: float | None) -> str:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=(7, 6.6))
    ax_t, ax_w, ax_c = fig.subplots(3, 1, sharex=True)
    fig.subplots_adjust(left=0.11, right=0.98, top=0.98, bottom=0.07, hspace=0.08)  # no layout pass
    for kind, style in (("ok", "-"), ("failed", "--")):
        t = np.sort(ev.loc[ev["kind"] == kind, "t_s"].to_numpy(float)) if not ev.empty else np.empty(0)
        if len(t):
            ax_t.step(t, np.arange(1, len(t) + 1), style, where="post", label=f"tasks {kind}")
    ax_t.set_ylabel("tasks finished")
    released = hosts["released_s"].dropna() if not hosts.empty else hosts
    end = float(max(released.max() if len(released) else 0, ev["t_s"].max() if not ev.empty else 0))
    grid = np.linspace(0, max(end, 1e-9), 400)
    if not hosts.empty:
        for pool, g in hosts.groupby("pool"):
            rel = g["released_s"].fillna(end).to_numpy(float)
            req = g["requested_s"].to_numpy(float)
            n = ((req[None, :] <= grid[:, None]) & (grid[:, None] < rel[None, :])).sum(axis=1)
            ax_w.step(grid, n, where="post", label=f"{pool} (rented)")
    ax_w.set_ylabel("workers")
    ax_w.yaxis.set_major_locator(MaxNLocator(integer=True))
    rel_ev = ev[ev["kind"] == "release"].sort_values("t_s") if not ev.empty else ev
    if len(rel_ev):
        ax_c.step(rel_ev["t_s"], rel_ev["value"].cumsum(), where="post", label="charged (released hosts)")
    if budget is not None:
        ax_c.axhline(budget, color="red", ls=":", label="budget")
    ax_c.set_ylabel("money")
    ax_c.set_xlabel("time (s)")
    for ax, loc in ((ax_t, "upper left"), (ax_w, "upper right"), (ax_c, "lower right")):
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc=loc, fontsize="small")  # a fixed place: "best" searches the 2,000 points
    atomic_write_bytes_via(path, lambda tmp: fig.savefig(tmp, dpi=100, format="png"))
    return path.name

