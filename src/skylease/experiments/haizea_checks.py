"""Checks of ``skylease reproduce haizea``: Table 1 and Figure 2 beside the paper's, and the claims.

Each claim is one row of ``claims.csv``: what the paper says (its number, from
:mod:`skylease.experiments.haizea_numbers`), ours, and whether ours holds within the tolerances of
decision H20 in docs/decisions/haizea.md (the orderings are those the paper's Table 1 itself
supports; its errata, decision H21, are checked against the figure).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import pandas as pd

from skylease.experiments.haizea import CONFIGS, parse_workload
from skylease.experiments.haizea_numbers import (
    FIG2_TOLERANCE,
    METRICS,
    PAPER,
    PAPER_FIG2,
    PAPER_TABLE1,
    RESIM,
    TABLE1_RHOS,
    TABLE1_WORKLOADS,
    VALIDATED,
    tolerance,
)

__all__ = ["baseline_claims", "fig2_claims", "fig2_table", "ordering_claims", "table1", "table1_claims"]


# -- derived tables ------------------------------------------------------------------------------------
def _with_workload(runs: pd.DataFrame) -> pd.DataFrame:
    parts = runs["workload"].map(parse_workload)
    r = runs.assign(rho=[p[0] for p in parts], delta=[p[1] for p in parts], size=[p[2] for p in parts])
    r["wait_ks"] = r["mean_wait_s"] / 1000
    r["x"] = 1 + r["rel_runtime_pct"] / 100
    r["image_seed"] = r["image_seed"].fillna(0).astype(int)
    return r


def table1(runs: pd.DataFrame) -> pd.DataFrame:
    """Table 1: one row per configuration x rho x metric: ours (first draw), the mean and range over
    image draws, the paper's value, the re-simulation of decision H20 (column ``spec_resim``, its
    name kept so that older ``table1.csv`` files compare), and whether ours is within tolerance."""
    r = runs[runs["workload"].isin(TABLE1_WORKLOADS)]
    rows = []
    for config in CONFIGS:
        for i, rho in enumerate(TABLE1_RHOS):
            g = r[(r["config"] == config) & (r["rho"] == rho)]
            if g.empty:
                continue
            for j, metric in enumerate(METRICS):
                vals = g.sort_values("image_seed")[metric].to_numpy(float)
                paper = PAPER_TABLE1[config][i][j]
                resim = RESIM.get(config, ((math.nan,) * 3,) * 3)[i][j]
                mean = float(vals.mean())
                diff = mean - paper if metric == "rel_runtime_pct" else mean / paper - 1
                tol = tolerance(metric, rho)
                rows.append({"config": config, "rho": rho, "metric": metric, "ours": float(vals[0]),
                             "ours_mean": mean, "ours_min": float(vals.min()), "ours_max": float(vals.max()),
                             "draws": len(vals), "paper": paper, "spec_resim": resim, "diff": diff,
                             "tolerance": tol, "within": abs(diff) <= tol, "validated": config in VALIDATED,
                             "ar_rejected": float(g["ar_rejected"].mean())})
    return pd.DataFrame(rows)


def fig2_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Figure 2: our relative running time (first image draw) beside the digitised paper's."""
    r = runs[runs["image_seed"] == 0][["size", "config", "rho", "delta", "x", "ar_rejected", "ar_dropped"]]
    m = r.merge(PAPER_FIG2, on=["size", "config", "rho", "delta"], how="left")
    m["diff"] = m["x"] - m["paper_x"]
    return m.sort_values(["size", "config", "rho", "delta"]).reset_index(drop=True)


# -- claims --------------------------------------------------------------------------------------------
def _claim(claim: str, paper: Any, ours: Any, holds: bool, why: str = "") -> dict[str, Any]:
    return {"claim": claim, "paper": paper, "ours": ours, "holds": bool(holds), "why": why}


def baseline_claims(base: dict[str, Any]) -> list[dict[str, Any]]:
    p_base = PAPER["baseline"]["all_best_effort_s"]
    p_clip = PAPER["clip"]["time_s"]
    tr = PAPER["trace"]
    return [
        _claim("NOVM-NOSR baseline, no ARs (all-best-effort, s)", f"{p_base:,}",
               f"{base['all_best_effort_s']:,}", base["all_best_effort_s"] == p_base),
        _claim("5 % clipping time (s)", f"{p_clip:,}", f"{base['clip_time']:,}", base["clip_time"] == p_clip),
        _claim("trace: jobs after the filter / after dropping cancelled",
               f"{tr['jobs']:,} / {tr['leases']:,}",
               f"{base['swf_jobs']:,} / {base['requests']:,}",
               base["swf_jobs"] == tr["jobs"] and base["requests"] == tr["leases"]),
        _claim("trace: share requesting <= 1 h / <= 4 nodes",
               f"{tr['short_share_pct']:.2f} % / {tr['small_share_pct']:.2f} %",
               f"{base['short_share'] * 100:.2f} % / {base['small_share'] * 100:.2f} %",
               round(base["short_share"] * 100, 2) == tr["short_share_pct"]
               and round(base["small_share"] * 100, 2) == tr["small_share_pct"]),
    ]


