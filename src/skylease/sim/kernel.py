"""A callback-based discrete-event kernel.

Events are ``(time, seq, fn, args)`` entries fired in (time, seq) order: equal times fire in the
order they were scheduled (seq is a global counter), so every run is deterministic. Two ways to
schedule:

* :meth:`Kernel.schedule` / :meth:`Kernel.schedule_in`: fire-and-forget, the fast path;
* :meth:`Kernel.call_at` / :meth:`Kernel.call_later`: return a :class:`Timer` that can be cancelled.

The pending events are a calendar queue rather than one binary heap: an event goes to the bucket
``int(time / width)`` (an unsorted list, so scheduling is an append), and only the current bucket
is a heap. A heap of all pending events costs a pop of ``log n`` comparisons, each a read of an
entry allocated long ago; with tens of thousands of pending events (every busy client of a desktop
grid holds one) those reads miss the CPU caches and the cost per event grew by 90 % from 2,500 to
24,000 pending events (``benchmarks/bench_scaling_floor.py``). A bucket holds some tens of events,
so a pop touches few entries whatever the size. The width follows the run: every
:data:`_CHECK` events it is multiplied or divided by 4 when the events fired per bucket leave
[:data:`_LOW`, :data:`_HIGH`]. The order of events does not depend on the width: buckets are
taken in time order and each is a heap on (time, seq).

Cancelled timers stay pending and are skipped when reached (lazy deletion, O(1) cancel: the
kernel keeps the seqs of dead entries); when they outnumber live events they are dropped, so
timer-heavy models do not grow without bound. Entries are tuples, not lists: a list is two
allocations, and each pending entry's memory is what the calendar keeps out of the caches.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from heapq import heapify, heappop, heappush
from typing import Any

_COMPACT_MIN = 256
#: events between two looks at the bucket width, and the events per bucket it aims at
_CHECK = 4096
_LOW, _HIGH = 8, 128
_STEP = 4.0  # the factor a width changes by
_WIDTH = 1.0  # initial bucket width (seconds): corrected within the first _CHECK events


class StopSimulation(Exception):
    """Raised inside a callback (via :meth:`Kernel.stop`) to end :meth:`Kernel.run` at once."""


class Timer:
    """A cancellable scheduled call, as returned by :meth:`Kernel.call_at`.

    Its pending entry is ``(time, seq, timer._fire, ())``. A cancelled timer's entry stays pending
    (its seq is in the kernel's set of dead entries) and is skipped when reached: cancel() costs
    no search.
    """

    __slots__ = ("args", "fn", "kernel", "seq", "time")

    def __init__(self, time: float, seq: int, fn: Callable[..., Any], args: tuple[Any, ...],
                 kernel: Kernel) -> None:
        self.time = time
        self.seq = seq
        self.fn: Callable[..., Any] | None = fn
        self.args = args
        self.kernel = kernel

    def cancel(self) -> None:
        """Prevent the call; cancelling twice, or after it fired, does nothing."""
        if self.fn is not None:
            self.fn = None
            self.args = ()
            kernel = self.kernel
            kernel._dead.add(self.seq)
            if len(kernel._dead) > kernel._check_dead:
                kernel._maybe_compact()

    @property
    def cancelled(self) -> bool:
        """True if cancelled or already fired."""
        return self.fn is None

    def _fire(self) -> None:
        fn, args = self.fn, self.args
        self.fn = None  # spent: a later cancel() is a no-op
        self.args = ()
        fn(*args)  # type: ignore[misc]  # never None: a cancelled timer's entry is skipped


def _bucket(time: float, inv: float) -> float:
    """The bucket of ``time`` (the slow path of scheduling: an infinite or NaN time)."""
    if math.isnan(time):
        raise ValueError("cannot schedule at NaN")
    return math.inf  # int(inf) overflows; inf sorts after every int bucket


class Kernel:
    """The event loop: a virtual clock ``now`` (seconds) and a calendar of pending calls.

    Invariant: every entry of the current bucket's heap ``_cur`` has a bucket index at most
    ``_curb``, and every entry of ``_buckets`` (keyed by index, the keys also in the heap
    ``_bheap``) a greater one; since the index grows with time, the least entry of ``_cur`` is the
    next event whenever ``_cur`` is not empty.
    """

    __slots__ = ("_bheap", "_buckets", "_check_dead", "_cur", "_curb", "_dead", "_inv", "_seq",
                 "events", "now")

    def __init__(self, start: float = 0.0) -> None:
        self.now = float(start)
        self._inv = 1.0 / _WIDTH
        self._cur: list[tuple[Any, ...]] = []
        self._curb: float = int(self.now * self._inv)
        self._buckets: dict[float, list[tuple[Any, ...]]] = {}
        self._bheap: list[float] = []
        self._seq = itertools.count()
        self._dead: set[int] = set()  # seqs of cancelled timers still pending
        self._check_dead = _COMPACT_MIN
        self.events = 0  # calls fired so far (cancelled timers not counted)

    # -- scheduling -------------------------------------------------------------------------
    def _push(self, entry: tuple[Any, ...]) -> None:
        time = entry[0]
        try:
            b: float = int(time * self._inv)
        except (OverflowError, ValueError):
            b = _bucket(time, self._inv)
        if b <= self._curb:
            heappush(self._cur, entry)
            return
        lst = self._buckets.get(b)
        if lst is None:
            self._buckets[b] = [entry]
            heappush(self._bheap, b)
        else:
            lst.append(entry)

    def schedule(self, time: float, fn: Callable[..., Any], *args: Any) -> None:
        """Call ``fn(*args)`` at ``time`` (no handle: cannot be cancelled)."""
        if time < self.now:
            raise ValueError(f"cannot schedule at {time} before now={self.now}")
        self._push((time, next(self._seq), fn, args))

    def schedule_in(self, delay: float, fn: Callable[..., Any], *args: Any) -> None:
        """Call ``fn(*args)`` after ``delay`` seconds (no handle)."""
        if delay < 0:
            raise ValueError(f"delay must be >= 0, got {delay}")
        self._push((self.now + delay, next(self._seq), fn, args))

    def call_at(self, time: float, fn: Callable[..., Any], *args: Any) -> Timer:
        """Call ``fn(*args)`` at ``time``; the returned timer can be cancelled."""
        if time < self.now:
            raise ValueError(f"cannot schedule at {time} before now={self.now}")
        timer = Timer(time, next(self._seq), fn, args, self)
        self._push((time, timer.seq, timer._fire, ()))
        return timer

    def call_later(self, delay: float, fn: Callable[..., Any], *args: Any) -> Timer:
        if delay < 0:
            raise ValueError(f"delay must be >= 0, got {delay}")
        return self.call_at(self.now + delay, fn, *args)

    # -- the calendar -----------------------------------------------------------------------
    def _next_bucket(self) -> bool:
        """Make the earliest future bucket current (``_cur`` is empty); False if there is none."""
        if not self._bheap:
            return False
        b = heappop(self._bheap)
        cur = self._cur
        cur.extend(self._buckets.pop(b))  # in place: the run loop holds this list
        heapify(cur)
        self._curb = b
        return True

    def _entries(self) -> list[tuple[Any, ...]]:
        out = list(self._cur)
        for lst in self._buckets.values():
            out.extend(lst)
        return out

    def _refill(self, entries: list[tuple[Any, ...]], inv: float) -> None:
        """Re-bucket ``entries`` (all pending) with width ``1 / inv``, in place."""
        self._inv = inv
        self._cur.clear()
        self._buckets.clear()
        self._bheap.clear()
        try:
            self._curb = int(self.now * inv)
        except OverflowError:
            self._curb = math.inf
        for e in entries:
            self._push(e)
        heapify(self._cur)

    def _maybe_compact(self) -> None:
        """Drop cancelled timers once they are over half the pending entries: cheaper than
        reaching each of them later."""
        n = len(self)
        dead = self._dead
        if 2 * len(dead) > n:
            self._refill([e for e in self._entries() if e[1] not in dead], self._inv)
            dead.clear()  # in place: the run loop holds this set
            self._check_dead = _COMPACT_MIN
        else:  # look again after a quarter of the pending entries more cancels
            self._check_dead = max(_COMPACT_MIN, len(dead) + n // 4)

    def _retune(self, fired: int, moves: int) -> None:
        """``fired`` events took ``moves`` bucket changes: widen or narrow the buckets by 4 if that
        is off [_LOW, _HIGH] events a bucket."""
        if moves * _HIGH < fired:
            inv = self._inv * _STEP
        elif moves * _LOW > fired:
            inv = self._inv / _STEP
        else:
            return
        if inv == 0.0 or math.isinf(inv):
            return
        self._refill(self._entries(), inv)

    # -- running ----------------------------------------------------------------------------
    def stop(self) -> None:
        """End the current :meth:`run` now: raises :class:`StopSimulation`, so call it last."""
        raise StopSimulation

    def peek(self) -> float:
        """Time of the next live event (inf if none)."""
        cur, dead = self._cur, self._dead
        while True:
            while cur and cur[0][1] in dead:
                dead.discard(heappop(cur)[1])
            if cur:
                return cur[0][0]
            if not self._next_bucket():
                return math.inf

    def __len__(self) -> int:
        """Pending entries, including cancelled timers not yet skipped."""
        return len(self._cur) + sum(map(len, self._buckets.values()))

    def run(self, until: float | None = None) -> float:
        """Fire events in time order until none is left or the next is after ``until``.

        With ``until``, the clock ends at ``until`` (events exactly at ``until`` fire).
        Returns the final clock.
        """
        cur, dead = self._cur, self._dead
        pop = heappop
        fired = 0
        limit = math.inf if until is None else until
        check = _CHECK  # events until the next look at the width
        moves = 0
        try:
            while True:
                if not cur:
                    if not self._next_bucket():
                        break
                    moves += 1
                if cur[0][0] > limit:
                    break
                entry = pop(cur)
                if dead and entry[1] in dead:  # a cancelled timer: not an event
                    dead.discard(entry[1])
                    continue
                self.now = entry[0]
                fired += 1
                check -= 1
                if not check:
                    self._retune(_CHECK, moves)
                    check, moves = _CHECK, 0
                entry[2](*entry[3])
            if until is not None and until > self.now:
                self.now = until
        except StopSimulation:
            pass
        finally:
            self.events += fired
        return self.now
