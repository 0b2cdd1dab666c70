"""``report.md`` of a real run: what ran, what it cost, which tasks failed, what to do next, and one
plot of three panels on one time axis (tasks finished, workers rented, money charged).

The money panel shows what ``skylease status`` reports at each instant: the money charged so far,
live workers included, a worker being charged each billing unit as it starts (at its rent request,
then every unit after), with the billing of its pool in its segment (recorded in the store's meta).

One figure, written as SVG without matplotlib (:mod:`skylease.experiments.svgplot`): the report is on
the path of every ``skylease run``, and importing matplotlib and drawing a PNG cost 0.5 s, half the
time of a 2,000-task job of ``true``.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from skylease.experiments.report import md_rows, write_report
from skylease.experiments.store import atomic_write_text
from skylease.model.billing import EPS
from skylease.model.units import duration, money


def _timeline(store: Any) -> tuple[list[dict], list[dict], list[dict]]:
    """Events, hosts and segments as rows, with times on one axis (seconds since the first
    segment). Plain rows, not DataFrames: pandas costs 0.2 s to import, on the path of every run."""
    seg = [dict(r) for r in store.query("SELECT * FROM segments ORDER BY segment")]
    ev = [dict(r) for r in store.query("SELECT * FROM events")]
    hosts = [dict(r) for r in store.query("SELECT * FROM hosts")]
    if not seg:
        return ev, hosts, seg
    t0 = min(r["started_unix"] for r in seg)
    shift = {r["segment"]: r["started_unix"] - t0 for r in seg}
    for rows, cols in ((ev, ("t_s",)), (hosts, ("requested_s", "up_s", "released_s"))):
        for r in rows:
            off = shift.get(r["segment"], 0.0)
            for c in cols:
                if r[c] is not None:
                    r[c] += off
    return ev, hosts, seg


#: Failed tasks listed in report.md (all of them are in ``skylease export``).
FAILED_IN_REPORT = 50


def write_run_report(out: Path, store: Any, summary: dict[str, Any]) -> None:
    """Write ``report.md`` and its plot into ``out`` (rebuilt from the store after every segment)."""
    _, _, seg = _timeline(store)
    figs = {}
    svg = run_figure(store, summary)
    if svg is not None:
        path = out / "run_over_time.svg"
        atomic_write_text(path, svg)
        figs["run"] = path.name
    keys = ("job", "policy", "policy_class", "tail_qos", "outcome", "tasks", "ok", "failed", "left", "wall_s",
            "cost", "budget", "hosts", "peak_hosts", "lost", "retried", "max_release_lag_s")
    # times as durations, money with its currency, nothing missing shown as None (docs/cli.md)
    shown = {"wall_s": duration, "max_release_lag_s": duration, "cost": money,
             "budget": lambda b: money(b, none="no budget")}
    rows = [(k, shown[k](summary.get(k)) if k in shown else "-" if summary.get(k) is None else summary[k])
            for k in keys]
    lines = [f"# Run of {summary.get('job')}", "", md_rows(rows, ["", "value"], digits=2), ""]
    per = summary.get("per_segment") or [{"segment": r["segment"], "outcome": r["outcome"], "wall_s": None,
                                          "spent": r["spent"], "hosts": None} for r in seg]
    if len(per) > 1:
        segs = [(r["segment"], r["outcome"], duration(r["wall_s"]), money(r["spent"]),
                 "-" if r["hosts"] is None else r["hosts"]) for r in per]
        lines += [f"The run was resumed {len(per) - 1} time(s); the figures above are the whole run's "
                  "(wall time, workers and retries added up over its segments, the peak the most of any "
                  "segment). Segments:", "",
                  md_rows(segs, ["segment", "outcome", "wall_s", "spent", "workers rented"], digits=3), ""]
    out_of = summary.get("budget_ran_out")
    if out_of:
        lines += [f"**The budget ran out**: {money(out_of['spent'])} spent of the {money(out_of['budget'])} "
                  f"allowed (a worker costs at least {money(out_of['least_charge'])}), with "
                  f"{summary.get('left')} task(s) not run.", ""]
    lines += _next_lines(summary)
    if "run" in figs:
        title = "Tasks finished, workers rented and money charged over time"
        lines += [f"## {title}", "", f"![{title}]({figs['run']})", ""]
    lines += _failed_lines(summary)
    write_report(out / "report.md", "\n".join(lines))


def _next_lines(summary: dict[str, Any]) -> list[str]:
    nxt = summary.get("next") or {}
    finish = "Finish the run (the tasks not run yet" + (", with a larger budget)" if summary.get(
        "budget_ran_out") else ")")
    steps = [(key, what) for key, what in (("resume", finish),
                                           ("retry_failed", "Run the failed tasks again, once fixed"),
                                           ("failed", "Or write them as a job file, fix their commands "
                                            "and run it (`skylease run fixed.txt --out NEW_DIR`)"),
                                           ("export", "Every task's result, one row per task"))
             if key in nxt and (key != "export" or summary.get("failed") or summary.get("left"))]
    if not steps:
        return []
    lines = ["## What next", ""]
    for key, what in steps:
        lines += [f"{what}:", "", "```bash", nxt[key], "```", ""]
    return lines


def _failed_lines(summary: dict[str, Any]) -> list[str]:
    failed = (summary.get("failed_tasks") or [])[:FAILED_IN_REPORT]
    if not failed:
        return []
    # a pipe in a command would end the table cell
    rows = [("" if f["line"] is None else str(f["line"]), f"`{_cell(f['command'])}`" if f["command"] else "",
             f["exit_code"], f["attempts"], f"`{_cell(f['stderr'])}`" if f["stderr"] else "") for f in failed]
    lines = ["## Failed tasks (after every retry)", "",
             md_rows(rows, ["job-file line", "command", "exit code", "attempts", "last line of stderr"]), ""]
    more = int(summary.get("failed") or 0) - len(failed)
    if more > 0:
        lines += [f"and {more} more: `skylease export {summary.get('out')}` lists every task.", ""]
    return lines


def _cell(text: Any) -> str:
    return " ".join(str(text).split()).replace("|", "\\|").replace("`", "'")


def charge_curve(store: Any) -> Any:
    """``charged(t)`` of the run in ``store``: money charged by each time ``t`` (seconds since its
    first segment started), live workers included, as ``skylease status`` counts it."""
    _, hosts, seg = _timeline(store)
    return _charged(hosts, seg, store.meta().get("billing") or {})


def _charged(hosts: list[dict], seg: list[dict], billing: dict[str, Any]
             ) -> Callable[[Iterable[float]], list[float]]:
    """``charged(ts)``: money charged by each time of ``ts`` (times on the report's axis), live hosts
    included.

    A host's charge at ``t`` is its started billing units by then (as ``status`` counts it), up
    to its release, or for a host its driver never released (killed), to the segment's last
    heartbeat. Hosts of a segment without recorded billing (a store of the previous format) count
    at their recorded cost from their release. Plain Python, no numpy: it is on the path of every
    run (a host's charge is computed only at the times it lives; after that it is a constant).
    """
    seg_end = {}
    if seg:
        t0 = min(r["started_unix"] for r in seg)
        for r in seg:
            last = r["ended_unix"] if r["ended_unix"] is not None else r["heartbeat_unix"]
            seg_end[r["segment"]] = (last if last is not None else r["started_unix"]) - t0
    rows = []
    for h in hosts:
        req = float(h["requested_s"])
        end = float(h["released_s"] if h["released_s"] is not None else seg_end.get(h["segment"], req))
        b = (billing.get(str(h["segment"])) or {}).get(h["pool"])
        if b:
            rows.append((req, end, float(b["price"]), float(b["billing_unit"]), float(b["min_units"]), None))
        else:
            rows.append((req, end, 0.0, 1.0, 0.0, float(h["cost"]) if h["cost"] is not None else 0.0))

    def charged(ts: Iterable[float]) -> list[float]:
        ts = [float(t) for t in ts]
        order = sorted(range(len(ts)), key=ts.__getitem__)
        at = [ts[i] for i in order]
        live = [0.0] * len(at)
        final = [0.0] * (len(at) + 1)  # a host's charge from its end on, added from that index up
        for req, end, price, unit, least, cost in rows:
            i_end = bisect.bisect_left(at, end)
            if cost is not None:
                final[i_end] += cost
                continue
            for k in range(bisect.bisect_left(at, req), i_end):
                live[k] += _units(at[k] - req, unit, least) * price
            final[max(i_end, bisect.bisect_left(at, req))] += _units(end - req, unit, least) * price
        out = [0.0] * len(at)
        since = 0.0
        for k, i in enumerate(order):
            since += final[k]
            out[i] = live[k] + since
        return out

    return charged


def _units(lived: float, unit: float, least: float) -> float:
    """Billing units started after ``lived`` seconds (at least ``least``), as Billing.units counts."""
    return max(least, math.ceil(max(lived, 0.0) / unit - EPS / unit))


def run_figure(store: Any, summary: dict[str, Any]) -> str | None:
    """The SVG of run_over_time.svg (tasks finished, workers rented, money charged), or None for a
    run that rented nothing."""
    ev, hosts, seg = _timeline(store)
    if not ev and not hosts:
        return None
    return _figure(ev, hosts, _charged(hosts, seg, store.meta().get("billing") or {}), summary)


def _figure(ev: list[dict], hosts: list[dict], charged: Any, summary: dict[str, Any]) -> str:
    from skylease.experiments.svgplot import Panel, Series, step_panels

    budget = summary.get("budget")
    tasks = Panel("tasks finished", integer=True)
    for kind, dashed in (("ok", False), ("failed", True)):
        t = sorted(float(e["t_s"]) for e in ev if e["kind"] == kind)
        if t:
            tasks.series.append(Series(f"tasks {kind}", [0.0, *t], [float(k) for k in range(len(t) + 1)],
                                       dashed))
    released = [h["released_s"] for h in hosts if h["released_s"] is not None]
    end = float(max(max(released, default=0.0), max((e["t_s"] for e in ev), default=0.0)))
    x_max = max(end, 1e-9)
    grid = [k * x_max / 399 for k in range(399)] + [x_max]
    workers = Panel("workers", integer=True)
    for pool in sorted({h["pool"] for h in hosts}):
        g = [h for h in hosts if h["pool"] == pool]
        rel = sorted(float(h["released_s"]) if h["released_s"] is not None else end for h in g)
        req = sorted(float(h["requested_s"]) for h in g)
        n = [float(bisect.bisect_right(req, t) - bisect.bisect_right(rel, t)) for t in grid]
        workers.series.append(Series(f"{pool} (rented)", grid, n))
    hline = ("budget", float(budget)) if budget is not None else None
    money = Panel("money charged ($)",
                  [Series("charged so far (live workers included)", grid, charged(grid))], hline=hline)
    title = (f"Run of {Path(str(summary.get('job'))).name} ({summary.get('outcome')}, "
             f"{summary.get('policy')}): tasks, workers and money over time")
    return step_panels([tasks, workers, money], "time since the run started (s)", title, max(end, 1e-9))