def table1_claims(t1: pd.DataFrame) -> list[dict[str, Any]]:
    out = []
    for config in CONFIGS:
        g = t1[t1["config"] == config]
        if g.empty:
            continue
        bad = g[~g["within"]]
        where = "; ".join(f"{r.metric.replace('_', ' ')} at {r.rho} %: {_fmt_diff(r)}"
                          for r in bad.itertuples())
        label = "validated by the re-simulation of H20" if config in VALIDATED else "not re-simulated (H20)"
        draws = int(g["draws"].max())
        mean = f" (mean of {draws} image draws)" if draws > 1 else ""
        out.append(_claim(f"Table 1 {config}{mean} within ±1.1 pp / ±10 % (±15 % at 30 %) [{label}]",
                          f"{len(g)} cells", f"{len(g) - len(bad)} of {len(g)} cells", bad.empty, where))
    return out


def _fmt_diff(r: Any) -> str:
    if r.metric == "rel_runtime_pct":
        return f"{r.ours_mean:+.2f} % vs {r.paper:+.2f} % ({r.diff:+.2f} pp)"
    return f"{r.ours_mean:.2f} vs {r.paper:.2f} ({r.diff:+.1%})"


def _cell(t1: pd.DataFrame, config: str, rho: int, metric: str) -> float:
    g = t1[(t1["config"] == config) & (t1["rho"] == rho) & (t1["metric"] == metric)]
    return float(g["ours_mean"].iloc[0]) if len(g) else math.nan


def ordering_claims(t1: pd.DataFrame) -> list[dict[str, Any]]:
    """The orderings the paper draws from Table 1 that its own Table 1 supports (decision H21)."""
    out = []
    rhos = [r for r in TABLE1_RHOS if r in set(t1["rho"])]
    have = set(t1["config"])
    if "NOVM-NOSR" in have and len(have) > 1:
        worst = [all(_cell(t1, "NOVM-NOSR", r, "rel_runtime_pct") >= _cell(t1, c, r, "rel_runtime_pct")
                     for c in have if c != "NOVM-NOSR") for r in rhos]
        out.append(_claim("Run time: NOVM-NOSR is the worst configuration in every Table 1 column",
                          "3 of 3 columns", f"{sum(worst)} of {len(worst)} columns", all(worst)))
    chain = [c for c in ("NOVM-SR", "VM-PREDEPLOY", "VM-REUSE-SKEWED", "VM-REUSE-UNIFORM", "VM-MULT")
             if c in have]
    if len(chain) > 1:
        ok, tot, fails = 0, 0, []
        for metric in ("wait_ks", "mean_bounded_slowdown"):
            for r in rhos:
                pairs = list(itertools.pairwise(chain))
                if metric == "mean_bounded_slowdown" and r == 30:  # the paper's own exception
                    pairs = [p for p in pairs if p != ("NOVM-SR", "VM-PREDEPLOY")]
                for a, b in pairs:
                    tot += 1
                    if _cell(t1, a, r, metric) < _cell(t1, b, r, metric):
                        ok += 1
                    else:
                        fails.append(f"{a} !< {b} ({metric.replace('_', ' ')}, {r} %)")
        out.append(_claim("Wait and slowdown: NOVM-SR < VM-PREDEPLOY < VM-REUSE-SKEWED < VM-REUSE-UNIFORM "
                          "< VM-MULT (except SR vs PREDEPLOY for the 30 % slowdown)",
                          f"{tot} of {tot} pairs", f"{ok} of {tot} pairs", ok == tot, "; ".join(fails)))
    if {"VM-MULT", "VM-REUSE-UNIFORM", "VM-REUSE-SKEWED"} <= have:
        ok, tot, fails = 0, 0, []
        for metric in METRICS:
            for r in rhos:
                for a, b in (("VM-REUSE-UNIFORM", "VM-MULT"), ("VM-REUSE-SKEWED", "VM-REUSE-UNIFORM")):
                    tot += 1
                    if _cell(t1, a, r, metric) < _cell(t1, b, r, metric):
                        ok += 1
                    else:
                        fails.append(f"{a} !< {b} ({metric.replace('_', ' ')}, {r} %)")
        out.append(_claim("Image reuse helps (REUSE-UNIFORM < MULT) and a skewed draw helps more "
                          "(REUSE-SKEWED < REUSE-UNIFORM), on all three metrics", f"{tot} of {tot}",
                          f"{ok} of {tot}", ok == tot, "; ".join(fails)))
    return out


