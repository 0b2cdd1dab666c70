"""File-level entry points for ETC mapping: what ``skylease map`` and ``skylease etc`` call."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from skylease.model.errors import UserError
from skylease.model.limits import check_number, check_seed

GENERATION_METHODS = ("cvb", "range")


def heuristic_names() -> list[str]:
    from skylease.planning.mapping import HEURISTICS

    return list(HEURISTICS)


HEURISTIC_GROUP = "skylease.heuristics"  # the entry-point group of installed mapping heuristics


def map_file(path: str | Path, heuristic: str, *, lam: float | None = None,
             voltage_seed: int | None = None, heuristic_args: Sequence[str] = ()) -> dict[str, Any]:
    """Read an ETC file, run one heuristic (a built-in name, or a
    :class:`~skylease.planning.mapping.plugin.MappingHeuristic` subclass named ``MODULE:CLASS``,
    ``FILE.py:CLASS`` or by an installed package, built with ``heuristic_args``), return the
    JSON-ready result. A plug-in's answer is checked before it is evaluated."""
    from skylease.planning.mapping import HEURISTICS, energy, random_voltages
    from skylease.planning.mapping.plugin import LOW, Builtin
    from skylease.traces.etc import read_etc

    builtin = heuristic in HEURISTICS
    if builtin and heuristic_args:
        raise UserError(f"the built-in heuristic {heuristic} takes no parameters (--heuristic-arg goes "
                        "with a MODULE:CLASS or FILE.py:CLASS heuristic)", field="--heuristic-arg")
    if lam is not None:
        if not 0.0 <= lam <= 1.0:
            raise UserError(f"lambda must be in [0, 1], got {lam}", field="--lambda")
        if heuristic not in LOW:
            raise UserError(f"--lambda applies to low1, low2 and low3, not {heuristic}",
                            field="--lambda")
    if voltage_seed is not None:
        check_seed(voltage_seed, "--voltages")
    h = Builtin(heuristic, lam) if builtin else load_heuristic(heuristic, heuristic_args)
    etc = read_etc(path)
    voltages = None if voltage_seed is None else random_voltages(etc.shape[1], voltage_seed)
    sched = h.schedule(etc, voltages=voltages) if builtin else _run_plugin(h, heuristic, etc, voltages)
    e = sched.energy
    if voltages is not None and e is None:
        e = energy(etc, sched.assignment, voltages)
    res: dict[str, Any] = {
        "heuristic": heuristic,
        "tasks": int(etc.shape[0]),
        "machines": int(etc.shape[1]),
        "makespan": float(sched.makespan),
        "flowtime": float(sched.flowtime),
        "energy": None if e is None else float(e),
        "lambda": sched.lam,
        "assignment": np.asarray(sched.assignment).tolist(),
    }
    if not builtin:  # (the built-ins' output is as it was)
        from skylease.control.plugins import describe

        res["heuristic_class"] = describe(h)
    return res


def load_heuristic(spec: str, args: Sequence[str] = ()) -> Any:
    """The :class:`~skylease.planning.mapping.plugin.MappingHeuristic` ``spec`` names, built with
    ``args`` (``KEY=VALUE``); every mistake one line on ``--heuristic`` or ``--heuristic-arg``."""
    from skylease.control import plugins
    from skylease.planning.mapping import HEURISTICS
    from skylease.planning.mapping.plugin import MappingHeuristic

    return plugins.load_option(spec, args, base=MappingHeuristic, group=HEURISTIC_GROUP,
                               what="mapping heuristic", builtins=HEURISTICS, option="--heuristic")


def _run_plugin(h: Any, spec: str, etc: np.ndarray, voltages: np.ndarray | None) -> Any:
    """A plug-in's schedule; its wrong answer or its failure as one line naming it."""
    from skylease.control import plugins
    from skylease.planning.mapping.plugin import BadAnswer, MappingHeuristic

    name = plugins.class_path(type(h))
    try:  # (the base's schedule, even if the class overrides it: its answer is always checked)
        return MappingHeuristic.schedule(h, etc, voltages=voltages)
    except BadAnswer as e:
        raise UserError(f"{name}.assign(etc) {e}", field="--heuristic") from None
    except Exception as e:  # the plug-in's own bug: where it is, in one line
        where = plugins.failure(e, name)
        raise UserError(f"{name}.assign(etc) fails: {type(e).__name__}: {_first_line(e)}",
                        file=where.file, line=where.line, field="--heuristic") from None


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else "(no message)"


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
