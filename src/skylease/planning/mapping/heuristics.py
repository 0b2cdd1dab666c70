"""Batch-mode mapping heuristics of C. O. Diaz's thesis, chapter 3.

Decisions A4.1-A4.8 in docs/decisions/thesis.md.

- Low_1/Low_2/Low_3 (Min-/Max-/Mean-Max-Min): Framework 1 with the score function Eq. 3.1 (A4.1, A4.2).
- Min-min (A4.3); Max-min, Sufferage, MCT, MET, OLB (A4.7, optional baselines).
- Luo_1 = TPD-minCT-minCT (A4.4, A4.5); Luo_2 = TPD-minCT-minSD with the row-SD rule that reproduces
  the thesis, Luo_2b = the load-SD reading of the text (A4.6).
- ``best_performance``: Algorithm 9 selector (A4.8).

Tie-breaking (decisions A4.1, A4.3): lowest machine index, then lowest task index; Low priorities use a
stable sort
of -priority. The sequential loops are numba kernels (float64 C-contiguous ETC); the Python wrappers
validate once and build the :class:`Schedule`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numba import njit

from ._inputs import _as_etc
from .energy import _as_voltages
from .schedule import Schedule, _build

__all__ = [
    "HEURISTICS", "LAMBDAS", "best_performance", "is_full_consistent", "lambda_sweep", "low1", "low2",
    "low3", "luo1", "luo2", "luo2b", "max_min", "mct", "met", "min_min", "olb", "sufferage",
]

#: The 11 λ values of the main experiments (A4.1): 0.0, 0.1, ..., 1.0.
# Decision: rounded to the nearest doubles of 0.0, 0.1, ..., 1.0 (plain linspace gives 0.30000000000000004),
# so the sweep entry for 0.8 is exactly low*(etc, 0.8) and reported λ values print cleanly.
LAMBDAS = np.linspace(0, 1, 11).round(12)
LAMBDAS.setflags(write=False)

#: Relative tolerance under which two makespans count as equal when choosing the best λ (as A2.7).
RTOL = 1e-9

_RULES = {"min": "low1", "max": "low2", "mean": "low3"}
_RULE_CODES = {"min": 0, "max": 1, "mean": 2}


# ============================================================================================ kernels


@njit(cache=True)
def _best1(etc, ready, i):  # pragma: no cover - compiled
    """(min completion time, lowest machine achieving it) of task i."""
    m = etc.shape[1]
    bc = ready[0] + etc[i, 0]
    bj = 0
    for j in range(1, m):
        c = ready[j] + etc[i, j]
        if c < bc:
            bc = c
            bj = j
    return bc, bj


@njit(cache=True)
def _minmax_kernel(etc, maximize):  # pragma: no cover - compiled
    """Min-min (maximize=False) / Max-min (True), incremental (A4.3, A4.7).

    Each unassigned task keeps its best completion time and machine. Mapping a task to machine j only
    raises ready[j], so a task whose best machine b != j keeps b (its CT on j only grew, and an old tie
    with j < b is impossible since b would then have been j): only tasks with best machine j are rescanned.
    The rescan is fused into the next selection pass.
    """
    n, m = etc.shape
    ready = np.zeros(m)
    bc = np.empty(n)
    bj = np.empty(n, np.int64)
    alive = np.arange(n)
    for i in range(n):
        bc[i], bj[i] = _best1(etc, ready, i)
    assign = np.empty(n, np.int64)
    order = np.empty(n, np.int64)
    cnt = n
    last = -1
    for step in range(n):
        sel_p = -1
        sel_i = n
        sel_c = 0.0
        for p in range(cnt):
            i = alive[p]
            if bj[i] == last:
                bc[i], bj[i] = _best1(etc, ready, i)
            c = bc[i]
            better = c > sel_c if maximize else c < sel_c
            if sel_p < 0 or better or (c == sel_c and i < sel_i):
                sel_p = p
                sel_i = i
                sel_c = c
        j = bj[sel_i]
        ready[j] += etc[sel_i, j]
        assign[sel_i] = j
        order[step] = sel_i
        cnt -= 1
        alive[sel_p] = alive[cnt]
        last = j
    return assign, order


@njit(cache=True)
def _best2(etc, ready, i):  # pragma: no cover - compiled
    """Best and second-best completion times of task i, with their machines (second = -1 if m == 1)."""
    m = etc.shape[1]
    c1 = np.inf
    c2 = np.inf
    j1 = -1
    j2 = -1
    for j in range(m):
        c = ready[j] + etc[i, j]
        if c < c1:
            c2 = c1
            j2 = j1
            c1 = c
            j1 = j
        elif c < c2:
            c2 = c
            j2 = j
    return c1, j1, c2, j2


@njit(cache=True)
def _sufferage_kernel(etc):  # pragma: no cover - compiled
    """Sufferage (simple version, A4.7), incremental: rescan only tasks whose best or second machine moved."""
    n, m = etc.shape
    ready = np.zeros(m)
    c1 = np.empty(n)
    c2 = np.empty(n)
    j1 = np.empty(n, np.int64)
    j2 = np.empty(n, np.int64)
    alive = np.arange(n)
    for i in range(n):
        c1[i], j1[i], c2[i], j2[i] = _best2(etc, ready, i)
    assign = np.empty(n, np.int64)
    order = np.empty(n, np.int64)
    cnt = n
    last = -1
    for step in range(n):
        sel_p = -1
        sel_i = n
        sel_s = 0.0
        for p in range(cnt):
            i = alive[p]
            if j1[i] == last or j2[i] == last:
                c1[i], j1[i], c2[i], j2[i] = _best2(etc, ready, i)
            s = c2[i] - c1[i]  # inf when m == 1: all tie, index order
            if sel_p < 0 or s > sel_s or (s == sel_s and i < sel_i):
                sel_p = p
                sel_i = i
                sel_s = s
        j = j1[sel_i]
        ready[j] += etc[sel_i, j]
        assign[sel_i] = j
        order[step] = sel_i
        cnt -= 1
        alive[sel_p] = alive[cnt]
        last = j
    return assign, order


@njit(cache=True)
def _mct_kernel(etc, order):  # pragma: no cover - compiled
    """MCT in the given task order: argmin_j ready[j] + ETC[i][j]."""
    n, m = etc.shape
    ready = np.zeros(m)
    assign = np.empty(n, np.int64)
    for k in range(n):
        i = order[k]
        _, j = _best1(etc, ready, i)
        ready[j] += etc[i, j]
        assign[i] = j
    return assign


@njit(cache=True)
def _olb_kernel(etc):  # pragma: no cover - compiled
    """OLB in task index order: the machine that becomes free first (lowest index on ties)."""
    n, m = etc.shape
    ready = np.zeros(m)
    assign = np.empty(n, np.int64)
    for i in range(n):
        j = 0
        for k in range(1, m):
            if ready[k] < ready[j]:
                j = k
        ready[j] += etc[i, j]
        assign[i] = j
    return assign


@njit(cache=True)
def _low_kernel(etc, order, lams):  # pragma: no cover - compiled
    """Framework 1 (A4.1) for every λ in ``lams`` in one pass over the priority order.

    Eq. 3.1 divided by λ/ΣC (> 0, so the argmin is unchanged) is ready[j] + w * ETC[i][j] with
    w = 1 + (1 - λ)/λ * ΣC/ΣETC, where ΣC = R + ΣETC and R = sum of the ready times (kept incrementally).
    λ = 1 gives w = 1 exactly (pure MCT); λ = 0 is pure MET (argmin of the ETC row).
    Returns the assignments (L, n) and the canonical makespans (L,).
    """
    n, m = etc.shape
    nl = lams.shape[0]
    ready = np.zeros((nl, m))
    rsum = np.zeros(nl)
    assign = np.empty((nl, n), np.int64)
    ratio = np.empty(nl)
    for lv in range(nl):
        ratio[lv] = (1.0 - lams[lv]) / lams[lv] if lams[lv] > 0.0 else 0.0
    for k in range(n):
        i = order[k]
        se = 0.0
        met = 0
        for j in range(m):
            e = etc[i, j]
            se += e
            if e < etc[i, met]:
                met = j
        for lv in range(nl):
            if lams[lv] == 0.0:
                bj = met
            else:
                w = 1.0 + ratio[lv] * (rsum[lv] + se) / se
                r = ready[lv]
                bs = r[0] + w * etc[i, 0]
                bj = 0
                for j in range(1, m):
                    s = r[j] + w * etc[i, j]
                    if s < bs:
                        bs = s
                        bj = j
            e = etc[i, bj]
            ready[lv, bj] += e
            rsum[lv] += e
            assign[lv, i] = bj
    mk = np.empty(nl)
    loads = np.empty(m)
    for lv in range(nl):
        loads[:] = 0.0
        for i in range(n):
            loads[assign[lv, i]] += etc[i, assign[lv, i]]
        mk[lv] = loads.max()
    return assign, mk


@njit(cache=True)
def _priority_kernel(etc, rule):  # pragma: no cover - compiled
    """Task order of Framework 1 (A4.1-A4.2): rule 0/1/2 = min/max/mean of the row, decreasing.

    Decision A4.1: stable sort on -priority, so equal priorities keep ascending task index.
    The mean is the sequential row sum divided by m.
    """
    n, m = etc.shape
    prio = np.empty(n)
    for i in range(n):
        if rule == 0:
            v = etc[i, 0]
            for j in range(1, m):
                v = min(v, etc[i, j])
        elif rule == 1:
            v = etc[i, 0]
            for j in range(1, m):
                v = max(v, etc[i, j])
        else:
            v = 0.0
            for j in range(m):
                v += etc[i, j]
            v /= m
        prio[i] = -v
    return np.argsort(prio, kind="mergesort").astype(np.int64)


@njit(cache=True)
def _dominance(etc):  # pragma: no cover - compiled
    """TPD dominance matrix D[a, b] (a ≻ b) and cnt[b] = number of dominators of b (A4.4).

    a ≻ b iff ETC[a][j] >= ETC[b][j] for all j; identical rows: the lower index dominates.
    Each pair is compared once, in both directions, stopping at the first column that rules out both.
    """
    n, m = etc.shape
    dom = np.zeros((n, n), np.bool_)
    cnt = np.zeros(n, np.int64)
    for a in range(n):
        for b in range(a + 1, n):
            ge = True
            le = True
            for j in range(m):
                x = etc[a, j]
                y = etc[b, j]
                if x < y:
                    ge = False
                    if not le:
                        break
                elif x > y:
                    le = False
                    if not ge:
                        break
            if ge:
                dom[a, b] = True
                cnt[b] += 1
            elif le:
                dom[b, a] = True
                cnt[a] += 1
    return dom, cnt


@njit(cache=True)
def _tpd_kernel(etc, dom, cnt, rule, sd):  # pragma: no cover - compiled
    """TPD framework (A4.4) with First-Mapping-Step ``rule``: 0 = minCT-minCT (Luo_1),
    1 = minCT then min row SD (Luo_2), 2 = minCT then min SD of the loads after the update (Luo_2b).

    T' (tasks with no unmapped dominator) is kept as a list; mapping t decrements cnt on D[t, :].
    Candidates keep their min-CT machine incrementally as in Min-min.
    """
    n, m = etc.shape
    cnt = cnt.copy()
    ready = np.zeros(m)
    s1 = 0.0
    bc = np.empty(n)
    bj = np.empty(n, np.int64)
    cand = np.empty(n, np.int64)
    nc = 0
    for i in range(n):
        if cnt[i] == 0:
            cand[nc] = i
            nc += 1
            bc[i], bj[i] = _best1(etc, ready, i)
    assign = np.empty(n, np.int64)
    order = np.empty(n, np.int64)
    last = -1
    for step in range(n):
        sel_p = -1
        sel_i = n
        k1 = 0.0
        k2 = 0.0
        for p in range(nc):
            i = cand[p]
            if bj[i] == last:
                bc[i], bj[i] = _best1(etc, ready, i)
            if rule == 0:
                a1 = bc[i]
                a2 = 0.0
            elif rule == 1:
                a1 = sd[i]
                a2 = bc[i]
            else:
                # m^2 Var(loads after update) minus a constant = e * (2 (m r_j - S1) + (m - 1) e)
                e = etc[i, bj[i]]
                a1 = e * (2.0 * (m * ready[bj[i]] - s1) + (m - 1) * e)
                a2 = bc[i]
            if sel_p < 0 or a1 < k1 or (a1 == k1 and (a2 < k2 or (a2 == k2 and i < sel_i))):
                sel_p = p
                sel_i = i
                k1 = a1
                k2 = a2
        t = sel_i
        j = bj[t]
        ready[j] += etc[t, j]
        s1 += etc[t, j]
        assign[t] = j
        order[step] = t
        nc -= 1
        cand[sel_p] = cand[nc]
        last = j
        row = dom[t]
        for b in range(n):
            if row[b]:
                cnt[b] -= 1
                if cnt[b] == 0:
                    cand[nc] = b
                    nc += 1
                    bc[b], bj[b] = _best1(etc, ready, b)
    return assign, order


@njit(cache=True)
def _is_fc_kernel(etc):  # pragma: no cover - compiled
    """True iff every row is non-decreasing along the lexicographic order of the columns.

    Columns are ordered by row 0, ties by row 1, and so on (stable insertion sort starting from the
    argsort of row 0, so usually O(m) comparisons of O(1) rows each).
    """
    n, m = etc.shape
    perm = np.argsort(etc[0], kind="mergesort")
    for k in range(1, m):
        c = perm[k]
        p = k - 1
        while p >= 0:
            d = perm[p]
            i = 0
            while i < n and etc[i, d] == etc[i, c]:
                i += 1
            if i < n and etc[i, d] > etc[i, c]:  # column d lexicographically after c: shift it
                perm[p + 1] = d
                p -= 1
            else:
                break
        perm[p + 1] = c
    for i in range(n):
        for k in range(1, m):
            if etc[i, perm[k]] < etc[i, perm[k - 1]]:
                return False
    return True


# ============================================================================================ helpers


def _prep(etc, voltages) -> tuple[np.ndarray, np.ndarray | None]:
    a = _as_etc(etc)
    return a, (None if voltages is None else _as_voltages(voltages, a.shape[1]))


def _as_lams(lams) -> np.ndarray:
    try:
        x = np.array(lams, dtype=np.float64, ndmin=1, copy=True)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"λ values must be numbers: {exc}") from None
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"λ values must be a non-empty 1-D array, got shape {x.shape}")
    if not np.isfinite(x).all() or (x < 0).any() or (x > 1).any():
        raise ValueError(f"λ must be in [0, 1], got {x.tolist()}")
    return x


def _priority_order(etc: np.ndarray, rule: str) -> np.ndarray:
    if rule not in _RULE_CODES:
        raise ValueError(f"rule must be one of 'min', 'max', 'mean', got {rule!r}")
    return _priority_kernel(etc, _RULE_CODES[rule])


def _low_best(etc: np.ndarray, rule: str, volts: np.ndarray | None) -> Schedule:
    order = _priority_order(etc, rule)
    lams = np.array(LAMBDAS)
    assign, mk = _low_kernel(etc, order, lams)
    # Decision: best λ = minimum makespan; makespans within RTOL (relative, as A2.7) of the minimum
    # tie, and the tie goes to the smallest λ.
    k = int(np.flatnonzero(mk <= mk.min() * (1.0 + RTOL))[0])
    return _build(etc, assign[k].copy(), order, _RULES[rule], lams[k], volts)


def _low(etc, lam, voltages, rule: str) -> Schedule:
    a, volts = _prep(etc, voltages)
    if lam is None:
        return _low_best(a, rule, volts)
    lams = _as_lams(lam)
    if lams.size != 1:
        raise ValueError("lam must be a single number in [0, 1] (use lambda_sweep for several)")
    order = _priority_order(a, rule)
    assign, _ = _low_kernel(a, order, lams)
    return _build(a, assign[0].copy(), order, _RULES[rule], lams[0], volts)


def _tpd(etc: np.ndarray, rule: int, name: str, volts: np.ndarray | None) -> Schedule:
    dom, cnt = _dominance(etc)
    sd = etc.std(axis=1) if rule == 1 else np.zeros(etc.shape[0])  # population SD (A4.6)
    assign, order = _tpd_kernel(etc, dom, cnt, rule, sd)
    return _build(etc, assign, order, name, None, volts)


# ============================================================================================ public


def min_min(etc, *, voltages=None) -> Schedule:
    """Min-min (Ibarra & Kim; decision A4.3)."""
    a, volts = _prep(etc, voltages)
    assign, order = _minmax_kernel(a, False)
    return _build(a, assign, order, "min-min", None, volts)


def max_min(etc, *, voltages=None) -> Schedule:
    """Max-min: the task whose minimum completion time is largest goes first (decision A4.7)."""
    a, volts = _prep(etc, voltages)
    assign, order = _minmax_kernel(a, True)
    return _build(a, assign, order, "max-min", None, volts)


def sufferage(etc, *, voltages=None) -> Schedule:
    """Sufferage, simple version: max (second-best CT - best CT) goes first (decision A4.7)."""
    a, volts = _prep(etc, voltages)
    assign, order = _sufferage_kernel(a)
    return _build(a, assign, order, "sufferage", None, volts)


def mct(etc, *, voltages=None) -> Schedule:
    """Minimum completion time, tasks in index order (decision A4.7)."""
    a, volts = _prep(etc, voltages)
    order = np.arange(a.shape[0], dtype=np.int64)
    return _build(a, _mct_kernel(a, order), order, "mct", None, volts)


def met(etc, *, voltages=None) -> Schedule:
    """Minimum execution time: each task on its fastest machine, load ignored (decision A4.7)."""
    a, volts = _prep(etc, voltages)
    order = np.arange(a.shape[0], dtype=np.int64)
    return _build(a, np.argmin(a, axis=1).astype(np.int64), order, "met", None, volts)


def olb(etc, *, voltages=None) -> Schedule:
    """Opportunistic load balancing: tasks in index order to the earliest-free machine (decision A4.7)."""
    a, volts = _prep(etc, voltages)
    order = np.arange(a.shape[0], dtype=np.int64)
    return _build(a, _olb_kernel(a), order, "olb", None, volts)


def luo1(etc, *, voltages=None) -> Schedule:
    """Luo_1 = TPD-minCT-minCT (decision A4.5)."""
    a, volts = _prep(etc, voltages)
    return _tpd(a, 0, "luo1", volts)


def luo2(etc, *, voltages=None) -> Schedule:
    """Luo_2 = TPD-minCT-minSD, row-SD rule that reproduces the thesis (decision A4.6)."""
    a, volts = _prep(etc, voltages)
    # Decision: SD ties -> smaller CT -> lower task index (decision A4.6).
    return _tpd(a, 1, "luo2", volts)


def luo2b(etc, *, voltages=None) -> Schedule:
    """Luo_2b = TPD-minCT-minSD with the SD of the machine loads after the update (decision A4.6)."""
    a, volts = _prep(etc, voltages)
    # Decision: same tie-breaks as Luo_2 (SD ties -> smaller CT -> lower task index); the SD is compared
    # through the exactly-equivalent key e * (2 (m r_j - S1) + (m - 1) e) (m^2 Var minus a constant).
    return _tpd(a, 2, "luo2b", volts)


def low1(etc, lam: float | None = None, *, voltages=None) -> Schedule:
    """Low_1 Min-Max-Min: decreasing min-ETC order, Eq. 3.1 score (A4.1-A4.2); lam None = best λ."""
    return _low(etc, lam, voltages, "min")


def low2(etc, lam: float | None = None, *, voltages=None) -> Schedule:
    """Low_2 Max-Max-Min: decreasing max-ETC order, Eq. 3.1 score (A4.1-A4.2); lam None = best λ."""
    return _low(etc, lam, voltages, "max")


def low3(etc, lam: float | None = None, *, voltages=None) -> Schedule:
    """Low_3 Mean-Max-Min: decreasing mean-ETC order, Eq. 3.1 score (A4.1-A4.2); lam None = best λ."""
    return _low(etc, lam, voltages, "mean")


def lambda_sweep(etc, rule: str, lams=LAMBDAS) -> list[Schedule]:
    """One Low schedule per λ (rule 'min'/'max'/'mean' = Low_1/2/3), all λ in one pass (A4.1)."""
    if rule not in _RULES:
        raise ValueError(f"rule must be one of 'min', 'max', 'mean', got {rule!r}")
    a = _as_etc(etc)
    x = _as_lams(lams)
    order = _priority_order(a, rule)
    assign, _ = _low_kernel(a, order, x)
    return [_build(a, assign[k].copy(), order.copy(), _RULES[rule], x[k], None) for k in range(x.size)]


def is_full_consistent(etc) -> bool:
    """True iff one machine order makes every ETC row non-decreasing (full-consistent, decision A6.2)."""
    return _is_fc(_as_etc(etc))


def _is_fc(etc: np.ndarray) -> bool:
    # Decision: FC detection for Algorithm 9 = "rows all sorted the same way": some column order makes every
    # row non-decreasing (equal entries allowed). If such an order exists, the lexicographic order of the
    # columns is one (every two columns are elementwise comparable, and comparable + lexicographically
    # smaller = elementwise smaller), so checking the rows along it is exact, with no rounding involved.
    return bool(_is_fc_kernel(etc))


def best_performance(etc, *, voltages=None) -> Schedule:
    """Algorithm 9 (decision A4.8): Luo_1 on full-consistent ETCs, else the best Low heuristic."""
    a, volts = _prep(etc, voltages)
    if _is_fc(a):
        s = _tpd(a, 0, "luo1", volts)
    else:
        # Decision: "a low computational complexity heuristic" = the minimum-makespan schedule among
        # Low_3, Low_2, Low_1 (each at its best λ of LAMBDAS); ties (RTOL) prefer that order, Low_3 first
        # (the heuristic the thesis compares with Luo_1 in Table 3.8).
        cands = [_low_best(a, r, volts) for r in ("mean", "max", "min")]
        best = min(c.makespan for c in cands)
        s = next(c for c in cands if c.makespan <= best * (1.0 + RTOL))
    # Decision: the name records the choice, "best:luo1" or "best:low3" etc.
    return Schedule(heuristic=f"best:{s.heuristic}", assignment=s.assignment, order=s.order,
                    makespan=s.makespan, flowtime=s.flowtime, flowtime_order=s.flowtime_order,
                    loads=s.loads, lam=s.lam, energy=s.energy)


HEURISTICS: dict[str, Callable[..., Schedule]] = {
    "min-min": min_min,
    "max-min": max_min,
    "sufferage": sufferage,
    "mct": mct,
    "met": met,
    "olb": olb,
    "luo1": luo1,
    "luo2": luo2,
    "luo2b": luo2b,
    "low1": low1,
    "low2": low2,
    "low3": low3,
    "best": best_performance,
}
