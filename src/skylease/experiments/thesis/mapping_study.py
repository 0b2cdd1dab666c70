"""Chapter 3 of the thesis, reproduced: the numerical example, the main study, the energy study.

Decisions A1-A10 of ``docs/decisions/thesis.md``. Instances are CVB ETCs (mu_task = 1000) in
the 16 heterogeneity scenarios of Table 3.5 x {FC, PC, OC} x {512x16, 1024x32, 2048x64}; PC uses
the "P-half" procedure (the one that reproduces the thesis's PC column best, decision A6.2). Each
campaign cell is one instance, numbered by its repetition (the thesis's replicate r), on which
all six heuristics run.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

import numpy as np
import pandas as pd

from skylease.experiments.thesis.paper_mapping import (
    EXAMPLE_DEVIATIONS,
    EXAMPLE_ETC,
    EXAMPLE_MAKESPANS,
    STUDY_HEURISTICS,
    TABLE_3_6,
    TABLE_3_7,
    TABLE_3_8,
)

SIZES = ("512x16", "1024x32", "2048x64")
CONSISTENCIES = ("fc", "pc", "oc")
LAMBDAS = tuple(round(x, 1) for x in np.linspace(0.0, 1.0, 11))


def parse_size(size: str) -> tuple[int, int]:
    n, m = size.lower().split("x")
    return int(n), int(m)


def scenario_label(v_task: float, v_mach: float) -> str:
    return f"{v_task:g}x{v_mach:g}"


def parse_scenario(label: str) -> tuple[float, float]:
    a, b = label.split("x")
    return float(a), float(b)


def thesis_scenarios() -> list[str]:
    """The 16 (V_task, V_mach) pairs of Table 3.5, as labels."""
    from skylease.traces.etc import THESIS_SCENARIOS

    return [scenario_label(vt, vm) for vt, vm in THESIS_SCENARIOS]


# -- numerical example (section 3.4) -------------------------------------------------------------
def optimum_by_enumeration(etc: np.ndarray) -> float:
    """Exact optimal makespan by trying every assignment (only for tiny instances)."""
    n, m = etc.shape
    if m**n > 5_000_000:
        raise ValueError("too many assignments to enumerate")
    assign = np.array(list(itertools.product(range(m), repeat=n)), dtype=np.int64)  # (m^n, n)
    times = etc[np.arange(n), assign]  # (m^n, n)
    loads = np.zeros((len(assign), m))
    for j in range(m):
        loads[:, j] = np.where(assign == j, times, 0.0).sum(axis=1)
    return float(loads.max(axis=1).min())


def example_table() -> pd.DataFrame:
    """Section 3.4: each heuristic's makespan and deviation from the optimum, ours and theirs."""
    from skylease.planning.mapping import HEURISTICS

    opt = optimum_by_enumeration(EXAMPLE_ETC)
    rows = []
    for h in STUDY_HEURISTICS:
        fn = HEURISTICS[h]
        s = fn(EXAMPLE_ETC, 0.8) if h.startswith("low") else fn(EXAMPLE_ETC)
        rows.append({
            "heuristic": h,
            "order": " ".join(f"t{t}" for t in s.order),
            "makespan": s.makespan,
            "thesis_makespan": EXAMPLE_MAKESPANS[h],
            "deviation_pct": 100 * (s.makespan - opt) / s.makespan,
            "thesis_deviation_pct": EXAMPLE_DEVIATIONS[h],
        })
    df = pd.DataFrame(rows)
    df.attrs["optimum"] = opt
    return df


# -- main study (sections 3.5-3.6) ---------------------------------------------------------------
def study_cell(size: str, scenario: str, consistency: str, seed: int, rep: int,
               pc: str = "pc-half") -> dict[str, Any]:
    """One ETC instance: every heuristic's makespan, SPT flowtime and run time, and the LB."""
    from skylease.planning.mapping import HEURISTICS, lower_bound
    from skylease.traces.etc import thesis_instance

    n, m = parse_size(size)
    v_task, v_mach = parse_scenario(scenario)
    etc = thesis_instance(n, m, v_task, v_mach, consistency, rep, pc=pc)
    row: dict[str, Any] = {"lb": lower_bound(etc)}
    for h in STUDY_HEURISTICS:
        t0 = time.perf_counter()
        s = HEURISTICS[h](etc)
        row[f"ms_{h}"] = (time.perf_counter() - t0) * 1000
        row[f"mk_{h}"] = s.makespan
        row[f"ft_{h}"] = s.flowtime
    return row


