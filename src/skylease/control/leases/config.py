"""Scheduling options and the overhead model (decisions H2, H9, H10, H14 in docs/decisions/haizea.md).

Every derived overhead is rounded **up** to whole seconds (decision H1): suspending or resuming a
VM of ``m`` MB takes ``ceil(m / rate)``; migrating it ``ceil(m / B)`` (memory only, the NOVM-SR
configuration) or ``ceil((m + s_I) / B)`` (memory and image). The suspend thresholds are
``(1 + factor) ×`` (boot + suspend) for a first start and ``(1 + factor) ×`` (migrate + 2 × suspend)
for a resumed or preempted lease (decision H10, 42 s and 248 s in NOVM-SR).

Haizea 1.0 (the released code, not the 2008 simulator) behaves differently in seven ways; each is
a key whose default is the 2008 behaviour (so the paper's Table 1 does not move), and
:data:`HAIZEA10_CONFIGURATIONS` sets them all as 1.0's test configuration does:

* ``enactment_overhead_s``: seconds per VM added to each suspension, resumption and shutdown;
  ``override_suspend_s`` / ``override_resume_s``: a fixed time per VM instead of memory / rate;
  ``resume_rate`` (default: ``suspend_rate``); ``suspendresume_exclusion``: ``"none"`` (the VMs of
  a lease suspend in parallel, 2008), ``"local"`` (one at a time per node) or ``"global"`` (one at
  a time in the cluster);
* ``shutdown_s``: ``None`` (2008: no shutdown reservation) or a shutdown reservation of
  ``shutdown_s`` + overhead × VMs after a normal end (best-effort and AR alike);
* ``threshold``: ``"2008"`` or ``"1.0"``: ``(1 + factor) ×`` (suspend estimate [+ resume estimate
  when the lease waits in the queue suspended]), the estimates being 1.0's;
* ``backfill_release``: the future reservation is given back at the reserved lease's VM
  ``"end"`` (2008) or ``"start"`` (1.0);
* ``transfer_link``: ``"two-channels"`` (2008: FIFO for BE, EDF with re-timing for AR) or
  ``"one-link"`` (1.0: one link; a BE transfer takes the first hole, an AR transfer the latest hole
  before its deadline; nothing scheduled is ever moved);
* ``premature_end``: ``"slide"`` (2008: the next plan on the freed nodes moves earlier) or
  ``"reschedule"`` (1.0: every future reservation is cancelled and scheduled again from scratch);
* ``migration_reservations``: the migration is reserved right after the suspension (1.0) rather
  than folded into the resumption's delay (2008); either way a suspended lease waits for now +
  the migration estimate;
* ``stop_when``: ``"besteffort"`` (all-best-effort is the last best-effort end) or ``"all"``
  (it is the time the run stops, every lease being done).

Haizea 1.0's pluggable policies are the fields ``admission``, ``preemption`` and
``host_selection`` (:mod:`skylease.control.leases.policies`); their defaults are the scheduler's
built-in rules.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, replace
from typing import Literal

from skylease.control.leases.lease import Lease
from skylease.control.leases.policies import (
    DEFAULT_ADMISSION,
    DEFAULT_HOST_SELECTION,
    DEFAULT_PREEMPTION,
    AdmissionPolicy,
    HostSelectionPolicy,
    PreemptionPolicy,
    check_policy,
)


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
    bandwidth: float = 12.5  # MB/s, B: 100 Mbit/s as the 2008 code reads it (decision H2)
    migrate: Literal["mem", "mem+vm"] = "mem"
    boot_s: int = 0  # VM boot + shutdown, added to every lease's durations (VM configurations: 20 s)
    runtime_overhead_pct: int = 0  # slowdown inside a VM (VM configurations: 5 %)
    image_size_mb: int = 4096  # s_I: what a "mem+vm" migration moves besides memory
    threshold_factor: float = 1.0
    # Decision H3 (the 2008 code's RR classes) makes RESUME reservations non-preemptible, so a
    # suspended lease's future plan (RESUME then VM) blocks an AR. With this option an AR may
    # unschedule such a plan whole (a decision of ours, off by default; see the scheduler's notes).
    preempt_future_resumptions: bool = False
    transfers: bool = False  # images go from the repository to the nodes (FIFO for BE, EDF for AR)
    piggyback: bool = True  # a BE lease may join a scheduled, not yet started transfer of its image
    reuse: bool = False  # per-node image pools (cowpool), reference counts, LRU eviction
    pool_mb: int = 20480
    # -- Haizea 1.0 behaviours (module docstring); every default is the 2008 code's ----------------
    enactment_overhead_s: int = 0
    override_suspend_s: int | None = None
    override_resume_s: int | None = None
    resume_rate: float | None = None  # None: suspend_rate
    suspendresume_exclusion: Literal["none", "local", "global"] = "none"
    shutdown_s: int | None = None
    threshold: Literal["2008", "1.0"] = "2008"
    backfill_release: Literal["end", "start"] = "end"
    transfer_link: Literal["two-channels", "one-link"] = "two-channels"
    premature_end: Literal["slide", "reschedule"] = "slide"
    migration_reservations: bool = False
    # Haizea 1.0's ``migration = no``: a suspended lease resumes on the nodes it was suspended on,
    # never elsewhere (a payload that is a process cannot move to another machine; the lease manager
    # sets it for a site with hosts: docs/decisions/host-failures.md)
    migration: bool = True
    stop_when: Literal["besteffort", "all"] = "besteffort"
    # -- pluggable policies (Haizea 1.0's policy manager; the defaults are the built-in rules) -----
    admission: AdmissionPolicy = DEFAULT_ADMISSION
    preemption: PreemptionPolicy = DEFAULT_PREEMPTION
    host_selection: HostSelectionPolicy = DEFAULT_HOST_SELECTION

    def __post_init__(self) -> None:
        for kind in POLICY_KEYS:
            check_policy(kind, getattr(self, kind))
        if self.max_reservations < 0:
            raise ValueError(f"max_reservations must be >= 0, got {self.max_reservations}")
        if self.suspend_rate <= 0 or self.bandwidth <= 0:
            raise ValueError("suspend_rate and bandwidth must be > 0")
        if self.resume_rate is not None and self.resume_rate <= 0:
            raise ValueError("resume_rate must be > 0")
        for name in ("enactment_overhead_s", "override_suspend_s", "override_resume_s", "shutdown_s"):
            v = getattr(self, name)
            if v is not None and v < 0:
                raise ValueError(f"{name} must be >= 0, got {v}")
        for name in ("override_suspend_s", "override_resume_s"):
            # a suspension or resumption is a reservation: it must last (2008 times do, ceil(m / rate))
            if getattr(self, name) == 0 and self.enactment_overhead_s == 0:
                raise ValueError(f"{name} = 0 needs enactment_overhead_s > 0 (a suspension or resumption "
                                 "must take at least 1 s)")

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
        """A duration with the VM overheads: ``ceil(d × (1 + pct/100)) + boot`` (decision H2), in
        exact integer arithmetic."""
        pct = self.runtime_overhead_pct
        return -(-duration * (100 + pct) // 100) + self.boot_s if pct or self.boot_s else duration

    def suspend_s(self, lease: Lease, nodes: tuple[int, ...] | None = None) -> int:
        """How long suspending the lease takes (on ``nodes``, one per VM: the exclusion serialises
        the VMs sharing a node; without ``nodes`` one VM per node is assumed)."""
        op = (self.override_suspend_s if self.override_suspend_s is not None
              else math.ceil(lease.memory / self.suspend_rate))
        return self._susprem_span(lease, op, nodes)

    def resume_s(self, lease: Lease, nodes: tuple[int, ...] | None = None) -> int:
        """How long resuming the lease takes (as :meth:`suspend_s`)."""
        rate = self.suspend_rate if self.resume_rate is None else self.resume_rate
        op = self.override_resume_s if self.override_resume_s is not None else math.ceil(lease.memory / rate)
        return self._susprem_span(lease, op, nodes)

    def _susprem_span(self, lease: Lease, op: int, nodes: tuple[int, ...] | None) -> int:
        """Haizea 1.0's ``__compute_susprem_times``, end to end: ``op`` per VM plus the enactment
        overhead per VM. Local exclusion runs one VM at a time per node, the nodes side by side,
        and its groups of simultaneous operations one after another (so the overheads add up);
        global exclusion runs every VM one after another; none (2008) runs them all at once."""
        oh = self.enactment_overhead_s
        n = lease.nodes
        if self.suspendresume_exclusion == "none":
            return op + oh
        if self.suspendresume_exclusion == "global":
            return n * (op + oh)
        per_node = max(Counter(nodes).values()) if nodes else 1
        return per_node * op + n * oh

    def shutdown_time(self, lease: Lease) -> int:
        """The shutdown reservation's length (0 without one): shutdown + overhead × VMs (1.0)."""
        if self.shutdown_s is None:
            return 0
        return self.shutdown_s + self.enactment_overhead_s * lease.nodes

    def migrate_s(self, lease: Lease, nodes: tuple[int, ...] = ()) -> int:
        """How long a suspended lease waits before it can resume elsewhere (from ``nodes``, where it
        was suspended, one per VM). With migration reservations (1.0), the memory and the image
        are estimated apart, each for the node holding most of them, and rounded up apart."""
        if self.migration_reservations:
            most = max(Counter(nodes).values()) if nodes else 1
            mem = math.ceil(most * lease.memory / self.bandwidth)
            if self.migrate != "mem+vm":
                return mem
            return mem + math.ceil(most * self.image_mb(lease) / self.bandwidth)
        size = lease.memory + (self.image_mb(lease) if self.migrate == "mem+vm" else 0)
        return math.ceil(size / self.bandwidth)

    # -- Haizea 1.0's estimates (``VMScheduler.__estimate_*``) -------------------------------------
    def suspend_estimate(self, lease: Lease) -> int:
        """1.0's estimate of a whole lease's suspension: the override alone if set, else VMs ×
        (ceil(memory of all VMs / rate) + overhead) (an overestimate, as 1.0 has it)."""
        if self.override_suspend_s is not None:
            return self.override_suspend_s
        return lease.nodes * (math.ceil(lease.nodes * lease.memory / self.suspend_rate)
                              + self.enactment_overhead_s)

    def resume_estimate(self, lease: Lease) -> int:
        """As :meth:`suspend_estimate`, for the resumption."""
        if self.override_resume_s is not None:
            return self.override_resume_s
        rate = self.suspend_rate if self.resume_rate is None else self.resume_rate
        return lease.nodes * (math.ceil(lease.nodes * lease.memory / rate) + self.enactment_overhead_s)

    def image_mb(self, lease: Lease) -> int:
        return lease.image_size if lease.image is not None and lease.image_size else self.image_size_mb

    def transfer_s(self, lease: Lease) -> int:
        """T_img: one image over the repository's link."""
        return math.ceil(self.image_mb(lease) / self.bandwidth)

    def initial_threshold(self, lease: Lease) -> float:
        """Minimum run before a planned suspension, on a first start."""
        if self.threshold == "1.0":
            return (1 + self.threshold_factor) * self.suspend_estimate(lease)
        t_img = self.transfer_s(lease) if self.transfers else 0
        return (1 + self.threshold_factor) * (self.boot_s + t_img + self.suspend_s(lease))

    def resume_threshold(self, lease: Lease) -> float:
        """Minimum run before a planned suspension of a resumed lease, or before suspending a
        lease an AR preempts (1.0: of a lease waiting suspended in the queue)."""
        if self.threshold == "1.0":
            return (1 + self.threshold_factor) * (self.suspend_estimate(lease) + self.resume_estimate(lease))
        return (1 + self.threshold_factor) * (self.migrate_s(lease) + 2 * self.suspend_s(lease))


