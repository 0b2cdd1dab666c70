"""Image preparation for the lease scheduler (decisions H8, H9, H13 in docs/decisions/haizea.md).

:class:`ImagePreparation` keeps the two transfer channels (BE: FIFO, as soon as possible; AR: EDF,
as late as the deadlines allow), which leases wait for which transfer, and the per-node image
pools. With ``transfer_link = "one-link"`` (Haizea 1.0) both kinds share one link: a BE transfer
takes the first hole long enough from now on, an AR transfer the latest hole that ends by its
deadline, and a transfer once scheduled never moves. The scheduler asks it when a lease's nodes can
be ready (Step A) and tells it where leases were placed (Step E); transfers appear in the slot
table as change points only.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from skylease.control.leases.config import SchedulerConfig
from skylease.control.leases.images import ImagePools, Transfer, TransferState, edf_times
from skylease.control.leases.lease import Lease
from skylease.control.leases.slottable import SlotTable

#: ``(start, the nodes usable from then on; None: all)``: a lease's first candidate start points.
Points = list[tuple[int, set[int] | None]]


class ImagePreparation:
    """Transfers and pools of one cluster, under ``config`` (``transfers``, ``piggyback``, ``reuse``)."""

    def __init__(self, config: SchedulerConfig, table: SlotTable) -> None:
        self.config = config
        self.table = table
        self.fifo: list[Transfer] = []  # BE transfers not done yet, in channel order
        self.edf: list[Transfer] = []  # AR transfers not done yet
        self.pools = ImagePools(table.n_nodes if config.reuse else 0, config.pool_mb)
        self._uses: dict[int, list[Transfer]] = {}  # lease id -> the transfers it waits for
        self.ready: dict[int, int] = {}  # lease id -> when its image is on all its nodes
        self._pooled: dict[int, list[tuple[str, int]]] = {}  # lease id -> its pool references
        #: Called with each transfer as it completes, before its users can leave it (a simulator
        #: records transfers through this; the scheduler needs nothing of it).
        self.on_done: Callable[[Transfer], None] | None = None

    # -- events ---------------------------------------------------------------------------------------
    def process(self, now: int, vm_end: Callable[[int], int | None]) -> None:
        """Transfers starting and ending now; an arrived image enters its nodes' pools (reuse), held
        until the end (``vm_end(lease id)``) of the leases using it."""
        for channel in (self.fifo, self.edf):
            keep = []
            for tr in channel:
                if tr.state is TransferState.SCHEDULED and tr.start <= now:
                    tr.state = TransferState.ACTIVE
                if tr.end <= now:
                    tr.state = TransferState.DONE
                    if self.on_done is not None:
                        self.on_done(tr)
                    if self.pools:
                        self._pool(tr, vm_end)
                else:
                    keep.append(tr)
            channel[:] = keep

    def _pool(self, tr: Transfer, vm_end: Callable[[int], int | None]) -> None:
        for lid, nodes in tr.users.items():
            end = vm_end(lid)
            for k in nodes:
                if self.pools.add(k, tr.image, tr.size_mb, lid, end if end is not None else tr.end):
                    self._pooled.setdefault(lid, []).append((tr.image, k))

    def drop(self, lid: int) -> None:
        """The lease no longer needs its transfers (one with no users left and not started is
        deleted; on Haizea 1.0's one link, also one under way) nor its pool references."""
        one_link = self.config.transfer_link == "one-link"
        for tr in self._uses.pop(lid, ()):
            tr.users.pop(lid, None)
            if not tr.users and (tr.state is TransferState.SCHEDULED
                                 or (one_link and tr.state is TransferState.ACTIVE)):
                (self.fifo if tr.deadline is None else self.edf).remove(tr)
                self.table.remove_marker(tr.start, tr.end)
        self.ready.pop(lid, None)
        for image, k in self._pooled.pop(lid, ()):
            self.pools.release(k, image, lid)

    # -- best-effort leases -----------------------------------------------------------------------------
    def next_fifo(self, now: int, duration: int = 0) -> int:
        """When a BE transfer of ``duration`` can start: when the BE channel is free (the end of its
        last transfer not done, or now); on the one link, Haizea 1.0's ``__get_next_transfer_slot``."""
        if self.config.transfer_link == "one-link":
            return next_slot(self.link(), now, duration)
        # each transfer starts when the one before it ends, so the last one ends last
        return max(now, self.fifo[-1].end) if self.fifo else now

    def link(self) -> list[Transfer]:
        """Every transfer not done, by start (both kinds: Haizea 1.0's one link)."""
        return sorted((*self.fifo, *self.edf), key=lambda tr: tr.start)

    def earliest(self, lease: Lease, now: int) -> tuple[Points, Transfer | None, set[int]]:
        """Step A/B for a new lease: its first start points, the scheduled transfer of its image it
        can join (piggyback), and the nodes whose pool holds its image."""
        cfg, img = self.config, lease.image or ""
        base = self.next_fifo(now, cfg.transfer_s(lease)) + cfg.transfer_s(lease)
        piggy = None
        if cfg.piggyback:
            for tr in self.fifo if cfg.transfer_link == "two-channels" else self.link():
                if tr.state is TransferState.SCHEDULED and tr.image == img and now < tr.end < base:
                    base, piggy = tr.end, tr
        pool_nodes = set(self.pools.nodes_with(img)) if self.pools else set()
        points: Points = [(now, pool_nodes), (base, None)] if pool_nodes else [(base, None)]
        return points, piggy, pool_nodes

    def stage_be(self, lease: Lease, nodes: tuple[int, ...], now: int, pool_nodes: set[int],
                 piggy: Transfer | None, vm_end: int) -> None:
        """Step E: pool hits are referenced, the other nodes join ``piggy`` or one new FIFO multicast."""
        img, cfg = lease.image or "", self.config
        rest = [k for k in nodes if k not in pool_nodes]
        for k in nodes:
            if k in pool_nodes and self.pools.add(k, img, cfg.image_mb(lease), lease.id, vm_end):
                self._pooled.setdefault(lease.id, []).append((img, k))
        if not rest:
            self.ready[lease.id] = now
            return
        if piggy is None:
            start = self.next_fifo(now, cfg.transfer_s(lease))
            piggy = Transfer(img, start, start + cfg.transfer_s(lease), size_mb=cfg.image_mb(lease))
            self.fifo.append(piggy)
            self.table.add_marker(piggy.start, piggy.end)
        piggy.users.setdefault(lease.id, set()).update(rest)
        self._uses[lease.id] = [piggy]
        self.ready[lease.id] = piggy.end

    # -- advance reservations ---------------------------------------------------------------------------
    def pooled_at(self, lease: Lease, start: int) -> set[int]:
        """Nodes whose pool holds the AR's image and keeps it until ``start`` at least."""
        img = lease.image or ""
        return {k for k in self.pools.nodes_with(img) if self.pools.has(k, img, valid_at=start)}

    def stage_ar(self, lease: Lease, nodes: tuple[int, ...], pooled: set[int], now: int) -> str | None:
        """One multicast of the AR's image to its nodes without it, due by its start, on the EDF
        channel (decision H8); the reason if that cannot be done in time."""
        assert lease.start is not None
        must = {k for k in nodes if k not in pooled}
        if not must:
            return None
        dur = self.config.transfer_s(lease)
        if self.config.transfer_link == "one-link":
            a = last_slot(self.link(), lease.start, dur)
            if a < now:  # (Haizea 1.0 would book it in the past; we reject)
                return f"its image ({dur} s to transfer) cannot reach its nodes by its start {lease.start}"
            self._add_ar_transfer(lease, must, a, a + dur)
            return None
        t0 = max([now, *(tr.end for tr in self.edf if tr.state is TransferState.ACTIVE)])
        pending = [tr for tr in self.edf if tr.state is TransferState.SCHEDULED]
        times = edf_times(pending, dur, lease.start, t0)
        if times is None:
            return f"its image ({dur} s to transfer) cannot reach its nodes by its start {lease.start}"
        for tr, (a, b) in zip(pending, times, strict=False):  # re-timed, never past their deadlines
            if (a, b) != (tr.start, tr.end):
                self.table.remove_marker(tr.start, tr.end)
                tr.start, tr.end = a, b
                self.table.add_marker(a, b)
        self._add_ar_transfer(lease, must, *times[-1])
        return None

    def _add_ar_transfer(self, lease: Lease, must: set[int], a: int, b: int) -> None:
        assert lease.start is not None
        tr = Transfer(lease.image or "", a, b, deadline=lease.start, users={lease.id: must},
                      size_mb=self.config.image_mb(lease))
        self.edf.append(tr)
        self.table.add_marker(a, b)
        self._uses[lease.id] = [tr]
        self.ready[lease.id] = b

    def move_ar(self, lease: Lease, old: tuple[int, ...], new: tuple[int, ...], end: int) -> bool:
        """An AR not started moves from the nodes ``old`` to ``new`` (a host went down,
        docs/decisions/host-failures.md): each node it gains must hold its image in its pool until
        the AR's start, or join the AR's transfer that has not started (a multicast takes as long
        whatever its destinations); else False, and nothing changes. The pool references it held
        on the nodes it leaves are released; the pooled copies it gains are pinned until ``end``."""
        assert lease.start is not None
        gone = {k for k in old if k not in new}
        gained = tuple(k for k in new if k not in old)
        pooled = self.pooled_at(lease, lease.start)
        need = {k for k in gained if k not in pooled}
        uses = self._uses.get(lease.id, [])
        pending = [tr for tr in uses if tr.state is TransferState.SCHEDULED]
        if need and not pending:
            return False
        for tr in uses:
            if lease.id in tr.users:
                tr.users[lease.id] -= gone
        if need:
            pending[0].users.setdefault(lease.id, set()).update(need)
        kept = []
        for image, k in self._pooled.pop(lease.id, ()):
            if k in gone:
                self.pools.release(k, image, lease.id)
            else:
                kept.append((image, k))
        if kept:
            self._pooled[lease.id] = kept
        self.pin(lease, gained, pooled, end)
        return True

    def pin(self, lease: Lease, nodes: tuple[int, ...], pooled: set[int], end: int) -> None:
        """Reference the pooled copies an AR uses, valid until it ends (decision H13 [R])."""
        img = lease.image or ""
        for k in nodes:
            if k in pooled and self.pools.add(k, img, self.config.image_mb(lease), lease.id, end):
                self._pooled.setdefault(lease.id, []).append((img, k))


def next_slot(link: list[Transfer], now: int, duration: int) -> int:
    """Haizea 1.0's ``__get_next_transfer_slot`` on ``link`` (by start): now if the transfer ends
    before the first one starts, else the end of the first transfer followed by a hole long
    enough, else the end of the last one."""
    if not link or now + duration <= link[0].start:
        return now
    for a, b in itertools.pairwise(link):
        if b.start - a.end >= duration:
            return a.end
    return link[-1].end


def last_slot(link: list[Transfer], deadline: int, duration: int) -> int:
    """Haizea 1.0's ``__get_last_transfer_slot`` on ``link`` (by start): the latest start that ends
    by ``deadline`` after the last transfer, else in the latest hole long enough, else before the
    first transfer."""
    if not link or link[-1].end + duration <= deadline:
        return deadline - duration
    for i in range(len(link) - 1, 0, -1):
        if link[i].start - link[i - 1].end >= duration:
            return link[i].start - duration
    return link[0].start - duration
