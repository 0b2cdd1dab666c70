"""The Oracle (decisions S2, S3, S5, S15, S16 in docs/decisions/spequlos.md) and strategy names."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skylease.control.qos.oracle import (
    Oracle,
    Snapshot,
    conservative,
    greedy,
    remaining_time,
    when_assigned,
    when_completed,
    when_variance,
    when_variance_rc,
)
from skylease.control.qos.prediction import (
    AlphaModel,
    fit_alpha,
    l1_error,
    loo_success_rate,
    predict,
    succeeded,
    success_rate,
    weighted_median,
)
from skylease.control.qos.strategy import STRATEGIES, Strategy, parse_strategy
from skylease.model.errors import UserError


def snap(completed, assigned=0, submitted=10, elapsed=1000.0, c=None, a=None):
    def arr(x):
        return None if x is None else np.asarray(x, dtype=float)

    return Snapshot(elapsed, submitted, assigned, completed, arr(c), arr(a))


def test_9c_and_9a_thresholds():
    assert when_completed(snap(9)) and not when_completed(snap(8))
    assert when_assigned(snap(0, assigned=9)) and not when_assigned(snap(9, assigned=8))
    assert not when_completed(snap(0, submitted=0))  # nothing submitted yet
    assert when_completed(snap(8), threshold=0.8)
    assert when_completed(snap(900, submitted=1000))


ALL_AT_ZERO = [0.0] * 10


def test_variance_rule_of_the_paper():
    # var(k/n) = c_k - 0; max over k <= 5 is 14; the 7th completion (c = 0.7) at 40 >= 2 * 14
    c = [10, 11, 12, 13, 14, 15, 40]
    assert when_variance(snap(7, 10, c=c, a=ALL_AT_ZERO))
    assert not when_variance(snap(7, 10, c=[*c[:6], 20], a=ALL_AT_ZERO))
    assert not when_variance(snap(5, 10, c=c[:5], a=ALL_AT_ZERO))  # only once c > 0.5
    assert when_variance(snap(7, 10, c=[*c[:6], 28], a=ALL_AT_ZERO))  # >= is inclusive
    with pytest.raises(ValueError):
        when_variance(snap(7, 10))


def test_variance_rule_of_rc():
    c = [10, 11, 12, 13, 14, 15, 16, 40]
    assert when_variance_rc(snap(8, 10, c=c, a=ALL_AT_ZERO))  # 40 > 1.5 * 14, c = 0.8 >= 0.75
    assert not when_variance_rc(snap(7, 10, c=c[:7], a=ALL_AT_ZERO))  # c = 0.7 < 0.75
    assert not when_variance_rc(snap(8, 10, c=[*c[:7], 21], a=ALL_AT_ZERO))  # strict >


def test_variance_uses_assignment_times():
    # tasks assigned late have small var: the same completions do not trigger
    c = [10, 11, 12, 13, 14, 15, 40]
    a = [9, 10, 11, 12, 13, 14, 39, 39, 39, 39]
    assert not when_variance(snap(7, 10, c=c, a=a))


def test_greedy_floors_s():
    assert greedy(750) == 50
    assert greedy(4583.33) == 305
    assert greedy(14.9) == 0


def test_conservative_is_min_not_max_a2():
    assert remaining_time(9000, 0.9) == pytest.approx(1000)
    assert conservative(750, 9000, 0.9) == 50  # t_r < 1 h: S
    assert conservative(750, 36000, 0.5) == 5  # t_r = 10 h: S / 10
    assert conservative(750, 36000, 0.9) == 45  # t_r = 4000 s
    assert conservative(750, 100, 0.0) == 0  # x_e = 0: no estimate, no worker


@settings(max_examples=200, deadline=None)
@given(st.floats(0, 1e5), st.floats(0, 1e6), st.floats(0.001, 1))
def test_conservative_never_exceeds_greedy(credits, elapsed, x):
    assert 0 <= conservative(credits, elapsed, x) <= greedy(credits)


def test_oracle_dispatches():
    s = snap(9, 9, elapsed=36000.0)
    assert Oracle("9C", "G").should_use_cloud(s)
    assert Oracle("9C", "G").cloud_workers_to_start(s, 750) == 50
    assert Oracle("9C", "C").cloud_workers_to_start(s, 750) == 45
    assert not Oracle("9A", "C").should_use_cloud(snap(9, 8))
    assert Oracle("V").needs_times and Oracle("V_rc").needs_times and not Oracle("9A").needs_times
    with pytest.raises(ValueError):
        Oracle("9B")
    with pytest.raises(ValueError):
        Oracle("9C", "X")


def test_prediction_and_success_band():
    assert predict(500, 0.5) == 1000
    assert predict(500, 0.5, alpha=1.2) == pytest.approx(1200)
    assert succeeded([100, 100, 100, 100], [80, 79, 120, 121]).tolist() == [True, False, True, False]
    m = AlphaModel(1.2, 0.9)
    pr = m.predict(500.0, 500.0, 0.5)
    assert (pr.p, pr.t_pred, pr.success_rate) == (1000, pytest.approx(1200), 0.9)


def test_alpha_fits_by_hand():
    p, t = [1, 1, 2], [1, 3, 2]  # ratios 1, 3, 1 with weights 1, 1, 2
    assert fit_alpha(p, t) == 1.0
    assert fit_alpha(p, t, "lsq") == pytest.approx(8 / 6)
    assert fit_alpha(p, t, "mean") == pytest.approx(5 / 3)
    assert fit_alpha([], []) == 1.0
    assert weighted_median([5, 1, 3], [1, 1, 1]) == 3
    with pytest.raises(ValueError):
        fit_alpha([0, 1], [1, 1])
    with pytest.raises(ValueError):
        fit_alpha([1], [1], "l2")


def test_success_rates_in_and_out_of_sample():
    p, t = np.array([100.0, 200, 300, 400]), np.array([110.0, 220, 330, 600])
    m = AlphaModel.fit(p, t)
    assert m.alpha == pytest.approx(1.1) and m.runs == 4
    assert m.success_rate == pytest.approx(0.75)
    assert success_rate(p, t, 1.1) == pytest.approx(0.75)
    assert loo_success_rate(p, t) == pytest.approx(0.5)  # without run 2, alpha = 1.5 misses it
    assert AlphaModel.fit([], []).success_rate is None


pairs = st.lists(st.tuples(st.floats(1, 1e4), st.floats(1, 1e5)), min_size=1, max_size=25)


@settings(max_examples=200, deadline=None)
@given(pairs)
def test_l1_alpha_minimises_the_l1_objective(rows):
    p = np.array([r[0] for r in rows])
    t = np.array([r[1] for r in rows])
    alpha = fit_alpha(p, t)
    best = l1_error(alpha, p, t)
    ratios = t / p
    grid = np.concatenate([np.linspace(ratios.min() * 0.5, ratios.max() * 1.5, 400), ratios])
    assert all(best <= l1_error(g, p, t) * (1 + 1e-9) + 1e-6 for g in grid)


def test_strategy_names():
    assert len(STRATEGIES) == 18 and len(set(STRATEGIES)) == 18
    assert all(parse_strategy(s).name == s for s in STRATEGIES)
    s = parse_strategy(" 9c-c-r ")
    assert s == Strategy("9C", "C", "R") and s.usage == "reschedule"
    assert parse_strategy("V_RC-G-D") == Strategy("V_rc", "G", "D")
    assert parse_strategy("9A-G-F").usage == "flat" and parse_strategy("9A-G-D").usage == "duplicate"
    assert parse_strategy("none") is None and parse_strategy("NONE") is None


@pytest.mark.parametrize("bad", ["9X-C-R", "9C-C", "9C-C-R-R", "", "9C_C_R"])
def test_bad_strategy_is_one_line_user_error(bad):
    with pytest.raises(UserError) as e:
        parse_strategy(bad)
    msg = str(e.value)
    assert "\n" not in msg and "9C-C-R" in msg and "none" in msg
