"""Enactment: how the scheduler's decisions reach the nodes (the paper's Section 3.1, "enactment component").

The scheduler decides *when* and *where*; an :class:`Enactment` carries out each resource
reservation (RR) when it starts and when it stops. ``rr.kind`` says what to do: ``VM`` (start /
shut down the lease's VMs on ``rr.nodes``), ``SUSPEND`` (save their memory to disk), ``RESUME``
(restore it; the RR's stop is the VM's restart). A stop can come before the planned end: the
lease ended early, or an AR cancelled the run. The simulator's enactment
(:class:`skylease.sim.leases.SimulatedEnactment`) books these on simulated nodes; a real one will
drive a VM manager with the same calls. Image transfers will add their own RR kind.
"""

from __future__ import annotations

from typing import Protocol

from skylease.control.leases.lease import Reservation


class Enactment(Protocol):
    def start(self, rr: Reservation, now: int) -> None:
        """Carry out ``rr`` from ``now`` on ``rr.nodes``."""

    def stop(self, rr: Reservation, now: int) -> None:
        """``rr`` is over (or cancelled) at ``now``."""


class NullEnactment:
    """Carries nothing out (the scheduler alone, e.g. in unit tests)."""

    def start(self, rr: Reservation, now: int) -> None:
        pass

    def stop(self, rr: Reservation, now: int) -> None:
        pass
