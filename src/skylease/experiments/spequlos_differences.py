"""The report's section "Where we differ, and why": for each group of checks that fails, the numbers
that explain it."""

from __future__ import annotations

import math

import pandas as pd

from skylease.experiments.spequlos import MIDDLEWARES
from skylease.experiments.spequlos_numbers import PAPER_FIG8
from skylease.experiments.spequlos_tables import Derived
from skylease.sim.dg.workload import BOT_CATEGORIES


def _failed(claims: pd.DataFrame, prefix: str) -> pd.DataFrame:
    return claims[~claims["holds"].astype(bool) & claims["claim"].str.startswith(prefix)]


def differences(d: Derived, claims: pd.DataFrame) -> list[str]:
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
            "at the next tick for every strategy (S4, the [RC] rule); under Flat a CW only gets what the "
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
    """The S4 variant's Fig. 7 numbers, for 'Where we differ'."""
    if d.idle.empty:
        return "that variant runs only in the full reproduction (not --quick)."
    v = d.idle[d.idle["idle_stop"] == "greedy"]
    g = v[v["axis"] == "how"].set_index("value")["credits_pct"]
    cg = v[v["axis"] == "C <= G"]["credits_pct"]
    return ("run that way on the same seeds, the HOWs spend "
            + ", ".join(f"{h} {g.get(h, math.nan):.1f} %" for h in ("D", "F", "R"))
            + f", and Conservative stays at or below Greedy in {int(cg.iloc[0]) if len(cg) else 0} of 9 "
            "pairs: Conservative's idle CWs stay billed until the bag ends, so neither reading gives "
            "the paper's D < F < R together with C ≤ G (see the S4 table above).")


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
    f8, qr = d.f8, d.q[d.q["strategy"] == "9C-C-R"]
    env = qr.groupby(["middleware", "bot", "trace"]).agg(slowdown=("base_tail_slowdown", "mean"))
    text = "- **Fig. 8 (9C-C-R).** "
    if len(d.ca):
        text += (f"9C-C-R does not lower {len(d.ca)} of {len(f8)} environments by 0.1 % or more; the section "
                 "'Where cloud workers cannot act' above gives the cause of each run. ")
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
