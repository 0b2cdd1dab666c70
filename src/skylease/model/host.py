"""Rented hosts as policies see them."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from skylease.model.instance import InstanceType

HostId = int


class HostState(enum.Enum):
    BOOTING = "booting"  # rented and charged, not yet able to run tasks
    IDLE = "idle"
    BUSY = "busy"
    DOWN = "down"  # temporarily unavailable (volatile hosts); may come back
    RELEASED = "released"  # given back; billing ended


@dataclass(slots=True)
class Host:
    """A rented host. Environments own and update it; policies only read it."""

    id: HostId
    pool: str
    itype: InstanceType
    requested_at: float
    up_at: float | None = None
    released_at: float | None = None
    state: HostState = HostState.BOOTING
    task: int | None = None
    task_started_at: float | None = None

    @property
    def alive(self) -> bool:
        return self.state is not HostState.RELEASED

    def lifetime(self, now: float) -> float:
        """Seconds charged so far: from the rent request to release (or ``now``)."""
        end = self.released_at if self.released_at is not None else now
        return end - self.requested_at

    def charged_units(self, now: float) -> int:
        return self.itype.billing.units(self.lifetime(now))

    def cost(self, now: float) -> float:
        return self.itype.billing.cost(self.lifetime(now))

    def charged_until(self, now: float) -> float:
        """End of the billing unit paid for at ``now``: the free moment to release it."""
        return self.itype.billing.charged_until(self.requested_at, now)
