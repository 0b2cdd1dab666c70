"""Desktop power models: watts drawn at an aggregate CPU load x (percent of all cores, 0-100).

Two kinds, both plain frozen data (decision B3.1 in docs/decisions/thesis.md; issue 9 "Model"):

* :class:`PowerCurve` -- the thesis's regression on wattmeter readings, ``f(x) = 45.341 x^0.1651``
  (Fig. 6.1; Eq. 6.5 with V_ini = 45.341 W, V_max = 97 W). The regression gives f(0) = 0; an idle
  but switched-on desktop draws ``idle_w`` = 47 W instead (Table 6.2, decision B3.1).
* :class:`PowerTable` -- a SPECpower table, watts at 0, 10, ..., 100 % load, linearly interpolated
  in between (as CloudSim's ``PowerModelSpecPower`` does).

Both evaluate whole numpy arrays at once (``watts(x)``), which the energy accounting relies on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

__all__ = ["THESIS_POWER", "PowerCurve", "PowerModel", "PowerTable"]

_STEPS = np.linspace(0.0, 100.0, 11)
_STEPS.setflags(write=False)


class PowerModel(Protocol):
    """What the energy accounting needs from a power model."""

    name: str

    @property
    def idle_w(self) -> float: ...

    def watts(self, load_pct: np.ndarray) -> np.ndarray: ...


@dataclass(frozen=True, slots=True)
class PowerCurve:
    """``a * x**b`` watts at load x in (0, 100] %; ``idle_w`` at x = 0."""

    a: float = 45.341
    b: float = 0.1651
    idle: float = 47.0
    name: str = "thesis"

    @property
    def idle_w(self) -> float:
        return self.idle

    def watts(self, load_pct: np.ndarray) -> np.ndarray:
        x = np.asarray(load_pct, dtype=np.float64)
        with np.errstate(divide="ignore"):
            p = self.a * np.power(x, self.b)
        return np.where(x > 0, p, self.idle)


@dataclass(frozen=True, slots=True)
class PowerTable:
    """Watts at 0, 10, ..., 100 % load (11 values), linearly interpolated."""

    table: tuple[float, ...]
    name: str = "table"

    def __post_init__(self) -> None:
        t = np.asarray(self.table, dtype=np.float64)
        if t.shape != (11,) or not np.isfinite(t).all() or (t < 0).any():
            raise ValueError(f"a power table is 11 finite watts >= 0 (0, 10, ..., 100 %), got {self.table!r}")

    @property
    def idle_w(self) -> float:
        return float(self.table[0])

    def watts(self, load_pct: np.ndarray) -> np.ndarray:
        return np.interp(np.asarray(load_pct, dtype=np.float64), _STEPS, np.asarray(self.table, np.float64))


#: The thesis's desktop (Fig. 6.1): f(100) = 96.98 W, f(50) = 86.50 W, idle 47 W.
THESIS_POWER = PowerCurve()
