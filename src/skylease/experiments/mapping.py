"""File-level entry points for ETC mapping: what ``skylease map`` and ``skylease etc`` call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from skylease.model.errors import UserError
from skylease.model.limits import check_number, check_seed

GENERATION_METHODS = ("cvb", "range")


def heuristic_names() -> list[str]:
    from skylease.planning.mapping import HEURISTICS

    return list(HEURISTICS)


def map_file(path: str | Path, heuristic: str, *, lam: float | None = None,
             voltage_seed: int | None = None) -> dict[str, Any]:
    """Read an ETC file, run one heuristic, return the JSON-ready result."""
    from skylease.planning.mapping import HEURISTICS, energy, random_voltages
    from skylease.traces.etc import read_etc

    if heuristic not in HEURISTICS:
        raise UserError(f"unknown heuristic {heuristic!r}; choose from {', '.join(HEURISTICS)}",
                        field="--heuristic")
    if lam is not None:
        if not 0.0 <= lam <= 1.0:
            raise UserError(f"lambda must be in [0, 1], got {lam}", field="--lambda")
        if heuristic not in ("low1", "low2", "low3"):
            raise UserError(f"--lambda applies to low1, low2 and low3, not {heuristic}",
                            field="--lambda")
    if voltage_seed is not None:
        check_seed(voltage_seed, "--voltages")
    etc = read_etc(path)
    voltages = None if voltage_seed is None else random_voltages(etc.shape[1], voltage_seed)
    fn = HEURISTICS[heuristic]
    sched = fn(etc, lam, voltages=voltages) if lam is not None else fn(etc, voltages=voltages)
    e = sched.energy
    if voltages is not None and e is None:
        e = energy(etc, sched.assignment, voltages)
    return {
        "heuristic": heuristic,
        "tasks": int(etc.shape[0]),
        "machines": int(etc.shape[1]),
        "makespan": float(sched.makespan),
        "flowtime": float(sched.flowtime),
        "energy": None if e is None else float(e),
        "lambda": sched.lam,
        "assignment": np.asarray(sched.assignment).tolist(),
    }


def generate_file(out: str | Path, *, tasks: int, machines: int, method: str = "cvb",
                  v_task: float = 0.6, v_mach: float = 0.3, mu: float = 1000.0,
                  r_task: float = 3000.0, r_mach: float = 1000.0, consistency: str = "oc",
                  seed: int = 0) -> dict[str, Any]:
    """Generate an ETC instance and write it in the Braun format; returns its statistics."""
    from skylease.experiments.report import check_output
    from skylease.traces.etc import (
        CONSISTENCIES,
        check_etc_size,
        cvb,
        etc_stats,
        make_consistent,
        range_based,
        write_etc,
    )

    for field, value in (("--tasks", tasks), ("--machines", machines)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
            raise UserError(f"must be a whole number >= 1, got {value!r}", field=field)
    check_etc_size(tasks, machines, field="--tasks x --machines")
    seed = check_seed(seed)
    check_output(out, "OUT_FILE", formats=None)
    if method not in GENERATION_METHODS:
        raise UserError(f"method must be one of {', '.join(GENERATION_METHODS)}", field="--method")
    if consistency not in CONSISTENCIES:
        raise UserError(f"consistency must be one of {', '.join(CONSISTENCIES)}",
                        field="--consistency")
    if method == "cvb":
        for field, value in (("--v-task", v_task), ("--v-mach", v_mach), ("--mu", mu)):
            check_number(value, field, above=0)
        etc = cvb(tasks, machines, v_task, v_mach, mu, seed)
    else:
        for field, value in (("--r-task", r_task), ("--r-mach", r_mach)):
            check_number(value, field, minimum=1, hint="the range is U(1, R)")
        etc = range_based(tasks, machines, r_task, r_mach, seed)
    etc = make_consistent(etc, consistency, seed)
    write_etc(out, etc)
    return {"file": str(out), **etc_stats(etc)}


def stats_file(path: str | Path) -> dict[str, Any]:
    from skylease.traces.etc import etc_stats, read_etc

    etc = read_etc(path)
    return {"file": str(path), "tasks": int(etc.shape[0]), "machines": int(etc.shape[1]),
            **etc_stats(etc)}
