"""The lease manager (Haizea): leases, the slot table and the lease scheduler.

Our readings of the Haizea paper are written in docs/decisions/haizea.md (decisions H1-H22).

Enactment is an interface (:class:`Enactment`): the simulator (:mod:`skylease.sim.leases`) carries
the scheduler's commands out on simulated nodes now; a real enactment can drive the same
scheduler later.
"""

from skylease.control.leases.config import (
    HAIZEA10_CONFIGURATIONS,
    NAMED_CONFIGURATIONS,
    PAPER_CONFIGURATIONS,
    SchedulerConfig,
    paper_configuration,
)
from skylease.control.leases.enact import Enactment, NullEnactment
from skylease.control.leases.images import ImagePool, ImagePools, Transfer, TransferState, edf_times
from skylease.control.leases.lease import (
    BLUE_HORIZON_NODE,
    NO_RESOURCES,
    Lease,
    LeaseKind,
    LeaseState,
    Reservation,
    ResourceTuple,
    RRKind,
)
from skylease.control.leases.preparation import ImagePreparation
from skylease.control.leases.scheduler import LeaseScheduler
from skylease.control.leases.slottable import AvailabilityWindow, SlotTable

__all__ = [
    "BLUE_HORIZON_NODE",
    "HAIZEA10_CONFIGURATIONS",
    "NAMED_CONFIGURATIONS",
    "NO_RESOURCES",
    "PAPER_CONFIGURATIONS",
    "AvailabilityWindow",
    "Enactment",
    "ImagePool",
    "ImagePools",
    "ImagePreparation",
    "Lease",
    "LeaseKind",
    "LeaseScheduler",
    "LeaseState",
    "NullEnactment",
    "RRKind",
    "Reservation",
    "ResourceTuple",
    "SchedulerConfig",
    "SlotTable",
    "Transfer",
    "TransferState",
    "edf_times",
    "paper_configuration",
]
