"""Hypothesis properties of planning.mapping: validity, bounds, equality with naive rescanning versions."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from skylease.planning import mapping as M

SETTINGS = settings(max_examples=150, deadline=None)


@st.composite
def etcs(draw, max_n: int = 10, max_m: int = 5) -> np.ndarray:
    """Small ETCs: small integers (many ties) or gamma-like positive floats."""
    n = draw(st.integers(1, max_n))
    m = draw(st.integers(1, max_m))
    elems = draw(st.sampled_from([
        st.integers(1, 4).map(float),
        st.integers(1, 1000).map(float),
        st.floats(0.01, 1e4, allow_nan=False, allow_infinity=False),
    ]))
    return draw(hnp.arrays(np.float64, (n, m), elements=elems))


int_etcs = etcs().map(np.round).map(lambda a: np.maximum(a, 1.0))


# ------------------------------------------------------------------------------------------ naive versions


def naive_min_max(etc: np.ndarray, maximize: bool) -> tuple[list[int], list[int]]:
    n, m = etc.shape
    ready = np.zeros(m)
    assign, order, left = [0] * n, [], list(range(n))
    while left:
        best = None
        for i in left:  # ascending index: strict comparison keeps the lowest task index on ties
            ct = ready + etc[i]
            j = int(np.argmin(ct))
            if best is None or (ct[j] > best[0] if maximize else ct[j] < best[0]):
                best = (ct[j], i, j)
        _, i, j = best
        ready[j] += etc[i, j]
        assign[i] = j
        order.append(i)
        left.remove(i)
    return assign, order


def naive_sufferage(etc: np.ndarray) -> tuple[list[int], list[int]]:
    n, m = etc.shape
    ready = np.zeros(m)
    assign, order, left = [0] * n, [], list(range(n))
    while left:
        best = None
        for i in left:
            ct = ready + etc[i]
            j = int(np.argmin(ct))
            second = np.sort(ct)[1] if m > 1 else np.inf
            suff = second - ct[j]
            if best is None or suff > best[0]:
                best = (suff, i, j)
        _, i, j = best
        ready[j] += etc[i, j]
        assign[i] = j
        order.append(i)
        left.remove(i)
    return assign, order


def naive_mct(etc: np.ndarray, order) -> list[int]:
    ready = np.zeros(etc.shape[1])
    assign = [0] * etc.shape[0]
    for i in order:
        j = int(np.argmin(ready + etc[i]))
        ready[j] += etc[i, j]
        assign[i] = j
    return assign


def naive_tpd(etc: np.ndarray, rule: str) -> tuple[list[int], list[int]]:
    """Rescanning TPD; for 'luo2b' the load SD is compared exactly (integer ETCs only)."""
    n, m = etc.shape

    def dominates(a: int, b: int) -> bool:
        if not (etc[a] >= etc[b]).all():
            return False
        return bool((etc[a] > etc[b]).any()) or a < b

    ready = np.zeros(m)
    sd = etc.std(axis=1)
    assign, order, left = [0] * n, [], set(range(n))
    while left:
        maximal = [b for b in sorted(left) if not any(dominates(a, b) for a in left if a != b)]
        keys = []
        for i in maximal:
            ct = ready + etc[i]
            j = int(np.argmin(ct))
            if rule == "luo1":
                key = (ct[j], i)
            elif rule == "luo2":
                key = (sd[i], ct[j], i)
            else:
                f = [int(x) for x in ready]
                f[j] += int(etc[i, j])
                key = (m * sum(x * x for x in f) - sum(f) ** 2, ct[j], i)
            keys.append((key, i, j))
        _, i, j = min(keys)
        ready[j] += etc[i, j]
        assign[i] = j
        order.append(i)
        left.remove(i)
    return assign, order


# ------------------------------------------------------------------------------------------ properties


@SETTINGS
@given(etc=etcs(), name=st.sampled_from(list(M.HEURISTICS)))
def test_every_heuristic_gives_a_valid_schedule(etc, name):
    n, m = etc.shape
    s = M.HEURISTICS[name](etc)
    assert s.assignment.dtype == np.int64 and s.order.dtype == np.int64
    assert s.assignment.shape == (n,) and ((s.assignment >= 0) & (s.assignment < m)).all()
    assert sorted(s.order.tolist()) == list(range(n))
    loads = np.zeros(m)
    for i, j in enumerate(s.assignment):
        loads[j] += etc[i, j]
    assert np.array_equal(s.loads, loads)
    assert s.makespan == s.loads.max()
    assert s.makespan >= M.lower_bound(etc) * (1 - 1e-12)
    e = M.evaluate(etc, s.assignment, s.order)
    assert (e.makespan, e.flowtime, e.flowtime_order) == (s.makespan, s.flowtime, s.flowtime_order)


@SETTINGS
@given(etc=etcs(), maximize=st.booleans())
def test_incremental_min_max_equals_naive(etc, maximize):
    s = (M.max_min if maximize else M.min_min)(etc)
    assign, order = naive_min_max(etc, maximize)
    assert s.assignment.tolist() == assign
    assert s.order.tolist() == order


@SETTINGS
@given(etc=etcs())
def test_incremental_sufferage_equals_naive(etc):
    s = M.sufferage(etc)
    assign, order = naive_sufferage(etc)
    assert s.assignment.tolist() == assign
    assert s.order.tolist() == order


@settings(max_examples=100, deadline=None)
@given(etc=etcs(max_n=8, max_m=4), rule=st.sampled_from(["luo1", "luo2"]))
def test_tpd_equals_naive(etc, rule):
    s = M.HEURISTICS[rule](etc)
    assign, order = naive_tpd(etc, rule)
    assert s.order.tolist() == order
    assert s.assignment.tolist() == assign


@settings(max_examples=100, deadline=None)
@given(etc=int_etcs)
def test_luo2b_equals_naive_exact_load_sd(etc):
    s = M.luo2b(etc)
    assign, order = naive_tpd(etc, "luo2b")
    assert s.order.tolist() == order
    assert s.assignment.tolist() == assign


@SETTINGS
@given(etc=etcs(), rule=st.sampled_from(["min", "max", "mean"]))
def test_low_lambda_one_is_mct_in_priority_order(etc, rule):
    fn = {"min": M.low1, "max": M.low2, "mean": M.low3}[rule]
    s = fn(etc, 1.0)
    if rule != "mean":  # min / max priorities are exact: check the stable decreasing order too
        prio = etc.min(axis=1) if rule == "min" else etc.max(axis=1)
        assert s.order.tolist() == np.argsort(-prio, kind="stable").tolist()
    assert s.assignment.tolist() == naive_mct(etc, s.order)


@SETTINGS
@given(etc=etcs(), rule=st.sampled_from(["min", "max", "mean"]))
def test_lambda_sweep_matches_single_runs_and_best(etc, rule):
    fn = {"min": M.low1, "max": M.low2, "mean": M.low3}[rule]
    sweep = M.lambda_sweep(etc, rule)
    assert len(sweep) == 11
    for s in sweep:
        one = fn(etc, s.lam)
        assert one.assignment.tolist() == s.assignment.tolist()
    best = fn(etc)
    mks = np.array([s.makespan for s in sweep])
    first = int(np.flatnonzero(mks <= mks.min() * (1 + 1e-9))[0])
    assert best.makespan == mks[first] and best.lam == sweep[first].lam


@SETTINGS
@given(etc=etcs(), name=st.sampled_from(list(M.HEURISTICS)))
def test_flowtime_spt_not_worse_than_assignment_order(etc, name):
    s = M.HEURISTICS[name](etc)
    assert s.flowtime <= s.flowtime_order * (1 + 1e-12)
    spt = 0.0
    for j in range(etc.shape[1]):
        spt += np.cumsum(np.sort(etc[s.assignment == j, j])).sum()
    assert np.isclose(s.flowtime, spt, rtol=1e-12)


@SETTINGS
@given(etc=etcs(), seed=st.integers(0, 2**32 - 1), name=st.sampled_from(list(M.HEURISTICS)))
def test_energy_nonnegative_and_formula(etc, seed, name):
    v = M.random_voltages(etc.shape[1], seed)
    s = M.HEURISTICS[name](etc, voltages=v)
    busy = sum(v[j, 0] ** 2 * etc[i, j] for i, j in enumerate(s.assignment))
    idle = sum(v[j, 1] ** 2 * (s.makespan - s.loads[j]) for j in range(etc.shape[1]))
    assert s.energy >= 0
    assert np.isclose(s.energy, busy + idle, rtol=1e-12)
    assert np.isclose(M.energy(etc, s.assignment, v), s.energy, rtol=1e-12)


@SETTINGS
@given(mk=hnp.arrays(np.float64, st.tuples(st.integers(1, 20), st.integers(1, 6)),
                     elements=st.integers(1, 5).map(float)))
def test_best_counts_cover_every_instance_once(mk):
    b, eb = M.best_counts(mk)
    best = mk.min(axis=1, keepdims=True)
    tied = int(((mk == best).sum(axis=1) > 1).sum())
    assert b.sum() + tied == mk.shape[0]
    assert (b >= 0).all() and (eb >= 0).all()
    prof = M.performance_profile(M.performance_ratios(mk)[:, 0], np.linspace(1, 6, 26))
    assert (np.diff(prof) >= 0).all() and prof[-1] == 1.0


@SETTINGS
@given(etc=etcs(max_n=8, max_m=5), perm_seed=st.integers(0, 1000))
def test_full_consistency_detection(etc, perm_seed):
    perm = np.random.default_rng(perm_seed).permutation(etc.shape[1])
    fc = np.sort(etc, axis=1)[:, perm]
    assert M.is_full_consistent(fc)
    s = M.best_performance(fc)
    assert s.heuristic == "best:luo1"
    assert s.assignment.tolist() == M.luo1(fc).assignment.tolist()
    brute = any((np.diff(etc[:, p], axis=1) >= 0).all() for p in _perms(etc.shape[1]))
    assert M.is_full_consistent(etc) == brute


def _perms(m: int):
    from itertools import permutations

    return [list(p) for p in permutations(range(m))]
