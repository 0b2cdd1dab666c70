"""Image preparation (decisions H8 EDF and FIFO, H13 pools, in docs/decisions/haizea.md): multicast
transfers of VM
images from the repository, on two independent serial channels (decision H8): best-effort
transfers go first-in first-out as soon as possible; advance-reservation transfers are ordered by
deadline (EDF) and pushed as late as their deadlines allow. Per-node image pools with reference
counts and least-recently-used eviction serve image reuse.

Network reservations are not checked (neither does the 2008 code): the channels serialise the
transfers. Times are integer seconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum


class TransferState(StrEnum):
    SCHEDULED = "scheduled"
    ACTIVE = "active"
    DONE = "done"


@dataclass(eq=False)
class Transfer:
    """One multicast of ``image`` to the nodes its users need it on, on ``[start, end)``."""

    image: str
    start: int
    end: int
    deadline: int | None = None  # an AR's start (EDF channel); None on the FIFO channel
    size_mb: int = 0
    users: dict[int, set[int]] = field(default_factory=dict)  # lease id -> destination nodes
    state: TransferState = TransferState.SCHEDULED

    @property
    def nodes(self) -> set[int]:
        return set().union(*self.users.values()) if self.users else set()


def edf_times(scheduled: Sequence[Transfer], duration: int, deadline: int,
              t0: int) -> list[tuple[int, int]] | None:
    """Times for the AR transfers not started yet (``scheduled``) plus a new one of ``duration`` due by
    ``deadline``, on a channel free from ``t0`` (decision H8, the 2008 code's ``scheduleImageTransferEDF``).

    Sorted by deadline (the new one last among equals), a forward ASAP pass checks that every
    transfer meets its deadline; a backward pass then pushes each as late as possible. Returns the
    ``(start, end)`` of ``scheduled`` (same order) followed by the new one's, or ``None`` if
    infeasible.
    """
    items = [(t.deadline if t.deadline is not None else t.end, 0, i, t.end - t.start)
             for i, t in enumerate(scheduled)]
    items.append((deadline, 1, len(scheduled), duration))
    items.sort()
    t = t0
    for dl, _, _, dur in items:
        t += dur
        if t > dl:
            return None
    out: list[tuple[int, int]] = [(0, 0)] * len(items)
    f = items[-1][0]
    for dl, _, i, dur in reversed(items):
        end = min(dl, f)
        out[i] = (end - dur, end)
        f = end - dur
    return out


@dataclass
class _PoolEntry:
    refs: set[tuple[int, int]] = field(default_factory=set)  # (lease id, node)
    timeout: int = 0  # the latest end of the leases that used it (LRU key)


class ImagePool:
    """One node's image cache: at most ``capacity_mb`` of images (decision H13)."""

    def __init__(self, capacity_mb: int) -> None:
        self.capacity_mb = capacity_mb
        self.entries: dict[str, _PoolEntry] = {}
        self.sizes: dict[str, int] = {}

    def has(self, image: str, valid_at: int | None = None) -> bool:
        e = self.entries.get(image)
        return e is not None and (valid_at is None or e.timeout >= valid_at)

    def used_mb(self) -> int:
        return sum(self.sizes.values())

    def add(self, image: str, size: int, lease: int, node: int, timeout: int) -> bool:
        """Pool ``image`` (or re-reference it) for ``lease``; evicts one unreferenced image, least
        recently used first, if full. Returns ``False`` when nothing can be evicted (the caller keeps
        a per-VM copy instead)."""
        e = self.entries.get(image)
        if e is None:
            if self.used_mb() + size > self.capacity_mb:
                idle = [(en.timeout, im) for im, en in self.entries.items() if not en.refs]
                if not idle:
                    return False
                _, victim = min(idle)
                del self.entries[victim]
                del self.sizes[victim]
                if self.used_mb() + size > self.capacity_mb:
                    return False
            e = self.entries[image] = _PoolEntry()
            self.sizes[image] = size
        e.refs.add((lease, node))
        e.timeout = max(e.timeout, timeout)
        return True

    def release(self, image: str, lease: int, node: int) -> None:
        e = self.entries.get(image)
        if e is not None:
            e.refs.discard((lease, node))


class ImagePools:
    """The pools of all nodes, with an index image -> nodes holding it (queries stay cheap)."""

    def __init__(self, n_nodes: int, capacity_mb: int) -> None:
        self.pools = [ImagePool(capacity_mb) for _ in range(n_nodes)]
        self._where: dict[str, set[int]] = {}

    def __bool__(self) -> bool:
        return bool(self.pools)

    def nodes_with(self, image: str) -> set[int]:
        return self._where.get(image, set())

    def has(self, k: int, image: str, valid_at: int | None = None) -> bool:
        return k in self._where.get(image, ()) and self.pools[k].has(image, valid_at)

    def add(self, k: int, image: str, size: int, lease: int, timeout: int) -> bool:
        pool = self.pools[k]
        before = set(pool.entries)
        ok = pool.add(image, size, lease, k, timeout)
        for gone in before.difference(pool.entries):
            self._where[gone].discard(k)
        if ok:
            self._where.setdefault(image, set()).add(k)
        return ok

    def release(self, k: int, image: str, lease: int) -> None:
        self.pools[k].release(image, lease, k)
