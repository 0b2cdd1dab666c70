"""The SpeQuloS scheduler (decisions S4, S24 in docs/decisions/spequlos.md) on a toy TailEnvironment: a clock,
a timer heap, scripted completion and assignment times, and cloud workers that stay busy or go idle on cue."""

from __future__ import annotations

import heapq
import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skylease.control.env import BotProgress, TailEnvironment
from skylease.control.qos import STRATEGIES, AlphaModel, CreditSystem, SpeQuloS
from skylease.model.catalog import InstanceType
from skylease.model.host import Host, HostState
from skylease.model.task import Task


class Timer:
    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeTail:
    """Completions and first assignments happen at scripted times; CWs do no real work.

    CW k (in acquisition order) comes up ``boot`` s after it is rented and is busy; if
    ``idle_after[k]`` is a number it turns idle that long after coming up (``on_host_idle``).
    Events at one instant run in insertion order; the scripted ones are inserted first.
    """

    def __init__(self, ctimes, atimes=None, *, boot=100.0, idle_after=()) -> None:
        self.ctimes = np.sort(np.asarray(ctimes, dtype=float))
        self.atimes = np.sort(np.asarray(self.ctimes if atimes is None else atimes, dtype=float))
        self.n = len(self.ctimes)
        self.boot, self.idle_after = boot, list(idle_after)
        self._now, self._seq, self._heap = 0.0, itertools.count(), []
        self.itype = InstanceType("cloud", boot_time=boot)
        self.cws: list[Host] = []
        self.acquire_calls: list[tuple[float, int]] = []
        self.served: list[str] = []
        self.done = 0
        self.finished = False
        for i, t in enumerate(self.ctimes):
            self._push(t, self._complete, i)

    def _push(self, t, fn, *args):
        timer = Timer()
        heapq.heappush(self._heap, (t, next(self._seq), timer, fn, args))
        return timer

    # TailEnvironment -------------------------------------------------------------------------
    @property
    def now(self) -> float:
        return self._now

    def call_at(self, t, fn, *args):
        return self._push(max(t, self._now), fn, *args)

    def call_later(self, delay, fn, *args):
        return self.call_at(self._now + delay, fn, *args)

    def pools(self):
        return ["cloud"]

    def pool_type(self, pool):
        return self.itype

    def acquire(self, pool, n=1):
        assert pool == "cloud" and n >= 1
        self.acquire_calls.append((self._now, n))
        ids = []
        for _ in range(n):
            h = Host(len(self.cws), pool, self.itype, self._now)
            self.cws.append(h)
            self._push(self._now + self.boot, self._up, h)
            ids.append(h.id)
        return ids

    def release(self, host):
        h = self.cws[host]
        if h.state is not HostState.RELEASED:
            h.state, h.released_at, h.task = HostState.RELEASED, self._now, None

    def hosts(self, pool=None):
        return [h for h in self.cws if h.state is not HostState.RELEASED]

    def host(self, host):
        return self.cws[host]

    def submit(self, tasks, pool=None):
        raise NotImplementedError

    def duplicate(self, task, pool):
        raise NotImplementedError

    def cancel(self, task):
        raise NotImplementedError

    def queued(self):
        return 0

    def pending(self):
        return self.n - self.done

    def spent(self):
        return 0.0

    def finish(self):
        self.finished = True
        for h in self.cws:
            self.release(h.id)

    def progress(self):
        return BotProgress(self.n, int(np.searchsorted(self.atimes, self._now, "right")), self.done)

    def completion_times(self):
        return self.ctimes[: self.done].copy()

    def assignment_times(self):
        return self.atimes[: int(np.searchsorted(self.atimes, self._now, "right"))].copy()

    def serve_cloud(self, how):
        assert not self.cws, "serve_cloud must come before the first acquire"
        self.served.append(how)

    # driving ---------------------------------------------------------------------------------
    def _up(self, h):
        if h.state is HostState.RELEASED:
            return
        h.state, h.up_at, h.task = HostState.BUSY, self._now, -1
        k = h.id
        if k < len(self.idle_after) and self.idle_after[k] is not None:
            self._push(self._now + self.idle_after[k], self._idle, h)

    def _idle(self, h):
        if h.state is HostState.BUSY:
            h.state, h.task = HostState.IDLE, None
            self.policy.on_host_idle(h)

    def _complete(self, i):
        self.done += 1
        self.policy.on_task_done(Task(i, 1.0), Host(-1, "dg", self.itype, 0.0), 1.0)
        if self.done == self.n:
            self.finish()

    def run(self, policy):
        self.policy = policy
        policy.on_start(self)
        while self._heap and not self.finished:
            t, _, timer, fn, args = heapq.heappop(self._heap)
            if timer.cancelled:
                continue
            self._now = t
            fn(*args)
        return policy


