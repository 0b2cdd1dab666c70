"""The reproduction's checks as decisions D2, D3 and D5 gate them, on small synthetic result tables."""

from pathlib import Path

import numpy as np
import pandas as pd

from skylease.experiments.spequlos_batch_accel import batch_accel_section, batch_accel_strategies
from skylease.experiments.spequlos_checks import baseline_checks, gate, prediction_checks, strategy_checks
from skylease.experiments.spequlos_tables import slowdown_stats, strategy_table


def _base(slowdowns: dict[tuple[str, str], list[float]]) -> pd.DataFrame:
    """Baseline rows: (middleware, bot) -> tail slowdowns, one run each (trace nd unless BIG on seti)."""
    rows = []
    for (mw, bot), values in slowdowns.items():
        for k, s in enumerate(values):
            rows.append({"middleware": mw, "bot": bot, "trace": "seti" if bot == "BIG" and k == 0 else "nd",
                         "run_seed": k, "tail_slowdown": s, "tail_task_share": 0.04, "tail_time_share": 0.3,
                         "completion_s": 100 * s, "ideal_s": 100.0, "strategy": "none"})
    return pd.DataFrame(rows)


def _by_claim(claims: list[dict]) -> dict[str, dict]:
    return {c["claim"]: c for c in claims}


GOOD = [1.0, 1.05, 1.1, 1.2, 1.3, 1.0, 1.1, 3.0, 1.0, 1.2]  # median 1.1, P(>= 2) 0.1


def test_fig2_is_gated_on_small_and_big_and_random_only_reported():
    # RANDOM's slowdown is >= 2 in every run (its arrivals): the pooled median and P(>= 2) fail, but
    # D2 gates SMALL + BIG per middleware, where they hold
    base = _base({(mw, b): GOOD for mw in ("boinc", "xwhep") for b in ("SMALL", "BIG")}
                 | {(mw, "RANDOM"): [5.0] * 10 for mw in ("boinc", "xwhep")})
    claims = baseline_checks(slowdown_stats(base), pd.DataFrame(), base)
    by = _by_claim(claims)
    gated = [c for c in claims if c["gated"]]
    assert {c["claim"] for c in gated} >= {
        "Fig. 2 boinc, SMALL + BIG (D2): median tail slowdown <= 1.33",
        "Fig. 2 xwhep, SMALL + BIG (D2): P(slowdown >= 2) at most the paper's"}
    assert all(c["holds"] for c in gated if "SMALL + BIG" in c["claim"])
    pooled = by["Fig. 2 xwhep, every BoT pooled: median / P(>= 2) / p95 (reported)"]
    assert not pooled["holds"] and not pooled["gated"]
    assert not by["Fig. 2 boinc, RANDOM on its own row: median / P(>= 2) / p95 (reported, D2)"]["gated"]
    assert not any(c["gated"] for c in claims if "95th percentile" in c["claim"])
    assert gate(claims)["passed"]


def test_fig2_gate_fails_when_small_and_big_have_a_long_tail():
    bad = [2.5] * 6 + [1.0] * 4  # median 2.5, P(>= 2) 0.6
    base = _base({("boinc", "SMALL"): bad, ("boinc", "BIG"): bad, ("xwhep", "SMALL"): GOOD,
                  ("xwhep", "BIG"): GOOD})
    v = gate(baseline_checks(slowdown_stats(base), pd.DataFrame(), base))
    assert not v["passed"]
    assert v["failed"] == ["Fig. 2 boinc, SMALL + BIG (D2): median tail slowdown <= 1.33",
                           "Fig. 2 boinc, SMALL + BIG (D2): P(slowdown >= 2) at most the paper's"]


def test_d4_names_xwhep_seti_big_as_the_cause_of_the_p95():
    xw = [1.0] * 17
    base = _base({("xwhep", "SMALL"): [1.0] * 20, ("xwhep", "BIG"): [11.0, 11.0, 11.0, *xw]})
    base.loc[(base["bot"] == "BIG") & (base["tail_slowdown"] == 11.0), "trace"] = "seti"
    d4 = [c for c in baseline_checks(slowdown_stats(base), pd.DataFrame(), base) if "D4" in c["claim"]]
    assert len(d4) == 1 and not d4[0]["gated"] and d4[0]["holds"]
    assert "median 11.0 there" in d4[0]["ours"]


def _pred(ok: dict[str, float], n: int = 20) -> pd.DataFrame:
    rows = []
    for trace, share in ok.items():
        hits = round(share * n)
        rows += [{"middleware": "boinc", "trace": trace, "bot": "SMALL", "ok": k < hits, "loo_ok": share}
                 for k in range(n)]
    return pd.DataFrame(rows)


