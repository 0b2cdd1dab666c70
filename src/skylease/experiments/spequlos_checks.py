"""The checks of ``skylease reproduce spequlos``: each claim of the paper, as the decisions D1-D7 of
``docs/decisions/spequlos.md`` amend them, that the reproduction gates, and the values it
reports beside the paper's without gating them. Pure functions of the tables of
:mod:`~skylease.experiments.spequlos_tables`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from skylease.experiments.spequlos_numbers import PAPER_CREDITS_ORDER, PAPER_FIG2, PAPER_FIG8, PAPER_TABLE7
from skylease.experiments.spequlos_tables import (
    GENERATED_TRACES,
    PREDICTION_TRACES,
    TRACE_TOLERANCE,
    TRACE_VALUES,
    one_wave_table,
    strategy_table,
)

PREDICTION_GATE = 85.0


# -- checks ---------------------------------------------------------------------------------------
def _claim(claim: str, paper: Any, ours: Any, holds: bool, gated: bool = True) -> dict[str, Any]:
    """One check. ``gated``: a claim of the paper as decisions D1-D7 amend it, which the reproduction
    must pass; otherwise a value reported beside the paper's (``holds`` then says how it compares)."""
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
    """Fig. 2 and Table 1, as decisions D2 and D4 gate them.

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
            out.append(_claim(f"Fig. 2 {mw}, SMALL + BIG (D2): median tail slowdown <= 1.33", f"<= {med}",
                              f"{r['median']:.2f}", r["median"] <= med))
            out.append(_claim(f"Fig. 2 {mw}, SMALL + BIG (D2): P(slowdown >= 2) at most the paper's",
                              f"<= {p2}", f"{r['P(>=2)']:.2f}", r["P(>=2)"] <= p2))
            out.append(_claim(f"Fig. 2 {mw}, SMALL + BIG: 95th percentile (reported, D2)", p95,
                              f"{r['p95']:.1f}", p95 / 1.5 <= r["p95"] <= p95 * 1.5, gated=False))
        if "all" in rows.index:
            r = rows.loc["all"]
            out.append(_claim(f"Fig. 2 {mw}, every BoT pooled: median / P(>= 2) / p95 (reported)",
                              f"<= {med} / {p2} / {p95:g}",
                              f"{r['median']:.2f} / {r['P(>=2)']:.2f} / {r['p95']:.1f}",
                              r["median"] <= med and abs(r["P(>=2)"] - p2) <= 0.10, gated=False))
            out.append(_claim(f"{mw}: tail-task share within Table 1's range (S26: 3-6.4 %)", "2.94-6.40 %",
                              f"{r['tail tasks %']:.2f} %", 2.94 <= r["tail tasks %"] <= 6.40))
        if "RANDOM" in rows.index:
            r = rows.loc["RANDOM"]
            out.append(_claim(f"Fig. 2 {mw}, RANDOM on its own row: median / P(>= 2) / p95 (reported, D2)",
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
    """D4: XWHEP/seti/BIG (one wave of about 170 s against a 900 s timeout) sets XWHEP's p95."""
    x = base[(base["middleware"] == "xwhep") & base["bot"].isin(["SMALL", "BIG"])]
    cell = (x["trace"] == "seti") & (x["bot"] == "BIG")
    if not cell.any() or cell.all():
        return []
    s = x["tail_slowdown"].to_numpy(float)
    rest = x.loc[~cell, "tail_slowdown"].to_numpy(float)
    p_all, p_rest = float(np.quantile(s, 0.95)), float(np.quantile(rest, 0.95))
    med = float(x.loc[cell, "tail_slowdown"].median())
    return [_claim("XWHEP/seti/BIG sets XWHEP's 95th percentile (reported, D4: 900 s timeout kept)",
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
    # D3: "9A-x-D best" is evaluated on SMALL + BIG (RANDOM's tail is its own arrivals).
    sb = strategy_table(q[q["bot"].isin(["SMALL", "BIG"])]).set_index("strategy") if len(q) else s
    sb = sb if len(sb) else s
    best = sb["tre_mean"].max()
    bd = sb.loc[[x for x in ("9A-G-D", "9A-C-D") if x in sb.index]]
    if len(bd):
        top = sb["tre_mean"].idxmax()
        out.append(
            _claim(
                "Fig. 6c, SMALL + BIG (D3): 9A-G-D / 9A-C-D are the best "
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


def trace_checks(t23: pd.DataFrame) -> list[dict[str, Any]]:
    """Decision S26 on the traces (:data:`TRACE_TOLERANCE`): gated on the generated traces' Table 2 mean
    and Table 3 quartiles and on the spot ladders' mean; reported otherwise."""
    out: list[dict[str, Any]] = []
    for name, g in t23.groupby("trace", sort=False):
        g = g.set_index("statistic")
        d = g.loc[list(TRACE_VALUES), "difference"]
        gen = name in GENERATED_TRACES
        ok = bool((d.abs() <= TRACE_TOLERANCE).all())
        out.append(_claim(
            f"S26 {name}: Table 2 mean nodes and Table 3 quartiles within ±15 %"
            + ("" if gen else " (reported: a stand-in, S18-S19)"),
            f"{g.loc['mean', 'paper']:,.4g} nodes",
            f"{g.loc['mean', 'ours']:,.4g} nodes ({d['mean']:+.1%}); quartiles within ±15 %: "
            f"{int((d.iloc[1:].abs() <= TRACE_TOLERANCE).sum())} of 6 (worst {d.iloc[1:].abs().max():.0%})",
            ok, gated=gen))
        if name.startswith("spot"):
            mean, most = g.loc["mean"], g.loc["max"]
            out.append(_claim(f"S26 {name}: Table 2 mean nodes within ±15 % (S18: price level calibrated)",
                              f"{mean['paper']:,.4g}",
                              f"{mean['ours']:,.4g} ({d['mean']:+.1%}; max {most['ours']:.0f}, "
                              f"paper {most['paper']:.0f})",
                              abs(d["mean"]) <= TRACE_TOLERANCE))
    return out


def idle_claims(t: pd.DataFrame) -> list[dict[str, Any]]:
    """The Fig. 7 orderings under the S4 variant (reported: the campaign's default stops every idle CW)."""
    if t.empty:
        return []
    g = t[t["idle_stop"] == "greedy"]
    how = g[g["axis"] == "how"].set_index("value")["credits_pct"]
    cg = g[g["axis"] == "C <= G"]["credits_pct"]
    under = how.get("D", math.nan) < how.get("F", math.nan) < how.get("R", math.nan)
    return [_claim("Fig. 7 under S4's other reading (idle CWs stop under Greedy only): D < F < R and C ≤ G "
                   "(reported)", "D < F < R; C ≤ G",
                   ", ".join(f"{h} {how.get(h, math.nan):.1f} %" for h in ("D", "F", "R"))
                   + f"; C ≤ G in {int(cg.iloc[0]) if len(cg) else 0} of 9",
                   bool(under and len(cg) and cg.iloc[0] == 9), gated=False)]


def _d3_claim(q: pd.DataFrame) -> list[dict[str, Any]]:
    t = one_wave_table(q)
    g = t[t["strategy"] == "9A-G-D"] if len(t) else t
    if g.empty:
        return []
    where = ", ".join(sorted({f"{r['trace']} {r['bot']}" for r in g.to_dict("records")}))
    return [_claim(f"9A with Greedy on one-wave bags ({where}): TRE ≈ 0, its order spent at once "
                   "(reported, D3: the rules imply it)", "TRE ≈ 0",
                   "; ".join(f"{r['middleware']}/{r['trace']}: TRE {r['tre_mean']:.2f}, "
                             f"{r['credits_pct']:.0f} % of the order" for r in g.to_dict("records")),
                   bool((g["tre_mean"] <= 0.2).all()), gated=False)]


def performance_checks(f8: pd.DataFrame, stab: pd.DataFrame) -> list[dict[str, Any]]:
    out = completion_claims(f8)
    for (mw, trace, bot), (pw, pq) in PAPER_FIG8.items():
        r = f8[(f8["middleware"] == mw) & (f8["trace"] == trace) & (f8["bot"] == bot)]
        if r.empty:
            continue
        r = r.iloc[0]
        if pw / pq > 2:
            # The paper's baseline (28818 s) waited for BOINC's one-day deadline on its SETI trace; our
            # stand-in has no such outages, so the large reduction is reported and the absolute time
            # with SpeQuloS is gated (the issue's ±15 %; D1 chose the arrivals that fit it).
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
    """Table 7, as decision D5 gates it. Gated: success >= 85 % pooled over the runs of seti,
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
            "Table 7 on seti, nd, spot10, spot100 (D5): predictions within ±20 %, >= 85 %",
            "94.1 / 99.4 / 100 / 78.3 %",
            f"{ok:.1f} % ({', '.join(f'{t} {per[t]:.0f} %' for t in PREDICTION_TRACES if t in per.index)})",
            ok >= PREDICTION_GATE))
    for t in sorted(set(pr["trace"]) - set(PREDICTION_TRACES)):
        v = float(pr.loc[pr["trace"] == t, "ok"].mean() * 100)
        paper = PAPER_TABLE7.get(t, (math.nan,) * 7)[-1]
        out.append(_claim(f"Table 7, {t}: data not available (D5: the paper's Grid'5000 traces are not "
                          "published; our stand-in's measured success)",
                          f"{paper} % on the paper's trace", f"{v:.1f} %", v >= PREDICTION_GATE, gated=False))
    overall = float(pr["ok"].mean() * 100)
    out.append(_claim("Table 7: predictions within ±20 % over every trace (reported)", "90.2 %",
                      f"{overall:.1f} %", overall >= PREDICTION_GATE, gated=False))
    loo = float(pr["loo_ok"].mean() * 100)
    out.append(_claim("Table 7, leave-one-out α (S15 variant), every trace (reported)", "90.2 % (in-sample)",
                      f"{loo:.1f} %", loo >= PREDICTION_GATE, gated=False))
    by_bot = pr.groupby("bot")["ok"].mean() * 100
    sb = [by_bot.get(b, math.nan) for b in ("SMALL", "BIG")]
    out.append(_claim("Table 7: >= 95 % for SMALL and BIG (reported)", ">= 95 %",
                      f"SMALL {sb[0]:.1f} %, BIG {sb[1]:.1f} %", min(sb) >= 95, gated=False))
    out.append(_claim("Table 7: RANDOM is the hardest to predict (reported)", "RANDOM lowest",
                      ", ".join(f"{k} {v:.1f} %" for k, v in by_bot.items()), by_bot.idxmin() == "RANDOM",
                      gated=False))
    return out


def arrival_claims(eps: pd.DataFrame) -> list[dict[str, Any]]:
    """RANDOM's prediction success under each reading of its arrivals (reported, D1)."""
    if eps.empty:
        return []
    a = eps[eps["middleware"] == "all"]
    return [_claim("Table 7, RANDOM's prediction success under each reading of its arrivals "
                   "(reported, D1)", "76-100 % (RANDOM cells)",
                   "; ".join(f"{r['reading']}: {r['RANDOM prediction %']:.1f} %"
                             for r in a.to_dict("records")),
                   bool(a["RANDOM prediction %"].iloc[0] >= 76), gated=False)]


# -- D6 and D7 ----------------------------------------------------------------------------------
#: The readings of which idle cloud workers stop (decision S4), in the report's words: ``all`` is the
#: campaign's default (every idle worker stops at the next turn), ``greedy`` the paper's l.198 (only
#: Greedy's do).
IDLE_READINGS = {"all": "every idle CW stops at the next turn (the campaign)",
                 "greedy": "only Greedy's idle CWs stop (l.198)"}
#: D7: how much 9C-C-R may raise an environment's mean completion time and still count as "never
#: raises it". The paper's own anchor XWHEP/spot10/BIG moves by 0.12 % between its two bars; a
#: difference of that size is the noise of the rules (which node asks for work first), not an effect.
COMPLETION_NOISE = 0.001


def credits_by_how(q: pd.DataFrame, idle: pd.DataFrame | None = None) -> dict[str, dict[str, float]]:
    """Fig. 7's % of the order spent per deployment (HOW), under each reading of idle workers that ran:
    ``all`` from the campaign's QoS runs ``q``, ``greedy`` from the S4 variant's table (``idle``,
    :func:`~skylease.experiments.spequlos_tables.idle_variant`; empty in ``--quick``)."""
    out = {"all": {str(h): float(v) for h, v in (q.groupby("how")["credits_share"].mean() * 100).items()}}
    if idle is not None and len(idle):
        g = idle[(idle["idle_stop"] == "greedy") & (idle["axis"] == "how")]
        if len(g):
            out["greedy"] = {str(h): float(v) for h, v in zip(g["value"], g["credits_pct"], strict=True)}
    return out


def _order(c: dict[str, float]) -> str:
    """The deployments from the least to the most spent, as ``F < D < R``."""
    return " < ".join(h for h, _ in sorted(c.items(), key=lambda kv: kv[1]))


def credits_order_claims(by_reading: dict[str, dict[str, float]]) -> list[dict[str, Any]]:
    """Fig. 7 as decision D6 decides it, from :func:`credits_by_how`.

    Gated: Reschedule spends more than Duplication (``D < R``) under every reading that ran. D6 gates
    "R spends the most, and D < R" and *reports* Flat's place: with Flat out of the gate, R is the most
    of the deployments gated. R above Flat is not gated, and could not be: under the l.198 reading
    Flat's idle workers stay billed until the bag ends and Flat spends the most (D6's own figures:
    D 21.0 % < R 22.6 % < F 25.5 %). Reported: the order of the three beside the paper's D < F < R
    under each reading, Flat's place in words.
    """
    def fmt(c: dict[str, float]) -> str:
        return ", ".join(f"{h} {c.get(h, math.nan):.1f} %" for h in ("D", "F", "R"))

    rows = [(r, c) for r, c in by_reading.items() if {"D", "R"} <= set(c)]
    if not rows:
        return []
    held = all(c["D"] < c["R"] for _, c in rows)
    out = [_claim(
        "Fig. 7 (D6): Reschedule spends the most of the gated deployments, Duplication less "
        f"(D < R), under {'both readings' if len(rows) > 1 else 'the one reading run'} of idle CWs",
        "R most; D < R",
        "; ".join(f"{r}: {fmt(c)}" for r, c in rows) + ("" if len(rows) > 1 else
                                                         " (l.198's reading runs in the full campaign)"),
        held)]
    places = []
    for r, c in rows:
        if "F" not in c:
            continue
        if c["F"] < min(c["D"], c["R"]):
            place = "Flat spends the least"
        elif c["F"] > max(c["D"], c["R"]):
            place = "Flat spends the most"
        else:
            place = "Flat between D and R, as the paper's"
        places.append((r, f"{r}: {_order(c)} ({place})", min(c["D"], c["R"]) < c["F"] < max(c["D"], c["R"])))
    if places:
        out.append(_claim(f"Fig. 7 (D6): Flat's place beside the paper's {PAPER_CREDITS_ORDER}, under "
                          f"{'each reading' if len(places) > 1 else 'the reading run'} (reported)",
                          PAPER_CREDITS_ORDER, "; ".join(p for _, p, _ in places),
                          all(ok for _, _, ok in places), gated=False))
    return out


def completion_claims(f8: pd.DataFrame, noise: float = COMPLETION_NOISE) -> list[dict[str, Any]]:
    """Fig. 8's "9C-C-R never raises the mean completion time" as decision D7 decides it: gated on no
    environment's mean being higher with 9C-C-R by more than ``noise`` (0.1 %). ``f8``: the
    environments' means without and with 9C-C-R (:func:`~skylease.experiments.spequlos_tables.fig8_table`)."""
    if f8.empty:
        return []
    ratio = f8["with_s"] / f8["without_s"]
    lower = ratio < 1 - noise
    higher = ratio > 1 + noise
    up = ratio > 1
    worst = f8.loc[ratio.idxmax()]
    return [_claim(
        f"Fig. 8 (D7): 9C-C-R never raises the mean completion time by more than {noise:.1%}",
        "never higher",
        f"lower by {noise:.1%} or more in {int(lower.sum())}, within {noise:.1%} in "
        f"{int((~lower & ~higher).sum())}, higher by more in {int(higher.sum())} of {len(f8)} environments"
        + (f"; the most raised: {worst['middleware']}/{worst['trace']}/{worst['bot']} "
           f"{worst['without_s']:,.0f} -> {worst['with_s']:,.0f} s ({ratio.max() - 1:+.2%})"
           if up.any() else ""),
        not bool(higher.any()))]


def cannot_act_claims(ca: pd.DataFrame, environments: int) -> list[dict[str, Any]]:
    """D7's list (reported): the environments where 9C-C-R does not lower the mean completion by
    0.1 % or more, each with its causes (:func:`~skylease.experiments.spequlos_tables.cannot_act`).
    ``holds`` when a cause of :data:`~skylease.experiments.spequlos_tables.CANNOT_ACT` explains every
    run of every listed environment."""
    if environments == 0:
        return []
    listed = "; ".join(f"{r['middleware']}/{r['trace']}/{r['bot']} ({r['change_pct']:+.2f} %): {r['cause']}"
                       for r in ca.to_dict("records"))
    return [_claim("Fig. 8 (D7): the environments where cloud workers cannot act (reported)",
                   "XWHEP/spot10/BIG 2,524 -> 2,521 s (-0.12 %)",
                   f"{len(ca)} of {environments}" + (f": {listed}" if len(ca) else ""),
                   not bool(ca["acted"].sum()) if len(ca) else True, gated=False)]
