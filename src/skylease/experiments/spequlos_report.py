"""``skylease reproduce spequlos``: the SpeQuloS evaluation (spec 003 §4-§5) beside the paper's numbers.

One campaign on :func:`~skylease.experiments.sweep.run_campaign`: every environment (middleware x
trace x BoT category) at every seed runs the baseline (no QoS) and the 18 strategies, paired on
the seed (:func:`~skylease.experiments.spequlos.environment_cell`). From those rows it derives
Table 1 and Fig. 2 (baseline tails), Figs. 6-7 (tail removal efficiency and credits of the 18
strategies), Figs. 8-9 (9C-C-R completion times and stability) and Table 7 (prediction success),
and writes ``report.md`` with the paper's values beside ours, CSVs and PNGs.
:func:`report_from_runs` rebuilds everything from a saved ``runs.csv`` without simulating. The full
campaign (6 traces, 10 seeds: 6840 runs, plus the variants, batch acceleration and the A4 reading:
about 14,000 runs) takes about 10 minutes on 2 worker processes; ``quick`` (nd and spot10, 2
seeds: 456 runs, no A4 variant) about 20-30 s.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from skylease.control.qos.prediction import TOLERANCE, fit_alpha, loo_success_rate, succeeded
from skylease.control.qos.strategy import STRATEGIES, parse_plan
from skylease.experiments.report import md_table, save_figure, write_report
from skylease.experiments.spequlos import (
    DEFAULT_CLOUD_BUFFER,
    MIDDLEWARES,
    TRACE_SEED,
    TRACES,
    check_readings,
    readings,
    run_once,
    tail_removal,
)
from skylease.experiments.store import atomic_write_text, out_folder
from skylease.experiments.sweep import check_cluster, run_campaign
from skylease.model.errors import UserError
from skylease.sim.dg.workload import ARRIVALS, BOT_CATEGORIES, make_bot

__all__ = ["batch_accel_section", "batch_accel_strategies", "campaign_cell", "gate", "report_from_runs",
           "reproduce_spequlos", "with_tre"]

FULL_SEEDS = 10
QUICK_SEEDS = 2
QUICK_TRACES = ("nd", "spot10")
#: The strategies of the section "SpeQuloS vs BOINC batch acceleration" (run on BOINC only).
BATCH_ACCEL = ("9C-C-R", "batch-accel", "batch-accel+9C-C-R")
#: Spec §8 D5: the traces the prediction gate (>= 85 %) is evaluated on; the Grid'5000 stand-ins are
#: reported as "data not available".
PREDICTION_TRACES = ("seti", "nd", "spot10", "spot100")
PREDICTION_GATE = 85.0
#: Spec §8 D3: the bags that may fit in one wave, where 9A with Greedy spends its order at once; the
#: report keeps the (middleware, trace) cells where 9A did fire at the first tick (spot100's SMALL bag
#: stopped fitting in one wave when the ladder was calibrated to the paper's 877 nodes, A18).
ONE_WAVE = (("seti", "SMALL"), ("spot100", "SMALL"))
FIRST_TICK_S = 240.0
KIND = {
    "seti": "Desktop Grids",
    "nd": "Desktop Grids",
    "g5klyo": "Best Effort Grids",
    "g5kgre": "Best Effort Grids",
    "spot10": "Spot Instances",
    "spot100": "Spot Instances",
}
#: Table 1 (spec §5.1): % of BoT in tail (BOINC, XWHEP), % of time in tail (BOINC, XWHEP).
PAPER_TABLE1 = {
    "Desktop Grids": (4.65, 5.11, 51.8, 45.2),
    "Best Effort Grids": (3.74, 6.40, 27.4, 16.5),
    "Spot Instances": (2.94, 5.19, 22.7, 21.6),
}
#: Fig. 2 (text): median <= 1.33; P(slowdown >= 2); 95th percentile.
PAPER_FIG2 = {"boinc": (1.33, 0.33, 10.0), "xwhep": (1.33, 0.25, 4.0)}
#: Table 7 (spec §5.4): success % per trace: SMALL B, SMALL X, BIG B, BIG X, RANDOM B, RANDOM X, Mixed.
PAPER_TABLE7 = {
    "seti": (100, 100, 100, 82.8, 100, 87.0, 94.1),
    "nd": (100, 100, 100, 100, 100, 96.0, 99.4),
    "g5klyo": (88.0, 89.3, 96.0, 87.5, 75, 75, 85.6),
    "g5kgre": (96.3, 88.5, 100, 92.9, 83.3, 34.8, 83.3),
    "spot10": (100, 100, 100, 100, 100, 100, 100),
    "spot100": (100, 100, 100, 100, 76, 3.6, 78.3),
    "Mixed": (97.6, 96.1, 99.2, 93.5, 89.6, 65.3, 90.2),
}
#: Fig. 8 anchors (text): (middleware, trace, BoT) -> (without, with 9C-C-R) average completion (s).
PAPER_FIG8 = {("boinc", "seti", "RANDOM"): (28818.0, 3195.0), ("xwhep", "spot10", "BIG"): (2524.0, 2521.0)}
Progress = Callable[[int, int], None]


def campaign_cell(
    environment: str,
    strategies: list[str],
    data_dir: str | None,
    seed: int,
    rep: int,
    epsilon: float | None = None,
    random_arrivals: str | None = None,
    buffer: int = DEFAULT_CLOUD_BUFFER,
    baseline: bool = True,
    idle: str = "all",
) -> list[dict[str, Any]]:
    """One campaign cell: ``environment`` = ``middleware/trace/BOT``; the runs pair on ``rep``.

    The campaign's own cell ``seed`` is not used: the seed of a run is its repetition number, so
    every environment and every strategy sees the same submission times for the same ``rep``.
    ``random_arrivals``/``epsilon``: RANDOM's reading of its arrivals (default quantile, spec §8 D1);
    ``buffer``: a BOINC cloud worker's buffer (§8 D3); each row records them (``arrivals``,
    ``epsilon_s``, NaN when no cap, ``cloud_buffer``). ``baseline``: run ``none`` first (False
    when another campaign already ran it at the same seeds). ``idle``: which idle cloud workers stop
    at the next tick (spec A4: ``all``, or ``greedy`` only; the row's ``idle_stop``).
    """
    del seed
    mw, trace, bot = environment.split("/")
    rows = []
    for s in (("none",) if baseline else ()) + tuple(strategies):
        r = run_once(mw, trace, bot, s, rep, data_dir=data_dir, epsilon=epsilon, arrivals=random_arrivals,
                     cloud_buffer=buffer, idle_stop=idle)
        r["run_seed"] = r.pop("seed")
        rows.append(r)
    return rows


def batch_accel_strategies() -> tuple[str, ...]:
    """The strategies of the batch-acceleration section (checked by the run names' parser), or ()
    if one were unknown (the section is then skipped with a note)."""
    try:
        for s in BATCH_ACCEL:
            parse_plan(s)
    except UserError:
        return ()
    return BATCH_ACCEL


# -- analysis -------------------------------------------------------------------------------------
def _ecdf(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = np.sort(x[np.isfinite(x)])
    return x, np.arange(1, len(x) + 1) / max(len(x), 1)


def with_tre(runs: pd.DataFrame) -> pd.DataFrame:
    """QoS runs with their paired baseline's completion and ideal time, and the TRE (A16)."""
    key = ["middleware", "trace", "bot", "run_seed"]
    base = runs[runs["strategy"] == "none"].set_index(key)[["completion_s", "ideal_s", "tail_slowdown"]]
    q = runs[runs["strategy"] != "none"].join(base.add_prefix("base_"), on=key)
    q["tre"] = [
        tail_removal(a, b, c)
        for a, b, c in zip(q["completion_s"], q["base_completion_s"], q["base_ideal_s"], strict=True)
    ]
    q["tre"] = q["tre"].astype(float)
    parts = q["strategy"].str.split("-", expand=True)
    q["when"], q["how_many"], q["how"] = parts[0], parts[1], parts[2]
    return q


def table1(base: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for kind, (pb, px, tb, tx) in PAPER_TABLE1.items():
        g = base[base["trace"].map(KIND) == kind]
        if g.empty:
            continue
        m = g.groupby("middleware")[["tail_task_share", "tail_time_share"]].mean() * 100
        rows.append(
            {
                "BE-DCI": kind,
                "runs": len(g),
                "tail tasks % BOINC": m.loc["boinc", "tail_task_share"],
                "paper BOINC": pb,
                "tail tasks % XWHEP": m.loc["xwhep", "tail_task_share"],
                "paper XWHEP": px,
                "tail time % BOINC": m.loc["boinc", "tail_time_share"],
                "paper time BOINC": tb,
                "tail time % XWHEP": m.loc["xwhep", "tail_time_share"],
                "paper time XWHEP": tx,
            }
        )
    return pd.DataFrame(rows)


def slowdown_stats(base: pd.DataFrame) -> pd.DataFrame:
    """Fig. 2's statistics per middleware: pooled (``all``), on ``SMALL+BIG`` (the gated pool, spec
    §8 D2) and per BoT category."""
    rows = []
    for mw, g in base.groupby("middleware"):
        pools = [("all", g), ("SMALL+BIG", g[g["bot"].isin(["SMALL", "BIG"])]),
                 *((c, g[g["bot"] == c]) for c in BOT_CATEGORIES)]
        for cat, h in pools:
            if h.empty:
                continue
            s = h["tail_slowdown"].to_numpy(float)
            rows.append(
                {
                    "middleware": mw,
                    "bot": cat,
                    "runs": len(h),
                    "median": float(np.median(s)),
                    "P(>=2)": float(np.mean(s >= 2)),
                    "p95": float(np.quantile(s, 0.95)),
                    "tail tasks %": float(h["tail_task_share"].mean() * 100),
                    "tail time %": float(h["tail_time_share"].mean() * 100),
                }
            )
    return pd.DataFrame(rows)


def strategy_table(q: pd.DataFrame) -> pd.DataFrame:
    """Per strategy: TRE mean, P(TRE = 1), P(TRE > 0.5), P(TRE < 0.3), excluded share, credits."""
    rows = []
    for s in STRATEGIES:
        g = q[q["strategy"] == s]
        if g.empty:
            continue
        t = g["tre"].dropna().to_numpy(float)
        rows.append(
            {
                "strategy": s,
                "runs": len(g),
                "excluded": float(g["tre"].isna().mean()),
                "tre_mean": float(np.mean(t)) if len(t) else math.nan,
                "P(TRE=1)": float(np.mean(t >= 1 - 1e-9)) if len(t) else math.nan,
                "P(TRE>0.5)": float(np.mean(t > 0.5)) if len(t) else math.nan,
                "P(TRE<0.3)": float(np.mean(t < 0.3)) if len(t) else math.nan,
                "credits_pct": float(g["credits_share"].mean() * 100),
                "runs_under_25pct": float((g["credits_share"] < 0.25).mean()),
                "cloud_tasks_pct": float(g["cloud_work_share"].mean() * 100),
            }
        )
    return pd.DataFrame(rows)


def fig8_table(runs: pd.DataFrame) -> pd.DataFrame:
    sub = runs[runs["strategy"].isin(["none", "9C-C-R"])]
    m = sub.pivot_table(
        index=["middleware", "bot", "trace"], columns="strategy", values="completion_s", aggfunc="mean"
    ).reset_index()
    m = m.rename(columns={"none": "without_s", "9C-C-R": "with_s"})
    order = {t: i for i, t in enumerate((*MIDDLEWARES, *TRACES, *BOT_CATEGORIES))}
    m = m.sort_values(["middleware", "bot", "trace"], key=lambda c: c.map(lambda v: order.get(v, 99)))
    m = m.reset_index(drop=True)
    m["speedup"] = m["without_s"] / m["with_s"]
    m["paper_without_s"] = [
        PAPER_FIG8.get((a, c, b), (math.nan, math.nan))[0]
        for a, b, c in zip(m["middleware"], m["bot"], m["trace"], strict=True)
    ]
    m["paper_with_s"] = [
        PAPER_FIG8.get((a, c, b), (math.nan, math.nan))[1]
        for a, b, c in zip(m["middleware"], m["bot"], m["trace"], strict=True)
    ]
    return m


def stability(runs: pd.DataFrame) -> pd.DataFrame:
    """Fig. 9: each run's completion over its environment's mean, without QoS and with 9C-C-R."""
    sub = runs[runs["strategy"].isin(["none", "9C-C-R"])].copy()
    mean = sub.groupby(["middleware", "trace", "bot", "strategy"])["completion_s"].transform("mean")
    sub["normalized"] = sub["completion_s"] / mean
    return sub[["middleware", "trace", "bot", "strategy", "run_seed", "normalized"]]


def prediction_table(runs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Table 7: success of α·t_c(0.5)/0.5 within ±20 %, α fitted (L1) per environment on 9C-C-R runs.

    Returns the table and the per-run frame; its ``loo_ok`` is the environment's leave-one-out
    success rate, so the mean of ``loo_ok`` over any set of environments is their run-weighted
    (pooled) leave-one-out success.
    """
    q = runs[(runs["strategy"] == "9C-C-R") & runs["predict_p"].notna()].copy()
    per_run = []
    for (mw, trace, bot), g in q.groupby(["middleware", "trace", "bot"]):
        p, t = g["predict_p"].to_numpy(float), g["completion_s"].to_numpy(float)
        alpha = fit_alpha(p, t)
        loo = loo_success_rate(p, t) if len(p) > 1 else math.nan
        ok = succeeded(alpha * p, t, TOLERANCE)
        per_run += [
            {"middleware": mw, "trace": trace, "bot": bot, "alpha": alpha, "ok": bool(o), "loo_ok": loo}
            for o in ok
        ]
    pr = pd.DataFrame(per_run)
    return (prediction_cells(pr, "ok") if len(pr) else pr), pr


def prediction_cells(pr: pd.DataFrame, column: str) -> pd.DataFrame:
    """Table 7's layout: % success per trace x (BoT, middleware), with run-weighted Mixed marginals."""
    rows = []
    for trace in [*[t for t in TRACES if t in set(pr["trace"])], "Mixed"]:
        g = pr if trace == "Mixed" else pr[pr["trace"] == trace]
        row: dict[str, Any] = {"trace": trace}
        for bot in BOT_CATEGORIES:
            for mw in MIDDLEWARES:
                h = g[(g["bot"] == bot) & (g["middleware"] == mw)][column].astype(float)
                row[f"{bot} {mw}"] = float(h.mean() * 100) if len(h) else math.nan
        row["Mixed"] = float(g[column].astype(float).mean() * 100)
        rows.append(row)
    return pd.DataFrame(rows)


def random_arrivals(seeds: Sequence[int], task_s: float = 20.0, arrivals: str | None = None,
                    epsilon: float | None = None) -> pd.DataFrame:
    """The RANDOM BoTs of ``seeds`` (as :func:`run_once` draws them under the reading ``arrivals``) and
    the tail their arrivals alone make: the slowdown of a grid where every task runs ``task_s`` seconds
    as soon as it arrives (20 s = 60000 nops on a 3000 nops/s node, the fastest in the evaluation)."""
    rows = []
    for seed in seeds:
        ss_bot, _ = np.random.SeedSequence([int(seed), 0xB07]).spawn(2)
        a = make_bot("RANDOM", seed=int(ss_bot.generate_state(1)[0]), arrivals=arrivals,
                     epsilon=epsilon).arrival
        k = math.ceil(0.9 * len(a)) - 1
        ideal = (a[k] + task_s) / 0.9
        rows.append(
            {
                "run_seed": int(seed),
                "tasks": len(a),
                "arrival_90pct_s": float(a[k]),
                "last_arrival_s": float(a[-1]),
                "ideal_s": ideal,
                "arrival_slowdown": float((a[-1] + task_s) / ideal),
            }
        )
    return pd.DataFrame(rows)


def _reading_name(arrivals: str, eps: float) -> str:
    return f"epsilon ({eps:g} s cap)" if arrivals == "epsilon" and math.isfinite(eps) else arrivals


def arrivals_variant(runs: pd.DataFrame, var_runs: pd.DataFrame) -> pd.DataFrame:
    """Fig. 2 and Table 7 under every reading of RANDOM's arrivals (spec §8 D1): the campaign's own
    (``runs``) and each of ``var_runs`` (RANDOM's baseline and 9C-C-R runs under another reading,
    same seeds).

    One row per (reading, middleware), plus one per reading with ``middleware = "all"``: the pooled
    statistics with RANDOM's runs taken from that reading, RANDOM's own row, its mean 9C-C-R
    completion and its prediction success.
    """
    main = runs[runs["bot"] == "RANDOM"]
    if main.empty:
        return pd.DataFrame()
    readings_: list[tuple[str, pd.DataFrame]] = [
        (_reading_name(main["arrivals"].iloc[0], float(main["epsilon_s"].iloc[0])) + " (campaign)", runs)]
    for (arr, eps), g in var_runs.groupby(["arrivals", var_runs["epsilon_s"].fillna(-1.0)], sort=False):
        readings_.append((_reading_name(arr, float(eps) if eps >= 0 else math.nan),
                          pd.concat([runs[runs["bot"] != "RANDOM"], g], ignore_index=True)))
    rows = []
    for name, r in readings_:
        base = r[r["strategy"] == "none"]
        _, pr = prediction_table(r)
        if pr.empty:
            pr = pd.DataFrame(columns=["middleware", "trace", "bot", "ok"])
        for mw, g in [*base.groupby("middleware"), ("all", base)]:
            s = g["tail_slowdown"].to_numpy(float)
            rnd = g[g["bot"] == "RANDOM"]["tail_slowdown"].to_numpy(float)
            p = pr if mw == "all" else pr[pr["middleware"] == mw]
            q = r[(r["strategy"] == "9C-C-R") & (r["bot"] == "RANDOM")]
            q = q if mw == "all" else q[q["middleware"] == mw]
            rows.append({
                "reading": name, "middleware": mw, "runs": len(g),
                "median": float(np.median(s)), "P(>=2)": float(np.mean(s >= 2)),
                "p95": float(np.quantile(s, 0.95)),
                "RANDOM median": float(np.median(rnd)) if len(rnd) else math.nan,
                "RANDOM P(>=2)": float(np.mean(rnd >= 2)) if len(rnd) else math.nan,
                "RANDOM 9C-C-R mean s": float(q["completion_s"].mean()) if len(q) else math.nan,
                "prediction %": _pct_ok(p),
                "RANDOM prediction %": _pct_ok(p[p["bot"] == "RANDOM"]),
                "RANDOM prediction % (seti, nd, spot)": _pct_ok(
                    p[(p["bot"] == "RANDOM") & p["trace"].isin(PREDICTION_TRACES)]),
            })
    return pd.DataFrame(rows)


def _pct_ok(p: pd.DataFrame) -> float:
    return float(p["ok"].astype(float).mean() * 100) if len(p) else math.nan


@dataclass
class Derived:
    """Everything the report is written from."""

    base: pd.DataFrame
    t1: pd.DataFrame
    sd: pd.DataFrame
    arr: pd.DataFrame
    st: pd.DataFrame
    q: pd.DataFrame
    f8: pd.DataFrame
    stab: pd.DataFrame
    t7: pd.DataFrame
    t7_loo: pd.DataFrame
    pr: pd.DataFrame
    eps: pd.DataFrame
    ba: pd.DataFrame
    meta: dict[str, Any]
    idle: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)
    t23: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)


# -- checks ---------------------------------------------------------------------------------------
def _claim(claim: str, paper: Any, ours: Any, holds: bool, gated: bool = True) -> dict[str, Any]:
    """One check. ``gated``: a check of spec §7 as amended by §8, which the reproduction must pass;
    otherwise a value reported beside the paper's (``holds`` then says how it compares)."""
    return {"claim": claim, "paper": paper, "ours": ours, "holds": bool(holds), "gated": bool(gated)}


def gate(claims: pd.DataFrame | Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The verdict of a set of checks: ``passed`` when every gated one holds; the counts, and the
    gated checks that fail (``failed``). Rows without a ``gated`` column count as gated."""
    df = pd.DataFrame(list(claims)) if not isinstance(claims, pd.DataFrame) else claims
    if df.empty:
        return {"passed": True, "gated": 0, "held": 0, "reported": 0, "reported_held": 0, "failed": []}
    g = df["gated"].astype(bool) if "gated" in df.columns else pd.Series(True, index=df.index)
    h = df["holds"].astype(bool)
    return {
        "passed": bool(h[g].all()),
        "gated": int(g.sum()),
        "held": int((h & g).sum()),
        "reported": int((~g).sum()),
        "reported_held": int((h & ~g).sum()),
        "failed": df.loc[g & ~h, "claim"].tolist(),
    }


def baseline_checks(sd: pd.DataFrame, t1: pd.DataFrame,
                    base: pd.DataFrame | None = None) -> list[dict[str, Any]]:
    """Fig. 2 and Table 1 (spec §7.2 as amended by §8 D2 and D4).

    Gated: the median (<= 1.33) and P(slowdown >= 2) on SMALL + BIG per middleware, the tail-task
    share and desktop grids' tail-time share. [R] P(>= 2) is gated as at most the paper's value:
    the paper's pool held RANDOM runs, whose slowdown is >= 2 on any grid, so its SMALL + BIG share
    can only be lower. Reported: the 95th percentile, the pool of every BoT, RANDOM on its own row,
    and (D4) XWHEP/seti/BIG as the cause of XWHEP's 95th percentile (needs ``base``).
    """
    out = []
    for mw, (med, p2, p95) in PAPER_FIG2.items():
        rows = sd[sd["middleware"] == mw].set_index("bot")
        if "SMALL+BIG" in rows.index:
            r = rows.loc["SMALL+BIG"]
            out.append(_claim(f"Fig. 2 {mw}, SMALL + BIG (§8 D2): median tail slowdown <= 1.33", f"<= {med}",
                              f"{r['median']:.2f}", r["median"] <= med))
            out.append(_claim(f"Fig. 2 {mw}, SMALL + BIG (§8 D2): P(slowdown >= 2) at most the paper's",
                              f"<= {p2}", f"{r['P(>=2)']:.2f}", r["P(>=2)"] <= p2))
            out.append(_claim(f"Fig. 2 {mw}, SMALL + BIG: 95th percentile (reported, §8 D2)", p95,
                              f"{r['p95']:.1f}", p95 / 1.5 <= r["p95"] <= p95 * 1.5, gated=False))
        if "all" in rows.index:
            r = rows.loc["all"]
            out.append(_claim(f"Fig. 2 {mw}, every BoT pooled: median / P(>= 2) / p95 (reported)",
                              f"<= {med} / {p2} / {p95:g}",
                              f"{r['median']:.2f} / {r['P(>=2)']:.2f} / {r['p95']:.1f}",
                              r["median"] <= med and abs(r["P(>=2)"] - p2) <= 0.10, gated=False))
            out.append(_claim(f"{mw}: tail-task share within Table 1's range (§7.2: 3-6.4 %)", "2.94-6.40 %",
                              f"{r['tail tasks %']:.2f} %", 2.94 <= r["tail tasks %"] <= 6.40))
        if "RANDOM" in rows.index:
            r = rows.loc["RANDOM"]
            out.append(_claim(f"Fig. 2 {mw}, RANDOM on its own row: median / P(>= 2) / p95 (reported, §8 D2)",
                              "-", f"{r['median']:.2f} / {r['P(>=2)']:.2f} / {r['p95']:.1f}",
                              r["median"] <= med, gated=False))
    if base is not None:
        out += _d4_claim(base)
    if {"tail time % BOINC", "tail time % XWHEP"} <= set(t1.columns) and len(t1) > 1:
        dg = t1[t1["BE-DCI"] == "Desktop Grids"]
        if len(dg):
            top = all(dg[c].iloc[0] >= t1[c].max() - 1e-9 for c in ("tail time % BOINC", "tail time % XWHEP"))
            out.append(
                _claim(
                    "Table 1: desktop grids spend the largest share of time in the tail",
                    "DG highest",
                    "DG highest" if top else "no",
                    top,
                )
            )
    return out


def _d4_claim(base: pd.DataFrame) -> list[dict[str, Any]]:
    """§8 D4: XWHEP/seti/BIG (one wave of about 170 s against a 900 s timeout) sets XWHEP's p95."""
    x = base[(base["middleware"] == "xwhep") & base["bot"].isin(["SMALL", "BIG"])]
    cell = (x["trace"] == "seti") & (x["bot"] == "BIG")
    if not cell.any() or cell.all():
        return []
    s = x["tail_slowdown"].to_numpy(float)
    rest = x.loc[~cell, "tail_slowdown"].to_numpy(float)
    p_all, p_rest = float(np.quantile(s, 0.95)), float(np.quantile(rest, 0.95))
    med = float(x.loc[cell, "tail_slowdown"].median())
    return [_claim("XWHEP/seti/BIG sets XWHEP's 95th percentile (reported, §8 D4: 900 s timeout kept)",
                   "median ≈ 11 there",
                   f"median {med:.1f} there; SMALL + BIG p95 {p_all:.1f}, {p_rest:.1f} without that cell",
                   p_rest < p_all, gated=False)]


def strategy_checks(st: pd.DataFrame, q: pd.DataFrame) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if st.empty:
        return out
    s = st.set_index("strategy")
    by_how = q.groupby("how")["tre"].mean()
    if {"F", "R", "D"} <= set(by_how.index):
        out.append(
            _claim(
                "Fig. 6: TRE of Reschedule and Duplication far above Flat (mean TRE, +0.2)",
                "D ≈ R ≫ F",
                f"R {by_how['R']:.2f}, D {by_how['D']:.2f}, F {by_how['F']:.2f}",
                min(by_how["R"], by_how["D"]) >= by_how["F"] + 0.2 and abs(by_how["R"] - by_how["D"]) <= 0.1,
            )
        )
    by_when = q.groupby(["how", "when"])["tre"].mean().unstack()
    if {"V", "9C", "9A"} <= set(by_when.columns):
        worst = bool((by_when["V"] <= by_when[["9C", "9A"]].min(axis=1)).all())
        out.append(
            _claim(
                "Fig. 6: V (execution variance) is the worst WHEN rule, for every HOW",
                "V worst",
                ", ".join(f"{h}: V {by_when.loc[h, 'V']:.2f}" for h in by_when.index),
                worst,
            )
        )
        ge = q.groupby(["how", "how_many", "when"])["tre"].mean().unstack()
        ok = bool((ge["9A"] >= ge["9C"] - 0.02).all())
        out.append(
            _claim(
                "Fig. 6: 9A >= 9C (each HOW x HOW MANY, 0.02 slack)",
                "9A ≥ 9C",
                f"{int((ge['9A'] >= ge['9C'] - 0.02).sum())} of {len(ge)} pairs",
                ok,
            )
        )
    # §8 D3: "9A-x-D best" is evaluated on SMALL + BIG (RANDOM's tail is its own arrivals).
    sb = strategy_table(q[q["bot"].isin(["SMALL", "BIG"])]).set_index("strategy") if len(q) else s
    sb = sb if len(sb) else s
    best = sb["tre_mean"].max()
    bd = sb.loc[[x for x in ("9A-G-D", "9A-C-D") if x in sb.index]]
    if len(bd):
        top = sb["tre_mean"].idxmax()
        out.append(
            _claim(
                "Fig. 6c, SMALL + BIG (§8 D3): 9A-G-D / 9A-C-D are the best "
                "(within 0.02 of the best mean TRE)",
                "best",
                f"{bd['tre_mean'].max():.2f} vs best {best:.2f} ({top})",
                bd["tre_mean"].max() >= best - 0.02,
            )
        )
        out.append(
            _claim(
                "Fig. 6c, SMALL + BIG: 9A-x-D remove the tail completely in half the runs (±0.15)",
                0.5,
                " / ".join(f"{v:.2f}" for v in bd["P(TRE=1)"]),
                bool((abs(bd["P(TRE=1)"] - 0.5) <= 0.15).all()),
            )
        )
        out.append(
            _claim(
                "Fig. 6c, SMALL + BIG: 9A-x-D: TRE > 50 % in 80 % of the runs (±0.15)",
                0.8,
                " / ".join(f"{v:.2f}" for v in bd["P(TRE>0.5)"]),
                bool((abs(bd["P(TRE>0.5)"] - 0.8) <= 0.15).all()),
            )
        )
    out += _d3_claim(q)
    f = s.loc[[x for x in s.index if x.endswith("-F")]]
    out.append(
        _claim(
            "Fig. 6a: Flat: TRE < 30 % in half the executions",
            ">= 0.5 of runs",
            f"{f['P(TRE<0.3)'].mean():.2f}",
            f["P(TRE<0.3)"].mean() >= 0.5,
        )
    )
    under = float((q["credits_share"] < 0.25).mean())
    out.append(
        _claim(
            "Fig. 7: in most runs less than 25 % of the credits are spent",
            "most",
            f"{under:.0%} of QoS runs",
            under > 0.5,
        )
    )
    cr = q.groupby("how")["credits_share"].mean() * 100
    out.append(
        _claim(
            "Fig. 7: credits spent D < F < R",
            "D < F < R",
            ", ".join(f"{h} {cr.get(h, math.nan):.1f} %" for h in ("D", "F", "R")),
            cr.get("D", 0) < cr.get("F", 0) < cr.get("R", 0),
        )
    )
    cw = q.groupby("when")["credits_share"].mean() * 100
    out.append(
        _claim(
            "Fig. 7: 9A spends the most credits",
            "9A highest",
            ", ".join(f"{k} {v:.1f} %" for k, v in cw.items()),
            cw.idxmax() == "9A",
        )
    )
    cg = q.groupby(["when", "how", "how_many"])["credits_share"].mean().unstack()
    ok = bool((cg["C"] <= cg["G"] + 0.01).all()) if {"C", "G"} <= set(cg.columns) else False
    out.append(
        _claim(
            "Fig. 7: Conservative spends no more than Greedy (each WHEN x HOW, 1 pp slack)",
            "C ≤ G",
            f"{int((cg['C'] <= cg['G'] + 0.01).sum())} of {len(cg)}" if ok or len(cg) else "-",
            ok,
        )
    )
    return out


#: Spec §7.1: a stand-in trace should match Table 2's mean node count and Table 3's quartiles within
#: about ±15 %. Gated where the spec asks for it: the generated traces (A19) on all seven values, the
#: spot ladders (A18, calibrated to the paper's price level) on the mean; the rest is reported.
TRACE_TOLERANCE = 0.15
TRACE_VALUES = ("mean", "av_q25", "av_q50", "av_q75", "unav_q25", "unav_q50", "unav_q75")
GENERATED_TRACES = ("seti", "nd")


def trace_tables(traces: Sequence[str], data_dir: str | None = None) -> pd.DataFrame:
    """Spec §7.1: Table 2 (node counts) and Table 3 (duration quartiles) of each trace of the campaign,
    with the paper's value and our relative difference (``ours/paper - 1``) per statistic."""
    from skylease.traces.avail import PAPER_TABLES, load_trace, trace_stats

    rows = []
    for name in traces:
        if name not in PAPER_TABLES:
            continue
        st = trace_stats(load_trace(name, seed=TRACE_SEED, data_dir=data_dir))
        for k in ("length_days", "mean", "std", "min", "max", *TRACE_VALUES[1:]):
            paper = float(PAPER_TABLES[name][k])
            rows.append({"trace": name, "statistic": k, "ours": float(st[k]), "paper": paper,
                         "difference": float(st[k]) / paper - 1 if paper else math.nan})
    return pd.DataFrame(rows)


def trace_checks(t23: pd.DataFrame) -> list[dict[str, Any]]:
    """Spec §7.1 on the traces (:data:`TRACE_TOLERANCE`): gated on the generated traces' Table 2 mean
    and Table 3 quartiles and on the spot ladders' mean; reported otherwise."""
    out: list[dict[str, Any]] = []
    for name, g in t23.groupby("trace", sort=False):
        g = g.set_index("statistic")
        d = g.loc[list(TRACE_VALUES), "difference"]
        gen = name in GENERATED_TRACES
        ok = bool((d.abs() <= TRACE_TOLERANCE).all())
        out.append(_claim(
            f"§7.1 {name}: Table 2 mean nodes and Table 3 quartiles within ±15 %"
            + ("" if gen else " (reported: a stand-in, A18-A19)"),
            f"{g.loc['mean', 'paper']:,.4g} nodes",
            f"{g.loc['mean', 'ours']:,.4g} nodes ({d['mean']:+.1%}); quartiles within ±15 %: "
            f"{int((d.iloc[1:].abs() <= TRACE_TOLERANCE).sum())} of 6 (worst {d.iloc[1:].abs().max():.0%})",
            ok, gated=gen))
        if name.startswith("spot"):
            mean, most = g.loc["mean"], g.loc["max"]
            out.append(_claim(f"§7.1 {name}: Table 2 mean nodes within ±15 % (A18: price level calibrated)",
                              f"{mean['paper']:,.4g}",
                              f"{mean['ours']:,.4g} ({d['mean']:+.1%}; max {most['ours']:.0f}, "
                              f"paper {most['paper']:.0f})",
                              abs(d["mean"]) <= TRACE_TOLERANCE))
    return out


def idle_variant(q: pd.DataFrame, q_idle: pd.DataFrame) -> pd.DataFrame:
    """Spec A4 beside the campaign: the mean TRE and % of the order spent per HOW, WHEN and HOW MANY
    with every idle CW stopped at the next tick (``all``, the campaign) and with Greedy's only
    (``greedy``, the paper's l.198), on the same seeds."""
    if q_idle.empty:
        return pd.DataFrame()
    rows = []
    for reading, g in (("all", q), ("greedy", q_idle)):
        for axis in ("how", "when", "how_many"):
            for v, h in g.groupby(axis):
                rows.append({"idle_stop": reading, "axis": axis, "value": v, "runs": len(h),
                             "tre_mean": float(h["tre"].mean()),
                             "credits_pct": float(h["credits_share"].mean() * 100)})
        cg = g.groupby(["when", "how", "how_many"])["credits_share"].mean().unstack()
        held = float((cg["C"] <= cg["G"] + 0.01).sum()) if {"C", "G"} <= set(cg) else 0.0
        rows.append({"idle_stop": reading, "axis": "C <= G", "value": "pairs",
                     "runs": len(cg), "tre_mean": math.nan, "credits_pct": held})
    return pd.DataFrame(rows)


def idle_claims(t: pd.DataFrame) -> list[dict[str, Any]]:
    """The Fig. 7 orderings under the A4 variant (reported: the spec's default stops every idle CW)."""
    if t.empty:
        return []
    g = t[t["idle_stop"] == "greedy"]
    how = g[g["axis"] == "how"].set_index("value")["credits_pct"]
    cg = g[g["axis"] == "C <= G"]["credits_pct"]
    under = how.get("D", math.nan) < how.get("F", math.nan) < how.get("R", math.nan)
    return [_claim("Fig. 7 under A4's other reading (idle CWs stop under Greedy only): D < F < R and C ≤ G "
                   "(reported)", "D < F < R; C ≤ G",
                   ", ".join(f"{h} {how.get(h, math.nan):.1f} %" for h in ("D", "F", "R"))
                   + f"; C ≤ G in {int(cg.iloc[0]) if len(cg) else 0} of 9",
                   bool(under and len(cg) and cg.iloc[0] == 9), gated=False)]


def one_wave_table(q: pd.DataFrame) -> pd.DataFrame:
    """§8 D3: mean TRE and credits spent of 9A-G-D, 9A-C-D and 9C-C-R per (middleware, trace) on the
    bags that fit in one wave (:data:`ONE_WAVE`), where 9A fires at the first tick and Greedy buys
    one hour of S cloud workers at once."""
    cells = q[[(t, b) in ONE_WAVE for t, b in zip(q["trace"], q["bot"], strict=True)]]
    cells = cells[cells["strategy"].isin(["9A-G-D", "9A-C-D", "9C-C-R"])]
    key = ["middleware", "trace", "bot"]
    fired = cells[cells["strategy"] == "9A-G-D"].groupby(key)["cw_started_s"].max()
    one = set(fired[fired <= FIRST_TICK_S + 1e-6].index)
    cells = cells[[k in one for k in zip(*(cells[c] for c in key), strict=True)]]
    if cells.empty:
        return pd.DataFrame()
    return (cells.groupby(["middleware", "trace", "bot", "strategy"])
            .agg(runs=("tre", "size"), tre_mean=("tre", "mean"), credits_pct=("credits_share", "mean"),
                 cw_started_s=("cw_started_s", "mean"))
            .assign(credits_pct=lambda d: d["credits_pct"] * 100).reset_index())


def _d3_claim(q: pd.DataFrame) -> list[dict[str, Any]]:
    t = one_wave_table(q)
    g = t[t["strategy"] == "9A-G-D"] if len(t) else t
    if g.empty:
        return []
    where = ", ".join(sorted({f"{r['trace']} {r['bot']}" for r in g.to_dict("records")}))
    return [_claim(f"9A with Greedy on one-wave bags ({where}): TRE ≈ 0, its order spent at once "
                   "(reported, §8 D3: the rules imply it)", "TRE ≈ 0",
                   "; ".join(f"{r['middleware']}/{r['trace']}: TRE {r['tre_mean']:.2f}, "
                             f"{r['credits_pct']:.0f} % of the order" for r in g.to_dict("records")),
                   bool((g["tre_mean"] <= 0.2).all()), gated=False)]


def performance_checks(f8: pd.DataFrame, stab: pd.DataFrame) -> list[dict[str, Any]]:
    out = []
    lower = f8["with_s"] <= f8["without_s"] * (1 + 1e-9)
    strict = f8["with_s"] < f8["without_s"] * (1 - 1e-3)
    out.append(
        _claim(
            "Fig. 8: 9C-C-R never raises the average completion time",
            "always lower",
            f"lower in {int(strict.sum())}, equal (within 0.1 %) in {int((lower & ~strict).sum())}, "
            f"higher in {int((~lower).sum())} of {len(f8)} environments"
            + (f" (by at most {(f8['with_s'] / f8['without_s']).max() - 1:.2%})" if (~lower).any() else ""),
            bool(strict.all()),
        )
    )
    for (mw, trace, bot), (pw, pq) in PAPER_FIG8.items():
        r = f8[(f8["middleware"] == mw) & (f8["trace"] == trace) & (f8["bot"] == bot)]
        if r.empty:
            continue
        r = r.iloc[0]
        if pw / pq > 2:
            # The paper's baseline (28818 s) waited for BOINC's one-day deadline on its SETI trace; our
            # stand-in has no such outages, so the large reduction is reported and the absolute time
            # with SpeQuloS is gated (the issue's ±15 %; §8 D1 chose the arrivals that fit it).
            out.append(_claim(f"Fig. 8: {mw} / {trace} / {bot}: with 9C-C-R within ±15 % of the paper's (s)",
                              f"{pq:.0f}", f"{r['with_s']:.0f} ({r['with_s'] / pq - 1:+.1%})",
                              abs(r["with_s"] / pq - 1) <= 0.15))
            out.append(_claim(f"Fig. 8: {mw} / {trace} / {bot}: without -> with 9C-C-R, a large reduction "
                              "(reported: follows the trace stand-in)", f"{pw:.0f} -> {pq:.0f}",
                              f"{r['without_s']:.0f} -> {r['with_s']:.0f}", r["speedup"] > 2, gated=False))
            continue
        out.append(
            _claim(
                f"Fig. 8: {mw} / {trace} / {bot}: without -> with 9C-C-R (s), almost no change (±5 %)",
                f"{pw:.0f} -> {pq:.0f}",
                f"{r['without_s']:.0f} -> {r['with_s']:.0f}",
                abs(r["speedup"] - 1) <= 0.05,
            )
        )
    sd = stab.groupby(["middleware", "strategy"])["normalized"].std()
    if ("boinc", "none") in sd.index and ("boinc", "9C-C-R") in sd.index:
        out.append(
            _claim(
                "Fig. 9: SpeQuloS makes BOINC more stable (sd of normalized completion)",
                "more stable",
                f"{sd[('boinc', 'none')]:.3f} -> {sd[('boinc', '9C-C-R')]:.3f}",
                sd[("boinc", "9C-C-R")] < sd[("boinc", "none")],
            )
        )
        if ("xwhep", "9C-C-R") in sd.index:
            out.append(
                _claim(
                    "Fig. 9: with SpeQuloS, BOINC is more stable than XWHEP",
                    "BOINC < XWHEP",
                    f"{sd[('boinc', '9C-C-R')]:.3f} vs {sd[('xwhep', '9C-C-R')]:.3f}",
                    sd[("boinc", "9C-C-R")] < sd[("xwhep", "9C-C-R")],
                )
            )
    return out


def prediction_checks(t7: pd.DataFrame, pr: pd.DataFrame) -> list[dict[str, Any]]:
    """Table 7 (spec §7.5 as amended by §8 D5). Gated: success >= 85 % pooled over the runs of seti,
    nd, spot10 and spot100 (:data:`PREDICTION_TRACES`). Reported: the overall and leave-one-out
    rates, the g5k stand-ins ("data not available", with their measured success), SMALL and BIG
    >= 95 %, RANDOM the hardest, and the rate without RANDOM."""
    if pr.empty:
        return []
    ours = pr[pr["trace"].isin(PREDICTION_TRACES)]
    out = []
    if len(ours):
        ok = float(ours["ok"].mean() * 100)
        per = ours.groupby("trace")["ok"].mean() * 100
        out.append(_claim(
            "Table 7 on seti, nd, spot10, spot100 (§8 D5): predictions within ±20 %, >= 85 %",
            "94.1 / 99.4 / 100 / 78.3 %",
            f"{ok:.1f} % ({', '.join(f'{t} {per[t]:.0f} %' for t in PREDICTION_TRACES if t in per.index)})",
            ok >= PREDICTION_GATE))
    for t in sorted(set(pr["trace"]) - set(PREDICTION_TRACES)):
        v = float(pr.loc[pr["trace"] == t, "ok"].mean() * 100)
        paper = PAPER_TABLE7.get(t, (math.nan,) * 7)[-1]
        out.append(_claim(f"Table 7, {t}: data not available (§8 D5: the paper's Grid'5000 traces are not "
                          "published; our stand-in's measured success)",
                          f"{paper} % on the paper's trace", f"{v:.1f} %", v >= PREDICTION_GATE, gated=False))
    overall = float(pr["ok"].mean() * 100)
    out.append(_claim("Table 7: predictions within ±20 % over every trace (reported)", "90.2 %",
                      f"{overall:.1f} %", overall >= PREDICTION_GATE, gated=False))
    loo = float(pr["loo_ok"].mean() * 100)
    out.append(_claim("Table 7, leave-one-out α (A15 variant), every trace (reported)", "90.2 % (in-sample)",
                      f"{loo:.1f} %", loo >= PREDICTION_GATE, gated=False))
    by_bot = pr.groupby("bot")["ok"].mean() * 100
    sb = [by_bot.get(b, math.nan) for b in ("SMALL", "BIG")]
    out.append(_claim("Table 7: >= 95 % for SMALL and BIG (reported)", ">= 95 %",
                      f"SMALL {sb[0]:.1f} %, BIG {sb[1]:.1f} %", min(sb) >= 95, gated=False))
    out.append(_claim("Table 7: RANDOM is the hardest to predict (reported)", "RANDOM lowest",
                      ", ".join(f"{k} {v:.1f} %" for k, v in by_bot.items()), by_bot.idxmin() == "RANDOM",
                      gated=False))
    return out


# -- SpeQuloS vs BOINC batch acceleration ----------------------------------------------------------
def batch_accel_table(runs: pd.DataFrame, strategies: Sequence[str] = BATCH_ACCEL) -> pd.DataFrame:
    """Side by side per (trace, BoT): each strategy of ``strategies`` and the baseline, on BOINC.

    ``runs`` holds the baseline (``none``) and the strategies' runs, paired on ``run_seed``. Columns:
    mean completion time, mean tail slowdown, mean TRE against the paired baseline (A16), mean extra
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
    plt = _plt()
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


# -- figures --------------------------------------------------------------------------------------
def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _fig2(base: pd.DataFrame, out: Path) -> str:
    plt = _plt()
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


def _fig6(q: pd.DataFrame, out: Path) -> str:
    plt = _plt()
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


def _fig7(st: pd.DataFrame, out: Path) -> str:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(9, 3.8))
    colors = {"F": "tab:blue", "R": "tab:orange", "D": "tab:green"}
    ax.bar(st["strategy"], st["credits_pct"], color=[colors[s[-1]] for s in st["strategy"]])
    ax.axhline(25, color="grey", ls=":", lw=0.8)
    ax.set_ylabel("credits spent (% of ordered)")
    ax.set_title("Fig. 7: credits spent per strategy (paper: mostly < 25 %; D < F < R)")
    ax.tick_params(axis="x", rotation=60, labelsize=8)
    return save_figure(fig, out / "fig7_credits.png")


def _fig8(f8: pd.DataFrame, out: Path) -> str:
    """Fig. 8: mean completion per trace, without QoS and with 9C-C-R, one panel per middleware and
    BoT. Bars start at zero on a linear axis in hours (a log axis not starting at zero made 1 %
    differences look like halvings); each 9C-C-R bar is labelled with its change; the legend sits
    below the panels, off the data."""
    plt = _plt()
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


def _fig9(stab: pd.DataFrame, out: Path) -> str:
    plt = _plt()
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


# -- the report -----------------------------------------------------------------------------------
def reproduce_spequlos(
    out: Path | str,
    *,
    quick: bool = False,
    seeds: int | None = None,
    traces: Sequence[str] | None = None,
    mode: str = "processes",
    workers: int | None = None,
    scheduler: str | None = None,
    data_dir: str | Path | None = None,
    progress: bool = False,
    cloud_buffer: int = DEFAULT_CLOUD_BUFFER,
) -> dict[str, Any]:
    """Run the SpeQuloS campaign and write ``report.md``, ``runs.csv``, ``metadata.json``, tables and
    figures into ``out``.

    ``seeds``: runs per environment (default 10; 2 with ``quick``); ``traces``: default all six
    (``nd`` and ``spot10`` with ``quick``); ``cloud_buffer``: a BOINC cloud worker's buffer (spec §8
    D3). Returns a summary with the ``claims`` rows (claim / paper / ours / holds / gated) for the
    CLI, the verdict of the gated ones (:func:`gate`) and the timings (``campaign_s``, ``seconds``).
    ``mode``/``workers``/``scheduler``/``progress`` go to :func:`run_campaign` (one cell = one
    environment at one seed, the baseline and the 18 strategies paired on it). RANDOM's baseline
    and 9C-C-R run again under the ``iid`` and ``epsilon`` readings of its arrivals (§8 D1), and,
    when the strategy parser knows ``batch-accel``, the BOINC environments run ``batch-accel`` and
    ``batch-accel+9C-C-R`` for the comparison section.
    """
    t0 = time.perf_counter()
    out = Path(out)
    n = seeds if seeds is not None else (QUICK_SEEDS if quick else FULL_SEEDS)
    if n < 1:
        raise UserError(f"seeds must be >= 1, got {n}", field="seeds")
    check_readings(None, None, cloud_buffer)
    chosen = tuple(traces) if traces is not None else (QUICK_TRACES if quick else TRACES)
    envs = [f"{mw}/{t}/{b}" for t in chosen for mw in MIDDLEWARES for b in BOT_CATEGORIES]
    dd = None if data_dir is None else str(data_dir)
    # fail fast on a missing data set, before starting workers
    from skylease.experiments.spequlos import trace_for

    for t in chosen:
        trace_for(t, dd)
    check_cluster(scheduler, workers)  # before the folder is made: a mistake leaves nothing
    out = out_folder(out)
    def campaign(grid: dict[str, list], description: str) -> Any:
        grid = {**grid, "data_dir": [dd], "buffer": [cloud_buffer]}
        return run_campaign(campaign_cell, grid, seeds=n, mode=mode, workers=workers, scheduler=scheduler,
                            progress=progress, description=description)

    camps = [campaign({"environment": envs, "strategies": [list(STRATEGIES)]},
                      f"SpeQuloS: {len(envs)} environments x {n} seeds x 19 runs")]
    # RANDOM under the other readings of its arrivals: baseline and 9C-C-R (Fig. 2 and Table 7 only).
    envs_rnd = [e for e in envs if e.endswith("/RANDOM")]
    others = [a for a in ARRIVALS if a != ARRIVALS[0]]
    camps.append(campaign({"environment": envs_rnd, "strategies": [["9C-C-R"]], "random_arrivals": others},
                          f"SpeQuloS, RANDOM under {' and '.join(others)} arrivals: "
                          f"{len(envs_rnd) * len(others)} x {n} x 2 runs"))
    ba = [s for s in batch_accel_strategies() if s != "9C-C-R"]
    if ba:  # the baseline and 9C-C-R of these seeds are in the first campaign
        envs_b = [e for e in envs if e.startswith("boinc/")]
        camps.append(campaign({"environment": envs_b, "strategies": [ba], "baseline": [False]},
                              f"BOINC batch acceleration: {len(envs_b)} x {n} x {len(ba)} runs"))
    # Spec A4: the paper stops idle CWs under Greedy only; "report both if results differ" (the full
    # run only: --quick is the smoke test, and this doubles the strategy runs).
    if not quick:
        camps.append(campaign({"environment": envs, "strategies": [list(STRATEGIES)], "baseline": [False],
                               "idle": ["greedy"]},
                              f"SpeQuloS, idle CWs stopped under Greedy only (A4): "
                              f"{len(envs)} x {n} x 18 runs"))
    failed = [f for c in camps for f in c.failed]
    if failed:
        raise RuntimeError(f"{len(failed)} cells failed; first: {failed[0].get('error')}")
    drop = ("strategies", "data_dir", "key", "seed", "rep", "environment", "epsilon", "random_arrivals",
            "buffer", "baseline", "idle")
    runs = pd.concat(
        [c.table.drop(columns=[k for k in drop if k in c.table.columns]) for c in camps],
        ignore_index=True,
    )
    return report_from_runs(runs, out, seeds=n, quick=quick,
                            campaign_s=sum(c.elapsed_s for c in camps), started=t0, data_dir=dd)


def _split_runs(runs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The campaign's runs, RANDOM's runs under other arrival readings, the batch-acceleration runs
    and the runs of the A4 variant (idle CWs stopped under Greedy only). A ``runs.csv`` written
    before spec §8 (no ``arrivals`` column) read its RANDOM arrivals i.i.d., with the ``epsilon``
    variant marked by ``epsilon_s``; one without ``idle_stop`` stopped every idle CW."""
    runs = runs.copy()
    if "idle_stop" not in runs.columns:
        runs["idle_stop"] = "all"
    idle = runs["idle_stop"] != "all"
    idle_runs = runs[idle].reset_index(drop=True)
    runs = runs[~idle]
    if "epsilon_s" not in runs.columns:
        runs["epsilon_s"] = math.nan
    if "arrivals" not in runs.columns:
        runs["arrivals"] = np.where(runs["epsilon_s"].notna(), "epsilon", "iid")
    if "cloud_buffer" not in runs.columns:
        runs["cloud_buffer"] = DEFAULT_CLOUD_BUFFER
    ba = ~runs["strategy"].isin(["none", *STRATEGIES])
    rest = runs[~ba]
    non_random = rest.loc[rest["bot"] != "RANDOM", "arrivals"]
    main = non_random.mode().iloc[0] if len(non_random) else ARRIVALS[0]
    var = ~ba & (runs["bot"] == "RANDOM") & (runs["arrivals"] != main)
    return (runs[~ba & ~var].reset_index(drop=True), runs[var].reset_index(drop=True),
            runs[ba].reset_index(drop=True), idle_runs)


def report_from_runs(
    runs: pd.DataFrame | str | Path,
    out: Path | str,
    *,
    seeds: int | None = None,
    quick: bool = False,
    campaign_s: float = math.nan,
    started: float | None = None,
    data_dir: str | Path | None = None,
) -> dict[str, Any]:
    """Derive every table, figure and check from the campaign's rows (a frame or a ``runs.csv``)
    and write them into ``out``; returns the summary :func:`reproduce_spequlos` returns.
    ``data_dir``: where the data-set traces are read for Tables 2-3 (default the data folder)."""
    t0 = time.perf_counter() if started is None else started
    out = out_folder(out)
    if not isinstance(runs, pd.DataFrame):
        runs = pd.read_csv(runs)
    runs = runs.sort_values(["middleware", "trace", "bot", "run_seed", "strategy"]).reset_index(drop=True)
    all_runs = runs
    runs, var_runs, ba_runs, idle_runs = _split_runs(runs)
    chosen = tuple(t for t in TRACES if t in set(runs["trace"])) + tuple(
        sorted(set(runs["trace"]) - set(TRACES))
    )
    n = int(seeds) if seeds is not None else int(runs["run_seed"].nunique())
    base = runs[runs["strategy"] == "none"]
    q = with_tre(runs)
    t1 = table1(base)
    sd = slowdown_stats(base)
    rnd = runs[runs["bot"] == "RANDOM"]
    reading = str(rnd["arrivals"].iloc[0]) if len(rnd) else ARRIVALS[0]
    eps0 = float(rnd["epsilon_s"].iloc[0]) if len(rnd) else math.nan
    arr = random_arrivals(sorted(set(base.loc[base["bot"] == "RANDOM", "run_seed"])), arrivals=reading,
                          **({"epsilon": eps0} if reading == "epsilon" and math.isfinite(eps0) else {}))
    st = strategy_table(q)
    f8 = fig8_table(runs)
    stab = stability(runs)
    t7, pr = prediction_table(runs)
    t7_loo = prediction_cells(pr, "loo_ok") if len(pr) else pr
    eps = arrivals_variant(runs, var_runs)
    idle_t = idle_variant(q, with_tre(pd.concat([base, idle_runs], ignore_index=True)) if len(idle_runs)
                          else idle_runs)
    t23 = trace_tables(chosen, None if data_dir is None else str(data_dir))
    claims = (
        trace_checks(t23)
        + baseline_checks(sd, t1, base)
        + strategy_checks(st, q)
        + performance_checks(f8, stab)
        + prediction_checks(t7, pr)
        + _arrival_claims(eps)
        + idle_claims(idle_t)
    )
    claims_df = pd.DataFrame(claims)
    verdict = gate(claims_df)
    ba_table, ba_text = batch_accel_section(
        pd.concat([runs[runs["strategy"].isin(["none", "9C-C-R"])], ba_runs], ignore_index=True), out)
    buffers = sorted({int(b) for b in runs["cloud_buffer"]})
    meta = {
        "spec": "003_spequlos.md (§6-§7 as amended by §8 D1-D5)",
        "readings": readings(reading, eps0 if reading == "epsilon" and math.isfinite(eps0) else None,
                             buffers[0] if len(buffers) == 1 else DEFAULT_CLOUD_BUFFER),
        "cloud_buffers": buffers,
        "variant_readings": sorted({_reading_name(a, float(e)) for a, e in
                                    zip(var_runs["arrivals"], var_runs["epsilon_s"], strict=True)}),
        "gating": {
            "fig2": "median <= 1.33 and P(slowdown >= 2) <= the paper's, on SMALL + BIG per middleware (D2); "
                    "RANDOM on its own row and the 95th percentile reported (D2); XWHEP/seti/BIG reported as "
                    "the cause of XWHEP's 95th percentile (D4)",
            "fig6c": "9A-G-D / 9A-C-D best, P(TRE = 1) and P(TRE > 0.5) on SMALL + BIG (D3); 9A with Greedy "
                     "on one-wave bags reported (D3)",
            "table7": f"success >= {PREDICTION_GATE:g} % pooled on {', '.join(PREDICTION_TRACES)} (D5); the "
                      "g5k stand-ins reported as data not available, with their measured success (D5)",
            "fig8": "BOINC/seti/RANDOM with 9C-C-R within ±15 % of 3195 s; its baseline reported",
        },
        "verdict": verdict,
        "batch_accel": list(dict.fromkeys(ba_table["strategy"])) if len(ba_table) else [],
        "decisions": list(DECISIONS),
    }
    for name, df in (
        ("runs", all_runs),
        ("variant_random_arrivals", eps),
        ("variant_idle_stop", idle_t),
        ("table2_table3_traces", t23),
        ("table1", t1),
        ("fig2_slowdown", sd),
        ("fig2_random_arrivals", arr),
        ("fig6_fig7_strategies", st),
        ("fig6_one_wave", one_wave_table(q)),
        ("fig8_completion", f8),
        ("fig9_stability", stab),
        ("table7_prediction", t7),
        ("table7_prediction_loo", t7_loo),
        ("claims", claims_df),
    ):
        df.to_csv(out / f"{name}.csv", index=False)
    atomic_write_text(out / "metadata.json", json.dumps(meta, indent=2, default=_json_default) + "\n")
    figs = {
        "fig2": _fig2(base, out),
        "fig6": _fig6(q, out),
        "fig7": _fig7(st, out),
        "fig8": _fig8(f8, out),
        "fig9": _fig9(stab, out),
    }
    seconds = time.perf_counter() - t0
    data = Derived(base=base, t1=t1, sd=sd, arr=arr, st=st, q=q, f8=f8, stab=stab, t7=t7, t7_loo=t7_loo,
                   pr=pr, eps=eps, ba=ba_table, meta=meta, idle=idle_t, t23=t23)
    text = _report(n, quick, chosen, len(runs), campaign_s, seconds, data, claims_df, figs, ba_text)
    write_report(out / "report.md", text)
    return {
        "out": str(out),
        "seeds": n,
        "traces": list(chosen),
        "runs": len(runs),
        "quick": quick,
        "seconds": seconds,
        "campaign_s": campaign_s,
        "claims": claims_df.to_dict("records"),
        "held": verdict["held"],
        "checked": verdict["gated"],
        "reported": verdict["reported"],
        "passed": verdict["passed"],
        "readings": meta["readings"],
    }


def _json_default(x: Any) -> Any:
    if isinstance(x, (np.integer, np.floating)):
        return x.item()
    return str(x)


def _arrival_claims(eps: pd.DataFrame) -> list[dict[str, Any]]:
    """RANDOM's prediction success under each reading of its arrivals (reported, §8 D1)."""
    if eps.empty:
        return []
    a = eps[eps["middleware"] == "all"]
    return [_claim("Table 7, RANDOM's prediction success under each reading of its arrivals "
                   "(reported, §8 D1)", "76-100 % (RANDOM cells)",
                   "; ".join(f"{r['reading']}: {r['RANDOM prediction %']:.1f} %"
                             for r in a.to_dict("records")),
                   bool(a["RANDOM prediction %"].iloc[0] >= 76), gated=False)]


def _claims_md(df: pd.DataFrame) -> str:
    if "gated" not in df.columns:
        return md_table(df, ["claim", "paper", "ours", "holds"])
    return md_table(df.assign(gated=df["gated"].map({True: "gated", False: "reported"})),
                    ["claim", "paper", "ours", "holds", "gated"])


DECISIONS = (
    "Traces (spec A18-A19): seti and nd are generated (per-node alternating renewal processes fitted to "
    "Tables 2-3, with a daily cycle for seti; seed 2013); g5klyo and g5kgre are the best-effort nodes of two "
    "SWF batch logs (Blue Horizon, 144 nodes; NASA iPSC, 128 nodes); spot10 and spot100 are the paper's bid "
    "ladder on a 2016 EC2 c1.xlarge spot-price history scaled by one factor to the paper's price level (A18: "
    "the ladders' maxima are Table 2's 87 and 877 nodes; unscaled they had about 1.8x the nodes). "
    "`skylease traces stats` prints their Table 2/3 rows beside the paper's. Traces are built once per "
    "process, so every run of the campaign sees the same traces.",
    "Submissions (A21): uniform over the trace minus a 10-day margin (a third of a shorter trace); a run's "
    "seed fixes its submission time, its BoT draw, node powers, ON offsets and CW boot delays, so the "
    "baseline and the 18 strategies of one seed are paired and identical until the policy first acts. "
    "Runs that never finish would be reported as `completion_s = inf` (none did here).",
    "BoTs (A9, §8 D1): RANDOM reads Table 6's σ² literally (σ = 14.1 tasks, 100 nops) and its weib(91.98 s, "
    "0.57) as the repartition function of its arrival times: task i of n arrives at F⁻¹((i − ½)/n) "
    "(`--random-arrivals quantile`, the default); the i.i.d. offsets of A9b (`iid`) and those offsets with "
    "every gap capped at the paper's ε = 60 s (`epsilon`) run as variants of RANDOM's baseline and 9C-C-R. "
    "Node powers are Table 4's normals clamped to [mean/3, 3 mean] (A8), homogeneous 3000 nops/s on the "
    "g5k grids.",
    "Middleware (A11-A13): work requests back off 30, 60, 120, 240, then every 300 s; a node up at "
    "submission comes ON then (plus its [RC] 0-300 s offset); requests due at the same instant are served "
    "in node order. XWHEP: a job whose node leaves is re-queued at its next ON or after the 900 s "
    "keep-alive timeout. BOINC: 3 tasks per CPU buffer, suspended replicas resume at the next ON and are "
    "re-sent after the 1-day deadline; 'one result per user per WU' holds for the WU's life. A duplicate "
    "result is ignored and the slower copy keeps running.",
    "Cloud workers (A6-A7, A13-A14): 3000 nops/s, boot N(150, 15) s clamped to [75, 300], never fail; a "
    "stopped CW is a worker switched OFF (XWHEP re-queues its job after the timeout, BOINC waits for the "
    "deadline). BOINC Reschedule: a CW copies the first IN_PROGRESS replica no live CW is copying, so two "
    "CWs complete a WU that still needs two results; a CW skips buffered copies of WUs validated "
    "meanwhile. Duplication copies the tasks arrived and not completed at the start (quorum 1).",
    "SpeQuloS (A2-A6, A24, §8 D3): a 240 s tick, each running CW billed 1 credit per tick from its start "
    "tick (boot billed); a BOINC CW asks for 3 replicas per request, as a client (`--cloud-buffer`; "
    "XWHEP CWs hold one job); 9A with Greedy keeps its semantics (S workers at the first tick where 90 % are "
    "assigned); CWs started once per BoT; an idle CW stops at the next tick for every strategy (A4; the full "
    "run repeats the 18 strategies with Greedy's idle CWs stopped only and reports both); "
    "if HOW MANY gives 0 the start is retried at the next tick; Conservative = floor(S / max(t_r, 1)); "
    "Greedy = floor(S). The order is 10 % of the BoT's wall-clock bound in CPU.hours x 15 credits.",
    "Metrics: tail slowdown = actual / ideal (A1), T_ideal = t_c(0.9)/0.9 over the final BoT size (A10); "
    "Table 1 and Fig. 2 come from the baseline runs (A25). TRE against the paired baseline; a run whose "
    "baseline had no tail (t_nospeq − t_ideal ≤ 1 s) is excluded and the excluded share reported; TRE is "
    "clipped at 1 (A16). `cloud_work_share` is the measured share of tasks whose first result came from "
    "a CW (the paper's proxy is 0.10 x the share of credits spent). The prediction p = t_c(0.5)/0.5 is "
    "made in the completion callback that reaches ceil(0.5 x submitted); α is fitted with L1 in-sample "
    "per (trace, middleware, BoT) on the 9C-C-R runs, and leave-one-out beside it (A15). Table 1 rows "
    "and Table 7's Mixed cells pool the runs (A22).",
    "Gating (§7 as amended by §8): Fig. 2's median (≤ 1.33) and P(slowdown ≥ 2) are gated on SMALL + BIG "
    "per middleware (D2); [R] P(≥ 2) as at most the paper's value, since the paper's pool held RANDOM runs, "
    "whose slowdown is ≥ 2 on any grid. RANDOM's own row and every 95th percentile are reported (D2), "
    "with XWHEP/seti/BIG named as the cause of XWHEP's (D4; the 900 s timeout is kept). Fig. 6c's "
    "'9A-x-D best' is evaluated on SMALL + BIG (D3). Table 7's ≥ 85 % is gated on the runs of seti, nd, "
    "spot10 and spot100 pooled; the g5k stand-ins are 'data not available' with their measured success "
    "(D5). The Fig. 8 anchor BOINC/seti/RANDOM is gated on its 9C-C-R time (±15 % of 3,195 s); its baseline "
    "(28,818 s on the paper's trace) is reported. The other checks of §7 are gated as written. "
    "`metadata.json` holds these readings, the gating and the verdict.",
)


def _pct(x: float) -> str:
    return f"{x:.0%}" if math.isfinite(x) else "–"


def _report(
    n: int,
    quick: bool,
    traces: Sequence[str],
    n_runs: int,
    campaign_s: float,
    seconds: float,
    d: Derived,
    claims: pd.DataFrame,
    figs: dict[str, str],
    ba_text: Sequence[str] = (),
) -> str:
    v = gate(claims)
    rd = d.meta.get("readings", {})
    f8r = d.f8.copy()
    for c in ("without_s", "with_s", "paper_without_s", "paper_with_s"):
        f8r[c] = f8r[c].round(0)
    t1p = pd.DataFrame(
        [{"BE-DCI": k, "BOINC tasks %": v[0], "XWHEP tasks %": v[1], "BOINC time %": v[2],
          "XWHEP time %": v[3]} for k, v in PAPER_TABLE1.items()]
    )
    t7p = pd.DataFrame([{"trace": k, **dict(zip(d.t7.columns[1:], v, strict=False))}
                        for k, v in PAPER_TABLE7.items()]) if len(d.t7) else pd.DataFrame()
    loo = float(d.pr["loo_ok"].mean() * 100) if len(d.pr) else math.nan
    stab_sd = d.stab.groupby(["middleware", "strategy"])["normalized"].std().unstack()
    mode = " --quick" if quick else ""
    lines = [
        "# SpeQuloS reproduced: cutting the tail of bags of tasks on best-effort infrastructures",
        "",
        'Source: S. Delamare, G. Fedak, D. Kondo, O. Lodygensky, "SpeQuloS: a QoS service for hybrid and '
        'elastic computing infrastructures", Cluster Computing 2013 (seed 003); implementation spec '
        f"`003_spequlos.md`. Generated by `skylease reproduce spequlos{mode}`.",
        "",
        f"**{len(traces)} traces ({', '.join(traces)}) x 2 middleware x 3 BoT categories x {n} seeds x "
        f"(baseline + 18 strategies) = {n_runs} runs** (the paper: more than 25,000). "
        + (f"Campaign: {campaign_s:.0f} s on the campaign runner; whole report {seconds:.0f} s. "
           if math.isfinite(campaign_s) else f"Report rebuilt from runs.csv in {seconds:.0f} s. ")
        + "Each seed fixes the "
        "submission time, the BoT, node powers, ON offsets and CW boots; the baseline and the 18 "
        "strategies of one seed are paired on it (the paper's fairness rule). "
        f"RANDOM's arrivals: **{rd.get('random_arrivals', '?')}** ({rd.get('random_arrivals_why', '')}); "
        f"a BOINC cloud worker's buffer: **{rd.get('cloud_buffer', '?')}** replicas. The spec's §8 (D1-D5) "
        "amends its §6-§7; every reading is in `metadata.json` and under Decisions.",
        "",
        f"## Headline: paper vs ours ({v['held']} of {v['gated']} gated checks hold"
        + ("" if v["passed"] else f"; failing: {'; '.join(v['failed'])}")
        + f"; {v['reported']} values reported beside the paper's)",
        "",
        "`gated`: a check of spec §7 as amended by §8, which the reproduction must pass; `reported`: a value "
        "§8 (or the report) puts beside the paper's without gating it, `holds` saying how it compares.",
        "",
        _claims_md(claims),
        "",
        *_traces_text(d),
        "## Table 1 and Fig. 2: the tail without SpeQuloS",
        "",
        "Ours (baseline runs, pooled over the two traces of each BE-DCI type; `paper` columns are Table 1):",
        "",
        md_table(d.t1, digits=2),
        "",
        "The paper's Table 1 (% of BoT in tail, % of time in tail):",
        "",
        md_table(t1p, digits=2),
        "",
        "Fig. 2's statistics per middleware, pooled (`all`) and per BoT category (paper: median ≤ 1.33; "
        "P(≥ 2) 0.33 BOINC, 0.25 XWHEP; p95 10 BOINC, 4 XWHEP):",
        "",
        md_table(d.sd, digits=2),
        "",
        f"![Fig. 2]({figs['fig2']})",
        "",
        *_random_text(d),
        "",
        *_arrivals_text(d),
        "## Figs. 6-7: the 18 strategies",
        "",
        "TRE = 1 − (t_speq − t_ideal)/(t_nospeq − t_ideal), t_ideal from the paired baseline (A16): a "
        "run whose baseline had no tail (t_nospeq − t_ideal ≤ 1 s) is excluded (column `excluded`: "
        f"{d.q['tre'].isna().mean():.1%} of the QoS runs overall), TRE is clipped at 1. `credits_pct` is "
        "the average share of the order spent (Fig. 7); `cloud_tasks_pct` the share of tasks a CW "
        "completed first.",
        "",
        md_table(d.st, digits=2),
        "",
        f"![Fig. 6]({figs['fig6']})",
        "",
        f"![Fig. 7]({figs['fig7']})",
        "",
        *_one_wave_text(d),
        *_idle_text(d),
        "Mean TRE per BoT category (the RANDOM runs pull every strategy down, for the reason above):",
        "",
        md_table(
            d.q.groupby(["how", "bot"])["tre"].mean().unstack().reset_index(), digits=2
        ),
        "",
        "## Figs. 8-9: SpeQuloS 9C-C-R",
        "",
        "Average completion time (s) per environment without SpeQuloS and with 9C-C-R; the paper prints "
        "two of them: BOINC / seti / RANDOM 28818 -> 3195 s and XWHEP / spot10 / BIG 2524 -> 2521 s.",
        "",
        md_table(
            f8r,
            ["middleware", "bot", "trace", "without_s", "with_s", "speedup", "paper_without_s",
             "paper_with_s"],
            digits=2,
        ),
        "",
        f"![Fig. 8]({figs['fig8']})",
        "",
        "Fig. 9: each run's completion time over its environment's mean. Standard deviation of that ratio "
        "(paper: SpeQuloS makes BOINC markedly more stable, and BOINC more stable than XWHEP):",
        "",
        md_table(stab_sd.reset_index(), digits=3),
        "",
        f"![Fig. 9]({figs['fig9']})",
        "",
        "## Table 7: completion-time prediction at 50 %",
        "",
        "α is fitted per (trace, middleware, BoT) on the 9C-C-R runs with the L1 objective, in-sample "
        f"(A15), {n} runs per cell; a prediction succeeds when the completion time is within ±20 % of "
        "α·t_c(0.5)/0.5. Ours, in-sample:",
        "",
        md_table(d.t7, digits=1),
        "",
        f"Leave-one-out (α fitted on the other {n - 1} runs of the cell), overall {loo:.1f} %:",
        "",
        md_table(d.t7_loo, digits=1),
        "",
        "The paper's Table 7:",
        "",
        md_table(t7p, digits=1) if len(t7p) else "",
        "",
        *ba_text,
        "## Decisions where the paper and the spec are silent",
        "",
        "Every [R] choice of `skylease.experiments.spequlos`, `skylease.sim.dg` and "
        "`skylease.control.qos` (their docstrings give the details):",
        "",
        *[f"- {x}" for x in DECISIONS],
        "",
        "## Where we differ, and why",
        "",
        *_differences(d, claims),
    ]
    return "\n".join(lines) + "\n"


def _traces_text(d: Derived) -> list[str]:
    """Spec §7.1: Tables 2 and 3 of our traces beside the paper's."""
    if d.t23.empty:
        return []
    t = d.t23.pivot_table(index="trace", columns="statistic", values="ours", sort=False)
    p = d.t23.pivot_table(index="trace", columns="statistic", values="paper", sort=False)
    cols = ["mean", "max", *TRACE_VALUES[1:]]
    rows = []
    for name in t.index:
        rows.append({"trace": name, **{c: t.loc[name, c] for c in cols}})
        rows.append({"trace": f"{name} (paper)", **{c: p.loc[name, c] for c in cols}})
    return [
        "## Traces (§7.1): Tables 2 and 3",
        "",
        "Mean and maximum number of available nodes (Table 2) and quartiles of availability and "
        "unavailability durations in seconds (Table 3), ours beside the paper's "
        "(`table2_table3_traces.csv`; `skylease traces stats NAME` prints every column). "
        "seti and nd are generated and fitted to the paper's tables (A19); spot10 and spot100 are the "
        "paper's bid ladder on a 2016 c1.xlarge price history scaled to the paper's price level, so "
        "that the ladders' maxima are Table 2's 87 and 877 nodes (A18); their durations are that "
        "market's, which moves every 15 minutes or so. g5klyo and g5kgre stand in for Grid'5000 "
        "best-effort traces that are not published (SWF batch logs; A19).",
        "",
        md_table(pd.DataFrame(rows), digits=1),
        "",
    ]


def _idle_text(d: Derived) -> list[str]:
    """Spec A4: both readings of which idle cloud workers stop, side by side."""
    if d.idle.empty:
        return []
    t = d.idle[d.idle["axis"] != "C <= G"].pivot_table(index=["axis", "value"], columns="idle_stop",
                                                         values=["credits_pct", "tre_mean"], sort=False)
    t.columns = [f"{a} ({b})" for a, b in t.columns]
    cg = d.idle[d.idle["axis"] == "C <= G"].set_index("idle_stop")["credits_pct"]
    return [
        "**Idle cloud workers (spec A4).** The campaign stops an idle CW at the next tick under every "
        "strategy (the authors' simulator); the paper's text (l.198) says so of Greedy only. The same "
        "seeds ran the 18 strategies again with only Greedy's idle CWs stopped (`variant_idle_stop.csv`): "
        "mean TRE and % of the order spent under each reading (`all` is the campaign), and how many of "
        "the 9 WHEN x HOW pairs keep Conservative at or below Greedy "
        f"(all: {int(cg.get('all', 0))} of 9; greedy only: {int(cg.get('greedy', 0))} of 9):",
        "",
        md_table(t.reset_index(), digits=2),
        "",
    ]


def _arrivals_text(d: Derived) -> list[str]:
    """The section comparing the readings of RANDOM's arrivals (spec §8 D1)."""
    if d.eps.empty:
        return []
    return [
        "### RANDOM under each reading of its arrivals (§8 D1)",
        "",
        "The paper gives the *repartition function* of RANDOM's arrival times, weib(91.98 s, 0.57): the "
        "campaign reads it as quantiles (task i of n at F⁻¹((i − ½)/n), `--random-arrivals quantile`). "
        "The same seeds ran RANDOM's baseline and 9C-C-R under the two other readings: i.i.d. offsets "
        "(`iid`, spec A9b) and those offsets with every gap capped at the paper's ε = 60 s (`epsilon`). "
        "Fig. 2's statistics and Table 7's success with RANDOM's runs taken from each reading (`all` pools "
        "both middleware; SMALL and BIG are the same runs in every reading); the paper's RANDOM cells of "
        "Table 7 are 76-100 % (34.8 % and 3.6 % on XWHEP g5kgre and spot100), and its BOINC/seti/RANDOM "
        "9C-C-R mean 3,195 s:",
        "",
        md_table(d.eps, digits=2),
        "",
    ]


def _one_wave_text(d: Derived) -> list[str]:
    """§8 D3: 9A with Greedy on the bags that fit in one wave, with the numbers."""
    t = one_wave_table(d.q)
    if t.empty:
        return []
    return [
        "**9A with Greedy on one-wave bags (§8 D3).** Where a SMALL bag fits in one wave (seti; spot100 "
        "did on the uncalibrated 2016 ladder's 1,557 nodes, no longer on the paper's 877), "
        "90 % of its tasks are assigned at the first tick, so 9A fires there; Greedy then starts S = "
        "credits/15 cloud workers, which spend the whole order in their first hour, before the tail, and "
        "TRE ≈ 0. That is what the paper's rules imply (S workers at once, 1 credit per worker per 240 s "
        "tick, an idle worker stops at once), so the semantics are kept and reported here; this is why "
        "Fig. 6c's '9A-x-D best' is evaluated on SMALL + BIG pooled. Mean TRE, % of the order spent and "
        "mean cloud-worker start (s after submission):",
        "",
        md_table(t, digits=2),
        "",
    ]


def _random_text(d: Derived) -> list[str]:
    """The RANDOM paragraph: its arrivals alone make a tail, with our numbers."""
    if d.arr.empty:
        return []
    a = d.arr
    rnd = d.sd[d.sd["bot"] == "RANDOM"]
    oth = d.sd[d.sd["bot"].isin(["SMALL", "BIG"])]
    meas = "; ".join(
        f"{r['middleware']}: median {r['median']:.2f}, P(≥ 2) {r['P(>=2)']:.2f}, p95 {r['p95']:.1f}"
        for r in rnd.to_dict("records")
    )
    other = "; ".join(
        f"{r['middleware']} {r['bot']}: median {r['median']:.2f}, P(≥ 2) {r['P(>=2)']:.2f}"
        for r in oth.to_dict("records")
    )
    return [
        "**RANDOM's slowdown is mostly its arrivals, not volatility.** Its tasks arrive over "
        f"weib(91.98 s, 0.57) ({d.meta.get('readings', {}).get('random_arrivals', 'quantile')} reading): "
        "over "
        f"our {len(a)} seeds, 90 % of the tasks have arrived "
        f"after {a['arrival_90pct_s'].median():.0f} s (median; {a['arrival_90pct_s'].min():.0f}-"
        f"{a['arrival_90pct_s'].max():.0f} s) but the last one only after "
        f"{a['last_arrival_s'].median():.0f} s ({a['last_arrival_s'].min():.0f}-"
        f"{a['last_arrival_s'].max():.0f} s). Even on a perfect grid where each task runs 20 s as soon as it "
        f"arrives, T / T_ideal would be {a['arrival_slowdown'].median():.1f} (median; "
        f"{a['arrival_slowdown'].min():.1f}-{a['arrival_slowdown'].max():.1f}): T_ideal = t_c(0.9)/0.9 "
        "sits at the 90 % arrival while the BoT ends after its last arrival. No QoS can remove that tail. "
        f"Measured RANDOM baselines: {meas}. SMALL and BIG: {other}. The pooled Fig. 2 statistics "
        "therefore mix two populations; as spec §8 D2 decides, the median and P(≥ 2) are gated on SMALL + "
        "BIG and RANDOM is reported on its own row.",
        "",
        md_table(a, digits=1),
    ]


def _failed(claims: pd.DataFrame, prefix: str) -> pd.DataFrame:
    return claims[~claims["holds"].astype(bool) & claims["claim"].str.startswith(prefix)]


def _differences(d: Derived, claims: pd.DataFrame) -> list[str]:
    """'Where we differ': one bullet per group of failed checks, with the numbers that explain it."""
    gated = claims["gated"].astype(bool) if "gated" in claims.columns else pd.Series(True, index=claims.index)
    failed = claims[~claims["holds"].astype(bool) & gated]
    if failed.empty:
        out = ["Every gated check of the headline holds at this scale; the reported values that differ from "
               "the paper's are explained below."]
    else:
        out = [
            f"{len(failed)} of {int(gated.sum())} gated checks fail: "
            + "; ".join(f"*{c}* (paper {p}, ours {o})" for c, p, o in
                        zip(failed["claim"], failed["paper"], failed["ours"], strict=True))
            + ". From the data:"
        ]
    out.append("")
    if any(len(_failed(claims, k)) for k in ("Fig. 2", "boinc: tail", "xwhep: tail", "Table 1")):
        out.append(_diff_fig2(d))
    if len(_failed(claims, "Fig. 6")) and len(d.st):
        out.append(_diff_fig6(d))
    if len(_failed(claims, "Fig. 7")):
        cr = d.q.groupby("how")[["credits_share", "cloud_work_share"]].mean() * 100
        started = float((d.q["cws"] > 0).mean())
        out.append(
            "- **Fig. 7 (credits).** Per HOW, % of the order spent and % of the tasks a CW completed "
            "first: "
            + "; ".join(f"{h}: {r['credits_share']:.1f} % / {r['cloud_work_share']:.1f} %"
                        for h, r in cr.iterrows())
            + f". The CWs start at the same tick and in the same number for every HOW ({started:.0%} of "
            "the QoS runs start any), so the spending follows how long they stay busy: an idle CW stops "
            "at the next tick for every strategy (A4, the [RC] rule); under Flat a CW only gets what the "
            "DG queue still holds and runs out of work first (it completes the fewest tasks), while "
            "Duplication feeds it every uncompleted task. The paper stops idle CWs under Greedy only; "
            + _idle_diff(d)
        )
    if len(_failed(claims, "Fig. 8")) or len(_failed(claims, "Fig. 9")):
        out.append(_diff_fig8(d))
    if len(_failed(claims, "Table 7")) and len(d.pr):
        out.append(_diff_table7(d))
    out.append(
        "- **Traces.** seti and nd are generated to the paper's Tables 2-3, g5klyo/g5kgre come from SWF "
        "batch logs (144 and 128 nodes), and spot10/spot100 from a 2016 spot-price history scaled to the "
        "paper's price level, whose top bids flip more often than the paper's (see Traces above): "
        "absolute completion times and the per-trace cells follow our traces, not the paper's."
    )
    return out


def _idle_diff(d: Derived) -> str:
    """The A4 variant's Fig. 7 numbers, for 'Where we differ'."""
    if d.idle.empty:
        return "that variant runs only in the full reproduction (not --quick)."
    v = d.idle[d.idle["idle_stop"] == "greedy"]
    g = v[v["axis"] == "how"].set_index("value")["credits_pct"]
    cg = v[v["axis"] == "C <= G"]["credits_pct"]
    return ("run that way on the same seeds, the HOWs spend "
            + ", ".join(f"{h} {g.get(h, math.nan):.1f} %" for h in ("D", "F", "R"))
            + f", and Conservative stays at or below Greedy in {int(cg.iloc[0]) if len(cg) else 0} of 9 "
            "pairs: Conservative's idle CWs stay billed until the bag ends, so neither reading gives "
            "the paper's D < F < R together with C ≤ G (see the A4 table above).")


def _diff_fig2(d: Derived) -> str:
    sd = d.sd.set_index(["middleware", "bot"])
    parts = [
        f"{mw}: pooled median {sd.loc[(mw, 'all'), 'median']:.2f}, "
        f"P(≥ 2) {sd.loc[(mw, 'all'), 'P(>=2)']:.2f}, "
        f"p95 {sd.loc[(mw, 'all'), 'p95']:.1f}; RANDOM alone {sd.loc[(mw, 'RANDOM'), 'median']:.2f}, "
        f"{sd.loc[(mw, 'RANDOM'), 'P(>=2)']:.2f}, {sd.loc[(mw, 'RANDOM'), 'p95']:.1f}"
        for mw in MIDDLEWARES
        if (mw, "all") in sd.index and (mw, "RANDOM") in sd.index
    ]
    cell = d.base.groupby(["middleware", "bot", "trace"]).agg(
        slowdown=("tail_slowdown", "mean"), ideal=("ideal_s", "mean")
    )
    worst = cell[cell.index.get_level_values("bot") != "RANDOM"].sort_values("slowdown").tail(3)
    arr = f"{d.arr['arrival_slowdown'].median():.1f}x on a perfect grid" if len(d.arr) else "see above"
    return (
        "- **Fig. 2 / Table 1 (baseline tails).** RANDOM's arrival tail (" + arr + ") is a third of the "
        "runs and pushes the pooled statistics up (" + "; ".join(parts) + "). Outside RANDOM, the "
        "largest mean slowdowns are "
        + ", ".join(f"{m}/{b}/{t} {r['slowdown']:.1f}x on T_ideal = {r['ideal']:.0f} s"
                    for (m, b, t), r in worst.iterrows())
        + ". The tail-task share per BoT: "
        + "; ".join(
            f"{mw} " + ", ".join(f"{b} {sd.loc[(mw, b), 'tail tasks %']:.2f} %" for b in BOT_CATEGORIES
                                 if (mw, b) in sd.index)
            for mw in MIDDLEWARES
        )
        + " (a BIG BoT has 10000 tasks, so a tail of a few hundred tasks is a small share of it)"
        + ". When T_ideal is a few minutes (seti's many nodes and 60 s BIG tasks), a few tasks lost on "
        "departing nodes make the tail: XWHEP re-queues a lost job only at the node's next ON or after "
        "its 900 s keep-alive timeout, then a volatile node must pick it up (back-off up to 300 s); "
        f"xwhep/seti/BIG's baseline ends {_tail_s(d, 'xwhep', 'BIG', 'seti'):.0f} s after T_ideal on "
        "average, of the order of one timeout plus a back-off or two. That is what lifts our XWHEP p95 "
        "above the paper's 4. Our traces are stand-ins "
        "(Decisions), so how much of the time the tail takes per BE-DCI type follows their availability."
    )


def _diff_fig6(d: Derived) -> str:
    s = d.st.set_index("strategy")
    by_bot = d.q.groupby(["how", "bot"])["tre"].mean().unstack()
    dd = d.q[d.q["strategy"].isin(["9A-G-D", "9A-C-D"])]
    p50 = (dd["tre"] > 0.5).groupby(dd["bot"]).mean()
    top = s["tre_mean"].sort_values(ascending=False).head(4)
    return (
        "- **Fig. 6 (TRE).** Our best strategies by mean TRE: "
        + ", ".join(f"{k} {v:.2f}" for k, v in top.items())
        + ". Mean TRE per HOW and BoT: "
        + "; ".join(f"{h}: " + ", ".join(f"{b} {by_bot.loc[h, b]:.2f}" for b in by_bot.columns)
                    for h in by_bot.index)
        + ". P(TRE > 0.5) of 9A-G-D and 9A-C-D per BoT: "
        + ", ".join(f"{b} {v:.2f}" for b, v in p50.items())
        + ". A RANDOM BoT's tail is its late arrivals, which a CW can only run as they come, so every "
        "HOW is capped there; the orderings (D ≈ R ≫ F, V worst, 9A ≥ 9C) are the paper's."
    )


def _diff_fig8(d: Derived) -> str:
    f8 = d.f8
    flat = f8[~(f8["with_s"] < f8["without_s"] * (1 - 1e-3))]
    qr = d.q[d.q["strategy"] == "9C-C-R"].copy()
    qr["left_s"] = qr["completion_s"] - qr["cw_started_s"]
    env = qr.groupby(["middleware", "bot", "trace"]).agg(
        started=("cws", lambda c: float((c > 0).mean())),
        credits=("credits_share", "mean"),
        cw_tasks=("cloud_work_share", "mean"),
        left=("left_s", "mean"),
        slowdown=("base_tail_slowdown", "mean"),
    )
    text = "- **Fig. 8 (9C-C-R).** "
    if len(flat):
        rows = []
        for r in flat.to_dict("records"):
            e = env.loc[(r["middleware"], r["bot"], r["trace"])]
            rows.append(
                f"{r['middleware']}/{r['trace']}/{r['bot']} {r['without_s']:.0f} -> {r['with_s']:.0f} s "
                f"(baseline slowdown {e['slowdown']:.1f}x; CWs started in {e['started']:.0%} of the runs, "
                f"{e['credits']:.0%} of the order spent, {e['cw_tasks']:.1%} of the tasks completed first "
                "by a CW"
                + (f", {e['left']:.0f} s left after the CW start" if math.isfinite(e["left"]) else "")
                + ")"
            )
        text += (
            "Environments not lower by 0.1 % or more: " + "; ".join(rows) + ". Three cases: no tail "
            "(slowdown about 1: the WHEN rule never fires or nothing is left to cut); RANDOM, whose tail "
            "is its own arrivals (a CW can only run a task once it has arrived); and tails shorter than "
            "a CW's boot (about 150 s) plus one task on it (SMALL: 3.6e6 nops at 3000 nops/s = 1200 s), "
            "where the rented CWs finish no copy first and the order is spent for nothing. "
        )
    for (mw, trace, bot), (pw, pq) in PAPER_FIG8.items():
        r = f8[(f8["middleware"] == mw) & (f8["trace"] == trace) & (f8["bot"] == bot)]
        if r.empty:
            continue
        r = r.iloc[0]
        text += f"Anchor {mw}/{trace}/{bot}: paper {pw:.0f} -> {pq:.0f} s, ours {r['without_s']:.0f} -> " \
            f"{r['with_s']:.0f} s"
        if bot == "RANDOM" and len(d.arr):
            text += (
                f" (our mean last arrival is {d.arr['last_arrival_s'].mean():.0f} s: with SpeQuloS both "
                "the paper and we end near the arrival span, but our seti stand-in leaves no multi-hour "
                "BOINC tail to cut, so our baseline is close to it too)"
            )
        elif (mw, bot, trace) in env.index:
            text += f" (baseline slowdown {env.loc[(mw, bot, trace), 'slowdown']:.2f}x: little tail to cut)"
        text += "; "
    return text.rstrip("; ") + ". Absolute times follow our stand-in traces."


def _tail_s(d: Derived, mw: str, bot: str, trace: str) -> float:
    b = d.base
    sel = (b["middleware"] == mw) & (b["bot"] == bot) & (b["trace"] == trace)
    return float((b.loc[sel, "completion_s"] - b.loc[sel, "ideal_s"]).mean())


def _diff_table7(d: Derived) -> str:
    qr = d.q[(d.q["strategy"] == "9C-C-R") & d.q["predict_p"].notna()]
    ratio = (qr["completion_s"] / qr["predict_p"]).groupby([qr["trace"], qr["bot"] != "RANDOM"])
    cv = (ratio.std() / ratio.mean()).unstack()
    by = d.pr.groupby(["bot", "middleware"])["ok"].mean().unstack() * 100
    per_trace = d.pr[d.pr["bot"] != "RANDOM"].groupby("trace")["ok"].mean() * 100
    text = (
        "- **Table 7 (prediction).** Success per BoT x middleware: "
        + "; ".join(f"{b}: " + ", ".join(f"{m} {by.loc[b, m]:.0f} %" for m in by.columns) for b in by.index)
        + ". SMALL and BIG per trace: "
        + ", ".join(f"{t} {v:.0f} %" for t, v in per_trace.items())
        + ". A ±20 % band needs T / p (actual over naive prediction) to vary by less than about ±20 % "
        "within a cell; its coefficient of variation per trace (SMALL+BIG / RANDOM) is "
        + ", ".join(f"{t} {r.get(True, math.nan):.2f} / {r.get(False, math.nan):.2f}"
                    for t, r in cv.iterrows())
        + ". On our g5k stand-ins the best-effort nodes come and go with the batch load within one BoT, "
        "so the speed at 50 % says little about the rest."
    )
    if len(d.arr):
        la = d.arr["last_arrival_s"]
        text += (
            f" A RANDOM BoT ends after its last arrival, whose coefficient of variation over our seeds is "
            f"{la.std() / la.mean():.2f} ({la.min():.0f}-{la.max():.0f} s), while at 50 % only the first "
            f"few minutes are seen (arrival of the 90 % task: {d.arr['arrival_90pct_s'].median():.0f} s): "
            "no α fits that within ±20 %."
        )
    return text
