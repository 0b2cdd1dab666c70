"""``skylease reproduce ilp``: the provisioning paper's checkable numbers, ours beside theirs.

Spec ``002_ilp.md`` sections 8-9: the Watershed points R11-R14 (exact), the 91 % and 11.4 %
comparisons, the incremental-vs-ILP and naive-vs-ILP ratios, the MapReduce points R7-R9, and the
cost/time Pareto fronts with the baselines. Every Watershed plan is also replayed in the event
simulator, whose cost and time are reported beside the plan's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from skylease.experiments.provisioning import plot_front, replay_watershed
from skylease.experiments.report import md_table, write_report
from skylease.experiments.store import out_folder
from skylease.planning.provisioning import (
    MapReduceJob,
    WatershedJob,
    load_catalog,
    modes,
    pick,
    solve_mapreduce,
    solve_watershed,
)
from skylease.planning.provisioning.baselines import mr_naive, ws_incremental, ws_naive
from skylease.planning.provisioning.pareto import nondominated, sweep


@dataclass
class IlpReproduction:
    points: pd.DataFrame
    ratios: pd.DataFrame
    mapreduce: pd.DataFrame
    out: Path
    elbows: pd.DataFrame


def _row(claim: str, paper_min: float | None, paper_cost: float, plan: Any,
         replay: Any = None) -> dict[str, Any]:
    r = {"claim": claim, "paper_min": paper_min, "paper_cost": paper_cost,
         "ours_min": plan.makespan_s / 60, "ours_cost": plan.cost}
    if replay is not None:
        r["sim_min"] = replay.makespan / 60
        r["sim_cost"] = replay.cost
    r["exact"] = (paper_min is None or abs(r["ours_min"] - paper_min) < 1e-6) and abs(
        r["ours_cost"] - paper_cost) < 1e-6
    return r


def watershed_points() -> pd.DataFrame:
    job = WatershedJob()
    types = pick(load_catalog("hybrid"), "local", "azure-small")
    rows = []
    for claim, plan, pm, pc in [
        ("R11 naive 20 small", ws_naive(job, 20), 63, 4.80),
        ("R12 naive 24 small", ws_naive(job, 24), 60, 2.88),  # "just under one hour"
        ("R13 naive 22 small (61 min mark)", ws_naive(job, 22), 61, 5.28),
        ("R13 ILP, 1-min intervals, D = 61", solve_watershed(job, types, 61, interval_min=1), 61, 2.76),
        ("R14 ILP, 10-min intervals, D = 70", solve_watershed(job, types, 70, interval_min=10), 70, 2.16),
        ("R14 incremental at 78 min", ws_incremental(job, 78), 78, 2.16),
    ]:
        rows.append(_row(claim, pm, pc, plan, replay_watershed(plan, job, types)))
    return pd.DataFrame(rows)


def ratio_checks() -> pd.DataFrame:
    job = WatershedJob()
    types = pick(load_catalog("hybrid"), "local", "azure-small")
    naive22 = ws_naive(job, 22)
    ilp61 = solve_watershed(job, types, 61, interval_min=1)
    ilp70 = solve_watershed(job, types, 70, interval_min=10)
    inc = ws_incremental(job, 78)
    # incremental vs ILP on a 5-min deadline grid: the largest cost ratio (paper: "38 % more")
    worst_cost, at = 0.0, None
    for d in range(60, 105, 5):
        i, p = ws_incremental(job, d), solve_watershed(job, types, d, interval_min=5)
        if i.ok and p.ok and p.cost > 0 and i.cost / p.cost > worst_cost:
            worst_cost, at = i.cost / p.cost, d
    rows = [
        {"claim": "R1/R4/R13 naive costs 91 % more (5.28 vs 2.76)", "paper": 91.0,
         "ours": 100 * (naive22.cost / ilp61.cost - 1)},
        {"claim": "R14 incremental 11.4 % slower for the same money (78 vs 70 min)", "paper": 11.4,
         "ours": 100 * (inc.makespan_s / ilp70.makespan_s - 1)},
        {"claim": f"R5 incremental up to 38 % more expensive (5-min grid; worst at D = {at} min)",
         "paper": 38.0, "ours": 100 * (worst_cost - 1)},
    ]
    mr = MapReduceJob()
    emr = load_catalog("emr")
    # the cheapest plan, and among equally cheap ones the fastest (spec section 5, min_cost)
    cheapest = modes.min_cost(lambda d: solve_mapreduce(mr, emr, d), 12.0, lo=0.25, step=0.25, unit="h")
    naive = [mr_naive(mr, t, n) for t in emr for n in (10, 20)]
    rows += [
        {"claim": "R2/R9 MapReduce naive up to 2.6x more expensive than the ILP",
         "paper": 2.6, "ours": max(p.cost for p in naive) / cheapest.cost},
        {"claim": "R9 MapReduce naive up to 21x slower than the ILP's cheapest plan",
         "paper": 21.0, "ours": max(p.makespan_s for p in naive) / cheapest.makespan_s},
    ]
    df = pd.DataFrame(rows)
    df["diff"] = df["ours"] - df["paper"]
    return df


def mapreduce_points() -> pd.DataFrame:
    mr = MapReduceJob()
    emr = load_catalog("emr")
    xl = pick(emr, "c1.xlarge")[0]
    r7 = solve_mapreduce(mr, emr, 3.0, billing="single_cluster")
    rows = [
        {**_row("R7 single cluster, D = 3 h: 2 c1.medium + 17 c1.xlarge", 180, 6.30, r7),
         "mix": r7.detail.get("summary", "")},
        {**_row("R8 naive 10 c1.xlarge", 315, 7.20, mr_naive(mr, xl, 10)), "mix": "10 c1.xlarge"},
    ]
    for d, cost in ((2.75, 8.40), (3.0, 7.77), (3.5, 6.63), (4.0, 6.33), (5.0, 6.30)):
        p = solve_mapreduce(mr, emr, d)
        rows.append({**_row(f"spec 9.1 literal ILP, D = {d} h", None, cost, p),
                     "mix": p.detail.get("summary", "")})
    return pd.DataFrame(rows)


def multimodel_elbows() -> pd.DataFrame:
    """Fig. 3: co-location against the ILP at co-location's elbow (where its local and cloud
    parts finish together), both scenarios, minute billing, local cores + Azure medium."""
    from skylease.planning.provisioning import SCENARIO_A, SCENARIO_B, solve_multimodel
    from skylease.planning.provisioning.baselines import colocation

    types = pick(load_catalog("hybrid"), "local", "azure-medium")
    rows = []
    for name, models, paper in (("A", SCENARIO_A, 5.4), ("B", SCENARIO_B, 18.8)):
        colo = [colocation(models, types, n) for n in range(1, 33)]
        elbow = min(colo, key=lambda p: (abs(p.detail["local_min"] - p.detail["azure_min"]), p.cost))
        ilp = solve_multimodel(models, types, elbow.makespan_s / 60, capacity="fluid")
        rows.append({"scenario": name, "colocation_min": elbow.makespan_s / 60,
                     "colocation_cost": elbow.cost, "ilp_min": ilp.makespan_s / 60, "ilp_cost": ilp.cost,
                     "paper_pct": paper, "ours_pct": 100 * (elbow.cost / ilp.cost - 1)})
    return pd.DataFrame(rows)


def reproduce_ilp(out: str | Path) -> IlpReproduction:
    out = out_folder(out)
    job = WatershedJob()
    types = pick(load_catalog("hybrid"), "local", "azure-small")
    points, ratios, mrp = watershed_points(), ratio_checks(), mapreduce_points()
    elbows = multimodel_elbows()
    for name, df in (("watershed_points", points), ("ratios", ratios), ("mapreduce_points", mrp),
                     ("multimodel_elbows", elbows)):
        df.to_csv(out / f"{name}.csv", index=False)
    ws_front = nondominated(sweep(lambda d: solve_watershed(job, types, d, interval_min=1),
                                  range(45, 121)))
    plot_front(ws_front, out / "watershed_front.png", title="Watershed: ILP (1-min intervals) vs baselines",
               baselines={"naive (16 local + n small)": [ws_naive(job, n) for n in range(0, 45)],
                          "incremental": [ws_incremental(job, d) for d in range(50, 110, 5)]})
    mr = MapReduceJob()
    emr = load_catalog("emr")
    mr_front = nondominated(sweep(lambda d: solve_mapreduce(mr, emr, d),
                                  [2.75 + 0.25 * k for k in range(14)]))
    plot_front(mr_front, out / "mapreduce_front.png", title="MapReduce: ILP vs naive (n = 10, 20)",
               baselines={"naive": [mr_naive(mr, t, n) for t in emr for n in (10, 20)]})
    write_report(out / "report.md", _report(points, ratios, mrp, elbows))
    return IlpReproduction(points, ratios, mrp, out, elbows)


def _report(points: pd.DataFrame, ratios: pd.DataFrame, mrp: pd.DataFrame, elbows: pd.DataFrame) -> str:
    return "\n".join([
        "# ILP provisioning reproduced: cost/time plans and the Pareto front",
        "",
        "Source: the ILP provisioning paper (seed 002); implementation spec `002_ilp.md`. Generated "
        "by `skylease reproduce ilp`. Solver: HiGHS (highspy), exact (zero MIP gap).",
        "",
        "## Watershed (hybrid cloud): the paper's points R11-R14",
        "",
        "`ours` is the plan (ILP or baseline); `sim` is the same plan replayed in skylease's event "
        "simulator with whole 90 s tasks, boot delays (local 10 min, Azure 30 min) and hourly "
        "billing.",
        "",
        md_table(points, ["claim", "paper_min", "ours_min", "sim_min", "paper_cost", "ours_cost",
                          "sim_cost", "exact"]),
        "",
        "R12's \"just under one hour\" is 60.0 min for whole tasks (59.5 min in the fluid model); "
        "R13's \"61 minutes mark\" is 61.5 min for whole tasks (61.05 fluid): the paper reads its "
        "figure at a coarser grain. Both costs are exact.",
        "",
        "## The paper's comparisons",
        "",
        md_table(ratios, ["claim", "paper", "ours", "diff"]),
        "",
        "The \"38 %\" depends on the deadline grid (spec 9.2): 37.5 % on a 5-min grid, 33 % on a "
        "10-min grid, 50 % on a 1-min grid.",
        "",
        "![watershed](watershed_front.png)",
        "",
        "## MapReduce on EMR",
        "",
        md_table(mrp, ["claim", "paper_min", "ours_min", "paper_cost", "ours_cost", "exact", "mix"]),
        "",
        "R7's $6.30 at 3 h holds only if one cluster runs both phases and is billed for 3 whole "
        "hours (spec M1); the literal per-phase ILP costs $7.77 at 3 h. Not reproduced, as the spec "
        "explains: \"45 minutes at $9.62\" and \"5.46x faster\" (R9, R2), which no variant of the "
        "stated model yields.",
        "",
        "![mapreduce](mapreduce_front.png)",
        "",
        "## Multiple models with data location (Fig. 3)",
        "",
        "Five models of 200 tasks; data placement as in the paper's scenarios A and B; local cores "
        "plus Azure medium instances, per-minute billing. The per-model task times (1 to 7.5 min, "
        "evenly spread), data sizes (1 GB) and transfer prices ($0.15/GB out of Azure) are the "
        "spec's assumptions: the paper does not print them, so only the direction of its claim "
        "can be checked. Claim: \"data co-location is 5.4 % (A) to 18.8 % (B) more expensive "
        "(for the same running time)\", at co-location's elbow.",
        "",
        md_table(elbows, ["scenario", "colocation_min", "colocation_cost", "ilp_min", "ilp_cost",
                          "paper_pct", "ours_pct"]),
        "",
        "The ILP dominates co-location in both scenarios (no later, cheaper), by less than the "
        "paper says; the gap depends on the unpublished inputs.",
        "",
    ])
