"""A small in-memory lease manager that keeps the :class:`LeaseManager` protocol, for the service's
tests until they run against the real manager: leases are queued, a request for more nodes than the
site has or an advance reservation in the past is refused, a user sees only their own leases.
``failed``: what its ``failure()`` says (None: it works), for the tests of the service's health."""

from __future__ import annotations

import threading

from skylease.control.leases import LeaseScheduler
from skylease.control.leases.lease import ResourceTuple
from skylease.control.leases.offers import offer
from skylease.runtime.changes import Changes
from skylease.runtime.leases import api as lease_api
from skylease.runtime.leases.api import (
    HostView,
    LeaseNotFound,
    LeaseRefused,
    LeaseRequest,
    LeaseView,
)
from skylease.runtime.leases.offering import offer_view


class FakeManager:
    def __init__(self, nodes: int = 4) -> None:
        self.nodes = nodes
        self.clock = 100
        self.closed = False
        self.failed: str | None = None
        self._leases: dict[int, LeaseView] = {}
        self._lock = threading.Lock()
        self.changes = Changes()

    def now(self) -> int:
        return self.clock

    def request(self, owner: str, req: LeaseRequest) -> LeaseView:
        if req.command == "fail inside the manager":  # a bug: the service must answer a generic 500
            raise RuntimeError("an internal failure")
        with self._lock:
            if req.nodes > self.nodes:
                raise LeaseRefused(f"asks for {req.nodes} nodes; the site has {self.nodes}")
            start = req.start if req.start_in is None else self.clock + req.start_in
            if req.type == "advance-reservation" and start is not None and start < self.clock:
                raise LeaseRefused(f"starts at {start}, before now ({self.clock})")
            lid = len(self._leases) + 1
            ar = req.type == "advance-reservation"
            view = LeaseView(id=lid, owner=owner, type=req.type, submit=self.clock, requested_start=start,
                             requested_duration=req.duration, nodes=req.nodes, image=req.image,
                             start=start if ar else None, end=start + req.duration if ar else None,
                             state="scheduled" if ar else "queued", reason=None,
                             events=[{"at": self.clock, "what": "submit"}])
            if ar:  # its reservation as the real manager's events show one (a bar of the Gantt chart)
                view.events.append({"time": start, "event": "start", "until": start + req.duration,
                                    "nodes": [(lid + k) % self.nodes for k in range(req.nodes)]})
            self._leases[lid] = view
            self.changes.bump()
            return view

    def offers(self, owner: str, query: lease_api.OfferQuery) -> lease_api.OfferView:
        """The real counter-offer on an empty table of this fake's nodes (it schedules nothing)."""
        per_node = ResourceTuple(query.cpu, query.memory, query.disk, 0.0)
        return offer_view(offer(LeaseScheduler(self.nodes), query.nodes, per_node, query.duration, self.clock,
                                query.not_before))

    def _get(self, owner: str | None, lease_id: int) -> LeaseView:
        view = self._leases.get(lease_id)
        if view is None or (owner is not None and view.owner != owner):
            raise LeaseNotFound(f"no lease {lease_id}")
        return view

    def cancel(self, owner: str | None, lease_id: int) -> LeaseView:
        with self._lock:
            view = self._get(owner, lease_id).model_copy(update={"state": "cancelled"})
            self._leases[lease_id] = view
            self.changes.bump()
            return view

    def extend(self, owner: str | None, lease_id: int, change: lease_api.LeaseChange) -> LeaseView:
        with self._lock:
            view = self._get(owner, lease_id)
            seconds = change.by if change.by is not None else 1
            view = view.model_copy(update={"requested_duration": view.requested_duration + seconds})
            self._leases[lease_id] = view
            self.changes.bump()
            return view

    def lease(self, owner: str | None, lease_id: int) -> LeaseView:
        with self._lock:
            return self._get(owner, lease_id)

    def leases(self, owner: str | None, after: int | None = None, limit: int | None = None
               ) -> list[LeaseView]:
        return self._page(owner, after, limit, lambda v: True)

    def queue(self, owner: str | None, after: int | None = None, limit: int | None = None
              ) -> list[LeaseView]:
        return self._page(owner, after, limit, lambda v: v.state == "queued")

    def _page(self, owner: str | None, after: int | None, limit: int | None, keep) -> list[LeaseView]:
        """The real manager's pages: by id, above ``after``, at most ``limit``."""
        with self._lock:
            views = [v for lid, v in sorted(self._leases.items()) if (owner is None or v.owner == owner)
                     and (after is None or lid > after) and keep(v)]
        return views if limit is None else views[:limit]

    def hosts(self) -> list[HostView]:
        return [HostView(name=f"node{i}", index=i, cpu=1.0, memory=1024, disk=0, cpus=[i % 2], leases=[],
                         cache=[]) for i in range(self.nodes)]

    def log(self, owner: str | None, lease_id: int, vnode: int, limit: int = 8192) -> lease_api.PayloadLog:
        """As the real manager for a lease whose VMs have not started: a VM it does not have is 404."""
        with self._lock:
            view = self._get(owner, lease_id)
        if not 0 <= vnode < view.nodes:
            raise LeaseNotFound(f"lease {lease_id} has no VM {vnode}")
        return lease_api.PayloadLog(lease=lease_id, vnode=vnode, node=None, state="not started",
                                    log="payload", text="")

    def version(self) -> int:
        return self.changes.version

    def wait_change(self, since: int, timeout: float) -> int:
        return self.changes.wait(since, timeout)

    async def wait_change_async(self, since: int, timeout: float) -> int:
        return await self.changes.wait_async(since, timeout)

    def failure(self) -> str | None:
        return self.failed

    def close(self) -> None:
        self.closed = True