def study_grid(sizes: tuple[str, ...] = SIZES, scenarios: list[str] | None = None,
               consistencies: tuple[str, ...] = CONSISTENCIES) -> dict[str, list[Any]]:
    return {"size": list(sizes), "scenario": scenarios or thesis_scenarios(),
            "consistency": list(consistencies)}


def gain_table(study: pd.DataFrame) -> pd.DataFrame:
    """Table 3.8: %Gain of Low_3's mean SPT flowtime over Luo_1's, ours beside the thesis's.

    ``gain`` is the mean of per-instance gains (decision A2.8); ``gain_of_means`` the ratio of
    mean flowtimes, the other reading.
    """
    df = study.copy()
    df["gain"] = (1 - df["ft_low3"] / df["ft_luo1"]) * 100
    g = df.groupby(["size", "scenario", "consistency"], sort=False)
    res = g.agg(gain=("gain", "mean"), gain_sd=("gain", "std"), instances=("gain", "size"),
                ft_low3=("ft_low3", "mean"), ft_luo1=("ft_luo1", "mean")).reset_index()
    res["gain_of_means"] = (1 - res["ft_low3"] / res["ft_luo1"]) * 100
    theirs = []
    for r in res.itertuples(index=False):
        n, m = parse_size(r.size)
        theirs.append(TABLE_3_8.get(parse_scenario(r.scenario), {}).get((n, m, r.consistency),
                                                                         np.nan))
    res["thesis_gain"] = theirs
    res["diff_pp"] = res["gain"] - res["thesis_gain"]
    return res.drop(columns=["ft_low3", "ft_luo1"])


def best_counts_table(study: pd.DataFrame, size: str = "512x16",
                      consistency: str = "oc") -> pd.DataFrame:
    """Tables 3.6/3.7: instances where each heuristic is the unique best (B) or ties (EB)."""
    from skylease.planning.mapping.metrics import best_counts

    rows = []
    sub = study[(study["size"] == size) & (study["consistency"] == consistency)]
    for scen, grp in sub.groupby("scenario", sort=False):
        mk = grp[[f"mk_{h}" for h in STUDY_HEURISTICS]].to_numpy()
        b, eb = best_counts(mk)
        low = mk[:, 3:].min(axis=1)
        best_of_low = int((low <= mk.min(axis=1) * (1 + 1e-9)).sum())
        vt, vm = parse_scenario(scen)
        paper = TABLE_3_6.get(vt) if vm == 0.6 else None
        if paper is None and vt == 0.6:
            paper = TABLE_3_7.get(vm)
        row: dict[str, Any] = {"scenario": scen, "instances": len(grp)}
        for i, h in enumerate(STUDY_HEURISTICS):
            row[f"B_{h}"] = int(b[i])
            row[f"EB_{h}"] = int(eb[i])
            if paper is not None:
                row[f"thesis_B_{h}"] = paper[0][i]
                row[f"thesis_EB_{h}"] = paper[1][i]
        row["best_of_low"] = best_of_low
        rows.append(row)
    return pd.DataFrame(rows)


def ratio_table(study: pd.DataFrame) -> pd.DataFrame:
    """Mean approximation factor ρ = C_max / LB and performance ratio γ per heuristic and cell."""
    df = study.copy()
    mk = df[[f"mk_{h}" for h in STUDY_HEURISTICS]].to_numpy()
    best = mk.min(axis=1, keepdims=True)
    for i, h in enumerate(STUDY_HEURISTICS):
        df[f"rho_{h}"] = mk[:, i] / df["lb"]
        df[f"gamma_{h}"] = mk[:, i] / best[:, 0]
    cols = [f"{k}_{h}" for k in ("rho", "gamma", "ms") for h in STUDY_HEURISTICS]
    return df.groupby(["size", "scenario", "consistency"], sort=False)[cols].mean().reset_index()


