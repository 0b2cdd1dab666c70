"""What a mapping heuristic is, for ``skylease map --heuristic``: the built-ins and a user's own class.

A heuristic of one's own derives from :class:`MappingHeuristic` and implements
:meth:`~MappingHeuristic.assign`: given the ETC matrix (tasks x machines, read-only), the machine
index of every task. Its answer is checked (:class:`BadAnswer` says what is wrong) and evaluated
like the built-ins' (makespan, SPT flowtime, energy with ``voltages``). The built-ins are
:class:`Builtin` objects that call the functions of :data:`~.heuristics.HEURISTICS` unchanged, so
their schedules (mapping order, λ) are exactly what those functions return. Pure: no I/O; the loading of a
class is the caller's (``skylease.experiments.mapping``). Why so: ``docs/decisions/map-place-plugins.md``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._inputs import _as_assignment, _as_etc
from .energy import _as_voltages
from .heuristics import HEURISTICS
from .schedule import Schedule, _build

__all__ = ["BadAnswer", "Builtin", "MappingHeuristic"]

LOW = ("low1", "low2", "low3")


class BadAnswer(ValueError):
    """A heuristic's answer that is not an assignment of every task to a machine."""


class MappingHeuristic:
    """Base of a mapping heuristic: subclass it and implement :meth:`assign`.

    ``name`` is what the result calls it (default: the class's name).
    """

    name: str = ""

    def assign(self, etc: np.ndarray) -> Any:
        """The machine index (0 to machines - 1) of every task, in task order: a sequence of ints."""
        raise NotImplementedError(f"{type(self).__qualname__} does not implement assign(etc)")

    def schedule(self, etc: Any, *, voltages: Any = None) -> Schedule:
        """The schedule of :meth:`assign`'s answer (tasks mapped in task order); :class:`BadAnswer`
        when it is not a machine index per task."""
        a = _as_etc(etc)
        volts = None if voltages is None else _as_voltages(voltages, a.shape[1])
        view = a.copy()
        view.setflags(write=False)  # the heuristic reads the ETC; it cannot change what is evaluated
        answer = self.assign(view)
        assignment = check_assignment(answer, *a.shape)
        return _build(a, assignment, np.arange(a.shape[0], dtype=np.int64),
                      self.name or type(self).__name__, None, volts)


def check_assignment(answer: Any, tasks: int, machines: int) -> np.ndarray:
    """``answer`` as an int64 machine index per task, or :class:`BadAnswer` saying what it is."""
    if answer is None:
        raise BadAnswer("returned None, not a machine index per task")
    try:
        arr = np.asarray(answer)
    except (TypeError, ValueError) as e:  # ragged lists and the like
        raise BadAnswer(f"returned something that is not a list of machine indices ({e})") from None
    if arr.ndim != 1 or arr.shape[0] != tasks:
        raise BadAnswer(f"returned {arr.shape[0] if arr.ndim == 1 else f'shape {arr.shape}'} values; "
                        f"expected one machine index per task ({tasks})")
    if arr.dtype.kind == "b" or (arr.dtype.kind not in "iuf"):
        raise BadAnswer(f"returned {arr.dtype} values; expected machine indices (integers)")
    try:
        return _as_assignment(arr, tasks, machines)
    except ValueError as e:
        raise BadAnswer(f"returned {e}") from None


class Builtin(MappingHeuristic):
    """One of :data:`~.heuristics.HEURISTICS` by name, with λ for low1/low2/low3 (None: the sweep)."""

    def __init__(self, name: str, lam: float | None = None) -> None:
        if name not in HEURISTICS:
            raise ValueError(f"unknown heuristic {name!r}; choose from {', '.join(HEURISTICS)}")
        if lam is not None and name not in LOW:
            raise ValueError(f"lambda applies to {', '.join(LOW)}, not {name}")
        self.name = name
        self.lam = lam

    def schedule(self, etc: Any, *, voltages: Any = None) -> Schedule:
        fn = HEURISTICS[self.name]
        if self.lam is not None:
            return fn(etc, self.lam, voltages=voltages)
        return fn(etc, voltages=voltages)

    def assign(self, etc: np.ndarray) -> np.ndarray:
        return self.schedule(etc).assignment
