"""Leases and their resource reservations (decision H1 in docs/decisions/haizea.md): the lease manager's
data model.

Times are integer seconds from the start of the simulation (decision H1). A best-effort (BE)
lease carries two durations: the requested one, which the scheduler plans with, and the actual
one (at most the requested), which the simulator learns only when the lease ends early.

Resources are per-node tuples (:class:`ResourceTuple`: CPUs, memory MB, disk MB, network MB/s).
A lease asks for ``nodes`` VMs, each with the same tuple; a node's capacity is a tuple too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import NamedTuple


class ResourceTuple(NamedTuple):
    """Per-node resources: CPUs, memory (MB), disk (MB), network bandwidth (MB/s)."""

    cpu: float = 1.0
    memory: int = 1024
    disk: int = 0
    net: float = 0.0

    def plus(self, other: ResourceTuple) -> ResourceTuple:
        return ResourceTuple(self.cpu + other.cpu, self.memory + other.memory, self.disk + other.disk,
                             self.net + other.net)

    def describe(self) -> str:
        """``cpu 1, memory 2048 MB`` (unbounded and zero components left out)."""
        units = {"cpu": "", "memory": " MB", "disk": " MB", "net": " MB/s"}
        parts = [f"{name} {value:g}{units[name]}" for name, value in self._asdict().items()
                 if 0 < value < 2**61]
        return ", ".join(parts) or "nothing"

    def fits_in(self, capacity: ResourceTuple) -> bool:
        """Whether every component is at most ``capacity``'s."""
        return (self.cpu <= capacity.cpu and self.memory <= capacity.memory and self.disk <= capacity.disk
                and self.net <= capacity.net)


#: Nothing reserved.
NO_RESOURCES = ResourceTuple(0.0, 0, 0, 0.0)
#: A node of the paper's cluster (decision H2): 1 CPU, 1 GB memory, 20,000 MB working disk,
#: 100 Mbit/s = 12.5 MB/s network.
BLUE_HORIZON_NODE = ResourceTuple(1.0, 1024, 20000, 12.5)


class LeaseKind(StrEnum):
    BEST_EFFORT = "BE"
    ADVANCE_RESERVATION = "AR"
    IMMEDIATE = "IM"


class LeaseState(StrEnum):
    PENDING = "pending"
    SCHEDULED = "scheduled"
    ACTIVE = "active"
    SUSPENDED = "suspended"
    DONE = "done"
    REJECTED = "rejected"
    CANCELLED = "cancelled"  # by its owner (the lease service), whatever state it was in


class RRKind(StrEnum):
    """What a resource reservation does (decision H1). Image transfers are kept by the scheduler's
    transfer channels (:mod:`skylease.control.leases.images`), not as node reservations."""

    VM = "vm"
    SUSPEND = "suspend"
    RESUME = "resume"
    TRANSFER = "transfer"
    SHUTDOWN = "shutdown"  # after a normal end (Haizea 1.0's shutdown reservations)
    MIGRATE = "migrate"  # memory (and image) moving to the resumption's nodes (1.0); reserves nothing


