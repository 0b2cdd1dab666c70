"""Decision S4 in docs/decisions/spequlos.md: which idle cloud workers stop at the next tick (every
strategy's, or Greedy's only), and the reproduction's side-by-side of both readings."""

import pandas as pd
import pytest

from skylease.control.qos.strategy import parse_strategy
from skylease.experiments.spequlos import run_once, stop_idle_cw
from skylease.experiments.spequlos_checks import idle_claims
from skylease.experiments.spequlos_report import campaign_cell
from skylease.experiments.spequlos_tables import idle_variant, with_tre
from skylease.model.errors import UserError

ENV = ("boinc", "nd", "BIG")


def test_the_readings_of_a4():
    assert stop_idle_cw("all", parse_strategy("9C-C-R")) and stop_idle_cw("all", parse_strategy("9C-G-F"))
    assert stop_idle_cw("greedy", parse_strategy("9A-G-D"))
    assert not stop_idle_cw("greedy", parse_strategy("9C-C-R"))
    assert not stop_idle_cw("greedy", None)
    with pytest.raises(UserError, match="idle-stop"):
        stop_idle_cw("some", None)


def test_greedy_only_keeps_conservative_idle_workers_billed(shared_data):
    """Same seed: Greedy's runs are the same under both readings; Conservative's CWs are no longer
    stopped when idle, so they spend at least as much, and more in some run."""
    more = False
    for seed in (0, 1):
        for s in ("9C-G-F", "9C-C-F"):
            a = run_once(*ENV, s, seed, data_dir=shared_data)
            g = run_once(*ENV, s, seed, data_dir=shared_data, idle_stop="greedy")
            assert g["idle_stop"] == "greedy" and a["idle_stop"] == "all"
            if s.split("-")[1] == "G":
                assert g["credits_used"] == a["credits_used"] and g["completion_s"] == a["completion_s"]
            else:
                assert g["credits_used"] >= a["credits_used"]
                more |= g["credits_used"] > a["credits_used"]
    assert more


def test_the_report_puts_both_readings_side_by_side(shared_data):
    strategies = ["9C-G-F", "9C-C-F", "9C-G-R", "9C-C-R"]
    rows = campaign_cell("/".join(ENV), strategies, str(shared_data), 0, 0)
    idle = campaign_cell("/".join(ENV), strategies, str(shared_data), 0, 0, baseline=False, idle="greedy")
    runs = pd.DataFrame(rows)
    q = with_tre(runs)
    qi = with_tre(pd.concat([runs[runs["strategy"] == "none"], pd.DataFrame(idle)], ignore_index=True))
    t = idle_variant(q, qi)
    how = t[t["axis"] == "how"].pivot_table(index="value", columns="idle_stop", values="credits_pct")
    assert set(how.columns) == {"all", "greedy"} and (how["greedy"] >= how["all"] - 1e-9).all()
    claims = idle_claims(t)
    assert len(claims) == 1 and not claims[0]["gated"]
    assert idle_variant(q, qi.iloc[0:0]).empty and idle_claims(pd.DataFrame()) == []
