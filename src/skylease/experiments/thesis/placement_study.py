"""Chapter 6 of the thesis, reproduced: the worked example and the Figs. 6.2-6.3 grid.

The grid (thesis §6.1.3.2; decision B5 in ``docs/decisions/thesis.md``): a user on 0, 10, ..., 50 % of the 109
desktops, 40, 50, ..., 130 VMs, 30 instances per size drawn from the synthetic stand-in trace,
every heuristic on each. Decisions where the thesis is silent (B5):

- VM instance k of a size is the same for every users share, and is paired with user draw k of
  that share (6 x 10 x 30 runs per heuristic). Instance k also fixes the lab's index order, drawn
  at random (4- and 8-core desktops mixed): FF, FFD and BF depend on it.
- Energy is Model C (the default; decision B3.5); Models A and B are computed on the same placements
  for the report's sensitivity section. Two variants run beside the five heuristics: Sorting with
  the worked example's secondary key (``sorting-none``) and Best-Fit in request order
  (``bf-trace``), for the claims that depend on them (decision B4).
"""

from __future__ import annotations

import functools
import time
from typing import Any

import numpy as np
import pandas as pd

from skylease.experiments.thesis.paper_placement import (
    DESKTOPS_SAVED_0,
    DESKTOPS_SAVED_50,
    ENERGY_SAVED_0,
    ENERGY_SAVED_50,
    EXAMPLE_ALG11,
    EXAMPLE_ALG12,
    EXAMPLE_DESKTOP_CORES,
    EXAMPLE_VM_CORES,
    EXAMPLE_VM_MINUTES,
    EXAMPLE_WH,
    FF_MORE_DESKTOPS_THAN_BF,
    RELATED,
    STUDY_ALGORITHMS,
)
from skylease.model.desktop import Desktops, VMs
from skylease.planning.placement import ENERGY_MODELS, energy, place
from skylease.traces.lab import draw_users, thesis_lab
from skylease.traces.vms import sample_vms, vm_trace

USERS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5)
N_VMS = tuple(range(40, 131, 10))
INSTANCES = 30
VARIANTS = ("sorting-none", "bf-trace")
ALL_ALGORITHMS = STUDY_ALGORITHMS + VARIANTS
STUDY_SEED = 6  # chapter 6: the root of every instance's seed
CLAIM_TOLERANCE_PP = 10.0  # a percentage claim "holds" within this many points of the thesis

DONE_WHEN_SAVING = 40.0  # issue 9: Sorting saves >= 40 % against FF, FFD and BF at 50 % busy, 130 VMs
#: Display names of the grid's heuristics and variants, for tables and plots.
LABELS = {"ff": "First-Fit", "ffd": "First-Fit Decreasing", "bf": "Best-Fit Decreasing",
          "sorting": "Sorting (Alg. 11)", "similar": "similar times (Alg. 12)",
          "sorting-none": "Sorting, cores only", "bf-trace": "Best-Fit, request order"}


@functools.lru_cache(maxsize=1)
def _trace() -> VMs:
    """The stand-in trace, drawn once per process (a pure function of its fixed seed)."""
    return vm_trace()


def study_instance(users: float, n_vms: int, rep: int) -> tuple[VMs, Desktops]:
    """Instance ``rep`` of a grid cell: the VMs, and the lab (shuffled) with its users."""
    g = np.random.default_rng([STUDY_SEED, n_vms, rep])
    lab = thesis_lab(g)
    vms = sample_vms(_trace(), n_vms, g, lab.cores)
    users_rng = np.random.default_rng([STUDY_SEED, 1000 + round(100 * users), rep])
    return vms, lab.with_users(draw_users(len(lab), users, users_rng))


def _run(algorithm: str, vms: VMs, lab: Desktops):
    if algorithm == "sorting-none":
        return place("sorting", vms, lab, secondary="none")
    return place(algorithm, vms, lab)


def study_cell(users: float, n_vms: int, rep: int, seed: int = 0,
               algorithms: tuple[str, ...] = ALL_ALGORITHMS,
               models: tuple[str, ...] = ENERGY_MODELS) -> list[dict[str, Any]]:
    """One instance, every heuristic: desktops used, energy (Wh) per model, unplaced VMs, time.

    ``seed`` (the campaign's) is unused: instances are numbered by ``rep`` so that instance k is
    shared across users shares, as the thesis does.
    """
    vms, lab = study_instance(users, n_vms, rep)
    biggest = lab.cores.max()
    rows = []
    for alg in algorithms:
        t0 = time.perf_counter()
        p = _run(alg, vms, lab)
        ms = (time.perf_counter() - t0) * 1000
        used = np.unique(p.desktop[p.placed])
        row: dict[str, Any] = {"algorithm": alg, "desktops_used": used.size,
                               "desktops_with_user": int(lab.user[used].sum()),
                               "desktops_small": int((lab.cores[used] < biggest).sum()),
                               "unplaced": len(p.unplaced), "place_ms": ms}
        for m in models:
            row["energy_wh" if m == "c" else f"energy_wh_{m}"] = energy(p, vms, lab, m).total_wh
        rows.append(row)
    return rows


