"""``skylease reproduce thesis-placement``: the chapter-6 grid, the online variant, and the report."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from skylease.experiments.report import md_table, save_figure, write_report
from skylease.experiments.store import atomic_write_bytes_via, out_folder
from skylease.experiments.sweep import check_cluster, run_campaign
from skylease.experiments.thesis.paper_placement import (
    ENERGY_SAVED_0,
    ENERGY_SAVED_50,
    RELATED,
    STUDY_ALGORITHMS,
)
from skylease.experiments.thesis.placement_online import (
    ONLINE_DAYS,
    ONLINE_INSTANCES,
    ONLINE_PER_DAY,
    ONLINE_PERIODS,
    ONLINE_USERS,
    online_cell,
    online_summary,
    survival_table,
)
from skylease.experiments.thesis.placement_study import (
    INSTANCES,
    N_VMS,
    USERS,
    claims,
    example_table,
    model_table,
    savings_table,
    study_cell,
    study_grid,
    summary_table,
)

QUICK_INSTANCES = 5
QUICK_N_VMS = (40, 70, 100, 130)
QUICK_ONLINE_INSTANCES = 2
QUICK_ONLINE_DAYS = 4.0
DONE_WHEN_SAVING = 40.0  # issue 9: Sorting saves >= 40 % against FF, FFD and BF at 50 % busy, 130 VMs
LABELS = {"ff": "First-Fit", "ffd": "First-Fit Decreasing", "bf": "Best-Fit Decreasing",
          "sorting": "Sorting (Alg. 11)", "similar": "similar times (Alg. 12)",
          "sorting-none": "Sorting, cores only", "bf-trace": "Best-Fit, request order"}


@dataclass
class PlacementReproduction:
    out: Path
    instances: int
    example: pd.DataFrame
    summary: pd.DataFrame
    claims: list[dict[str, Any]]
    models: pd.DataFrame
    online: pd.DataFrame
    survival: pd.DataFrame
    grid_s: float
    online_s: float
    online_days: float = ONLINE_DAYS
    done_when: dict[str, Any] = field(default_factory=dict)
    failed: int = 0


def reproduce_thesis_placement(
    out: str | Path,
    *,
    quick: bool = False,
    instances: int | None = None,
    n_vms: tuple[int, ...] | None = None,
    online: bool = True,
    online_instances: int | None = None,
    mode: str = "inline",
    workers: int | None = None,
    scheduler: str | None = None,
    progress: bool = True,
) -> PlacementReproduction:
    """Run the worked example, the Figs. 6.2-6.3 grid and the online variant; write the report."""
    check_cluster(scheduler, workers)  # before the folder is made: a mistake leaves nothing
    out = out_folder(out)
    n_inst = instances or (QUICK_INSTANCES if quick else INSTANCES)
    sizes = n_vms or (QUICK_N_VMS if quick else N_VMS)
    t0 = time.perf_counter()
    study = run_campaign(study_cell, study_grid(USERS, sizes), seeds=n_inst, out=out / "study", mode=mode,
                         workers=workers, scheduler=scheduler, progress=progress,
                         description=f"thesis ch.6 grid, {n_inst} instance(s) per cell")
    grid_s = time.perf_counter() - t0
    summary = summary_table(study.table)
    online_runs = pd.DataFrame()
    online_s = 0.0
    failed = len(study.failed)
    if online:
        t0 = time.perf_counter()
        grid = {"users": list(ONLINE_USERS), "period": list(ONLINE_PERIODS),
                "days": [QUICK_ONLINE_DAYS if quick else ONLINE_DAYS]}
        n_online = online_instances or (QUICK_ONLINE_INSTANCES if quick else ONLINE_INSTANCES)
        res = run_campaign(online_cell, grid, seeds=n_online,
                           out=out / "online", mode=mode, workers=workers, scheduler=scheduler,
                           progress=progress, description="placement over time")
        online_s = time.perf_counter() - t0
        online_runs = res.table
        failed += len(res.failed)
    on = online_summary(online_runs) if len(online_runs) else pd.DataFrame()
    days = QUICK_ONLINE_DAYS if quick else ONLINE_DAYS
    rep = PlacementReproduction(
        out=out, instances=n_inst, example=example_table(), summary=summary, claims=claims(summary),
        models=model_table(summary), online=on,
        survival=survival_table(on, summary) if len(on) else pd.DataFrame(),
        grid_s=grid_s, online_s=online_s, online_days=days, done_when=done_when(summary), failed=failed)
    for name, df in (("example", rep.example), ("summary", rep.summary),
                     ("energy_savings", savings_table(summary, "energy_wh")),
                     ("desktop_savings", savings_table(summary, "desktops_used")),
                     ("claims", pd.DataFrame(rep.claims)), ("models", rep.models),
                     ("online", rep.online), ("online_survival", rep.survival)):
        atomic_write_bytes_via(out / f"{name}.csv", lambda tmp, df=df: df.to_csv(tmp, index=False))
    figures = {"desktops": _grid_figure(summary, "desktops_used", "desktops used", 1.0,
                                        out / "fig_6_2_desktops.png"),
               "energy": _grid_figure(summary, "energy_wh", "energy (MWh, Model C)", 1e-6,
                                      out / "fig_6_3_energy.png"),
               "savings": _savings_figure(summary, out / "sorting_savings.png")}
    if len(on):
        figures["online"] = _online_figure(on, out / "online.png")
    write_report(out / "report.md", _report_text(rep, figures, sizes))
    return rep


def done_when(summary: pd.DataFrame) -> dict[str, Any]:
    """The issue's bar: Sorting's savings at 50 % busy and the largest size; 50 % below 0 % for all."""
    big = int(summary["n_vms"].max())
    sv = savings_table(summary, "energy_wh")
    at = sv[np.isclose(sv["users"], 0.5) & (sv["n_vms"] == big)]
    e = summary[summary["algorithm"].isin(STUDY_ALGORITHMS)].pivot_table(
        index=["algorithm", "n_vms"], columns="users", values="energy_wh")
    savings = {a: float(at[a].iloc[0]) for a in RELATED} if len(at) else {}
    lower = e[0.5] < e[0.0] if {0.0, 0.5} <= set(e.columns) else pd.Series(dtype=bool)
    return {"n_vms": big, "savings": savings,
            "savings_hold": bool(savings) and min(savings.values()) >= DONE_WHEN_SAVING,
            "lower_at_50": int(lower.sum()), "cells": len(lower),
            "lower_hold": bool(len(lower)) and bool(lower.all())}


# -- figures ---------------------------------------------------------------------------------------
def _grid_figure(summary: pd.DataFrame, metric: str, label: str, scale: float, path: Path) -> str:
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


def _savings_figure(summary: pd.DataFrame, path: Path) -> str:
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


def _online_figure(on: pd.DataFrame, path: Path) -> str:
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
def _pivot(summary: pd.DataFrame, users: float, metric: str, scale: float = 1.0) -> pd.DataFrame:
    sub = summary[np.isclose(summary["users"], users) & summary["algorithm"].isin(STUDY_ALGORITHMS)]
    p = sub.pivot_table(index="n_vms", columns="algorithm", values=metric)[list(STUDY_ALGORITHMS)] * scale
    return p.reset_index()


def _report_text(rep: PlacementReproduction, figures: dict[str, str], sizes: tuple[int, ...]) -> str:
    s = rep.summary
    dw = rep.done_when
    held = sum(c["holds"] for c in rep.claims)
    unplaced = int((s["unplaced"] * s["instances"]).sum())
    runs = int(s[s["algorithm"].isin(STUDY_ALGORITHMS)]["instances"].sum())
    parts = [
        "# Thesis chapters 5-6 reproduced: energy-aware VM placement on an opportunistic desktop cloud",
        "",
        "Source: C. O. Diaz, PhD thesis, Univ. Luxembourg 2014, §6.1; the decisions that read it (B1-B6) "
        "are in `docs/decisions/thesis.md`. Generated by `skylease reproduce thesis-placement`.",
        "",
        f"Grid: users on {', '.join(f'{u:.0%}' for u in USERS)} of the 109 desktops x "
        f"{len(sizes)} sizes ({min(sizes)}-{max(sizes)} VMs) x **{rep.instances} instances** (the thesis: "
        f"30) x 5 heuristics = {runs:,} placements, plus two variants, in **{rep.grid_s:.1f} s** "
        f"(one process, including instance generation and the energy under all three models). "
        f"VMs left unplaced in the whole grid: {unplaced}.",
        "",
        "## What we had to decide",
        "",
        "- **Workload.** The UnaCloud trace is not published. Stand-in (decision B5): cores 1/2/3/4/6/8 with "
        "weights 0.35/0.25/0.05/0.20/0.05/0.10, durations log-uniform on [45, 43,200] min; a trace of "
        "9,800 requests, instances drawn from it without replacement and kept in request order, redrawn "
        "unless the cores fit the lab (sum <= 592, at most 39 VMs above 4 cores).",
        "- **Pairing and order.** Instance k of a size is the same at every users share and is paired "
        "with user draw k; it also fixes a random order of the lab's desktops (FF, FFD and BF depend on "
        "it; the thesis does not say). 50 % of 109 desktops is 55 (half rounded up).",
        "- **Energy (Model C, decision B3.5).** On a desktop with a user, VMs cost the incremental "
        "max(0, f(x) + 20 − 87) W for their whole run and run τ + 0.1·min(d, τ); on a desktop without "
        "one they cost f(x) = 45.341·x^0.1651; an unused desktop costs nothing. Models A and B are "
        "computed on the same placements below.",
        "- **Heuristics.** FFD and Best-Fit sort VMs by cores, then duration, descending (ties in "
        "request order); Best-Fit is Best-Fit Decreasing (the text: the items are sorted); Sorting "
        "re-ranks desktops by (has a VM, has a user, free cores) after every VM; similar-times (Alg. 12, "
        "not evaluated in the thesis) fills each desktop with the VMs whose durations are closest to "
        "its first VM's.",
        "",
        "## The worked example of §6.1.2.4 (Model C, no users)",
        "",
        md_table(rep.example, ["algorithm", "placement", "thesis_placement", "energy_wh", "thesis_wh"],
                 digits=1),
        "",
        "The text's Alg. 11 placement {VM1, VM2 | VM3} needs the VMs sorted by cores only; with the "
        "text's secondary key (duration, descending) Sorting already pairs VM3 with VM1, as Alg. 12 "
        "does (decision B4). The thesis gives no Wh; the reference values are ours (decision B4).",
        "",
        "## The thesis's claims (§6.1.3.3) beside ours",
        "",
        f"A percentage claim holds when ours is within 10 points of the thesis's. **{held} of "
        f"{len(rep.claims)} hold.**",
        "",
        md_table(pd.DataFrame(rep.claims), ["claim", "thesis", "ours", "diff_pp", "holds"], digits=1),
        "",
        "Where we differ, and why:",
        "",
        *_differences(rep),
        "",
        "## Figures 6.2 and 6.3 (ours)",
        "",
        f"![desktops]({figures['desktops']})",
        "",
        f"![energy]({figures['energy']})",
        "",
        "Mean desktops used, no users and 50 % busy:",
        "",
        md_table(_pivot(s, 0.0, "desktops_used"), digits=1),
        "",
        md_table(_pivot(s, 0.5, "desktops_used"), digits=1),
        "",
        "Mean energy (MWh, Model C), no users and 50 % busy:",
        "",
        md_table(_pivot(s, 0.0, "energy_wh", 1e-6), digits=3),
        "",
        md_table(_pivot(s, 0.5, "energy_wh", 1e-6), digits=3),
        "",
        f"![savings]({figures['savings']})",
        "",
        "## The issue's bar",
        "",
        f"- Sorting's energy saving at 50 % busy and {dw['n_vms']} VMs: "
        + ", ".join(f"{v:.1f} % vs {a.upper()}" for a, v in dw["savings"].items())
        + f" (thesis 48/45/46 %; bar: >= {DONE_WHEN_SAVING:g} %): "
        f"**{'met' if dw['savings_hold'] else 'not met'}**.",
        f"- Less energy at 50 % busy than with no users: {dw['lower_at_50']} of {dw['cells']} "
        f"(heuristic, size) cells: **{'met' if dw['lower_hold'] else 'not met'}**.",
        "",
        "## The three accounting readings (decision B3.5)",
        "",
        "Sorting's energy saving (%) against each heuristic at the largest size, and in how many "
        "(heuristic, size) cells 50 % busy costs less than no users:",
        "",
        md_table(rep.models, digits=1),
        "",
        "Only Model C makes the thesis's statements true together: Model A (Eqs. 6.2-6.11 literally, "
        "z = 1.1 with a user) makes busy desktops dearer, and under Model B users leave after 1-4 h "
        "while VMs run for days, so their desktops soon cost as much as idle ones.",
        "",
        "## Variants",
        "",
        md_table(_variants(s), digits=3),
        "",
        "Sorting with the worked example's secondary key (cores only) picks the same desktops, in "
        "the same order, as with the text's key (duration, descending); only which VMs share a "
        "desktop changes, and with it the energy (a VM kept alone for days at low load is what costs).",
        "",
    ]
    if len(rep.online):
        parts += _online_text(rep, figures)
    parts += [
        "## Run time",
        "",
        f"Grid {rep.grid_s:.1f} s, online study {rep.online_s:.1f} s, on the 2-core development machine. "
        "The 5-heuristic grid alone, ours against a plain pure-Python implementation: "
        "[performance.md](../../performance.md#vm-placement-thesis-chapter-6--benchmarksbench_placementpy).",
        "",
    ]
    if rep.failed:
        parts += [f"**{rep.failed} cell(s) failed**; see cells.jsonl in study/ and online/.", ""]
    return "\n".join(parts)


def _differences(rep: PlacementReproduction) -> list[str]:
    """Why ours differs from the thesis, sentence by sentence from the measured claims."""
    c = {x["key"]: x for x in rep.claims}
    s = rep.summary
    lines = []
    desk = [c[k]["diff_pp"] for k in c if k.startswith("desktops_")]
    if desk:
        lines.append(
            f"- *Desktops saved.* Ours are {_points(np.mean(desk))} the thesis's on average over "
            "the four desktop claims. The saving depends on how the requests' cores are spread, which "
            "the unpublished trace fixes and our stand-in can only guess (decision B6). With users, Sorting "
            "spreads VMs over the busy desktops first, which costs desktops (the thesis says so too) "
            "but saves energy.")
    energy = [c[k]["diff_pp"] for k in c if k.startswith("energy_")]
    if energy:
        lines.append(f"- *Energy saved.* Ours are {_points(np.mean(energy))} the thesis's on average over "
                     "the six energy claims: the direction and the size of the advantage match, at 0 % "
                     "and at 50 % busy desktops alike.")
    if "ff_more_desktops_bf" in c:
        mean = lambda a, col: float(s[s["algorithm"] == a][col].mean())  # noqa: E731
        share = c["ff_more_desktops_bf"]["value"]
        lines.append(
            f"- *FF against BF.* The thesis's FF uses about 4 % more desktops than BF; ours does in "
            f"{share:.0%} of the cells (Best-Fit Decreasing; the request-order variant is in the table). "
            "Best-Fit picks the desktop left with the fewest free cores, which for a fresh lab is the "
            f"smallest that fits: it uses {mean('bf', 'desktops_small'):.1f} 4-core desktops on average "
            f"against FF's {mean('ff', 'desktops_small'):.1f} (FF takes the lab's random order), so it "
            "needs more desktops for the same cores. Our pilot found the same reversal (decision B6); the "
            "claim depends on choices the thesis does not describe (VM order, desktop order).")
    if "ff_less_energy_bf" in c and "ff_less_energy_bf-trace" in c:
        lines.append(
            f"- *FF's energy against BF's.* FF uses less energy than Best-Fit Decreasing in "
            f"{c['ff_less_energy_bf']['value']:.0%} of the cells and than Best-Fit in request order in "
            f"{c['ff_less_energy_bf-trace']['value']:.0%}: which Best-Fit the thesis ran decides this "
            "claim (decision B4).")
    return lines


def _points(diff: float) -> str:
    return f"{abs(diff):.1f} points {'below' if diff < 0 else 'above'}"


def _variants(summary: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for users in (0.0, 0.5):
        sub = summary[np.isclose(summary["users"], users)]
        for a in ("sorting", "sorting-none", "similar", "bf", "bf-trace", "ff"):
            c = sub[sub["algorithm"] == a]
            if len(c):
                rows.append({"users": f"{users:.0%}", "heuristic": LABELS[a],
                             "desktops (mean over sizes)": f"{c['desktops_used'].mean():.1f}",
                             "energy MWh (mean over sizes)": c["energy_wh"].mean() / 1e6})
    return pd.DataFrame(rows)


def _online_text(rep: PlacementReproduction, figures: dict[str, str]) -> list[str]:
    on = rep.online.copy()
    on["energy_mwh"] = on["energy_wh"] / 1e6
    on["busy"] = [f"{u:.0%}" for u in on["users"]]
    on["rounds"] = ["immediate" if p == 0 else f"every {p:g} min" for p in on["period"]]
    on["desktops"] = [f"{d:.1f}" for d in on["desktops_used"]]
    on["wait_min"] = [f"{w:.1f}" for w in on["mean_wait_min"]]
    on["with_user"] = [f"{x:.0%}" for x in on["share_with_user"]]
    sv = rep.survival.copy()
    sv["busy"] = [f"{u:.0%}" for u in sv["users"]]
    sv["rounds"] = ["immediate" if p == 0 else f"every {p:g} min" for p in sv["period"]]
    sv["kept"] = [f"{x:.0%}" for x in sv["survives"]]
    s50 = sv[(sv["users"] == 0.5)]
    s0 = sv[(sv["users"] == 0.0)]
    n_inst = int(on["instances"].max())
    days = rep.online_days

    def beside(a: str) -> float:
        return float(on[(on["users"] == 0.5) & (on["algorithm"] == a)]["share_with_user"].mean())

    def saving(users: float) -> float:
        return float(sv[(sv["users"] == users) & (sv["against"] == "ff")]["online"].mean())
    return [
        "## Beyond the thesis: placement over time",
        "",
        f"VMs from the same trace arrive as a Poisson process ({ONLINE_PER_DAY:g} a day for about "
        f"{days:.0f} days, {on['vms'].mean():.0f} VMs on average), users come and go during opening "
        "hours 08:00-20:00 (sessions of U[60, 240] min; a desktop busy for 0 or 50 % of the open "
        f"hours), {n_inst} instances, every heuristic on the same arrivals and users. Each placement "
        "round hands the waiting VMs and the lab's current state to the same planners; rounds run at "
        "every arrival and departure (immediate) or every 60 minutes; no migration. A VM runs at "
        "90 % speed while a user shares its desktop (a session of d minutes costs it 0.1·d, as in the "
        "batch study); energy is integrated over time until the last VM ends, with Table 6.2's two "
        "states evaluated at every instant: f(x) without a user, max(0, f(x) + 20 − 87) with one, "
        "nothing for a desktop without VMs (Model B's reading: Model C's state frozen at placement "
        "has no meaning once users come and go).",
        "",
        f"![online]({figures['online']})",
        "",
        md_table(on, ["busy", "rounds", "algorithm", "energy_mwh", "desktops", "wait_min", "with_user"],
                 digits=3, headers=["busy", "rounds", "heuristic", "energy (MWh)", "desktops used",
                                    "mean wait (min)", "VM time beside a user"]),
        "",
        "Sorting's energy saving (%): the batch grid at its largest size (Models C and B) against online:",
        "",
        md_table(sv, ["busy", "rounds", "against", "batch_c", "batch_b", "online", "kept"], digits=1,
                 headers=["busy", "rounds", "Sorting against", "batch, Model C (%)", "batch, Model B (%)",
                          "online (%)", "online / batch C"]),
        "",
        "**How much of the batch advantage survives.** With no users, Sorting's online saving keeps "
        f"{100 * s0['survives'].mean():.0f} % of its batch saving on average: consolidating onto "
        "desktops already running VMs still pays under the concave power curve. With 50 % busy "
        f"desktops it keeps {100 * s50['survives'].mean():.0f} % of the Model C batch saving. The "
        "users Sorting chases leave after 1-4 hours while the VMs run for days, so the share of VM "
        f"time spent beside a user is {beside('sorting'):.0%} under Sorting and {beside('ff'):.0%} under "
        "First-Fit: what survives online is the consolidation, not the opportunism (Sorting's saving "
        f"against First-Fit is {saving(0.0):.1f} % with no users and {saving(0.5):.1f} % with 50 % busy).",
        "",
    ]
