"""A callback-based discrete-event kernel.

Events are ``[time, seq, fn, args]`` entries on a binary heap: equal times fire in the order they
were scheduled (seq is a global counter), so every run is deterministic. Two ways to schedule:

* :meth:`Kernel.schedule` / :meth:`Kernel.schedule_in`: fire-and-forget, the fast path;
* :meth:`Kernel.call_at` / :meth:`Kernel.call_later`: return a :class:`Timer` that can be cancelled.

Cancelled timers stay in the heap and are skipped when popped (lazy deletion, O(1) cancel); when
they outnumber live events the heap is compacted so timer-heavy models do not grow without bound.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from heapq import heapify, heappop, heappush
from typing import Any

_COMPACT_MIN = 256


class StopSimulation(Exception):
    """Raised inside a callback (via :meth:`Kernel.stop`) to end :meth:`Kernel.run` at once."""


class Timer(list):
    """A cancellable scheduled call: the heap entry itself, ``[time, seq, fn, args, kernel]``.

    Being the entry (a list, compared by time then seq) makes creating and cancelling a timer
    cost no Python-level call: cancel() just blanks ``fn`` and the run loop skips it.
    """

    __slots__ = ()

    def cancel(self) -> None:
        """Prevent the call; cancelling twice, or after it fired, does nothing."""
        if self[2] is not None:
            self[2] = None
            self[3] = ()
            kernel = self[4]
            kernel._cancelled += 1
            if kernel._cancelled > _COMPACT_MIN and 2 * kernel._cancelled > len(kernel._heap):
                kernel._compact()

    @property
    def time(self) -> float:
        return self[0]

    @property
    def cancelled(self) -> bool:
        """True if cancelled or already fired."""
        return self[2] is None


class Kernel:
    """The event loop: a virtual clock ``now`` (seconds) and a heap of pending calls."""

    __slots__ = ("_cancelled", "_heap", "_seq", "events", "now")

    def __init__(self, start: float = 0.0) -> None:
        self.now = float(start)
        self._heap: list[list[Any]] = []
        self._seq = itertools.count()
        self._cancelled = 0
        self.events = 0  # calls fired so far (cancelled timers not counted)

    # -- scheduling -------------------------------------------------------------------------
    def schedule(self, time: float, fn: Callable[..., Any], *args: Any) -> None:
        """Call ``fn(*args)`` at ``time`` (no handle: cannot be cancelled)."""
        if time < self.now:
            raise ValueError(f"cannot schedule at {time} before now={self.now}")
        heappush(self._heap, [time, next(self._seq), fn, args])

    def schedule_in(self, delay: float, fn: Callable[..., Any], *args: Any) -> None:
        """Call ``fn(*args)`` after ``delay`` seconds (no handle)."""
        if delay < 0:
            raise ValueError(f"delay must be >= 0, got {delay}")
        heappush(self._heap, [self.now + delay, next(self._seq), fn, args])

    def call_at(self, time: float, fn: Callable[..., Any], *args: Any) -> Timer:
        """Call ``fn(*args)`` at ``time``; the returned timer can be cancelled."""
        if time < self.now:
            raise ValueError(f"cannot schedule at {time} before now={self.now}")
        timer = Timer((time, next(self._seq), fn, args, self))
        heappush(self._heap, timer)
        return timer

    def call_later(self, delay: float, fn: Callable[..., Any], *args: Any) -> Timer:
        if delay < 0:
            raise ValueError(f"delay must be >= 0, got {delay}")
        timer = Timer((self.now + delay, next(self._seq), fn, args, self))
        heappush(self._heap, timer)
        return timer

    def _compact(self) -> None:
        """Drop cancelled timers: cheaper than popping each of them later."""
        heap = self._heap
        heap[:] = [e for e in heap if e[2] is not None]
        heapify(heap)
        self._cancelled = 0

    # -- running ----------------------------------------------------------------------------
    def stop(self) -> None:
        """End the current :meth:`run` now: raises :class:`StopSimulation`, so call it last."""
        raise StopSimulation

    def peek(self) -> float:
        """Time of the next live event (inf if none)."""
        heap = self._heap
        while heap and heap[0][2] is None:
            heappop(heap)
            self._cancelled -= 1
        return heap[0][0] if heap else float("inf")

    def __len__(self) -> int:
        """Pending entries, including cancelled timers not yet skipped."""
        return len(self._heap)

    def run(self, until: float | None = None) -> float:
        """Fire events in time order until the heap is empty or the next is after ``until``.

        With ``until``, the clock ends at ``until`` (events exactly at ``until`` fire).
        Returns the final clock.
        """
        heap = self._heap
        pop = heappop
        fired = 0
        limit = math.inf if until is None else until
        try:
            while heap and heap[0][0] <= limit:
                entry = pop(heap)
                fn = entry[2]
                if fn is None:  # a cancelled timer: not an event
                    self._cancelled -= 1
                    continue
                entry[2] = None  # spent: a later cancel() of this timer is a no-op
                self.now = entry[0]
                fired += 1
                fn(*entry[3])
            if until is not None and until > self.now:
                self.now = until
        except StopSimulation:
            pass
        finally:
            self.events += fired
        return self.now