def study_grid(users: tuple[float, ...] = USERS, n_vms: tuple[int, ...] = N_VMS) -> dict[str, list[Any]]:
    return {"users": list(users), "n_vms": list(n_vms)}


# -- the worked example (§6.1.2.4) -------------------------------------------------------------------
def example_table() -> pd.DataFrame:
    """Alg. 11 (both secondary keys) and Alg. 12 on the worked example, Model C, no users."""
    lab = Desktops(cores=list(EXAMPLE_DESKTOP_CORES))
    vms = VMs(cores=list(EXAMPLE_VM_CORES), minutes=list(EXAMPLE_VM_MINUTES), names=("VM1", "VM2", "VM3"))
    rows = []
    for label, alg, sec, thesis_p, thesis_wh in (
        ("Alg. 11 (Sorting), cores only", "sorting", "none", EXAMPLE_ALG11, EXAMPLE_WH["alg11"]),
        ("Alg. 11 (Sorting), cores then time desc.", "sorting", "time_desc", EXAMPLE_ALG11, None),
        ("Alg. 12 (similar times)", "similar", "time_desc", EXAMPLE_ALG12, EXAMPLE_WH["alg12"]),
    ):
        p = place(alg, vms, lab, secondary=sec)
        rows.append({"algorithm": label, "placement": _groups(p.desktop, vms.names),
                     "thesis_placement": _groups(np.array(thesis_p), vms.names),
                     "energy_wh": energy(p, vms, lab, "c").total_wh,
                     "thesis_wh": float("nan") if thesis_wh is None else thesis_wh})
    return pd.DataFrame(rows)


def _groups(desk: np.ndarray, names: tuple[str, ...]) -> str:
    return " / ".join("{" + ", ".join(names[i] for i in np.flatnonzero(desk == j)) + "}"
                      for j in sorted(set(desk.tolist())))


