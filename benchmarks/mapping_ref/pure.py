"""Straightforward pure-Python reference implementations (plain lists and loops, no numpy).

Benchmark-only twins of ``mapping_ref.c``, written to make exactly the same floating-point operations
in the same order, so that both produce bit-identical makespans, assignments and orders (the benchmark
asserts it). Definitions and tie-breaks: decisions A4.1-A4.3 and A4.7 in docs/decisions/thesis.md.

Every function takes ``etc`` as a list of n rows (lists of m floats) and returns
``(assignment, makespan, order, extra)``: assignment[i] is task i's machine, order is the mapping
sequence (for Low_3: the priority order), extra is the best lambda index for Low_3, else -1.

Ties: lowest machine index (``list.index`` of the minimum), then lowest task index.
"""

from __future__ import annotations

import sys
from functools import reduce
from operator import add

INF = float("inf")
LAMBDAS = [k / 10 for k in range(11)]  # 0.0, 0.1, ..., 1.0, each the double nearest the decimal

if sys.version_info < (3, 12):
    seqsum = sum  # plain left-to-right double addition, like the C loop
else:  # 3.12+ sum() of floats is compensated (Neumaier); keep the C summation order instead

    def seqsum(xs):
        return reduce(add, xs, 0.0)


def _best(row, ready):
    c = [r + e for r, e in zip(ready, row, strict=True)]
    b = min(c)
    return b, c.index(b)


def _best2(row, ready):
    c = [r + e for r, e in zip(ready, row, strict=True)]
    b = min(c)
    bj = c.index(b)
    c[bj] = INF
    s = min(c)  # +inf when m == 1
    return b, bj, s, (c.index(s) if s < INF else -1)


def min_min_rescan(etc):
    """Textbook Min-min: every step rescans every unassigned task, O(n^2 m)."""
    n, m = len(etc), len(etc[0])
    ready = [0.0] * m
    assign = [-1] * n
    order = []
    unassigned = list(range(n))  # kept in ascending index order
    while unassigned:
        cv, kpos, kj = INF, -1, -1
        for pos, i in enumerate(unassigned):
            c, j = _best(etc[i], ready)
            if c < cv or kpos < 0:
                cv, kpos, kj = c, pos, j
        k = unassigned.pop(kpos)
        assign[k] = kj
        order.append(k)
        ready[kj] = cv
    return assign, max(ready), order, -1


def min_min(etc):
    """Incremental Min-min: after loading machine j only tasks whose best machine was j are rescanned."""
    n, m = len(etc), len(etc[0])
    ready = [0.0] * m
    assign = [-1] * n
    order = []
    best = [0.0] * n
    bj = [0] * n
    for i in range(n):
        best[i], bj[i] = _best(etc[i], ready)
    for _ in range(n):
        cv = min(best)  # assigned tasks hold +inf
        k = best.index(cv)
        j = bj[k]
        assign[k] = j
        order.append(k)
        ready[j] = cv
        best[k] = INF
        bj[k] = -1
        for i in [i for i, b in enumerate(bj) if b == j]:
            best[i], bj[i] = _best(etc[i], ready)
    return assign, max(ready), order, -1


def sufferage_rescan(etc):
    """Textbook Sufferage (simple version): every step rescans every unassigned task, O(n^2 m)."""
    n, m = len(etc), len(etc[0])
    ready = [0.0] * m
    assign = [-1] * n
    order = []
    unassigned = list(range(n))
    while unassigned:
        sv, kpos, kj, kb = -INF, -1, -1, 0.0
        for pos, i in enumerate(unassigned):
            b, bj, s, _ = _best2(etc[i], ready)
            su = s - b
            if su > sv or kpos < 0:
                sv, kpos, kj, kb = su, pos, bj, b
        k = unassigned.pop(kpos)
        assign[k] = kj
        order.append(k)
        ready[kj] = kb
    return assign, max(ready), order, -1