def test_the_fake_is_a_tail_environment():
    assert isinstance(FakeTail([1.0]), TailEnvironment)


STRAGGLER = [100.0 * k for k in range(1, 10)] + [5000.0]  # 9C holds from t = 900: first tick 960


def test_greedy_starts_once_and_bills_each_cw_each_tick_until_credits_run_out():
    env = FakeTail(STRAGGLER)
    p = env.run(SpeQuloS("9C-G-R", credits=150))  # S = 10 CPU.h: 10 CWs, 10 credits per tick
    assert env.served == ["reschedule"] and env.acquire_calls == [(960.0, 10)]
    assert p.started_at == 960.0 and len(p.cws) == 10
    # ticks 960, 1200, ..., 4320 bill 10 each (15 ticks); at 4560 the order cannot pay a tick
    assert p.spent == 150 and p.refund == 0
    assert {c.reason for c in p.cws.values()} == {"credits"}
    assert all(c.stopped == 4560 and c.billed == 15 for c in p.cws.values())


def test_completion_stops_all_and_refunds():
    env = FakeTail([*STRAGGLER[:9], 2000.0])
    bank = CreditSystem()
    bank.deposit("ann", 2000)
    p = env.run(SpeQuloS("9C-G-D", credits=1500, bank=bank, user="ann"))
    assert env.served == ["duplicate"] and env.acquire_calls == [(960.0, 100)]
    assert p.spent == 500  # ticks 960, 1200, 1440, 1680, 1920
    assert p.refund == 1000 and bank.balance("ann") == 1500
    assert all(c.reason == "complete" and c.stopped == 2000 for c in p.cws.values())
    assert p.completed_at == 2000 and bank.get("bot").closed
    assert p.summary()["credits_spent"] == 500


def test_one_tick_of_credits_caps_the_count():
    env = FakeTail(STRAGGLER)
    p = env.run(SpeQuloS("9C-G-R", credits=15, tick=240, tick_credits=4))  # S = 1 but G = 1, 15 // 4 = 3
    assert env.acquire_calls == [(960.0, 1)]
    p2 = FakeTail(STRAGGLER).run(SpeQuloS("9C-G-R", credits=45, tick_credits=20))  # S = 3, 45 // 20 = 2
    assert len(p2.cws) == 2 and p.spent <= 15 and p2.spent <= 45


@pytest.mark.parametrize("stop_idle", [True, False])
def test_idle_cws_stop_at_the_next_tick(stop_idle):
    env = FakeTail(STRAGGLER, idle_after=[0.0] * 5)  # CWs 0-4 get no work once up (1060)
    p = env.run(SpeQuloS("9C-G-F", credits=150, stop_idle_cw=stop_idle))
    idle = [p.cws[k] for k in range(5)]
    if stop_idle:
        assert all(c.reason == "idle" and c.stopped == 1200 and c.billed == 1 for c in idle)
        # the other five are billed at every tick 960 .. 4800 and stop at completion
        assert all(p.cws[k].billed == 17 and p.cws[k].reason == "complete" for k in range(5, 10))
        assert p.spent == 5 + 85 and p.refund == 60
    else:
        assert all(c.reason == "credits" for c in p.cws.values())
        assert p.spent == 150
    assert len(env.acquire_calls) == 1  # never restarted (decision S24)


def test_conservative_count_from_the_remaining_time():
    ctimes = [4000.0 * k for k in range(1, 10)] + [90000.0]  # 9th at 36000, a tick (150 * 240)
    env = FakeTail(ctimes)
    p = env.run(SpeQuloS("9C-C-R", credits=750))
    # t_r = 36000/0.9 - 36000 = 4000 s: floor(50 / 1.111) = 45
    assert env.acquire_calls == [(36000.0, 45)] and p.spent <= 750


