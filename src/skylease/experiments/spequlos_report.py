"""``skylease reproduce spequlos``: the SpeQuloS paper's evaluation beside the paper's numbers.

One campaign on :func:`~skylease.experiments.sweep.run_campaign`: every environment (middleware x
trace x BoT category) at every seed runs the baseline (no QoS) and the 18 strategies, paired on
the seed (:func:`~skylease.experiments.spequlos.environment_cell`). From those rows it derives
Table 1 and Fig. 2 (baseline tails), Figs. 6-7 (tail removal efficiency and credits of the 18
strategies), Figs. 8-9 (9C-C-R completion times and stability) and Table 7 (prediction success),
and writes ``report.md`` with the paper's values beside ours, CSVs and PNGs.
:func:`report_from_runs` rebuilds everything from a saved ``runs.csv`` without simulating. The
tables are :mod:`~skylease.experiments.spequlos_tables`, the checks
:mod:`~skylease.experiments.spequlos_checks`, the figures :mod:`~skylease.experiments.spequlos_figures`
and the text :mod:`~skylease.experiments.spequlos_text`. The full
campaign (6 traces, 10 seeds: 6840 runs, plus the variants, batch acceleration and the S4 reading:
about 14,000 runs) takes about 10 minutes on 2 worker processes; ``quick`` (nd and spot10, 2
seeds: 456 runs, no S4 variant) about 20-30 s.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from skylease.control.qos.strategy import STRATEGIES
from skylease.experiments.report import write_report
from skylease.experiments.spequlos import (
    DEFAULT_CLOUD_BUFFER,
    MIDDLEWARES,
    TRACES,
    check_readings,
    readings,
    run_once,
)
from skylease.experiments.spequlos_batch_accel import batch_accel_section, batch_accel_strategies
from skylease.experiments.spequlos_checks import (
    PREDICTION_GATE,
    arrival_claims,
    baseline_checks,
    cannot_act_claims,
    credits_by_how,
    credits_order_claims,
    gate,
    idle_claims,
    performance_checks,
    prediction_checks,
    strategy_checks,
    trace_checks,
)
from skylease.experiments.spequlos_figures import plot_fig2, plot_fig6, plot_fig7, plot_fig8, plot_fig9
from skylease.experiments.spequlos_tables import (
    PREDICTION_TRACES,
    Derived,
    arrivals_variant,
    cannot_act,
    fig8_table,
    idle_variant,
    one_wave_table,
    prediction_cells,
    prediction_table,
    random_arrivals,
    reading_name,
    slowdown_stats,
    stability,
    strategy_table,
    table1,
    trace_tables,
    with_tre,
)
from skylease.experiments.spequlos_text import DECISIONS, report_text
from skylease.experiments.store import atomic_write_text, out_folder
from skylease.experiments.sweep import check_cluster, run_campaign
from skylease.model.errors import UserError
from skylease.sim.dg.workload import ARRIVALS, BOT_CATEGORIES

__all__ = ["batch_accel_section", "batch_accel_strategies", "campaign_cell", "gate", "report_from_runs",
           "reproduce_spequlos", "with_tre"]

FULL_SEEDS = 10
QUICK_SEEDS = 2
QUICK_TRACES = ("nd", "spot10")
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
    ``random_arrivals``/``epsilon``: RANDOM's reading of its arrivals (default quantile, decision D1);
    ``buffer``: a BOINC cloud worker's buffer (D3); each row records them (``arrivals``,
    ``epsilon_s``, NaN when no cap, ``cloud_buffer``). ``baseline``: run ``none`` first (False
    when another campaign already ran it at the same seeds). ``idle``: which idle cloud workers stop
    at the next tick (decision S4: ``all``, or ``greedy`` only; the row's ``idle_stop``).
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
    (``nd`` and ``spot10`` with ``quick``); ``cloud_buffer``: a BOINC cloud worker's buffer (decision
    D3). Returns a summary with the ``claims`` rows (claim / paper / ours / holds / gated) for the
    CLI, the verdict of the gated ones (:func:`gate`) and the timings (``campaign_s``, ``seconds``).
    ``mode``/``workers``/``scheduler``/``progress`` go to :func:`run_campaign` (one cell = one
    environment at one seed, the baseline and the 18 strategies paired on it). RANDOM's baseline
    and 9C-C-R run again under the ``iid`` and ``epsilon`` readings of its arrivals (D1), and,
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
    # Decision S4: the paper stops idle CWs under Greedy only; "report both if results differ" (the full
    # run only: --quick is the smoke test, and this doubles the strategy runs).
    if not quick:
        camps.append(campaign({"environment": envs, "strategies": [list(STRATEGIES)], "baseline": [False],
                               "idle": ["greedy"]},
                              f"SpeQuloS, idle CWs stopped under Greedy only (S4): "
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
    and the runs of the S4 variant (idle CWs stopped under Greedy only). A ``runs.csv`` written
    before decision D1 (no ``arrivals`` column) read its RANDOM arrivals i.i.d., with the ``epsilon``
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
    last = dict(zip(arr["run_seed"], arr["last_arrival_s"], strict=True)) if len(arr) else None
    ca = cannot_act(q, f8, last)
    claims = (
        trace_checks(t23)
        + baseline_checks(sd, t1, base)
        + strategy_checks(st, q)
        + credits_order_claims(credits_by_how(q, idle_t))
        + performance_checks(f8, stab)
        + cannot_act_claims(ca, len(f8))
        + prediction_checks(t7, pr)
        + arrival_claims(eps)
        + idle_claims(idle_t)
    )
    claims_df = pd.DataFrame(claims)
    verdict = gate(claims_df)
    ba_table, ba_text = batch_accel_section(
        pd.concat([runs[runs["strategy"].isin(["none", "9C-C-R"])], ba_runs], ignore_index=True), out)
    buffers = sorted({int(b) for b in runs["cloud_buffer"]})
    meta = {
        "decisions_doc": "docs/decisions/spequlos.md (S1-S29, D1-D7)",
        "readings": readings(reading, eps0 if reading == "epsilon" and math.isfinite(eps0) else None,
                             buffers[0] if len(buffers) == 1 else DEFAULT_CLOUD_BUFFER),
        "cloud_buffers": buffers,
        "variant_readings": sorted({reading_name(a, float(e)) for a, e in
                                    zip(var_runs["arrivals"], var_runs["epsilon_s"], strict=True)}),
        "gating": {
            "fig2": "median <= 1.33 and P(slowdown >= 2) <= the paper's, on SMALL + BIG per middleware (D2); "
                    "RANDOM on its own row and the 95th percentile reported (D2); XWHEP/seti/BIG reported as "
                    "the cause of XWHEP's 95th percentile (D4)",
            "fig6c": "9A-G-D / 9A-C-D best, P(TRE = 1) and P(TRE > 0.5) on SMALL + BIG (D3); 9A with Greedy "
                     "on one-wave bags reported (D3)",
            "table7": f"success >= {PREDICTION_GATE:g} % pooled on {', '.join(PREDICTION_TRACES)} (D5); the "
                      "g5k stand-ins reported as data not available, with their measured success (D5)",
            "fig7": "R spends more than D under every reading of idle CWs that ran (D6); F's place beside "
                    "the paper's D < F < R reported under each",
            "fig8": "9C-C-R never raises an environment's mean completion by more than 0.1 % (D7), the "
                    "environments where CWs cannot act listed with their causes (D7); BOINC/seti/RANDOM with "
                    "9C-C-R within ±15 % of 3195 s, its baseline reported",
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
        ("fig8_cannot_act", ca),
        ("fig9_stability", stab),
        ("table7_prediction", t7),
        ("table7_prediction_loo", t7_loo),
        ("claims", claims_df),
    ):
        df.to_csv(out / f"{name}.csv", index=False)
    atomic_write_text(out / "metadata.json", json.dumps(meta, indent=2, default=_json_default) + "\n")
    figs = {
        "fig2": plot_fig2(base, out),
        "fig6": plot_fig6(q, out),
        "fig7": plot_fig7(st, out),
        "fig8": plot_fig8(f8, out),
        "fig9": plot_fig9(stab, out),
    }
    seconds = time.perf_counter() - t0
    data = Derived(base=base, t1=t1, sd=sd, arr=arr, st=st, q=q, f8=f8, stab=stab, t7=t7, t7_loo=t7_loo,
                   pr=pr, eps=eps, ba=ba_table, meta=meta, idle=idle_t, t23=t23, ca=ca)
    text = report_text(n, quick, chosen, len(runs), campaign_s, seconds, data, claims_df, figs, ba_text)
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


