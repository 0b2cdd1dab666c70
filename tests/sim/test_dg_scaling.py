"""What a BOINC run keeps for the garbage collector does not grow with the bag (issue 25, item 5;
docs/performance.md, "Scaling").

Each collection walks every item of every live list, deque and set of its generation, a cold
object per item: per-task lists, a set per WU and a tuple per result sent made every event of a
run dearer as the bag grew. Numbers per task or per slot now live in typed arrays, which the
collector does not look into.
"""

from __future__ import annotations

import gc
import types

from skylease.model.availability import Availability, AvailabilityTrace
from skylease.sim.dg import DesktopGridEnv, DGBot

_OPAQUE = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType)


def walked(n_tasks: int) -> int:
    """References the collector walks in the containers a finished BOINC run of ``n_tasks`` keeps
    (reached from the environment's attributes; classes, modules and functions left out)."""
    nodes = tuple(Availability.from_intervals([(0.0, 1e7)]) for _ in range(20))
    env = DesktopGridEnv("boinc", AvailabilityTrace("test", nodes, 0.0, 1e7),
                         DGBot.homogeneous(n_tasks, 60_000.0), seed=1)
    env.run()
    gc.collect()  # as a collection would: tuples of numbers stop being tracked
    seen: set[int] = set()
    todo = list(vars(env).values())
    total = 0
    while todo:
        o = todo.pop()
        if id(o) in seen or isinstance(o, _OPAQUE) or not gc.is_tracked(o):
            continue
        seen.add(id(o))
        refs = gc.get_referents(o)
        total += len(refs)
        todo.extend(refs)
    return total


def test_a_run_keeps_no_collector_reference_per_task() -> None:
    small, big = walked(2_000), walked(12_000)
    # before: about 15 per task (send counts, nops, arrivals, times, a set per WU, the deadline deque)
    assert big - small <= 0.1 * (12_000 - 2_000)
