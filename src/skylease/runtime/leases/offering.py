"""Counter-offers on the real clock (issue 40, item 1; docs/decisions/lease-offers.md): the
lease manager's :meth:`Offering.offers` answers "when could this request start?" from its
scheduler's slot table, under its lock, at the lease time it is asked, changing no lease (it steps
what fell due by then first, as a request does, so the answer is the table a request would meet).
A refused advance reservation or immediate request carries the same answer
(:func:`earliest_for`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from skylease.control.leases import LeaseKind
from skylease.control.leases.lease import ResourceTuple
from skylease.control.leases.offers import Offer, offer
from skylease.model.wire import whole
from skylease.runtime.leases.api import MAX_DURATION_S

__all__ = ["OfferQuery", "OfferView", "Offering", "earliest_for", "offer_view"]


class OfferQuery(BaseModel):
    """A dry run of a request: ``nodes`` nodes of ``cpu`` CPUs, ``memory`` and ``disk`` MB each, for
    ``duration`` lease seconds, starting no earlier than ``not_before`` (lease seconds since the
    server's epoch; default: now). The same bounds and defaults as a lease request's keys."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    nodes: whole(1, 100_000) = 1
    duration: whole(1, MAX_DURATION_S)
    not_before: whole(0, 2**53) | None = None
    cpu: Annotated[float, Field(gt=0, le=1024, allow_inf_nan=False)] = 1.0
    memory: whole(0, 2**40) = 1024
    disk: whole(0, 2**40) = 0


class NodesFree(BaseModel):
    """At ``at``, for the whole duration: nodes ``free``, and nodes an advance reservation could
    have by preempting best-effort leases (``with_preemption``, the free ones included)."""

    at: int
    free: int
    with_preemption: int


class OfferView(BaseModel):
    """The answer: ``earliest_start`` (lease seconds; null with ``reason`` when no start fits), the
    ``now`` it was computed at, ``nodes_free_at`` the not-before time, and whether an ``immediate``
    lease of it would start now."""

    now: int
    earliest_start: int | None
    nodes_free_at: NodesFree
    immediate: bool
    reason: str | None = None


def offer_view(o: Offer) -> OfferView:
    return OfferView(now=o.now, earliest_start=o.earliest_start, immediate=o.immediate, reason=o.reason,
                     nodes_free_at=NodesFree(at=o.at, free=o.free, with_preemption=o.with_preemption))


def earliest_for(sched: Any, body: dict[str, Any], now: int) -> int | None:
    """The earliest start that would fit a refused AR or IM request (its lease body, as journaled):
    from its requested start on for an AR (from now if that has passed), from now for an IM lease."""
    kind = LeaseKind(body["kind"])
    if kind is LeaseKind.BEST_EFFORT:
        return None
    start = body.get("start") if kind is LeaseKind.ADVANCE_RESERVATION else None
    per_node = ResourceTuple(float(body["cpu"]), int(body["memory"]), int(body["disk"]), 0.0)
    earliest = offer(sched, body["nodes"], per_node, body["duration"], now, start).earliest_start
    if kind is LeaseKind.ADVANCE_RESERVATION and earliest is not None and earliest == start:
        return None  # (it had room: refused for what an offer does not count, its image's transfer)
    return earliest


class Offering:
    """:meth:`offers` of :class:`~skylease.runtime.leases.manager.LocalLeaseManager` (a mixin)."""

    sched: Any
    clock: Any
    _lock: Any
    _wake: Any
    _stepped: int
    if TYPE_CHECKING:  # the manager's
        def _alive(self) -> None: ...
        def _payload_exits(self, now: int) -> None: ...
        def _advance(self, now: int) -> None: ...
        def _commit(self) -> None: ...

    def offers(self, owner: str, query: OfferQuery) -> OfferView:
        """The counter-offer for ``query`` (``owner`` asks: the answer is the same for everyone;
        nothing of another user's is shown but counts of nodes)."""
        arrived = self.clock.now()
        with self._lock:
            self._alive()
            now = max(arrived, self._stepped)
            self._payload_exits(now)  # (as a request does: the table a request made now would meet)
            self._advance(now)
            self._commit()
            self._wake.notify_all()
            per_node = ResourceTuple(query.cpu, query.memory, query.disk, 0.0)
            o = offer(self.sched, query.nodes, per_node, query.duration, now, query.not_before)
        return offer_view(o)
