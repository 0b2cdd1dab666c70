"""Scheduling options and the overhead model (spec 001 §2.2, §2.3, §6.3, §7).

Every derived overhead is rounded **up** to whole seconds (spec §12-P): suspending or resuming a
VM of ``m`` MB takes ``ceil(m / rate)``; migrating it ``ceil(m / B)`` (memory only, the NOVM-SR
configuration) or ``ceil((m + s_I) / B)`` (memory and image). The suspend thresholds are
``(1 + factor) ×`` (boot + suspend) for a first start and ``(1 + factor) ×`` (migrate + 2 × suspend)
for a resumed or preempted lease (spec §6.3, 42 s and 248 s in NOVM-SR).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Literal

from skylease.control.leases.lease import Lease


@dataclass(frozen=True)
class SchedulerConfig:
    """How the lease scheduler behaves.

    ``max_reservations``: how many queued best-effort leases may hold a future reservation at once
    (1 = aggressive backfilling, ``math.inf`` = conservative, 0 = none). ``backfilling=False`` is
    plain FCFS: the queue stops at the first lease that cannot start. ``suspension``: best-effort
    leases may be suspended (planned before a blocking reservation, or when an AR preempts them)
    and resumed later, instead of being cancelled and requeued.
    """

    max_reservations: float = 1
    backfilling: bool = True
    suspension: bool = False
    suspend_rate: float = 50.0  # MB/s, disk write (suspend) = read (resume) rate H_w = H_r
    bandwidth: float = 12.5  # MB/s, B: 100 Mbit/s as the 2008 code reads it (spec §12-A)
    migrate: Literal["mem", "mem+vm"] = "mem"
    boot_s: int = 0  # VM boot + shutdown, added to every lease's durations (VM configurations: 20 s)
    runtime_overhead_pct: int = 0  # slowdown inside a VM (VM configurations: 5 %)
    image_size_mb: int = 4096  # s_I: what a "mem+vm" migration moves besides memory
    threshold_factor: float = 1.0
    # The spec (and the 2008 code's RR classes) make RESUME reservations non-preemptible, so a
    # suspended lease's future plan (RESUME then VM) blocks an AR. With this option an AR may
    # unschedule such a plan whole (a decision of ours, off by default; see the scheduler's notes).
    preempt_future_resumptions: bool = False
    transfers: bool = False  # images go from the repository to the nodes (FIFO for BE, EDF for AR)
    piggyback: bool = True  # a BE lease may join a scheduled, not yet started transfer of its image
    reuse: bool = False  # per-node image pools (cowpool), reference counts, LRU eviction
    pool_mb: int = 20480

    def __post_init__(self) -> None:
        if self.max_reservations < 0:
            raise ValueError(f"max_reservations must be >= 0, got {self.max_reservations}")
        if self.suspend_rate <= 0 or self.bandwidth <= 0:
            raise ValueError("suspend_rate and bandwidth must be > 0")

    # -- the paper's configurations and backfilling variants ---------------------------------------
    @classmethod
    def novm_nosr(cls) -> SchedulerConfig:
        """NOVM-NOSR: no VMs, no suspension; preempted leases are cancelled and requeued."""
        return cls()

    @classmethod
    def novm_sr(cls) -> SchedulerConfig:
        """NOVM-SR: suspension and resumption, migration of memory only."""
        return cls(suspension=True, migrate="mem")

    @classmethod
    def vm_predeploy(cls) -> SchedulerConfig:
        """VM-PREDEPLOY: VMs (+5 % run time, +20 s boot/shutdown), suspend/resume, migration of
        memory and image; the image is already on every node (no transfers)."""
        return cls(suspension=True, migrate="mem+vm", boot_s=20, runtime_overhead_pct=5)

    @classmethod
    def vm_mult(cls) -> SchedulerConfig:
        """VM-MULT: VM-PREDEPLOY plus multicast image transfers, no reuse (but piggybacking)."""
        return cls.vm_predeploy().with_(transfers=True)

    @classmethod
    def vm_reuse(cls) -> SchedulerConfig:
        """VM-REUSE-*: VM-MULT plus per-node image pools of 20,480 MB (the image draw, uniform or
        skewed, is the workload's)."""
        return cls.vm_mult().with_(reuse=True)

    @classmethod
    def aggressive(cls) -> SchedulerConfig:
        return cls(max_reservations=1)

    @classmethod
    def conservative(cls) -> SchedulerConfig:
        return cls(max_reservations=math.inf)

    @classmethod
    def fcfs(cls) -> SchedulerConfig:
        return cls(max_reservations=0, backfilling=False)

    def with_(self, **changes: object) -> SchedulerConfig:
        return replace(self, **changes)  # type: ignore[arg-type]

    # -- overheads (seconds, rounded up) -------------------------------------------------------------
    def planned(self, duration: int) -> int:
        """A duration with the VM overheads: ``ceil(d × (1 + pct/100)) + boot`` (spec §2.2), in
        exact integer arithmetic."""
        pct = self.runtime_overhead_pct
        return -(-duration * (100 + pct) // 100) + self.boot_s if pct or self.boot_s else duration

    def suspend_s(self, lease: Lease) -> int:
        return math.ceil(lease.memory / self.suspend_rate)

    def resume_s(self, lease: Lease) -> int:
        return math.ceil(lease.memory / self.suspend_rate)

    def migrate_s(self, lease: Lease) -> int:
        size = lease.memory + (self.image_mb(lease) if self.migrate == "mem+vm" else 0)
        return math.ceil(size / self.bandwidth)

    def image_mb(self, lease: Lease) -> int:
        return lease.image_size if lease.image is not None and lease.image_size else self.image_size_mb

    def transfer_s(self, lease: Lease) -> int:
        """T_img: one image over the repository's link."""
        return math.ceil(self.image_mb(lease) / self.bandwidth)

    def initial_threshold(self, lease: Lease) -> float:
        """Minimum run before a planned suspension, on a first start."""
        t_img = self.transfer_s(lease) if self.transfers else 0
        return (1 + self.threshold_factor) * (self.boot_s + t_img + self.suspend_s(lease))

    def resume_threshold(self, lease: Lease) -> float:
        """Minimum run before a planned suspension of a resumed lease, or before suspending a
        lease an AR preempts."""
        return (1 + self.threshold_factor) * (self.migrate_s(lease) + 2 * self.suspend_s(lease))


#: The paper's six configurations (spec 001 §7): name -> (scheduler options, image draw of the
#: workload; ``None`` where images play no part).
PAPER_CONFIGURATIONS: dict[str, tuple[SchedulerConfig, str | None]] = {
    "NOVM-NOSR": (SchedulerConfig.novm_nosr(), None),
    "NOVM-SR": (SchedulerConfig.novm_sr(), None),
    "VM-PREDEPLOY": (SchedulerConfig.vm_predeploy(), None),
    "VM-MULT": (SchedulerConfig.vm_mult(), "uniform"),
    "VM-REUSE-UNIFORM": (SchedulerConfig.vm_reuse(), "uniform"),
    "VM-REUSE-SKEWED": (SchedulerConfig.vm_reuse(), "skewed"),
}


def configuration_key(name: str) -> str:
    """A configuration name as :data:`PAPER_CONFIGURATIONS` spells it (case and ``_``/``-`` free)."""
    return name.strip().upper().replace("_", "-")


def paper_configuration(name: str) -> tuple[SchedulerConfig, str | None]:
    """One of :data:`PAPER_CONFIGURATIONS`, by name (case and ``_``/``-`` insensitive)."""
    key = configuration_key(name)
    if key not in PAPER_CONFIGURATIONS:
        raise KeyError(f"unknown configuration {name!r}; known: {', '.join(PAPER_CONFIGURATIONS)}")
    return PAPER_CONFIGURATIONS[key]
