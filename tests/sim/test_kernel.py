import heapq
import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skylease.sim.kernel import CalendarKernel, Kernel

KERNELS = pytest.mark.parametrize("kernel_type", [Kernel, CalendarKernel])

times = st.floats(min_value=0, max_value=1e6, allow_nan=False)


@KERNELS
def test_equal_times_fire_in_scheduling_order(kernel_type):
    k = kernel_type()
    out = []
    for i in range(5):
        k.schedule(1.0, out.append, i)
    k.call_at(1.0, out.append, 5)
    k.run()
    assert out == [0, 1, 2, 3, 4, 5]


@KERNELS
def test_events_scheduled_at_now_from_a_callback_fire_after_current_ones(kernel_type):
    k = kernel_type()
    out = []
    k.schedule(1.0, lambda: (out.append("a"), k.schedule(1.0, out.append, "c")))
    k.schedule(1.0, out.append, "b")
    k.run()
    assert out == ["a", "b", "c"]


@KERNELS
def test_run_until_stops_and_resumes(kernel_type):
    k = kernel_type()
    out = []
    for t in (1, 2, 3):
        k.schedule(t, out.append, t)
    assert k.run(until=2) == 2
    assert out == [1, 2]
    k.run(until=10)
    assert out == [1, 2, 3] and k.now == 10


@KERNELS
def test_scheduling_in_the_past_is_an_error(kernel_type):
    k = kernel_type()
    k.schedule(5, lambda: None)
    k.run()
    with pytest.raises(ValueError):
        k.schedule(4, lambda: None)
    with pytest.raises(ValueError):
        k.call_later(-1, lambda: None)


@KERNELS
def test_cancelled_timer_does_not_advance_clock_or_count(kernel_type):
    k = kernel_type()
    t = k.call_at(10, lambda: None)
    k.schedule(3, lambda: None)
    t.cancel()
    t.cancel()
    k.run()
    assert k.now == 3 and k.events == 1 and t.cancelled


@KERNELS
def test_stop_ends_run(kernel_type):
    k = kernel_type()
    out = []
    k.schedule(1, out.append, 1)
    k.schedule(2, k.stop)
    k.schedule(3, out.append, 3)
    k.run()
    assert out == [1] and k.now == 2
    k.run()
    assert out == [1, 3]


@KERNELS
def test_stop_inside_a_run_until_keeps_the_clock_where_it_stopped(kernel_type):
    k = kernel_type()
    k.schedule(2, k.stop)
    k.schedule(3, lambda: None)
    assert k.run(until=10) == 2 and k.now == 2
    assert k.run(until=10) == 10


@KERNELS
def test_heap_is_compacted_under_heavy_cancellation(kernel_type):
    k = kernel_type()
    for i in range(10_000):
        k.call_at(1000 + i, lambda: None).cancel()
    assert len(k) < 1000
    k.run()
    assert k.events == 0


@KERNELS
@settings(max_examples=200)
@given(st.lists(st.tuples(times, st.booleans()), min_size=1, max_size=200))
def test_events_fire_in_time_order_and_cancelled_never_fire(kernel_type, specs):
    k = kernel_type()
    fired = []
    timers = []
    for i, (t, cancel) in enumerate(specs):
        timers.append((k.call_at(t, lambda i=i: fired.append((k.now, i))), cancel, t))
    for timer, cancel, _ in timers:
        if cancel:
            timer.cancel()
    k.run()
    assert [t for t, _ in fired] == sorted(t for t, _ in fired)
    fired_ids = [i for _, i in fired]
    expected = [i for i, (_, c, _) in enumerate(timers) if not c]
    assert sorted(fired_ids) == expected  # every live timer fired once, no cancelled one did
    for now, i in fired:
        assert now == specs[i][0]  # at exactly its time


@KERNELS
@settings(max_examples=100)
@given(st.lists(times, min_size=1, max_size=100), st.data())
def test_cancel_from_inside_callbacks(kernel_type, ts, data):
    """Callbacks cancelling other timers (the keep-alive pattern) never let a cancelled one fire."""
    k = kernel_type()
    fired = set()
    timers = {}
    victims = {i: data.draw(st.integers(0, len(ts) - 1)) for i in range(len(ts))}

    def cb(i):
        fired.add(i)
        timers[victims[i]].cancel()

    for i, t in enumerate(ts):
        timers[i] = k.call_at(t, cb, i)
    k.run()
    for i in fired:
        # a timer fired only if nobody that fired strictly before it cancelled it
        assert not any(victims[j] == i and (ts[j], j) < (ts[i], i) for j in fired)
    assert all(tm.cancelled for tm in timers.values())  # each fired or was cancelled


