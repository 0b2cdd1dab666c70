"""Counter-offers on the real clock (issue 40, item 1; docs/decisions/lease-offers.md): the
lease manager's :meth:`Offering.offers` answers "when could this request start?" from its
scheduler's slot table, under its lock, at the lease time it is asked, changing no lease (it steps
what fell due by then first, as a request does, so the answer is the table a request would meet).
A refused advance reservation or immediate request carries the same answer
(:func:`earliest_for`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skylease.control.leases import LeaseKind
from skylease.control.leases.lease import ResourceTuple
from skylease.control.leases.offers import Offer, offer
from skylease.runtime.leases.api import NodesFree, OfferQuery, OfferView

__all__ = ["Offering", "earliest_for", "offer_view"]


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
