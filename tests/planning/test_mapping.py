"""Golden values of the thesis's numerical example (decision A7 in docs/decisions/thesis.md) and API
behaviour of planning.mapping."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from skylease.experiments.thesis.paper_mapping import EXAMPLE_ETC
from skylease.planning import mapping as M

# Table 3.3: the 8 x 4 running example (kept once, with the thesis's other published numbers).
ETC = EXAMPLE_ETC
OPT = 2130.0


def _optimum(etc: np.ndarray) -> float:
    """Exhaustive search over all m^n assignments, vectorised."""
    n, m = etc.shape
    assign = np.indices((m,) * n).reshape(n, -1).T  # (m^n, n)
    vals = etc[np.arange(n), assign]
    loads = np.stack([(vals * (assign == j)).sum(axis=1) for j in range(m)], axis=1)
    return float(loads.max(axis=1).min())


def test_keys_of_heuristics():
    assert list(M.HEURISTICS) == ["min-min", "max-min", "sufferage", "mct", "met", "olb", "luo1", "luo2",
                                  "luo2b", "low1", "low2", "low3", "best"]


def test_optimum_by_exhaustive_search():
    assert _optimum(ETC) == OPT
    # the optimal assignment quoted in the spec
    s = M.evaluate(ETC, [0, 2, 1, 1, 2, 3, 3, 0])
    assert s.makespan == OPT
    assert s.loads.tolist() == [2100.0, 2130.0, 2100.0, 2000.0]
    assert M.lower_bound(ETC) <= OPT


def test_min_min_golden():
    s = M.min_min(ETC)
    assert s.makespan == 3200.0
    assert s.order.tolist() == [7, 6, 5, 4, 3, 1, 2, 0]
    assert s.heuristic == "min-min" and s.lam is None


def test_max_min_golden():
    s = M.max_min(ETC)
    assert s.makespan == 2490.0
    assert s.order.tolist() == [0, 1, 2, 4, 3, 5, 6, 7]


def test_luo1_golden():
    s = M.luo1(ETC)
    assert s.makespan == 2350.0
    assert s.order.tolist() == [0, 2, 1, 3, 6, 5, 4, 7]
    assert s.assignment.tolist() == [0, 2, 1, 3, 1, 2, 1, 3]


def test_luo2_golden_row_sd():
    s = M.luo2(ETC)
    assert s.makespan == 2490.0
    assert s.order.tolist() == [0, 3, 1, 5, 2, 6, 4, 7]


def test_luo2b_load_sd_reading():
    assert M.luo2b(ETC).makespan == 2350.0  # the text's reading does not reproduce Table 3.4 (decision A4.6)


@pytest.mark.parametrize(("fn", "makespan", "order", "assignment"), [
    (M.low1, 2550.0, [0, 3, 2, 1, 4, 6, 5, 7], [0, 3, 2, 1, 1, 0, 2, 1]),
    (M.low2, 2350.0, [0, 2, 1, 4, 3, 5, 6, 7], [0, 2, 1, 3, 1, 2, 1, 0]),
    (M.low3, 2350.0, [0, 2, 3, 1, 4, 5, 6, 7], [0, 3, 1, 2, 1, 2, 1, 0]),
])
def test_low_golden_at_lambda_08(fn, makespan, order, assignment):
    s = fn(ETC, 0.8)
    assert s.makespan == makespan
    assert s.order.tolist() == order
    assert s.assignment.tolist() == assignment
    assert s.lam == 0.8


SWEEPS = {
    "min": [6080, 4500, 3550, 3550, 2700, 2700, 2550, 2550, 2550, 2550, 2500],
    "max": [6080, 4150, 3550, 3080, 3080, 2650, 2350, 2350, 2350, 2490, 2490],
    "mean": [6080, 4530, 3550, 3000, 2700, 2700, 2350, 2350, 2350, 2350, 2350],
}


@pytest.mark.parametrize("rule", list(SWEEPS))
def test_lambda_sweep_golden(rule):
    sweep = M.lambda_sweep(ETC, rule)
    assert [s.makespan for s in sweep] == SWEEPS[rule]
    assert [s.lam for s in sweep] == [k / 10 for k in range(11)]
    assert {s.heuristic for s in sweep} == {{"min": "low1", "max": "low2", "mean": "low3"}[rule]}


def test_lambda_zero_is_met_with_lowest_index_ties():
    s = M.low1(ETC, 0.0)
    assert s.makespan == 6080.0
    assert s.assignment.tolist() == [0, 0, 0, 0, 0, 0, 1, 0]  # t6 ties m1/m2 -> m1
    assert s.assignment.tolist() == M.met(ETC).assignment.tolist()


@pytest.mark.parametrize(("fn", "makespan", "lam"), [(M.low1, 2500.0, 1.0), (M.low2, 2350.0, 0.6),
                                                     (M.low3, 2350.0, 0.6)])
def test_low_best_lambda_smallest_on_ties(fn, makespan, lam):
    s = fn(ETC)
    assert (s.makespan, s.lam) == (makespan, lam)


def test_error_deviations_from_optimum():
    dev = {name: round(100 * (s.makespan - OPT) / s.makespan) for name, s in [
        ("m_m", M.min_min(ETC)), ("low1", M.low1(ETC, 0.8)), ("luo2", M.luo2(ETC)), ("luo1", M.luo1(ETC)),
        ("low2", M.low2(ETC, 0.8)), ("low3", M.low3(ETC, 0.8))]}
    assert dev == {"m_m": 33, "low1": 16, "luo2": 14, "luo1": 9, "low2": 9, "low3": 9}


def test_lower_bound_formula():
    mins = ETC.min(axis=1)
    assert M.lower_bound(ETC) == max(mins.max(), mins.sum() / 4) == 2000.0


def test_flowtime_spt_and_order():
    s = M.evaluate(ETC, [0, 0, 1, 1, 2, 2, 3, 3], order=[1, 0, 2, 3, 4, 5, 7, 6])
    # m0: 2000, 900 -> SPT 900 + 2900; order run: 900 then 2000 -> same (order lists t1 first)
    spt = (900 + 2900) + (1050 + 2130) + (750 + 1550) + (400 + 1400)
    assert s.flowtime == spt == M.flowtime_spt(ETC, s.assignment)
    assert s.flowtime_order == (900 + 2900) + (1050 + 2130) + (800 + 1550) + (400 + 1400)
    assert s.makespan == 2900.0 and s.heuristic == "given"


def test_best_performance_picks_luo1_on_full_consistent():
    assert M.is_full_consistent(ETC) is False  # t5 and t6 are out of order
    fc = np.sort(ETC, axis=1)[:, [2, 0, 3, 1]]  # consistent up to a column permutation
    assert M.is_full_consistent(fc) is True
    s = M.best_performance(fc)
    ref = M.luo1(fc)
    assert s.heuristic == "best:luo1"
    assert s.assignment.tolist() == ref.assignment.tolist() and s.makespan == ref.makespan


def test_best_performance_low_otherwise():
    s = M.best_performance(ETC)
    assert s.heuristic == "best:low3" and s.makespan == 2350.0 and s.lam == 0.6


def test_schedule_is_frozen():
    s = M.min_min(ETC)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.makespan = 1.0  # type: ignore[misc]
    with pytest.raises(ValueError):
        s.assignment[0] = 1
    # evaluating a schedule's own (read-only) arrays works and reproduces it
    e = M.evaluate(ETC, s.assignment, s.order)
    assert (e.makespan, e.flowtime, e.flowtime_order) == (s.makespan, s.flowtime, s.flowtime_order)


def test_energy_golden_and_voltages():
    v = M.random_voltages(4, 3)
    assert v.shape == (4, 2)
    assert all(any((row == vs).all() for vs in M.VOLTAGE_SETS) for row in v)
    assert np.array_equal(v, M.random_voltages(4, np.random.default_rng(3)))
    s = M.min_min(ETC, voltages=v)
    busy = sum(v[j, 0] ** 2 * ETC[i, j] for i, j in enumerate(s.assignment))
    idle = sum(v[j, 1] ** 2 * (s.makespan - s.loads[j]) for j in range(4))
    assert s.energy == pytest.approx(busy + idle, rel=1e-12)
    assert M.energy(ETC, s.assignment, v) == pytest.approx(s.energy, rel=1e-12)
    assert M.min_min(ETC).energy is None


@pytest.mark.parametrize("bad", [
    np.ones(3), np.ones((0, 3)), np.ones((3, 0)), [[1.0, np.nan]], [[1.0, np.inf]], [[1.0, 0.0]],
    [[1.0, -2.0]], [["a", "b"]], np.ones((2, 2, 2)),
])
def test_etc_validation(bad):
    for fn in (M.min_min, M.luo1, M.low3, M.lower_bound, M.best_performance):
        with pytest.raises(ValueError):
            fn(bad)


def test_argument_validation():
    with pytest.raises(ValueError, match="assignment"):
        M.evaluate(ETC, [0] * 7)
    with pytest.raises(ValueError, match="machine indices"):
        M.evaluate(ETC, [0] * 7 + [4])
    with pytest.raises(ValueError, match="integers"):
        M.evaluate(ETC, [0.5] * 8)
    with pytest.raises(ValueError, match="permutation"):
        M.evaluate(ETC, [0] * 8, order=[0] * 8)
    with pytest.raises(ValueError, match="voltages"):
        M.min_min(ETC, voltages=np.ones((3, 2)))
    with pytest.raises(ValueError, match="λ"):
        M.low1(ETC, 1.5)
    with pytest.raises(ValueError, match="rule"):
        M.lambda_sweep(ETC, "median")
    with pytest.raises(ValueError):
        M.random_voltages(0, 1)


def test_metrics_basic():
    mk = np.array([[10.0, 12.0, 10.0], [9.0, 8.0, 11.0], [5.0, 5.0, 5.0]])
    r = M.performance_ratios(mk)
    assert r[1].tolist() == [9 / 8, 1.0, 11 / 8]
    b, eb = M.best_counts(mk)
    assert b.tolist() == [0, 1, 0] and eb.tolist() == [2, 1, 2]
    prof = M.performance_profile(r[:, 0], np.array([1.0, 1.1, 1.2]))
    assert prof.tolist() == [2 / 3, 2 / 3, 1.0]
    assert M.percent_gain(90.0, 100.0) == pytest.approx(10.0)
    assert M.approximation_factor(2350.0, 2000.0) == pytest.approx(1.175)
