"""The A2HA reproduction's claim checks: each a row of claim / paper / ours / holds.

The paper's side comes from :mod:`skylease.experiments.a2ha_numbers` (the published values); the
readings behind each check are the decisions of ``docs/decisions/a2ha.md`` (ACCEPT lists them).
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from skylease.experiments.a2ha_numbers import (
    GRID_WORKLOADS,
    PAPER_FIG4B,
    PAPER_FIG6B,
    PAPER_FIG12,
    PAPER_OPTIMUM,
    PAPER_OVER_OPTIMUM,
    PAPER_TABLE1,
    PAPER_TABLE2,
    PRESETS,
    REASONABLE_CR0,
    heuristic_row,
)

_OVER = PAPER_OVER_OPTIMUM["outsystems"]  # the upper end of "between 20% and 35%" (decision A20)
_F12, _F4, _F6 = PAPER_FIG12, PAPER_FIG4B, PAPER_FIG6B


def pm(mean: float, sd: float, digits: int = 1) -> str:
    return f"{mean:,.{digits}f} ± {sd:,.{digits}f}"


def _pair(row: str, col: int) -> str:
    """A Table 2 cell as printed: mean ± sd."""
    cell = PAPER_TABLE2[row][col]
    assert cell is not None
    return f"{cell[0]} ± {cell[1]}"


def grid_checks(grid: pd.DataFrame) -> list[dict[str, Any]]:
    out = []
    for wl in GRID_WORKLOADS:
        g = grid[grid["workload"] == wl]
        ok = g[g["cr0"].isin(REASONABLE_CR0)]
        lo, hi = ok["hosts_vs_opt_pct"].min(), ok["hosts_vs_opt_pct"].max()
        out.append({"claim": f"{wl}: mean hosts within +0..{_OVER} % of the optimum {PAPER_OPTIMUM[wl]} "
                             f"(cr0 in {{0.25, 0.5, 0.75}}, all ir)",
                    "paper": f"+{PAPER_OVER_OPTIMUM['image']} % (image) .. +{_OVER} % (OutSystems)",
                    "ours": f"{lo:+.0f} % .. {hi:+.0f} %",
                    "holds": bool(lo >= -1e-9 and hi <= _OVER)})
        if wl != "outsystems":
            for col, what, unit in (("hosts_sd", "host count", ""), ("wall_min_sd", "job time", " min")):
                sd = g.groupby("cr0")[col].mean()  # mean over ir
                out.append({"claim": f"{wl}: sd of the {what} grows as cr0 -> 1 (mean over ir; "
                                     "checked: cr0 = 1 above cr0 = 0.5)",
                            "paper": "visibly higher at cr0 = 1",
                            "ours": " -> ".join(f"{sd[c]:.1f}" for c in sd.index) + f"{unit} (cr0 "
                                    + ", ".join(f"{c:g}" for c in sd.index) + ")",
                            "holds": bool(sd[1.0] > sd[0.5])})
            z = g[g["cr0"] == 0.0].sort_values("ir")
            first, last = z.iloc[0], z.iloc[-1]
            out.append({"claim": f"{wl}: at cr0 = 0, higher ir gives more hosts, shorter jobs, higher host "
                                 f"sd (ir {first['ir']:g} -> {last['ir']:g})",
                        "paper": "yes",
                        "ours": f"hosts {first['hosts_mean']:.1f} -> {last['hosts_mean']:.1f}, time "
                                f"{first['wall_min_mean']:.0f} -> {last['wall_min_mean']:.0f} min, sd "
                                f"{first['hosts_sd']:.1f} -> {last['hosts_sd']:.1f}",
                        "holds": bool(last["hosts_mean"] > first["hosts_mean"]
                                      and last["wall_min_mean"] < first["wall_min_mean"]
                                      and last["hosts_sd"] > first["hosts_sd"])})
        else:
            spread = g["hosts_mean"].max() - g["hosts_mean"].min()
            sd = g["hosts_sd"].mean()
            out.append({"claim": "outsystems: no distinct difference between parameter combinations "
                                 "(spread of the cell means below the per-cell sd)",
                        "paper": "no distinct difference",
                        "ours": f"means {g['hosts_mean'].min():.1f}..{g['hosts_mean'].max():.1f} hosts "
                                f"(spread {spread:.1f}); mean sd {sd:.1f}",
                        "holds": bool(spread < sd)})
    return out


def fig12_checks(f: pd.DataFrame) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    summ = (f.groupby(["workload", "preset"])
            .agg(hosts_mean=("hosts", "mean"), hosts_sd=("hosts", "std"), hosts_min=("hosts", "min"),
                 hosts_max=("hosts", "max"), speedup_mean=("speedup", "mean"), speedup_sd=("speedup", "std"),
                 efficiency_mean=("efficiency", "mean"), efficiency_min=("efficiency", "min"))
            .reset_index())
    summ["gap_pct"] = 100 * (summ["hosts_mean"] - summ["speedup_mean"]) / summ["hosts_mean"]
    checks = []
    syn = f[f["workload"] == "synthetic"]
    k, (lo, hi) = _F12["hosts"], _F12["speedup"]
    eff = _F12["min_efficiency_pct"]
    at13 = syn[syn["hosts"] == k]
    per = {p: at13[at13["preset"] == p]["speedup"] for p in PRESETS}
    txt = "; ".join(f"{p} {s.mean():.2f} ({len(s)} runs)" if len(s) else f"{p}: no run with {k} hosts"
                    for p, s in per.items())
    m = at13["speedup"].mean() if len(at13) else math.nan
    checks.append({"claim": f"synthetic: runs with {k} hosts reach a speedup of {lo}-{hi} (both presets)",
                   "paper": f"{lo}-{hi}", "ours": txt, "holds": bool(lo <= m <= hi)})
    eff_min = f["efficiency"].min()
    low = f[f["efficiency"] <= eff / 100]
    where = f"; all at {low['hosts'].min():.0f}+ hosts" if len(low) else ""
    checks.append({"claim": f"efficiency (speedup / hosts) > {eff} % in every run of both presets",
                   "paper": f"always > {eff} %",
                   "ours": f"min {100 * eff_min:.0f} %; {len(low)} of {len(f)} runs at or below "
                           f"{eff} %{where}",
                   "holds": bool(eff_min > eff / 100)})
    e13 = (at13["speedup"] / k).mean() if len(at13) else math.nan
    e_paper, e_max = _F12["efficiency_pct"], _F12["max_efficiency_pct"]
    # ±10 points around the paper's "about 70 %"; the best possible is 55/60 (H over the unit)
    checks.append({"claim": f"efficiency about {e_paper} % at {k} hosts ({lo}/{k}); at most 55/60 = 92 %",
                   "paper": f"~{e_paper} %, max ~{e_max} %",
                   "ours": f"{100 * e13:.0f} % at {k} hosts; best run {100 * f['efficiency'].max():.0f} %",
                   "holds": bool((e_paper - 10) / 100 <= e13 <= (e_paper + 10) / 100
                                 and f["efficiency"].max() <= 55 / 60 + 1e-9)})
    for wl in ("image", "synthetic"):
        s = summ[summ["workload"] == wl].set_index("preset")
        c, a = s.loc["conservative"], s.loc["aggressive"]
        opt = PAPER_OPTIMUM[wl]
        checks.append({
            "claim": f"{wl}: aggressive creates more hosts (up to ~2x the optimum {opt}); conservative's "
                     "host counts lie in a narrower interval",
            "paper": "yes",
            "ours": f"mean {c['hosts_mean']:.1f} vs {a['hosts_mean']:.1f}; max {c['hosts_max']:.0f} vs "
                    f"{a['hosts_max']:.0f} ({a['hosts_max'] / opt:.2f}x opt); sd {c['hosts_sd']:.1f} vs "
                    f"{a['hosts_sd']:.1f}",
            "holds": bool(a["hosts_mean"] > c["hosts_mean"] and c["hosts_sd"] < a["hosts_sd"])})
        checks.append({"claim": f"{wl}: the minimum host count is the same for both presets",
                       "paper": "same", "ours": f"{c['hosts_min']:.0f} vs {a['hosts_min']:.0f}",
                       "holds": bool(c["hosts_min"] == a["hosts_min"])})
        w = f[f["workload"] == wl]
        g = w.groupby(["hosts", "preset"])["speedup"].agg(["mean", "count"]).unstack("preset")
        both = g[(g[("count", "conservative")] >= 3) & (g[("count", "aggressive")] >= 3)]
        diff = (both[("mean", "aggressive")] - both[("mean", "conservative")])
        checks.append({"claim": f"{wl}: for the same host count, aggressive reaches a better speedup",
                       "paper": "yes",
                       "ours": (f"aggressive - conservative {diff.mean():+.2f} on average over "
                                f"{len(diff)} shared host counts") if len(diff) else "no shared host count",
                       "holds": bool(len(diff) and diff.mean() > 0)})
    return summ, checks


def table2_checks(t2: pd.DataFrame) -> list[dict[str, Any]]:
    t = t2.set_index("row")
    se = 3 / math.sqrt(float(t.loc["serial", "runs"]))  # three standard errors of a mean, per unit sd
    h = [t.loc[heuristic_row(k)] for k in (100, 50, 1)]
    rows = [heuristic_row(k) for k in (100, 50, 1)]
    p_pay = [PAPER_TABLE2[r][3][0] for r in rows]  # type: ignore[index]
    p_sp = [PAPER_TABLE2[r][2][0] for r in rows]  # type: ignore[index]
    p_serial, p_opt = PAPER_TABLE2["serial"], PAPER_TABLE2["optimal"]
    p_task = PAPER_TABLE2["one host per task"]
    assert p_serial[3] and p_opt[1] and p_opt[2] and p_task[3]
    serial, per_task = t.loc["serial", "payment_h_ours"], t.loc["one host per task", "payment_h_ours"]
    pays = [x["payment_h_ours"] for x in h]
    sps = [x["speedup_ours"] for x in h]
    opt = t.loc["optimal"]
    return [
        {"claim": f"Table 2 analytic rows: serial {_pair('serial', 3)} h; optimal "
                  f"{_pair('optimal', 2)} speedup, wall {_pair('optimal', 1)} h; one host per task "
                  f"{_pair('one host per task', 3)} h",
         "paper": f"{p_serial[3][0]} / {p_opt[2][0]} / {p_opt[1][0]} / {p_task[3][0]}",
         "ours": f"{serial:.0f} ± {t.loc['serial', 'payment_h_sd']:.1f} / {opt['speedup_ours']:.0f} ± "
                 f"{opt['speedup_sd']:.1f} / {opt['wall_h_ours']:.2f} ± {opt['wall_h_sd']:.2f} / "
                 f"{per_task:.0f} ± {t.loc['one host per task', 'payment_h_sd']:.1f}",
         # within rounding plus three standard errors of the mean over our draws; the serial sd is
         # sqrt(256) * 20 min = 5.3 h (decision A11), the others are the paper's
         "holds": bool(abs(serial - p_serial[3][0]) < 0.5 + 5.3 * se
                       and abs(opt["speedup_ours"] - p_opt[2][0]) < 0.5 + p_opt[2][1] * se
                       and abs(opt["wall_h_ours"] - p_opt[1][0]) < 0.005 + p_opt[1][1] * se
                       and abs(per_task - p_task[3][0]) < 0.5 + p_task[3][1] * se)},
        {"claim": "Table 2: heuristic payment between serial (optimal) and one host per task",
         "paper": f"{min(p_pay):.0f}-{max(p_pay):.0f} h",
         "ours": " / ".join(f"{p:.0f}" for p in pays) + " h (100 / 50 / 1 initial)",
         "holds": bool(all(serial < p < per_task for p in pays))},
        {"claim": "Table 2: speedup falls as initial hosts fall (100 > 50 > 1)",
         "paper": " > ".join(f"{s:.0f}" for s in p_sp), "ours": " > ".join(f"{s:.0f}" for s in sps),
         "holds": bool(sps[0] > sps[1] > sps[2])},
        {"claim": "Table 2: payment falls as initial hosts fall (100 > 50 > 1)",
         "paper": " > ".join(f"{p:.0f}" for p in p_pay), "ours": " > ".join(f"{p:.0f}" for p in pays),
         "holds": bool(pays[0] > pays[1] > pays[2])},
    ]


def headline_claims(grid: pd.DataFrame, t1: pd.DataFrame, t2: pd.DataFrame, tinfo: dict[str, Any],
                    optima: dict[str, int], f12_checks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    g = grid.set_index(["workload", "cr0", "ir"])
    t1i = t1.set_index("workload")
    t2i = t2.set_index("row")
    rows: list[dict[str, Any]] = [
        {"claim": "optimal hosts ceil(N·mean/55 min): image / synthetic / outsystems",
         "paper": " / ".join(str(PAPER_OPTIMUM[w]) for w in GRID_WORKLOADS),
         "ours": " / ".join(str(optima[w]) for w in GRID_WORKLOADS),
         "holds": [optima[w] for w in GRID_WORKLOADS] == [PAPER_OPTIMUM[w] for w in GRID_WORKLOADS]},
    ]
    for wl in GRID_WORKLOADS:
        c = g.loc[(wl, 0.5, 0.5)]
        rows.append({"claim": f"{wl}: hosts created, conservative (optimum {PAPER_OPTIMUM[wl]})",
                     "paper": {"image": f"~+{PAPER_OVER_OPTIMUM['image']} %",
                               "synthetic": f"{_F12['hosts']} (Fig. 12)", "outsystems": f"~+{_OVER} %"}[wl],
                     "ours": f"{pm(c['hosts_mean'], c['hosts_sd'])} ({c['hosts_vs_opt_pct']:+.0f} %)",
                     "holds": bool(0 <= c["hosts_vs_opt_pct"] <= _OVER)})
    rows.append(f12_checks[0])
    for wl in PAPER_TABLE1:
        r = t1i.loc[wl]
        rows.append({"claim": f"Table 1 {wl}: charged h / interrupted / wasted min / continued",
                     "paper": " / ".join(str(v) for v in PAPER_TABLE1[wl]),
                     "ours": f"{r['charged_h_ours']:.1f} / {r['interrupted_ours']:.1f} / "
                             f"{r['wasted_min_ours']:.1f} / {r['continued_ours']:.1f}",
                     "holds": bool(r["interrupted_ours"] < 10 and r["continued_ours"] < 10
                                   and abs(r["charged_h_diff"]) <= 0.25 * r["charged_h_paper"])})
    for init in (100, 50, 1):
        label = heuristic_row(init)
        r = t2i.loc[label]
        rows.append({"claim": f"Table 2 {label}: wall h / speedup / payment h",
                     "paper": f"{r['wall_h_paper']:.2f} / {r['speedup_paper']:.0f} / "
                              f"{r['payment_h_paper']:.0f}",
                     "ours": f"{r['wall_h_ours']:.2f} / {r['speedup_ours']:.0f} / {r['payment_h_ours']:.0f}",
                     "holds": bool(abs(r["wall_h_diff_pct"]) <= 10 and abs(r["payment_h_diff_pct"]) <= 5)})
    rows.append({"claim": f"Figs. 4a/4b: predicted hosts round(N·T̄/H) first {_F4['first']}, final "
                          f"{_F4['final']}, within ±1 of {_F4['final']} after ~{_F4['stable_after']} tasks "
                          "(T̄ over the first k tasks of the random order)",
                 "paper": f"{_F4['first']} / {_F4['final']} / ~{_F4['stable_after']}",
                 "ours": f"{tinfo['open_loop_first']} / {tinfo['open_loop_last']} / {tinfo['stable_sub']} "
                         f"(ordering {tinfo['seed']}); median {tinfo['stable_sub_median']:.0f} over "
                         f"{tinfo['orderings']} orderings",
                 "holds": bool(tinfo["open_loop_first"] == _F4["first"]
                               and tinfo["open_loop_last"] == _F4["final"]
                               and tinfo["stable_sub_median"] <= 50)})
    rows.append({"claim": f"Fig. 6b: first prediction {_F6['first']} -> {_F6['created']} hosts created "
                          f"(cr0 = {_F6['cr0']})",
                 "paper": f"{_F6['first']} -> {_F6['created']}",
                 "ours": f"{tinfo['first_total']} -> {tinfo['first_created_damped']}",
                 "holds": bool(tinfo["first_total"] == _F6["first"]
                               and tinfo["first_created_damped"] == _F6["created"])})
    rows.append({"claim": f"Fig. 6b: creationRatio about 1 after about {_F6['tasks']} completed tasks",
                 "paper": "~1", "ours": f"{tinfo['cr_after_10']:.3f} (closed form with an update per "
                                        f"completion: {tinfo['cr_closed_form_10']:.4f})",
                 "holds": bool(tinfo["cr_after_10"] >= 0.95)})
    return rows