#: The keys of Haizea 1.0's behaviours (the module docstring), added after the paper's.
HAIZEA10_KEYS = ("enactment_overhead_s", "override_suspend_s", "override_resume_s", "resume_rate",
                 "suspendresume_exclusion", "shutdown_s", "threshold", "backfill_release", "transfer_link",
                 "premature_end", "migration_reservations", "migration", "stop_when")

#: The keys of the pluggable policies (:mod:`skylease.control.leases.policies`).
POLICY_KEYS = ("admission", "preemption", "host_selection")

#: Haizea 1.0's behaviours (the module docstring) with the values of its test configuration
#: ``tests/base_config_simulator.conf``: enactment overhead 2 s, suspension override 0 s, resume rate
#: 32 MB/s, local exclusion, shutdown time 0, aggressive backfilling, migration yes.
HAIZEA10 = SchedulerConfig(
    max_reservations=1, backfilling=True, suspension=True, suspend_rate=32.0, bandwidth=12.5,
    migrate="mem", threshold_factor=1.0, preempt_future_resumptions=True, transfers=False,
    piggyback=True, reuse=False, pool_mb=20480, enactment_overhead_s=2, override_suspend_s=0,
    override_resume_s=None, resume_rate=32.0, suspendresume_exclusion="local", shutdown_s=0,
    threshold="1.0", backfill_release="start", transfer_link="one-link", premature_end="reschedule",
    migration_reservations=True, stop_when="all")