def test_9a_with_conservative_waits_for_a_first_completion():
    ctimes = [1000.0 + 100 * k for k in range(10)]
    env = FakeTail(ctimes, atimes=[10.0] * 10)
    p = env.run(SpeQuloS("9A-C-R", credits=750))
    # 9A holds at 240 but x_e = 0; at 1200 x_e = 0.3 (1000, 1100, 1200): t_r = 2800 s < 1 h: S = 50
    assert env.acquire_calls == [(1200.0, 50)] and p.started_at == 1200.0


def test_no_start_without_credits_for_a_tick_and_none_never_rents():
    env = FakeTail(STRAGGLER)
    p = env.run(SpeQuloS("9C-G-R", credits=0.5))
    assert env.acquire_calls == [] and p.spent == 0 and p.refund == 0.5
    env = FakeTail(STRAGGLER)
    p = env.run(SpeQuloS("none", credits=100))
    assert env.acquire_calls == [] and p.refund == 100 and p.summary()["strategy"] == "none"


def test_prediction_at_half_completion():
    env = FakeTail(STRAGGLER)
    p = env.run(SpeQuloS("none", alpha=AlphaModel(1.2, 0.9)))
    pr = p.prediction
    assert pr is not None and (pr.t, pr.r, pr.p) == (500.0, 0.5, 1000.0)
    assert pr.t_pred == pytest.approx(1200.0) and pr.success_rate == 0.9
    assert p.summary()["t_pred"] == pytest.approx(1200.0)


def test_variance_strategy_reads_the_times():
    # assignments at 0; completions 1..5 then a slow 6th, 7th...: V fires once c > 0.5 and var(c) >= 10
    ctimes = [1.0, 2, 3, 4, 5, 700, 800, 900, 1000, 3000]
    env = FakeTail(ctimes, atimes=[0.0] * 10)
    p = env.run(SpeQuloS("V-G-R", credits=150))
    assert env.acquire_calls == [(720.0, 10)] and p.spent <= 150


def test_bad_arguments():
    with pytest.raises(ValueError):
        SpeQuloS("9C-C-R", tick=0)
    with pytest.raises(ValueError):
        SpeQuloS("9C-C-R", credits=-1)
    with pytest.raises(ValueError):
        SpeQuloS("9C-C-R", predict_at=0)
    with pytest.raises(TypeError):
        SpeQuloS().on_start(object())  # type: ignore[arg-type]


@st.composite
def runs(draw):
    n = draw(st.integers(1, 30))
    gaps = draw(st.lists(st.floats(0, 3000), min_size=n, max_size=n))
    ctimes = np.cumsum(gaps) + 1.0
    lags = draw(st.lists(st.floats(0, 2000), min_size=n, max_size=n))
    atimes = np.maximum(ctimes - np.array(lags), 0.0)
    strategy = draw(st.sampled_from([*STRATEGIES, "V_rc-C-R", "V_rc-G-F"]))
    credits = draw(st.integers(0, 60).map(lambda k: k * 7.5))
    idle = draw(st.lists(st.one_of(st.none(), st.floats(0, 2000)), max_size=40))
    stop_idle = draw(st.booleans())
    tick = draw(st.sampled_from([60.0, 240.0]))
    return ctimes, atimes, strategy, credits, idle, stop_idle, tick


@settings(max_examples=150, deadline=None)
@given(runs())
def test_random_progress_never_overspends(run):
    ctimes, atimes, strategy, credits, idle, stop_idle, tick = run
    env = FakeTail(ctimes, atimes, idle_after=idle)
    bank = CreditSystem()
    bank.deposit("u", credits)
    p = env.run(SpeQuloS(strategy, credits=credits, tick=tick, stop_idle_cw=stop_idle, bank=bank, user="u"))
    order = bank.get("bot")
    assert order.spent <= order.ordered == credits
    assert order.closed and p.refund == pytest.approx(credits - order.spent)
    assert bank.balance("u") + order.spent == pytest.approx(credits)
    assert len(env.acquire_calls) <= 1 and len(env.served) <= 1
    assert all(h.state is HostState.RELEASED for h in env.cws)
    cost = p.tick_credits
    for c in p.cws.values():  # billed once per tick from its start tick (inclusive) until it stopped
        assert c.stopped is not None
        ticks = math.floor(c.stopped / tick - 1e-9) - round(c.started / tick) + 1
        assert c.billed == pytest.approx(ticks * cost)
    assert p.spent == pytest.approx(sum(c.billed for c in p.cws.values()))
