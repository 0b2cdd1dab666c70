"""Per-unit billing and budgets.

A host that runs from t0 to t1 is charged ceil((t1 - t0) / unit) units, at least ``min_units``
(per-second billing with a one-minute minimum is unit=1, min_units=60). A duration that exceeds a
whole number of units by less than ``EPS`` seconds is not charged an extra unit: floating-point
sums of task times must not buy a new hour (a decision of ours; the papers are silent).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy is imported where arrays are made: a real run of commands never needs it
    import numpy as np

EPS = 1e-9


@dataclass(frozen=True, slots=True)
class Billing:
    """How one host is charged: ``price`` per started ``unit`` seconds (free unless a price is given,
    as everywhere in skylease)."""

    unit: float = 3600.0
    price: float = 0.0
    min_units: int = 1

    def __post_init__(self) -> None:
        if not (self.unit > 0 and math.isfinite(self.unit)):
            raise ValueError(f"billing unit must be > 0 seconds, got {self.unit!r}")
        if not (self.price >= 0 and math.isfinite(self.price)):
            raise ValueError(f"price must be >= 0, got {self.price!r}")
        if self.min_units < 0:
            raise ValueError(f"min_units must be >= 0, got {self.min_units!r}")

    def units(self, duration: float) -> int:
        """Charged units for a host that ran ``duration`` seconds."""
        if duration < 0:
            raise ValueError(f"duration must be >= 0, got {duration!r}")
        return max(self.min_units, math.ceil(duration / self.unit - EPS / self.unit))

    def cost(self, duration: float) -> float:
        return self.units(duration) * self.price

    def units_many(self, durations: np.ndarray) -> np.ndarray:
        """Vectorised :meth:`units`."""
        import numpy as np

        d = np.asarray(durations, float)
        if (d < 0).any():
            raise ValueError("durations must be >= 0")
        return np.maximum(self.min_units, np.ceil(d / self.unit - EPS / self.unit)).astype(np.int64)

    def charged_until(self, started: float, now: float) -> float:
        """End of the unit being paid for at ``now`` by a host started at ``started``."""
        return started + self.units(now - started) * self.unit

    def affordable_units(self, money: float) -> int:
        """Whole units that ``money`` buys (unbounded if the price is zero)."""
        if self.price == 0:
            return 2**62
        return math.floor(money / self.price + EPS)


@dataclass(frozen=True, slots=True)
class Budget:
    """A spending limit in currency units."""

    limit: float

    def __post_init__(self) -> None:
        if not (self.limit >= 0 and math.isfinite(self.limit)):
            raise ValueError(f"budget must be a finite number >= 0, got {self.limit!r}")

    def remaining(self, spent: float) -> float:
        return self.limit - spent

    def allows(self, spent: float, extra: float) -> bool:
        """True if spending ``extra`` more keeps the total within the limit."""
        return spent + extra <= self.limit + EPS
