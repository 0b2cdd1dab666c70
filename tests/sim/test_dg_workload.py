"""SpeQuloS workloads: Table 6 categories, Table 4 powers, credits (decisions S8, S9, S28 in
docs/decisions/spequlos.md)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from skylease.sim.dg.workload import (
    WEIBULL_SCALE,
    WEIBULL_SHAPE,
    cap_arrival_gaps,
    credits_for,
    make_bot,
    node_powers,
    quantile_arrivals,
    resolve_arrivals,
)


def test_small_and_big_are_table6() -> None:
    small, big = make_bot("SMALL"), make_bot("big")
    assert len(small) == 1000 and set(small.nops) == {3.6e6} and not small.arrival.any()
    assert len(big) == 10000 and set(big.nops) == {6e4} and not big.arrival.any()
    assert make_bot("LARGE").category == "BIG"


def test_random_literal_and_std_sigma() -> None:
    lit = make_bot("RANDOM", seed=1)
    std = make_bot("RANDOM", seed=1, sigma="std")
    assert 900 < len(lit) < 1100
    assert np.all(np.diff(lit.arrival) >= 0) and lit.arrival[0] >= 0
    assert 50 < lit.nops.std() < 150  # sigma = sqrt(10000) = 100
    assert std.nops.std() > 5000  # sigma = 10000
    assert 100 < lit.arrival.mean() < 220  # Weibull(91.98, 0.57): mean ~148 s (quantiles: ~146 s)
    assert make_bot("RANDOM", seed=1).nops.tolist() == lit.nops.tolist()
    with pytest.raises(ValueError):
        make_bot("HUGE")


def test_node_powers_clamped_and_homogeneous_grids() -> None:
    p = node_powers("seti", 100000, seed=2)
    assert p.min() >= 1000 / 3 and p.max() <= 3000
    assert abs(p.mean() - 1000) < 10 and abs(p.std() - 250) < 10
    assert set(node_powers("g5klyo", 10, seed=2)) == {3000.0}
    s = node_powers("spot100", 10000, seed=2)
    assert abs(s.mean() - 3000) < 20 and abs(s.std() - 300) < 20


def test_credits_are_ten_percent_of_workload() -> None:
    assert credits_for("SMALL", 1000) == pytest.approx(4583.333, rel=1e-6)
    assert credits_for("BIG", 10000) == pytest.approx(750.0)
    assert credits_for("RANDOM", 1000) == pytest.approx(916.667, rel=1e-5)
    assert make_bot("SMALL").credits == pytest.approx(4583.333, rel=1e-6)


def test_random_arrivals_default_to_the_weibull_quantiles() -> None:
    """Spec D1: task i of n arrives at F^-1((i - 1/2)/n) of weib(91.98, 0.57), whatever the seed."""
    a, b = make_bot("RANDOM", seed=1), make_bot("RANDOM", seed=2)
    for bot in (a, b):
        n = len(bot)
        i = np.arange(1, n + 1)
        cdf = 1 - np.exp(-((bot.arrival / WEIBULL_SCALE) ** WEIBULL_SHAPE))
        assert np.allclose(cdf, (i - 0.5) / n)
    assert np.array_equal(make_bot("RANDOM", seed=1, arrivals="quantile").arrival, a.arrival)
    # the sizes and nops are the same draw under every reading
    iid = make_bot("RANDOM", seed=1, arrivals="iid")
    assert iid.nops.tolist() == a.nops.tolist() and not np.array_equal(iid.arrival, a.arrival)
    q = quantile_arrivals(1000)
    assert 2900 < q[-1] < 3500 and 40 < np.median(q) < 60  # last ~3,230 s; median = the Weibull's 48 s


def test_resolve_arrivals_readings_and_refusals() -> None:
    assert resolve_arrivals(None, None) == ("quantile", None)
    assert resolve_arrivals(None, 30.0) == ("epsilon", 30.0)  # the older spelling of the cap
    assert resolve_arrivals("EPSILON", None) == ("epsilon", 60.0)
    assert resolve_arrivals("iid", None) == ("iid", None)
    with pytest.raises(ValueError, match="one of quantile, iid, epsilon"):
        resolve_arrivals("gaps", None)
    with pytest.raises(ValueError, match="only applies"):
        resolve_arrivals("quantile", 60.0)
    with pytest.raises(ValueError, match="epsilon must be > 0"):
        resolve_arrivals("epsilon", -1.0)


def test_random_epsilon_caps_gaps_and_keeps_the_draw() -> None:
    spec = make_bot("RANDOM", seed=3, arrivals="iid")
    capped = make_bot("RANDOM", seed=3, epsilon=60.0)
    assert capped.nops.tolist() == spec.nops.tolist()  # only the arrivals change
    assert capped.arrival[0] == spec.arrival[0]
    assert np.diff(capped.arrival).max() <= 60.0 + 1e-9
    assert np.diff(spec.arrival).max() > 60.0  # the i.i.d. reading (S9) has longer gaps at this seed
    assert capped.arrival[-1] < spec.arrival[-1]
    with pytest.raises(ValueError, match="epsilon"):
        make_bot("RANDOM", seed=3, epsilon=0.0)


@given(st.lists(st.floats(0, 1e5), min_size=0, max_size=50), st.floats(0.1, 1e4))
def test_cap_arrival_gaps_properties(xs, eps) -> None:
    a = np.sort(np.array(xs, dtype=float))
    c = cap_arrival_gaps(a, eps)
    assert len(c) == len(a)
    if len(a):
        assert c[0] == a[0]
        d, g = np.diff(c), np.diff(a)
        assert (d >= 0).all() and (d <= eps + 1e-6).all()
        # gaps below epsilon are kept as they are
        assert np.allclose(d[g < eps], g[g < eps])
