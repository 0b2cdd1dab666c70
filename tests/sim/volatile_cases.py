"""Hand-made instances of the volatile-hosts scenario whose results are worked out by hand, one per
same-instant rule of docs/decisions/simgrid-scenario.md: tests/sim/test_volatile.py runs them on our
side, tests/sim/test_simgrid_agreement.py through SimGrid too."""

from __future__ import annotations

import math

import numpy as np

from skylease.sim.volatile import VolatileInstance

INF = math.inf


def instance(speeds, intervals, work) -> VolatileInstance:
    """``intervals[i]``: host i's (on, off) pairs."""
    starts = [a for iv in intervals for a, _ in iv]
    ends = [b for iv in intervals for _, b in iv]
    bounds = np.concatenate([[0], np.cumsum([len(iv) for iv in intervals])])
    return VolatileInstance(np.array(speeds, float), np.array(starts, float), np.array(ends, float), bounds,
                            np.array(work, float))


# Hand-made cases, shared with the SimGrid agreement test: (name, instance, makespan, interrupted).
CASES = [
    # one host always on, speed 2: 4 flops then 6 flops
    ("always-on", instance([2.0], [[(0, INF)]], [4, 6]), 5.0, 0),
    # off at 3 with 6 of its 10 flops done: lost, redone from 5
    ("lost-and-back", instance([2.0], [[(0, 3), (5, INF)]], [10]), 10.0, 1),
    # rule 1: the task ends exactly when its host goes off: done, not lost
    ("ends-at-off", instance([2.0], [[(0, 5), (7, INF)]], [10, 2]), 8.0, 0),
    # rules 2 and 3: host 0 goes off at 3 as host 1 comes on; the lost task (10 flops) is requeued
    # before host 1 asks, so host 1 (speed 1) takes it: 3 + 10 = 13; host 0 is back at 4 for the other
    ("off-then-on", instance([2.0, 1.0], [[(0, 3), (4, INF)], [(3, INF)]], [10, 2]), 13.0, 1),
    # a host off at 0 comes on at 2; hosts on at 0 ask in index order (host 1 gets task 0)
    ("late-host", instance([1.0, 1.0], [[(2, INF)], [(0, INF)]], [3, 1, 1]), 4.0, 0),
    # an idle host waiting takes a lost task at once: host 0 idle from 1, host 1 off at 2 -> task 1 on
    # host 0 from 2 to 6 (4 flops at speed 1); host 1 never comes back
    ("idle-takes-lost", instance([1.0, 1.0], [[(0, INF)], [(0, 2)]], [1, 4]), 6.0, 1),
]
