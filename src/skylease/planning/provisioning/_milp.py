"""A tiny in-process MILP builder on HiGHS (highspy): variables, sparse rows, solve, re-solve."""

from __future__ import annotations

import functools
import math
import os
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import highspy
import numpy as np

INF = highspy.kHighsInf


@functools.cache
def _absorb_banner() -> None:
    """Create this process's first ``Highs`` with C stdout sent to /dev/null.

    highspy 1.16 prints its copyright banner on the first ``Highs()`` of a process, before any
    option can be set; on stdout it would corrupt ``--json`` output. Later instances stay silent.
    """
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)


@dataclass(frozen=True)
class MilpResult:
    status: str  # "optimal" | "infeasible" | "error"
    objective: float
    x: np.ndarray
    solve_ms: float
    raw_status: str


class Milp:
    """Collects columns and rows, then hands them to one ``highspy.Highs`` instance."""

    def __init__(self) -> None:
        self.cost: list[float] = []
        self.lb: list[float] = []
        self.ub: list[float] = []
        self.integer: list[int] = []
        self._lo: list[float] = []
        self._hi: list[float] = []
        self._idx: list[list[int]] = []
        self._val: list[list[float]] = []
        self._h: highspy.Highs | None = None
        self.start: dict[int, float] | None = None  # a feasible point to hand HiGHS as its first incumbent

    def var(self, lb: float = 0.0, ub: float = INF, cost: float = 0.0, *, integer: bool = False) -> int:
        self.cost.append(float(cost))
        self.lb.append(float(lb))
        self.ub.append(float(ub))
        if integer:
            self.integer.append(len(self.cost) - 1)
        return len(self.cost) - 1

    def binary(self, cost: float = 0.0) -> int:
        return self.var(0.0, 1.0, cost, integer=True)

    def row(self, terms: Mapping[int, float] | Iterable[tuple[int, float]], lo: float = -INF,
            hi: float = INF) -> None:
        items = terms.items() if isinstance(terms, Mapping) else terms
        idx, val = [], []
        for i, v in items:
            if v != 0.0:
                idx.append(int(i))
                val.append(float(v))
        self._lo.append(float(lo))
        self._hi.append(float(hi))
        self._idx.append(idx)
        self._val.append(val)

    @property
    def num_vars(self) -> int:
        return len(self.cost)

    @property
    def num_rows(self) -> int:
        return len(self._lo)

    def _build(self) -> highspy.Highs:
        _absorb_banner()
        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        # Decision: prove optimality exactly (the paper needs optimal plans; our models are tiny).
        h.setOptionValue("mip_rel_gap", 0.0)
        h.setOptionValue("mip_abs_gap", 1e-9)
        # Decision: the feasibility-jump primal heuristic costs ~5-6 ms per solve and finds
        # nothing on these small models that presolve and the first LP do not (measured by
        # benchmarks/bench_provisioning.py: single-cluster MR 9.8 -> ~1.5 ms, same optima).
        h.setOptionValue("mip_heuristic_run_feasibility_jump", False)
        n = self.num_vars
        h.addCols(n, np.array(self.cost), np.array(self.lb), np.array(self.ub), 0,
                  np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int32), np.zeros(0))
        if self.num_rows:
            starts = np.cumsum([0] + [len(r) for r in self._idx[:-1]]).astype(np.int32)
            idx = np.fromiter((i for r in self._idx for i in r), dtype=np.int32)
            val = np.fromiter((v for r in self._val for v in r), dtype=np.float64)
            h.addRows(self.num_rows, np.array(self._lo), np.array(self._hi), len(idx), starts, idx, val)
        if self.integer:
            ints = np.array(self.integer, dtype=np.int32)
            h.changeColsIntegrality(len(ints), ints,
                                    np.full(len(ints), highspy.HighsVarType.kInteger.value, dtype=np.uint8))
        if self.start:
            idx = np.array(list(self.start), dtype=np.int32)
            h.setSolution(len(idx), idx, np.array(list(self.start.values()), dtype=np.float64))
        return h

    def solve(self) -> MilpResult:
        self._h = self._build()
        return self._run()

    def resolve(self, cost: Mapping[int, float], extra_rows: Iterable[tuple[dict[int, float], float, float]]
                ) -> MilpResult:
        """Re-solve the built model with a new objective and extra rows (lexicographic second stage)."""
        h = self._h
        assert h is not None, "solve() first"
        n = self.num_vars
        new_cost = np.zeros(n)
        for i, v in cost.items():
            new_cost[i] = v
        first = np.array(h.getSolution().col_value)
        h.changeColsCost(n, np.arange(n, dtype=np.int32), new_cost)
        for terms, lo, hi in extra_rows:
            idx = np.array(list(terms), dtype=np.int32)
            val = np.array(list(terms.values()), dtype=np.float64)
            h.addRow(lo, hi, len(idx), idx, val)
        # the first stage's optimum satisfies the new rows: start the second stage from it
        sol = highspy.HighsSolution()
        sol.col_value = first.tolist()
        h.setSolution(sol)
        return self._run()

    def solve_lexicographic(self, cost_var: int, secondary: Mapping[int, float], *, second: bool = True,
                            weight: float | None = None) -> tuple[MilpResult, float, int]:
        """Solve for minimum cost; then, if ``second``, minimise ``secondary`` among the plans within
        a hair of that cost (decision M10 in docs/decisions/ilp.md). Returns the result, total solve ms and
        stages.

        With ``weight`` (a positive number small enough that ``weight * max(secondary)`` is below
        the smallest possible difference between two costs), both are done in one solve of
        ``cost + weight * secondary``, which has the same optimum.
        """
        if second and weight is not None and secondary:
            for i, v in secondary.items():
                self.cost[i] += weight * v
            res = self.solve()
            return res, res.solve_ms, 1
        res = self.solve()
        solve_ms, stages = res.solve_ms, 1
        if res.status == "optimal" and second:
            c_star = res.objective
            tol = 1e-6 + 1e-9 * abs(c_star)
            res2 = self.resolve(secondary, [({cost_var: 1.0}, -math.inf, c_star + tol)])
            solve_ms += res2.solve_ms
            stages = 2
            if res2.status == "optimal":
                res = res2
        return res, solve_ms, stages

    def _run(self) -> MilpResult:
        h = self._h
        assert h is not None
        t0 = time.perf_counter()
        h.run()
        ms = (time.perf_counter() - t0) * 1000.0
        st = h.getModelStatus()
        raw = h.modelStatusToString(st)
        if st == highspy.HighsModelStatus.kOptimal:
            x = np.array(h.getSolution().col_value)
            return MilpResult("optimal", float(h.getInfo().objective_function_value), x, ms, raw)
        if st in (highspy.HighsModelStatus.kInfeasible, highspy.HighsModelStatus.kUnboundedOrInfeasible):
            # Decision: our models are bounded below (cost >= 0 or bounded integer boxes), so
            # "unbounded or infeasible" from presolve means infeasible.
            return MilpResult("infeasible", float("nan"), np.zeros(self.num_vars), ms, raw)
        return MilpResult("error", float("nan"), np.zeros(self.num_vars), ms, raw)
