"""A plain slot table for the lease-manager benchmark: the same answers by scanning.

It keeps the per-node rows (so that it is a drop-in replacement) but answers every query the way a
direct transcription of decisions H3-H4 in docs/decisions/haizea.md would: no caches, no one-VM-per-node
shortcut (a usage sweep on every node), change points and the next event found by scanning every reservation.
"""

from __future__ import annotations

import math

from skylease.control.leases.lease import ResourceTuple
from skylease.control.leases.slottable import AvailabilityWindow, SlotTable


class PlainSlotTable(SlotTable):
    def _exclusive(self, request: ResourceTuple) -> bool:
        return False

    def window(self, t, request, skip=None):
        until = {}
        for k in range(self.n_nodes):
            u = self.free_until(k, t, request, skip)
            if u > t:
                until[k] = u
        return AvailabilityWindow(t, request, until)

    def has_free_cpu(self, t):
        for k in range(self.n_nodes):
            used = sum(rr.usage.cpu for rr in self.reservations.values()
                       if k in rr.nodes and rr.start <= t < rr.end)
            if used < self.capacity[k].cpu:
                return True
        return False

    def changepoints_after(self, t, nodes=None, skip=None):
        if nodes is not None:
            return super().changepoints_after(t, nodes, skip)
        pts = {p for rr in self.reservations.values() for p in (rr.start, rr.end) if p > t}
        pts.update(p for p in self._points.keys if p > t)  # (transfer markers)
        return sorted(pts)

    def next_changepoint(self, t):
        pts = [p for rr in self.reservations.values() for p in (rr.start, rr.end, rr.real_end) if p > t]
        pts += [p for p in self._points.keys if p > t]
        return min(pts, default=math.inf)