class _HeapKernel:
    """The definition the calendar must agree with: one heap on (time, seq), lazy cancels."""

    def __init__(self) -> None:
        self.now, self.heap, self.seq, self.events = 0.0, [], 0, 0

    def call_at(self, t, fn, *args):
        entry = [t, self.seq, fn, args]
        self.seq += 1
        heapq.heappush(self.heap, entry)
        return entry

    def run(self, until=None):
        while self.heap and (until is None or self.heap[0][0] <= until):
            entry = heapq.heappop(self.heap)
            if entry[2] is None:
                continue
            self.now = entry[0]
            self.events += 1
            fn, entry[2] = entry[2], None
            fn(*entry[3])
        if until is not None and until > self.now:
            self.now = until
        return self.now


# times on several scales at once (and ties), so that the width is retuned both ways mid-run
_scaled = st.one_of(st.floats(0, 1e-3), st.floats(0, 10), st.floats(0, 1e6), st.sampled_from([0.0, 1.0, 5.0]))


@KERNELS
@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(_scaled, st.integers(0, 3), st.integers(0, 10**6)), min_size=1, max_size=120),
       st.lists(st.floats(0, 2e6), max_size=3), st.integers(1, 40))
def test_both_kernels_fire_what_one_heap_fires_in_the_same_order(kernel_type, specs, stops, check):
    """Each event may schedule children (some at now, some cancellable) and cancel a pending timer;
    runs may stop at ``until`` and resume. The calendar (width retuned every ``check`` events) and
    a plain heap fire the same calls at the same times in the same order, with the same counts."""
    import skylease.sim.kernel as kmod

    old = kmod._CHECK
    kmod._CHECK = check
    try:
        logs = []
        for k in (kernel_type(), _HeapKernel()):
            log, timers = [], []
            budget = [600]

            def ev(i, depth, k=k, log=log, timers=timers, budget=budget):
                log.append((k.now, i))
                _, kids, salt = specs[i % len(specs)]
                if timers and salt % 3 == 0:
                    victim = timers[salt % len(timers)]
                    # mid-run too (a timer due now may have fired or not yet), both must agree
                    log.append(victim[2] is None if type(victim) is list else victim.cancelled)
                    if type(victim) is list:
                        victim[2] = None
                    else:
                        victim.cancel()
                for c in range(kids if depth < 3 and budget[0] > 0 else 0):
                    budget[0] -= 1
                    delay = 0.0 if (salt + c) % 4 == 0 else specs[(i + c + 1) % len(specs)][0]
                    if (salt + c) % 2:  # the fast path, no handle
                        add = k.schedule if isinstance(k, kernel_type) else k.call_at
                        add(k.now + delay, ev, i * 7 + c + 1, depth + 1)
                    else:
                        timers.append(k.call_at(k.now + delay, ev, i * 7 + c + 1, depth + 1))

            for i, (t, _, _) in enumerate(specs):
                timers.append(k.call_at(t, ev, i, 0))
            def gone(timers=timers):  # cancelled or fired, as each timer reports it
                return [tm[2] is None if type(tm) is list else tm.cancelled for tm in timers]

            for u in sorted(stops):
                k.run(until=u)
                log.append(("stop", k.now, gone()))
            k.run()
            logs.append((log, k.now, k.events, gone()))
        assert logs[0] == logs[1]
    finally:
        kmod._CHECK = old


def test_the_width_follows_the_events():
    """A million-second model and a millisecond one both end with tens of events a bucket (the
    first bucket of the millisecond one holds them all: it is split at once), and fire what the
    heap fires."""
    for scale in (1e6, 1e-3):
        fired = []
        for k in (CalendarKernel(), Kernel()):
            rnd = random.Random(3)
            times = []

            def again(k=k, rnd=rnd, scale=scale, times=times):
                times.append(k.now)
                k.schedule(k.now + rnd.uniform(0.5, 1.5) * scale, again)

            for _ in range(5_000):
                k.schedule(rnd.uniform(0, scale), again)
            k.run(until=40 * scale)
            fired.append(times)
            if isinstance(k, CalendarKernel):
                per_bucket = len(k) / (len(k._bheap) + 1)
                assert 2 <= per_bucket <= 256, (scale, per_bucket)
        assert fired[0] == fired[1] and len(fired[0]) > 100_000


@KERNELS
def test_infinite_times_fire_last_and_nan_is_refused(kernel_type):
    k = kernel_type()
    out = []
    k.schedule(math.inf, out.append, "inf")
    k.schedule(1e300, out.append, "big")
    k.schedule(1.0, out.append, "one")
    with pytest.raises(ValueError):
        k.schedule(math.nan, out.append, "nan")
    k.run()
    assert out == ["one", "big", "inf"]


def test_a_crowded_bucket_is_split_and_later_ones_kept():
    """A bucket reached with 1,000 events (all within half a second) is split at once; the events
    of later buckets all still fire, in order."""
    k = CalendarKernel()
    out = []
    rnd = random.Random(5)
    ts = [10 + rnd.random() / 2 for _ in range(1_000)] + [20 + rnd.random() * 10 for _ in range(100)]
    for t in ts:
        k.schedule(t, out.append, t)
    k.schedule(5.0, out.append, 5.0)
    k.run()
    assert out == sorted([*ts, 5.0]) and len(k._bheap) == 0
    assert k._inv > 1.0  # narrowed