def sufferage(etc):
    """Incremental Sufferage: only tasks whose best or second-best machine was just loaded are rescanned."""
    n, m = len(etc), len(etc[0])
    ready = [0.0] * m
    assign = [-1] * n
    order = []
    best = [0.0] * n
    bj = [0] * n
    sj = [0] * n
    suff = [0.0] * n
    for i in range(n):
        b, bj[i], s, sj[i] = _best2(etc[i], ready)
        best[i] = b
        suff[i] = s - b
    for _ in range(n):
        sv = max(suff)  # assigned tasks hold -inf
        k = suff.index(sv)
        j = bj[k]
        assign[k] = j
        order.append(k)
        ready[j] = best[k]
        suff[k] = -INF
        bj[k] = sj[k] = -2
        for i in [i for i in range(n) if bj[i] == j or sj[i] == j]:
            b, bj[i], s, sj[i] = _best2(etc[i], ready)
            best[i] = b
            suff[i] = s - b
    return assign, max(ready), order, -1


def low3(etc, lambdas=LAMBDAS):
    """Low_3 (Mean-Max-Min) over a lambda sweep; the minimum makespan wins (smaller lambda on ties)."""
    n, m = len(etc), len(etc[0])
    rowsum = [seqsum(row) for row in etc]
    prio = [se / m for se in rowsum]
    order = sorted(range(n), key=lambda i: -prio[i])  # stable: equal priorities keep ascending index
    best_mk, best_l, best_assign = INF, -1, None
    for li, lam in enumerate(lambdas):
        oml = 1.0 - lam
        ready = [0.0] * m
        assign = [-1] * n
        for i in order:
            row = etc[i]
            se = rowsum[i]
            c = [r + e for r, e in zip(ready, row, strict=True)]
            sc = seqsum(c)
            sf = [lam * cj / sc + oml * e / se for cj, e in zip(c, row, strict=True)]
            j = sf.index(min(sf))
            ready[j] = c[j]
            assign[i] = j
        mk = max(ready)
        if mk < best_mk:
            best_mk, best_l, best_assign = mk, li, assign
    return best_assign, best_mk, order, best_l


def low3_fast(etc, lambdas=LAMBDAS):
    """Low_3 with the rescaled score skylease uses (see mapping_ref.c, low3_fast): all lambdas in one pass.

    SF / (lam / sum_k C_k) = ready_j + w * ETC_j, w = 1 + (1 - lam)/lam * (R + sum ETC)/sum ETC, where R is
    the sum of the ready times; lam = 0 is MET (the row's fastest machine). Same argmin as Eq. 3.1 in exact
    arithmetic; the rounding differs, so near-ties may break differently from ``low3``.
    """
    n, m = len(etc), len(etc[0])
    prio = [seqsum(row) / m for row in etc]
    order = sorted(range(n), key=lambda i: -prio[i])
    nl = len(lambdas)
    ratio = [(1.0 - lam) / lam if lam > 0.0 else 0.0 for lam in lambdas]
    ready = [[0.0] * m for _ in range(nl)]
    rsum = [0.0] * nl
    assign = [[-1] * n for _ in range(nl)]
    for i in order:
        row = etc[i]
        se = seqsum(row)
        met = row.index(min(row))
        for li in range(nl):
            r = ready[li]
            if lambdas[li] == 0.0:
                j = met
            else:
                w = 1.0 + ratio[li] * (rsum[li] + se) / se
                s = [rj + w * e for rj, e in zip(r, row, strict=True)]
                j = s.index(min(s))
            r[j] += row[j]
            rsum[li] += row[j]
            assign[li][i] = j
    mks = [max(r) for r in ready]
    best_l = mks.index(min(mks))  # smaller lambda on ties
    return assign[best_l], mks[best_l], order, best_l


def low3_per_lambda(etc, lambdas=LAMBDAS):
    """Makespan of Low_3 at each lambda (for the self-test on the thesis example)."""
    return [low3(etc, [lam])[1] for lam in lambdas]
