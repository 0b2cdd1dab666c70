"""Two site policies, as ``docs/howto/leases.md`` ("Your own policies") writes them: a site's own
module would hold the same code. Named in a scheduler configuration file as
``"skylease.control.leases.examples:NoLongARs"`` and ``"skylease.control.leases.examples:PackNodes"``.
"""

from __future__ import annotations

from collections.abc import Sequence

from skylease.control.leases.lease import Lease, LeaseKind
from skylease.control.leases.policies import HostRequest


class NoLongARs:
    """Admission: refuse advance reservations longer than ``max_hours`` (best-effort leases and
    shorter ARs are considered as usual)."""

    def __init__(self, max_hours: float = 4) -> None:
        if max_hours <= 0:
            raise ValueError(f"max_hours must be > 0, got {max_hours}")
        self.max_hours = max_hours

    def admit(self, lease: Lease, now: int) -> str | None:
        if lease.kind is LeaseKind.ADVANCE_RESERVATION and lease.duration > self.max_hours * 3600:
            return f"advance reservations of more than {self.max_hours:g} h are not accepted here"
        return None


class PackNodes:
    """Host selection: put VMs on nodes already running something at the start (most reservations
    there first), so that as many nodes as possible stay empty (to be switched off); then the
    lowest ids. An advance reservation still prefers nodes where it preempts nothing."""

    def select(self, request: HostRequest) -> Sequence[int]:
        def load(k: int) -> int:
            return sum(1 for rr in request.table.on_node(k) if rr.start <= request.at < rr.end)

        order = sorted(request.candidates, key=lambda k: (request.victims.get(k, 0), -load(k), k))
        return order[: request.lease.nodes]