def claims(study: pd.DataFrame, gains: pd.DataFrame) -> list[dict[str, Any]]:
    """The thesis's quantitative text claims (decision A9), each with ours and whether it holds."""
    rt = ratio_table(study)
    rho = rt[[f"rho_{h}" for h in STUDY_HEURISTICS]].to_numpy()
    worst = rho.argmax(axis=1)
    out = []
    luo2_worst = float((worst == STUDY_HEURISTICS.index("luo2")).mean())
    out.append({"claim": "Luo_2 has the worst results in all scenarios (mean ρ)",
                "ours": f"worst in {luo2_worst:.0%} of cells", "holds": luo2_worst == 1.0})
    for size in sorted(set(gains["size"]), key=lambda s: parse_size(s)[0]):
        g = gains[gains["size"] == size]
        share = float((g["gain"] > 0).mean())
        thesis = {"512x16": 0.87, "1024x32": 0.90, "2048x64": 0.92}.get(size)
        out.append({"claim": f"Low_3 beats Luo_1 in flowtime in ~{thesis:.0%} of the {size} cells",
                    "ours": f"{share:.0%}", "holds": thesis is not None and abs(share - thesis) <= 0.1})
    ordering = []
    for _, grp in gains.groupby(["size", "scenario"], sort=False):
        by = dict(zip(grp["consistency"], grp["gain"], strict=True))
        if {"fc", "pc", "oc"} <= set(by):
            ordering.append(by["oc"] >= by["pc"] - 0.5 and by["pc"] > by["fc"])
    if ordering:
        share = float(np.mean(ordering))
        out.append({"claim": "gains order OC >= PC > FC (within 0.5 pp for OC vs PC)",
                    "ours": f"holds in {share:.0%} of (size, scenario) cells", "holds": share >= 0.8})
    return out


# -- energy study (section 3.7) ------------------------------------------------------------------
ENERGY_CLASSES = tuple(f"{c}-{t}{mm}" for c in "fpo" for t in ("lo", "hi") for mm in ("lo", "hi"))
_HET = {"lo": 0.1, "hi": 0.6}
_CONS = {"f": "fc", "p": "pc-half", "o": "oc"}


def energy_cell(cls: str, seed: int) -> list[dict[str, Any]]:
    """One 512x16 instance of a class (e.g. 'o-hihi', mu = 100) with random voltage sets:
    Low_1/2/3 at every λ and Min-min, each with makespan, SPT flowtime and energy."""
    from skylease.planning.mapping import HEURISTICS, lambda_sweep, random_voltages
    from skylease.planning.mapping.energy import energy
    from skylease.traces.etc import cvb, make_consistent

    cons, het = cls.split("-")
    rng = np.random.default_rng(seed)
    etc = make_consistent(cvb(512, 16, _HET[het[:2]], _HET[het[2:]], 100.0, rng), _CONS[cons], rng)
    volts = random_voltages(16, rng)
    rows = []
    for rule, h in (("min", "low1"), ("max", "low2"), ("mean", "low3")):
        for s in lambda_sweep(etc, rule):
            rows.append({"heuristic": h, "lam": round(float(s.lam), 1), "makespan": s.makespan,
                         "flowtime": s.flowtime, "energy": energy(etc, s.assignment, volts)})
    mm = HEURISTICS["min-min"](etc)
    rows.append({"heuristic": "min-min", "lam": np.nan, "makespan": mm.makespan,
                 "flowtime": mm.flowtime, "energy": energy(etc, mm.assignment, volts)})
    return rows


def energy_curves(table: pd.DataFrame) -> pd.DataFrame:
    """Mean over instances, normalised per class and metric by the maximum over all heuristics
    and λ (decision A5.2); min-min is one value per class."""
    t = table.copy()
    t["lam"] = t["lam"].fillna(-1.0)
    mean = t.groupby(["cls", "heuristic", "lam"], sort=False)[["makespan", "flowtime", "energy"]]
    mean = mean.mean().reset_index()
    for metric in ("makespan", "flowtime", "energy"):
        mean[f"n_{metric}"] = mean[metric] / mean.groupby("cls")[metric].transform("max")
    mean.loc[mean["lam"] < 0, "lam"] = np.nan
    return mean
