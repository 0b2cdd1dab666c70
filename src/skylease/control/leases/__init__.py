"""The lease manager (Haizea, spec 001): leases, the slot table and the lease scheduler.

Enactment is the caller's: the simulator (:mod:`skylease.sim.leases`) drives the scheduler's
event steps now; a real enactment can drive the same scheduler later.
"""

from skylease.control.leases.lease import Lease, LeaseKind, LeaseState, Reservation
from skylease.control.leases.scheduler import LeaseScheduler
from skylease.control.leases.slottable import SlotTable

__all__ = ["Lease", "LeaseKind", "LeaseScheduler", "LeaseState", "Reservation", "SlotTable"]
