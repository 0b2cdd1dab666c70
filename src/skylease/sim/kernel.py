"""A callback-based discrete-event kernel.

Events are ``[time, seq, fn, args]`` entries on a binary heap: equal times fire in the order they
were scheduled (seq is a global counter), so every run is deterministic. Two ways to schedule:

* :meth:`Kernel.schedule` / :meth:`Kernel.schedule_in`: fire-and-forget, the fast path;
* :meth:`Kernel.call_at` / :meth:`Kernel.call_later`: return a :class:`Timer` that can be cancelled.

Cancelled timers stay in the heap and are skipped when popped (lazy deletion, O(1) cancel); when
they outnumber live events the heap is compacted so timer-heavy models do not grow without bound.

:class:`CalendarKernel` fires the same events in the same order from a calendar queue, for models
that keep thousands of events pending (a desktop grid's busy clients hold one each). A heap pop
reads ``log n`` entries allocated long ago; with tens of thousands pending those reads miss the
CPU caches (``benchmarks/bench_scaling_floor.py``: +95-110 % per event from 2,500 to 24,000
pending). The calendar puts an event in the bucket ``int(time / width)`` (an unsorted list:
scheduling is an append) and makes a bucket a heap only when it is reached, so a pop touches tens
of entries however many are pending. The width follows the run: at the first bucket change after
every :data:`_CHECK` events, when the events fired per bucket leave [:data:`_LOW`, :data:`_HIGH`],
it is set to hold :data:`_AIM` of them at the rate they fired since the last look, and a bucket
reached with over :data:`_SPLIT` events
is split at once. The order never depends on the width: buckets are taken in time order and each
is a heap on (time, seq). With few events pending the one heap is faster (5-20 % on
``benchmarks/bench_kernel.py``'s models), hence two kernels.
"""

from __future__ import annotations

import gc
import itertools
import math
from collections.abc import Callable
from heapq import heapify, heappop, heappush
from typing import Any

_COMPACT_MIN = 256
#: CalendarKernel: events between two looks at the bucket width, the events per bucket it aims at
_CHECK = 4096
_LOW, _HIGH = 8, 128
_AIM = (_LOW + _HIGH) / 2  # the events per bucket a new width aims at
_WIDTH = 1.0  # initial bucket width (seconds): split or retuned once the run shows its scale
_SPLIT = 4 * _HIGH  # a bucket reached with more events than this is split at once
_INT_MAX = 9e18  # a bucket index above it (or NaN) takes the slow path: inf, or an error


def _pause_collector() -> bool:
    """Pause Python's cyclic garbage collector for a run; True if the caller must resume it.

    A model's objects die by reference counting (an event's entry when it fires, a task's state when
    it is done), but the collector still walks every live container object at each full pass, and
    a run's churn triggers those passes more often the larger the run: 11 passes over 1.4-2.1
    million objects at a million tasks, a third of the run's CPU time and +14 % instructions per
    event against 100,000 tasks (docs/performance.md, "Simulations at SimGrid's scale"). What a run
    leaves in cycles (a few thousand objects at 20,000 tasks) is collected once it is resumed."""
    if not gc.isenabled():
        return False  # paused already (an outer run, or the program's own choice): leave it so
    gc.disable()
    return True


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
            if kernel._cancelled > kernel._check_cancelled:
                kernel._maybe_compact()

    @property
    def time(self) -> float:
        return self[0]

    @property
    def cancelled(self) -> bool:
        """True if cancelled or already fired."""
        return self[2] is None


