"""Desktop-grid middleware simulators (XWHEP, BOINC) for SpeQuloS (decisions S7, S11-S14 in
docs/decisions/spequlos.md).

* :mod:`.workload` -- BoT categories (Table 6), node powers (Table 4), credits.
* :mod:`.flat` -- traces flattened for fast per-node interval lookups; hashed ON offsets.
* :mod:`.env` -- :class:`DesktopGridEnv` (a :class:`~skylease.control.env.TailEnvironment`).
* :mod:`.accel` -- BOINC's batch acceleration (:class:`BatchAccel`, ``DGParams(accel=...)``).
"""

from skylease.sim.dg.accel import BatchAccel
from skylease.sim.dg.env import BOINCEnv, DesktopGridEnv, DGParams, DGResult, XWHEPEnv
from skylease.sim.dg.flat import FlatTrace, flatten
from skylease.sim.dg.workload import DGBot, credits_for, make_bot, node_powers

__all__ = [
    "BOINCEnv",
    "BatchAccel",
    "DGBot",
    "DGParams",
    "DGResult",
    "DesktopGridEnv",
    "FlatTrace",
    "XWHEPEnv",
    "credits_for",
    "flatten",
    "make_bot",
    "node_powers",
]