#: Haizea 1.0's three test configurations (``haizea-1.0``: unmanaged images; ``-transfers``: image
#: transfers; ``-transfers-reuse``: and image caches), as the paper's configurations are kept.
HAIZEA10_CONFIGURATIONS: dict[str, tuple[SchedulerConfig, str | None]] = {
    "HAIZEA-1.0": (HAIZEA10, None),
    "HAIZEA-1.0-TRANSFERS": (HAIZEA10.with_(migrate="mem+vm", transfers=True), None),
    "HAIZEA-1.0-TRANSFERS-REUSE": (HAIZEA10.with_(migrate="mem+vm", transfers=True, reuse=True), None),
}

#: The paper's six configurations (decision H14): name -> (scheduler options, image draw of the
#: workload; ``None`` where images play no part).
PAPER_CONFIGURATIONS: dict[str, tuple[SchedulerConfig, str | None]] = {
    "NOVM-NOSR": (SchedulerConfig.novm_nosr(), None),
    "NOVM-SR": (SchedulerConfig.novm_sr(), None),
    "VM-PREDEPLOY": (SchedulerConfig.vm_predeploy(), None),
    "VM-MULT": (SchedulerConfig.vm_mult(), "uniform"),
    "VM-REUSE-UNIFORM": (SchedulerConfig.vm_reuse(), "uniform"),
    "VM-REUSE-SKEWED": (SchedulerConfig.vm_reuse(), "skewed"),
}


#: Every configuration known by name: the paper's six and Haizea 1.0's three.
NAMED_CONFIGURATIONS: dict[str, tuple[SchedulerConfig, str | None]] = {**PAPER_CONFIGURATIONS,
                                                                       **HAIZEA10_CONFIGURATIONS}


def configuration_key(name: str) -> str:
    """A configuration name as :data:`PAPER_CONFIGURATIONS` spells it (case and ``_``/``-`` free)."""
    return name.strip().upper().replace("_", "-")


def paper_configuration(name: str) -> tuple[SchedulerConfig, str | None]:
    """One of :data:`PAPER_CONFIGURATIONS`, by name (case and ``_``/``-`` insensitive)."""
    key = configuration_key(name)
    if key not in PAPER_CONFIGURATIONS:
        raise KeyError(f"unknown configuration {name!r}; known: {', '.join(PAPER_CONFIGURATIONS)}")
    return PAPER_CONFIGURATIONS[key]