class Kernel:
    """The event loop: a virtual clock ``now`` (seconds) and a heap of pending calls."""

    __slots__ = ("_cancelled", "_check_cancelled", "_heap", "_seq", "events", "now")

    def __init__(self, start: float = 0.0) -> None:
        self.now = float(start)
        self._heap: list[list[Any]] = []
        self._seq = itertools.count()
        self._cancelled = 0
        self._check_cancelled = _COMPACT_MIN
        self.events = 0  # calls fired so far (cancelled timers not counted)

    # -- scheduling -------------------------------------------------------------------------
    def schedule(self, time: float, fn: Callable[..., Any], *args: Any) -> None:
        """Call ``fn(*args)`` at ``time`` (no handle: cannot be cancelled)."""
        if not time >= self.now:  # NaN too
            raise ValueError(f"cannot schedule at {time} before now={self.now}")
        heappush(self._heap, [time, next(self._seq), fn, args])

    def schedule_in(self, delay: float, fn: Callable[..., Any], *args: Any) -> None:
        """Call ``fn(*args)`` after ``delay`` seconds (no handle)."""
        if not delay >= 0:
            raise ValueError(f"delay must be >= 0, got {delay}")
        heappush(self._heap, [self.now + delay, next(self._seq), fn, args])

    def call_at(self, time: float, fn: Callable[..., Any], *args: Any) -> Timer:
        """Call ``fn(*args)`` at ``time``; the returned timer can be cancelled."""
        if not time >= self.now:  # NaN too
            raise ValueError(f"cannot schedule at {time} before now={self.now}")
        timer = Timer((time, next(self._seq), fn, args, self))
        heappush(self._heap, timer)
        return timer

    def call_later(self, delay: float, fn: Callable[..., Any], *args: Any) -> Timer:
        if not delay >= 0:
            raise ValueError(f"delay must be >= 0, got {delay}")
        timer = Timer((self.now + delay, next(self._seq), fn, args, self))
        heappush(self._heap, timer)
        return timer

    def _maybe_compact(self) -> None:
        """Drop cancelled timers once they are over half the pending entries: cheaper than
        popping each of them later."""
        n = len(self)
        if 2 * self._cancelled > n:
            self._compact()
            self._cancelled = 0
            self._check_cancelled = _COMPACT_MIN
        else:  # look again when they would be over half of what is pending now
            self._check_cancelled = max(_COMPACT_MIN, n // 2)

    def _compact(self) -> None:
        heap = self._heap
        heap[:] = [e for e in heap if e[2] is not None]
        heapify(heap)

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
        paused = _pause_collector()
        try:
            return self._run(until)
        finally:
            if paused:
                gc.enable()

    def _run(self, until: float | None) -> float:
        stopped = self._fire(math.inf if until is None else until)
        if not stopped and until is not None and until > self.now:
            self.now = until  # a stopped run keeps the clock where it stopped
        return self.now

    def _fire(self, limit: float) -> bool:
        """Fire the heap's events up to ``limit``; True if a callback stopped the run."""
        heap = self._heap
        pop = heappop
        fired = 0
        try:
            if limit == math.inf:  # no look at the next entry's time: every event is run, in order
                while heap:
                    entry = pop(heap)
                    fn = entry[2]
                    if fn is None:  # a cancelled timer: not an event
                        self._cancelled -= 1
                        continue
                    entry[2] = None  # spent: a later cancel() of this timer is a no-op
                    self.now = entry[0]
                    fired += 1
                    fn(*entry[3])
                return False
            while heap and heap[0][0] <= limit:
                entry = pop(heap)
                fn = entry[2]
                if fn is None:
                    self._cancelled -= 1
                    continue
                entry[2] = None
                self.now = entry[0]
                fired += 1
                fn(*entry[3])
        except StopSimulation:
            return True
        finally:
            self.events += fired
        return False


def _bucket(time: float) -> float:
    """The bucket of ``time`` when ``time / width`` is not below :data:`_INT_MAX`: inf (after
    every int bucket), which keeps huge finite times in order among themselves by their heap."""
    if math.isnan(time):
        raise ValueError("cannot schedule at NaN")
    return math.inf


def _index(time: float, inv: float) -> float:
    """The bucket of ``time``; :meth:`CalendarKernel.schedule` inlines it (keep them the same)."""
    x = time * inv
    return int(x) if x < _INT_MAX else _bucket(time)


class CalendarKernel(Kernel):
    """:class:`Kernel`'s events in the same order, from a calendar queue (see the module's doc).

    Invariant: every entry of the current bucket's heap ``_heap`` has a bucket index at most
    ``_curb``, and every entry of ``_buckets`` (keyed by index, the keys also in the heap
    ``_bheap``) a greater one; since the index grows with time, the least entry of ``_heap`` is
    the next event whenever ``_heap`` is not empty.
    """

    __slots__ = ("_bheap", "_buckets", "_curb", "_inv")

    def __init__(self, start: float = 0.0) -> None:
        super().__init__(start)
        self._inv = 1.0 / _WIDTH
        self._curb = _index(self.now, self._inv)
        self._buckets: dict[float, list[list[Any]]] = {}
        self._bheap: list[float] = []

    def _push(self, entry: list[Any]) -> None:
        b = _index(entry[0], self._inv)
        if b > self._curb:
            self._later(entry, b)
        else:
            heappush(self._heap, entry)

    def _later(self, entry: list[Any], b: float) -> None:
        lst = self._buckets.get(b)
        if lst is None:
            self._buckets[b] = [entry]
            heappush(self._bheap, b)
        else:
            lst.append(entry)

    def schedule(self, time: float, fn: Callable[..., Any], *args: Any) -> None:
        if not time >= self.now:  # NaN too
            raise ValueError(f"cannot schedule at {time} before now={self.now}")
        entry = [time, next(self._seq), fn, args]
        x = time * self._inv  # _index and _push inlined: every event of a model comes here
        b = int(x) if x < _INT_MAX else _bucket(time)
        if b <= self._curb:
            heappush(self._heap, entry)
        else:
            self._later(entry, b)

    def schedule_in(self, delay: float, fn: Callable[..., Any], *args: Any) -> None:
        if not delay >= 0:
            raise ValueError(f"delay must be >= 0, got {delay}")
        self._push([self.now + delay, next(self._seq), fn, args])

    def call_at(self, time: float, fn: Callable[..., Any], *args: Any) -> Timer:
        if not time >= self.now:  # NaN too
            raise ValueError(f"cannot schedule at {time} before now={self.now}")
        timer = Timer((time, next(self._seq), fn, args, self))
        self._push(timer)
        return timer

    def call_later(self, delay: float, fn: Callable[..., Any], *args: Any) -> Timer:
        if not delay >= 0:
            raise ValueError(f"delay must be >= 0, got {delay}")
        timer = Timer((self.now + delay, next(self._seq), fn, args, self))
        self._push(timer)
        return timer

    # -- the calendar -----------------------------------------------------------------------
    def _next_bucket(self) -> bool:
        """Make the earliest future bucket current (``_heap`` is empty); False if none is left."""
        if not self._bheap:
            return False
        b = heappop(self._bheap)
        heap = self._heap
        heap.extend(self._buckets.pop(b))  # in place: the run loop holds this list
        heapify(heap)
        self._curb = b
        return True

    def _entries(self) -> list[list[Any]]:
        out = list(self._heap)
        for lst in self._buckets.values():
            out.extend(lst)
        return out

    def _refill(self, entries: list[list[Any]], inv: float) -> None:
        """Re-bucket ``entries`` (all pending) with width ``1 / inv``, in place."""
        self._inv = inv
        self._heap.clear()
        self._buckets.clear()
        self._bheap.clear()
        self._curb = _index(self.now, inv)
        for e in entries:
            self._push(e)

    def _compact(self) -> None:
        self._refill([e for e in self._entries() if e[2] is not None], self._inv)

    def _split(self) -> None:
        """The current bucket holds over :data:`_SPLIT` events (the width is far too wide, as at
        the start of a run on another time scale): narrow it to spread them over tens of buckets."""
        heap = self._heap
        hi = max((e[0] for e in heap if e[0] < math.inf), default=heap[0][0])
        if heap[0][0] < hi:
            inv = len(heap) / _AIM / (hi - heap[0][0])
            if inv > self._inv and not math.isinf(inv):
                self._refill(self._entries(), inv)

    def _retune(self, fired: int, moves: int, span: float) -> None:
        """``fired`` events over ``span`` seconds took ``moves`` bucket changes: if that is off
        [_LOW, _HIGH] events a bucket, make the width hold :data:`_AIM` events at that rate. In one
        step: each change re-buckets every pending event, and steps of a fixed factor (4) took 7 of
        them, of 120,000 events each, to find the width of a run at 100,000 hosts."""
        if _LOW * moves <= fired <= _HIGH * moves or not span > 0:  # (all at one instant: no rate)
            return
        inv = fired / (_AIM * span)
        if inv == 0.0 or math.isinf(inv):
            return
        self._refill(self._entries(), inv)

    def peek(self) -> float:
        heap = self._heap
        while True:
            while heap and heap[0][2] is None:
                heappop(heap)
                self._cancelled -= 1
            if heap:
                return heap[0][0]
            if not self._next_bucket():
                return math.inf

    def __len__(self) -> int:
        return len(self._heap) + sum(map(len, self._buckets.values()))

    def _run(self, until: float | None) -> float:
        limit = math.inf if until is None else until
        heap = self._heap
        # bucket changes, events and the clock since the last look at the width
        moves, since, since_t = 0, self.events, self.now
        if len(heap) > _SPLIT:
            self._split()
        while not (stopped := self._fire(limit)) and not heap:  # the bucket is spent: the next
            if not self._next_bucket():
                break
            moves += 1
            if len(heap) > _SPLIT:
                self._split()
            if self.events - since >= _CHECK:
                self._retune(self.events - since, moves, self.now - since_t)
                moves, since, since_t = 0, self.events, self.now
        if not stopped and until is not None and until > self.now:
            self.now = until
        return self.now
