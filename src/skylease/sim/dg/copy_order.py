"""The order in which BOINC's cloud workers copy work under Reschedule.

Under Reschedule a cloud worker with nothing unsent copies a result a desktop node is still
computing: it walks the unvalidated work units, oldest offer first, and takes the first it may
copy; a unit it took goes to the back. Units with nothing to copy (every result unsent, done, or
already copied by a cloud worker) are skipped, and they stay where they are, so every walk met them
again: at a million tasks the walk passed tens of thousands of such units per cloud worker served
(quadratic; docs/performance.md, "Simulations at SimGrid's scale").

Here such a unit is *parked*: it leaves the walk but keeps its place, and comes back to that same
place when it may have something to copy again (a result of it sent, or a cloud worker's copy of it
dropped). Walks therefore see the same units in the same order as a walk over all of them, minus
units they would have skipped: the same choices, in time proportional to what is taken.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from sortedcontainers import SortedDict


class CopyOrder:
    """Unvalidated work units in the order cloud workers are offered them."""

    __slots__ = ("_at", "_next", "_order", "_parked")

    def __init__(self, units: Iterable[int] = ()) -> None:
        self._order: SortedDict = SortedDict()  # place -> unit, for units in the walk
        self._at: dict[int, int] = {}  # unit -> place, for every unit (walked or parked)
        self._parked: set[int] = set()
        self._next = 0
        for w in units:
            self.append(w)

    def __len__(self) -> int:
        return len(self._at)  # parked units count: they are still unvalidated

    def __iter__(self) -> Iterator[int]:
        """The walk: units not parked, oldest place first (do not change the order meanwhile)."""
        return iter(self._order.values())

    def append(self, w: int) -> None:
        """Unit ``w`` (new) goes to the back."""
        self._at[w] = self._next
        self._order[self._next] = w
        self._next += 1

    def to_back(self, w: int) -> None:
        """Unit ``w``, in the walk, goes to the back."""
        del self._order[self._at[w]]
        self.append(w)

    def remove(self, w: int) -> None:
        """Unit ``w`` (validated) leaves for good; nothing if it is not here."""
        at = self._at.pop(w, None)
        if at is None:
            return
        if w in self._parked:
            self._parked.discard(w)
        else:
            del self._order[at]

    def park(self, w: int) -> None:
        """Unit ``w``, in the walk, has nothing to copy: it leaves the walk, keeping its place."""
        del self._order[self._at[w]]
        self._parked.add(w)

    def wake(self, w: int) -> None:
        """Unit ``w`` may have something to copy again: if parked, it is back at its place."""
        if w in self._parked:
            self._parked.discard(w)
            self._order[self._at[w]] = w
