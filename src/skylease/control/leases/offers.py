"""Counter-offers (issue 40, item 1; docs/decisions/lease-offers.md): "when could this request
start?" and "how many nodes are free at ``t`` for ``d`` seconds?", answered from a
:class:`LeaseScheduler`'s slot table as it is, changing nothing (no clock: the caller says ``now``).

The earliest start is the first time ``s >= not_before`` (and ``>= now``) at which an advance
reservation of the request would be admitted by :meth:`LeaseScheduler._schedule_ar` now: on
``[s, s + planned(duration))`` enough nodes are free, or can be freed by preempting what the AR may
preempt (:meth:`LeaseScheduler.ar_fits`, the rule of :meth:`LeaseScheduler.ar_room`). Only
``not_before`` and the planned ends of reservations after it need be tried: a window starting later
ends later, and it fits on more nodes only once it starts at or after the end of something in its
way. After the last end the table is empty, so a request the cluster can hold always gets an
answer unless nodes are down.

Not counted (said in the decision): an AR's image transfer (an offer has no image), and an
admission or preemption policy whose answer depends on the time asked.
"""

from __future__ import annotations

from dataclasses import dataclass

from skylease.control.leases.lease import Lease, LeaseKind, ResourceTuple
from skylease.control.leases.scheduler import LeaseScheduler

__all__ = ["Offer", "offer", "probe"]

#: The id of the probe lease an offer asks about (never a real lease's: those are positive).
PROBE_ID = -1


@dataclass(frozen=True)
class Offer:
    """The answer: ``earliest_start`` (None with ``reason`` when none fits), and at ``at`` (the
    not-before time) how many nodes are ``free`` for the whole duration, and how many an advance
    reservation could have there by preempting (``with_preemption``, free ones included);
    ``immediate``: whether an immediate lease of it would start now."""

    now: int
    at: int
    earliest_start: int | None
    free: int
    with_preemption: int
    immediate: bool
    reason: str | None = None


def probe(sched: LeaseScheduler, nodes: int, per_node: ResourceTuple, duration: int, now: int,
          kind: LeaseKind = LeaseKind.ADVANCE_RESERVATION, start: int | None = None) -> Lease:
    """A lease of the request that is never submitted, planned as :meth:`LeaseScheduler.submit`
    would plan it (its remaining time with the configuration's VM overheads)."""
    lease = Lease(PROBE_ID, kind, now, nodes, duration, duration, duration, start=start,
                  cpu=per_node.cpu, memory=int(per_node.memory), disk=int(per_node.disk),
                  net=per_node.net, preemptible=False)
    lease.remaining = lease.real_remaining = sched.config.planned(duration)
    return lease


def _room(sched: LeaseScheduler, lease: Lease, start: int) -> tuple[int, int]:
    free, victims = sched.ar_room(lease, start, start + lease.remaining)
    return len(free), len(free) + len(victims)


def immediate_fits(sched: LeaseScheduler, lease: Lease, now: int) -> bool:
    """Whether an immediate lease of ``lease``'s request would start at ``now`` (the rule of
    ``LeaseScheduler._schedule_im``: nodes free for its time and its shutdown, nothing preempted)."""
    if sched.config.admission.admit(probe(sched, lease.nodes, lease.per_node, lease.duration, now,
                                          LeaseKind.IMMEDIATE), now) is not None:
        return False
    until = now + lease.remaining + sched.config.shutdown_time(lease)
    return sched.table.window(now, lease.per_node).count_free_until(until) >= lease.nodes


def offer(sched: LeaseScheduler, nodes: int, per_node: ResourceTuple, duration: int, now: int,
          not_before: int | None = None) -> Offer:
    """The counter-offer for ``nodes`` nodes of ``per_node`` for ``duration`` seconds, not before
    ``not_before`` (default and at least ``now``). The table is only read."""
    at = now if not_before is None else max(now, not_before)
    lease = probe(sched, nodes, per_node, duration, now, start=at)
    reason = sched.too_big(lease) or sched.config.admission.admit(lease, now)
    free, with_preemption = _room(sched, lease, at)
    immediate = reason is None and at == now and immediate_fits(sched, lease, now)
    if reason is not None:
        return Offer(now, at, None, free, with_preemption, False, str(reason))
    earliest: int | None = at if with_preemption >= nodes else None  # (at itself: counted above)
    for s in () if earliest is not None else sched.table.ends_after(at):
        lease.start = s
        if sched.ar_fits(lease, s, s + lease.remaining):
            earliest = s
            break
    why = None if earliest is not None else (
        f"{sched.table.n_nodes - len(sched.table.down)} of the {sched.table.n_nodes} nodes are up")
    return Offer(now, at, earliest, free, with_preemption, immediate, why)