@dataclass(eq=False)
class Lease:
    """One lease request and what happened to it.

    ``nodes`` VMs, each with ``(cpu, memory, disk, net)``; software is a VM image ``image`` of
    ``image_size`` MB, or none (``image=None``). ``start`` is the exact start of an advance
    reservation (``None`` for best-effort and immediate leases).
    """

    id: int
    kind: LeaseKind
    submit: int
    nodes: int
    duration: int  # requested (maximum) duration, overheads included
    real_duration: int  # actual duration (<= duration), overheads included
    dedicated: int  # run time on a dedicated physical machine (bounded slowdown)
    start: int | None = None  # AR: the exact start requested
    cpu: float = 1.0
    memory: int = 1024
    disk: int = 0
    net: float = 0.0
    image: str | None = None
    image_size: int = 0
    preemptible: bool = True
    state: LeaseState = LeaseState.PENDING
    first_start: int | None = None
    end: int | None = None
    reason: str | None = None  # why it was rejected
    history: list[tuple[str, int]] = field(default_factory=list)  # (event, time)
    # why an AR or IM lease lost a node it holds (a host went down, docs/decisions/host-failures.md);
    # None while it has lost none. Kept once set: it is the lease's history.
    degraded: str | None = None
    # who asked: the lease service's user, a workload's user (None: nobody named); the fairness
    # rules count per owner (docs/decisions/fairness-rules.md)
    owner: str | None = None
    # a workload's lease that stops working after this many lease seconds of work and holds its
    # nodes idle from then (what the simulator knows of idleness: the idle_reclaim rule, idle.py);
    # None: it works to its end. A served lease's idleness is its payloads' measured CPU instead.
    idle_after: int | None = None
    # why the site ended it before its end (the idle_reclaim rule's reason), None: it was not
    reclaimed: str | None = None
    # what is left to run (planned and actual): less than the durations once a run was suspended
    remaining: int = field(init=False, repr=False)
    real_remaining: int = field(init=False, repr=False)
    last_nodes: tuple[int, ...] = field(default=(), init=False, repr=False)  # where it was suspended

    def __post_init__(self) -> None:
        if self.nodes < 1 or self.duration < 1 or not 0 < self.real_duration <= self.duration:
            raise ValueError(f"lease {self.id}: needs nodes >= 1 and 1 <= real_duration <= duration, got "
                             f"nodes={self.nodes}, duration={self.duration}, real={self.real_duration}")
        self.remaining = self.duration
        self.real_remaining = self.real_duration

    @property
    def per_node(self) -> ResourceTuple:
        """The resources each of the lease's VMs asks for."""
        return ResourceTuple(self.cpu, self.memory, self.disk, self.net)

    @property
    def wait(self) -> int | None:
        return None if self.first_start is None else self.first_start - self.submit

    def bounded_slowdown(self, bound: int = 10) -> float | None:
        """``(t_e - t_a) / max(t_u, bound)`` with ``t_u`` the dedicated run time (decision H18)."""
        if self.end is None:
            return None
        return (self.end - self.submit) / max(self.dedicated, bound)


@dataclass(eq=False)
class Reservation:
    """A resource reservation (RR) of a lease on a set of nodes, ``[start, end)``.

    ``nodes`` holds one physical node per VM; ``usage`` is what each VM reserves there. ``end``
    is planned from the requested duration; ``real_end`` (<= ``end``) is when the lease actually
    ends. ``backfill`` marks a future reservation of the backfilling budget (decision H9).
    """

    lease: Lease
    start: int
    end: int
    real_end: int
    nodes: tuple[int, ...]
    backfill: bool = False
    state: LeaseState = LeaseState.SCHEDULED
    kind: RRKind = RRKind.VM
    usage: ResourceTuple = field(default=ResourceTuple())
    # a VM RR's companions: the migration and resumption before it, the planned suspension or
    # shutdown after it
    resume: Reservation | None = field(default=None, repr=False)
    suspend: Reservation | None = field(default=None, repr=False)
    shutdown: Reservation | None = field(default=None, repr=False)
    migrate: Reservation | None = field(default=None, repr=False)

    def parts(self) -> tuple[Reservation, ...]:
        """A VM RR's plan in time order: migration, resumption, the VM, suspension or shutdown."""
        return tuple(p for p in (self.migrate, self.resume, self, self.suspend, self.shutdown)
                     if p is not None)

    @property
    def final_end(self) -> int:
        """When the plan leaves its nodes (the end of its suspension or shutdown, else its own)."""
        return (self.suspend or self.shutdown or self).end

    @property
    def preemptible(self) -> bool:
        """Only the VM reservations of preemptible (best-effort) leases can be preempted (decision H7)."""
        return self.kind is RRKind.VM and self.lease.preemptible

    def overlaps(self, a: int, b: int) -> bool:
        """Whether the reservation occupies some of ``[a, b)``."""
        return self.start < b and self.end > a