# -- tables --------------------------------------------------------------------------------------
def summary_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Mean (and sd) over instances per users share, VM count and heuristic."""
    metrics = [c for c in ("desktops_used", "energy_wh", "energy_wh_a", "energy_wh_b", "unplaced",
                           "desktops_with_user", "desktops_small", "place_ms") if c in runs.columns]
    g = runs.groupby(["users", "n_vms", "algorithm"], sort=True)
    s = g[metrics].mean()
    s["energy_wh_sd"] = g["energy_wh"].std()
    s["desktops_used_sd"] = g["desktops_used"].std()
    s["instances"] = g.size()
    return s.reset_index()


def savings_table(summary: pd.DataFrame, metric: str = "energy_wh", against: tuple[str, ...] = RELATED,
                  of: str = "sorting") -> pd.DataFrame:
    """% saved by ``of`` against each heuristic: 100 (1 − mean_of / mean_other), per cell."""
    wide = summary.pivot_table(index=["users", "n_vms"], columns="algorithm", values=metric)
    out = pd.DataFrame(index=wide.index)
    for a in against:
        if a in wide.columns:
            out[a] = 100.0 * (1.0 - wide[of] / wide[a])
    return out.reset_index()


def _at(df: pd.DataFrame, users: float) -> pd.DataFrame:
    return df[np.isclose(df["users"], users)]


def _claim(key: str, claim: str, thesis: str, ours: str, value: float, holds: bool,
           diff_pp: float = float("nan")) -> dict[str, Any]:
    return {"key": key, "claim": claim, "thesis": thesis, "ours": ours, "value": value, "diff_pp": diff_pp,
            "holds": bool(holds)}


def _pct_claim(key: str, claim: str, thesis: float, ours: float, where: str) -> dict[str, Any]:
    """A percentage claim: holds within CLAIM_TOLERANCE_PP points of the thesis."""
    return _claim(key, claim, f"{thesis:g} %", f"{ours:.1f} % ({where})", ours,
                  abs(ours - thesis) <= CLAIM_TOLERANCE_PP, ours - thesis)


def _up_to(s: pd.DataFrame, a: str) -> tuple[float, str]:
    """The best saving over sizes ("up to"), and where."""
    return float(s[a].max()), f"max over sizes, at {int(s.loc[s[a].idxmax(), 'n_vms'])} VMs"


def claims(summary: pd.DataFrame) -> list[dict[str, Any]]:
    """The text's claims (§6.1.3.3, decision B6), ours beside theirs, and whether each holds."""
    out: list[dict[str, Any]] = []
    pm0, pm50 = (_at(savings_table(summary, "desktops_used"), u) for u in (0.0, 0.5))
    en0, en50 = (_at(savings_table(summary, "energy_wh"), u) for u in (0.0, 0.5))
    big = int(summary["n_vms"].max())
    for a in RELATED if len(pm0) else ():
        out.append(_pct_claim(f"desktops_0_{a}", f"no users: Sorting uses up to {DESKTOPS_SAVED_0[a]:g} % "
                              f"fewer desktops than {a.upper()}", DESKTOPS_SAVED_0[a], *_up_to(pm0, a)))
    if len(pm50):
        out.append(_pct_claim("desktops_50", "50 % busy: Sorting uses 30 % fewer desktops on average than "
                              "FF, FFD, BF", DESKTOPS_SAVED_50, float(pm50[list(RELATED)].to_numpy().mean()),
                              "mean over sizes and the three"))
    for a in RELATED if len(en0) else ():
        out.append(_pct_claim(f"energy_0_{a}", f"no users: Sorting uses up to {ENERGY_SAVED_0[a]:g} % less "
                              f"energy than {a.upper()}", ENERGY_SAVED_0[a], *_up_to(en0, a)))
    for a in RELATED if len(en50) else ():
        at_big = float(en50[en50["n_vms"] == big][a].iloc[0])
        out.append(_pct_claim(f"energy_50_{a}", f"50 % busy: Sorting uses {ENERGY_SAVED_50[a]:g} % less "
                              f"energy than {a.upper()}", ENERGY_SAVED_50[a], at_big,
                              f"at {big} VMs; up to {en50[a].max():.1f} %"))
    if len(en0) and len(en50):
        e = summary[summary["algorithm"].isin(STUDY_ALGORITHMS)].pivot_table(
            index=["algorithm", "n_vms"], columns="users", values="energy_wh")
        lower, ratio = e[0.5] < e[0.0], e[0.5] / e[0.0]
        out.append(_claim("less_at_50", "every heuristic uses less energy with 50 % busy desktops than with "
                          "none", "yes", f"{int(lower.sum())} of {len(lower)} (heuristic, size) cells; "
                          f"50 % / 0 % = {ratio.min():.2f}-{ratio.max():.2f}", float(lower.mean()),
                          lower.all()))
        gain0, gain50 = (float(x[list(RELATED)].to_numpy().mean()) for x in (en0, en50))
        out.append(_claim("advantage_grows", "Sorting's energy advantage is larger with 50 % busy desktops "
                          "than with none", "yes", f"mean saving {gain0:.1f} % -> {gain50:.1f} %",
                          gain50 - gain0, gain50 > gain0))
        d = summary[summary["algorithm"] == "sorting"].pivot_table(index="n_vms", columns="users",
                                                                   values="desktops_used")
        more = d[0.5] > d[0.0]
        out.append(_claim("more_desktops_50", "Sorting needs more desktops with 50 % busy than with none",
                          "yes", f"{int(more.sum())} of {len(more)} sizes", float(more.mean()), more.all()))
    wide_pm = summary.pivot_table(index=["users", "n_vms"], columns="algorithm", values="desktops_used")
    wide_e = summary.pivot_table(index=["users", "n_vms"], columns="algorithm", values="energy_wh")
    for bf in ("bf", "bf-trace"):
        if bf not in wide_pm.columns:
            continue
        more = 100.0 * (wide_pm["ff"] / wide_pm[bf] - 1.0)
        out.append(_claim(f"ff_more_desktops_{bf}", f"FF uses about {FF_MORE_DESKTOPS_THAN_BF:g} % more "
                          f"desktops than BF in almost all scenarios (ours: {bf})",
                          f"{FF_MORE_DESKTOPS_THAN_BF:g} %", f"{more.mean():+.1f} % on average; FF more in "
                          f"{int((more > 0).sum())} of {len(more)} cells", float((more > 0).mean()),
                          (more > 0).mean() >= 0.8, float(more.mean() - FF_MORE_DESKTOPS_THAN_BF)))
        cheaper = wide_e["ff"] < wide_e[bf]
        out.append(_claim(f"ff_less_energy_{bf}", f"... yet FF uses less energy than BF (ours: {bf})", "yes",
                          f"in {int(cheaper.sum())} of {len(cheaper)} cells", float(cheaper.mean()),
                          cheaper.mean() >= 0.8))
    return out


def model_table(summary: pd.DataFrame) -> pd.DataFrame:
    """The energy claims under each accounting model, at the largest size, 0 % and 50 % busy."""
    rows = []
    big = int(summary["n_vms"].max())
    for m, col in (("a", "energy_wh_a"), ("b", "energy_wh_b"), ("c", "energy_wh")):
        if col not in summary.columns:
            continue
        sv = savings_table(summary, col)
        e = summary[summary["algorithm"].isin(STUDY_ALGORITHMS)].pivot_table(
            index=["algorithm", "n_vms"], columns="users", values=col)
        row: dict[str, Any] = {"model": m.upper()}
        for u in (0.0, 0.5):
            s = _at(sv, u)
            s = s[s["n_vms"] == big]
            for a in RELATED:
                if len(s):
                    row[f"saving_{a}_{int(u * 100)}"] = float(s[a].iloc[0])
        if 0.0 in e.columns and 0.5 in e.columns:
            row["less_at_50"] = f"{int((e[0.5] < e[0.0]).sum())} of {len(e)}"
        rows.append(row)
    return pd.DataFrame(rows)