def fig2_claims(f2: pd.DataFrame) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    f = f2.dropna(subset=["paper_x"])
    if f.empty:
        return out
    within = (f["diff"].abs() <= FIG2_TOLERANCE)
    out.append(_claim(f"Figure 2: points within ±{FIG2_TOLERANCE * 100:.1f} pp of the digitised paper",
                      "all", f"{int(within.sum())} of {len(f)} ({within.mean():.0%}); median abs. diff "
                      f"{f['diff'].abs().median() * 100:.2f} pp", bool(within.mean() >= 0.9),
                      "pass mark: 90 % of the points"))
    piv = f2.pivot_table(index=["size", "rho", "delta"], columns="config", values="x")
    sr = [c for c in ("NOVM-SR", "VM-PREDEPLOY", "VM-MULT", "VM-REUSE-UNIFORM", "VM-REUSE-SKEWED")
          if c in piv.columns]
    if "NOVM-NOSR" in piv.columns and sr:
        paper = PAPER_FIG2.pivot_table(index=["size", "rho", "delta"], columns="config", values="paper_x")
        p_beat = (paper[sr].max(axis=1) < paper["NOVM-NOSR"]).loc[piv.index]
        o_beat = piv[sr].max(axis=1) < piv["NOVM-NOSR"]
        out.append(_claim("Suspend/resume (any configuration) runs shorter than NOVM-NOSR (text: 'in every "
                          "case'; decision H21: near-ties at 5 %)", f"{int(p_beat.sum())} of {len(p_beat)}",
                          f"{int(o_beat.sum())} of {len(o_beat)}", bool(o_beat.sum() >= p_beat.sum() - 2),
                          "pass mark: at most 2 fewer workloads than the paper's figure"))
        worst1, p_worst1 = [], []
        for (size, rho), g in f2[f2["config"] == "NOVM-NOSR"].groupby(["size", "rho"]):
            if rho >= 15:
                worst1.append(g.set_index("delta")["x"].idxmax() == 1)
                pg = PAPER_FIG2[(PAPER_FIG2["config"] == "NOVM-NOSR") & (PAPER_FIG2["size"] == size)
                                & (PAPER_FIG2["rho"] == rho)]
                p_worst1.append(pg.set_index("delta")["paper_x"].idxmax() == 1)
        if worst1:
            out.append(_claim("NOVM-NOSR is worst with 1 h ARs (rho >= 15 %)",
                              f"{sum(p_worst1)} of {len(p_worst1)} (size x rho)",
                              f"{sum(worst1)} of {len(worst1)}", sum(worst1) >= len(worst1) - 1,
                              "pass mark: all but one"))
        nosr = f2[f2["config"] == "NOVM-NOSR"]
        if ((nosr["rho"] == 30) & (nosr["delta"] == 1)).any():
            top = nosr["x"].max()
            out.append(_claim("NOVM-NOSR's largest slowdown of run time (text 32.97 %; figure ≈ 43 %)",
                              "1.43", f"{top:.3f}", abs(top - 1.433) <= 0.05))
    bands = {"NOVM-SR": (0.98, 1.06), "VM-PREDEPLOY": (0.98, 1.11), "VM-MULT": (0.98, 1.15),
             "VM-REUSE-UNIFORM": (0.98, 1.15), "VM-REUSE-SKEWED": (0.98, 1.15)}
    for c, (lo, hi) in bands.items():
        if c in piv.columns:
            x = piv[c]
            out.append(_claim(f"{c} stays in {lo:.2f}-{hi:.2f}", f"{lo:.2f}-{hi:.2f}",
                              f"{x.min():.3f}-{x.max():.3f}",
                              bool(x.min() >= lo - 0.005 and x.max() <= hi + 0.005),
                              "±0.005 for digitisation"))
    order = [c for c in ("VM-MULT", "VM-REUSE-UNIFORM", "VM-REUSE-SKEWED", "VM-PREDEPLOY", "NOVM-SR")
             if c in piv.columns]
    high = f2[f2["rho"] >= 25]
    hi_rho = high.groupby("config")["x"].mean()
    n_high = len(high[["size", "delta", "rho"]].drop_duplicates())  # 24 in the full campaign
    if len(order) > 1 and all(c in hi_rho.index for c in order):
        vals = [hi_rho[c] for c in order]
        ok = all(a >= b - 0.005 for a, b in itertools.pairwise(vals))
        what = "workload" if n_high == 1 else "workloads"
        out.append(_claim(f"At high rho (25-30 %, mean of {n_high} {what}): MULT > REUSE-UNIFORM ≳ "
                          "REUSE-SKEWED > PREDEPLOY > NOVM-SR", " > ".join(order),
                          " ≥ ".join(f"{v:.3f}" for v in vals), ok, "'≳': within 0.005"))
    return out


