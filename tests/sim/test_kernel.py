import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skylease.sim.kernel import Kernel

times = st.floats(min_value=0, max_value=1e6, allow_nan=False)


def test_equal_times_fire_in_scheduling_order():
    k = Kernel()
    out = []
    for i in range(5):
        k.schedule(1.0, out.append, i)
    k.call_at(1.0, out.append, 5)
    k.run()
    assert out == [0, 1, 2, 3, 4, 5]


def test_events_scheduled_at_now_from_a_callback_fire_after_current_ones():
    k = Kernel()
    out = []
    k.schedule(1.0, lambda: (out.append("a"), k.schedule(1.0, out.append, "c")))
    k.schedule(1.0, out.append, "b")
    k.run()
    assert out == ["a", "b", "c"]


def test_run_until_stops_and_resumes():
    k = Kernel()
    out = []
    for t in (1, 2, 3):
        k.schedule(t, out.append, t)
    assert k.run(until=2) == 2
    assert out == [1, 2]
    k.run(until=10)
    assert out == [1, 2, 3] and k.now == 10


def test_scheduling_in_the_past_is_an_error():
    k = Kernel()
    k.schedule(5, lambda: None)
    k.run()
    with pytest.raises(ValueError):
        k.schedule(4, lambda: None)
    with pytest.raises(ValueError):
        k.call_later(-1, lambda: None)


def test_cancelled_timer_does_not_advance_clock_or_count():
    k = Kernel()
    t = k.call_at(10, lambda: None)
    k.schedule(3, lambda: None)
    t.cancel()
    t.cancel()
    k.run()
    assert k.now == 3 and k.events == 1 and t.cancelled


def test_stop_ends_run():
    k = Kernel()
    out = []
    k.schedule(1, out.append, 1)
    k.schedule(2, k.stop)
    k.schedule(3, out.append, 3)
    k.run()
    assert out == [1] and k.now == 2
    k.run()
    assert out == [1, 3]


def test_heap_is_compacted_under_heavy_cancellation():
    k = Kernel()
    for i in range(10_000):
        k.call_at(1000 + i, lambda: None).cancel()
    assert len(k) < 1000
    k.run()
    assert k.events == 0


@settings(max_examples=200)
@given(st.lists(st.tuples(times, st.booleans()), min_size=1, max_size=200))
def test_events_fire_in_time_order_and_cancelled_never_fire(specs):
    k = Kernel()
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


@settings(max_examples=100)
@given(st.lists(times, min_size=1, max_size=100), st.data())
def test_cancel_from_inside_callbacks(ts, data):
    """Callbacks cancelling other timers (the keep-alive pattern) never let a cancelled one fire."""
    k = Kernel()
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