def test_prediction_gate_is_the_four_traces_and_g5k_is_data_not_available():
    claims = prediction_checks(pd.DataFrame(), _pred({"seti": 0.95, "nd": 1.0, "spot10": 0.9, "spot100": 0.8,
                                                      "g5klyo": 0.3, "g5kgre": 0.2}))
    v = gate(claims)
    assert v["passed"] and v["gated"] == 1  # 91.25 % on the four traces; g5k's 25 % is only reported
    g5k = [c for c in claims if "data not available" in c["claim"]]
    assert [c["ours"] for c in g5k] == ["20.0 %", "30.0 %"] and not any(c["gated"] for c in g5k)
    low = {"seti": 0.9, "nd": 0.8, "spot10": 0.8, "spot100": 0.8}
    failing = prediction_checks(pd.DataFrame(), _pred(low))
    assert gate(failing)["failed"] == [
        "Table 7 on seti, nd, spot10, spot100 (D5): predictions within ±20 %, >= 85 %"]


def _qos(tre: dict[tuple[str, str], list[float]]) -> pd.DataFrame:
    rows = []
    for (strategy, bot), values in tre.items():
        w, m, h = strategy.split("-")
        rows += [{"strategy": strategy, "bot": bot, "trace": "nd", "middleware": "boinc", "tre": t,
                  "when": w, "how_many": m, "how": h, "credits_share": 0.1, "cloud_work_share": 0.01,
                  "cws": 1, "cw_started_s": 10.0} for t in values]
    return pd.DataFrame(rows)


def test_9a_x_d_best_is_evaluated_on_small_and_big():
    # 9A-x-D remove the tail of SMALL and BIG; on RANDOM (its arrivals) nothing can, and 9C-C-R is
    # ahead there: pooled, 9A-x-D would not be best; on SMALL + BIG it is
    good = [1.0] * 5 + [0.9] * 3 + [0.2] * 2
    q = _qos({**{(s, b): good for s in ("9A-G-D", "9A-C-D") for b in ("SMALL", "BIG")},
              **{(s, "RANDOM"): [-1.0] * 30 for s in ("9A-G-D", "9A-C-D")},
              **{("9C-C-R", b): [0.7] * 10 for b in ("SMALL", "BIG")}, ("9C-C-R", "RANDOM"): [0.5] * 30})
    by = _by_claim(strategy_checks(strategy_table(q), q))
    best = by["Fig. 6c, SMALL + BIG (D3): 9A-G-D / 9A-C-D are the best (within 0.02 of the best mean TRE)"]
    assert best["holds"] and best["gated"]
    assert by["Fig. 6c, SMALL + BIG: 9A-x-D: TRE > 50 % in 80 % of the runs (±0.15)"]["holds"]
    pooled = strategy_table(q).set_index("strategy")["tre_mean"]
    assert pooled["9C-C-R"] > pooled["9A-G-D"]  # the pool would have failed it


def test_batch_accel_section_skips_with_a_note_while_the_strategy_is_unknown(tmp_path: Path):
    runs = pd.DataFrame([{"middleware": "boinc", "trace": "nd", "bot": "SMALL", "run_seed": 0, "strategy": s,
                          "completion_s": c, "ideal_s": 90.0, "tail_slowdown": c / 90, "credits_used": u}
                         for s, c, u in (("none", 200.0, 0.0), ("9C-C-R", 120.0, 30.0))])
    table, text = batch_accel_section(runs, tmp_path)  # no batch-accel run: the section says so
    assert table.empty and "Skipped" in "\n".join(text)
    assert not (tmp_path / "batch_accel.csv").exists()
    assert set(batch_accel_strategies()) in (set(), {"9C-C-R", "batch-accel", "batch-accel+9C-C-R"})


def test_batch_accel_section_renders_rows_and_a_plot(tmp_path: Path):
    rows = []
    for seed in range(3):
        for s, c, extra, u in (("none", 300.0, 0, 0.0), ("9C-C-R", 150.0, 0, 40.0),
                               ("batch-accel", 200.0, 12, 0.0), ("batch-accel+9C-C-R", 140.0, 8, 20.0)):
            rows.append({"middleware": "boinc", "trace": "seti", "bot": "SMALL", "run_seed": seed,
                         "strategy": s, "completion_s": c + seed, "ideal_s": 100.0,
                         "tail_slowdown": (c + seed) / 100,
                         "credits_used": u, "extra_results": extra})
    table, text = batch_accel_section(pd.DataFrame(rows), tmp_path)
    t = table.set_index("strategy")
    assert list(t.index) == ["none", "9C-C-R", "batch-accel", "batch-accel+9C-C-R"]
    assert t.loc["batch-accel", "extra_results"] == 12 and t.loc["batch-accel", "credits_used"] == 0
    assert np.isclose(t.loc["9C-C-R", "tre"], np.mean([1 - (50 + k) / (200 + k) for k in range(3)]))
    body = "\n".join(text)
    assert "## SpeQuloS vs BOINC batch acceleration" in body and "batch_accel_completion.png" in body
    assert (tmp_path / "batch_accel_completion.png").stat().st_size > 1000
    assert (tmp_path / "batch_accel.csv").exists()
