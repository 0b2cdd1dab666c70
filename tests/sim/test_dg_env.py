"""Desktop-grid simulators (XWHEP, BOINC) and cloud workers (decisions S6, S7, S11, S12 in
docs/decisions/spequlos.md)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skylease.control.env import Policy, TailEnvironment
from skylease.model.availability import Availability, AvailabilityTrace
from skylease.sim.dg import DesktopGridEnv, DGBot, DGParams

from .dg_reference import ref_boinc, ref_xwhep

EXACT = DGParams(on_offset_max=0.0, boot_std=0.0)  # hand-checkable: no ON offset, boot 150 s
MW = ("xwhep", "boinc")


def trace(*nodes: list[tuple[float, float]], end: float = 1e6) -> AvailabilityTrace:
    return AvailabilityTrace("test", tuple(Availability.from_intervals(iv) for iv in nodes), 0.0, end)


def random_trace(
    rng: np.random.Generator, n: int, length: float, up: float, down: float
) -> AvailabilityTrace:
    nodes = []
    for _ in range(n):
        t = -rng.uniform(0, up + down)
        iv = []
        while t < length:
            u = rng.exponential(up)
            iv.append((max(t, 0.0), min(t + u, length)))
            t += u + rng.exponential(down)
        nodes.append([(a, b) for a, b in iv if b > a])
    return trace(*nodes, end=length)


class ActAt(Policy):
    """Rents ``n`` cloud workers at time ``t`` and feeds them ``how``."""

    def __init__(self, t: float, n: int, how: str, release_idle: bool = False) -> None:
        self.t, self.n, self.how, self.release_idle = t, n, how, release_idle
        self.done: list[int] = []
        self.up: list[int] = []
        self.idle: list[int] = []

    def on_start(self, env) -> None:
        self.env = env
        env.serve_cloud(self.how)
        env.call_at(self.t, self.act)

    def act(self) -> None:
        self.ids = self.env.acquire("cloud", self.n)

    def on_host_up(self, host) -> None:
        self.up.append(host.id)

    def on_host_idle(self, host) -> None:
        self.idle.append(host.id)
        if self.release_idle:
            self.env.release(host.id)

    def on_task_done(self, task, host, runtime) -> None:
        self.done.append(task.id)


def check_invariants(env, res) -> None:
    # every task completes exactly once, histories ascending
    assert res.completed == env.n_tasks == len(res.completion_times)
    assert np.all(np.diff(res.completion_times) >= 0)
    assert np.all(np.diff(res.assignment_times) >= 0)
    assert len(res.assignment_times) <= env.n_tasks
    # a host never runs two things at once (XW: one job; BOINC: its buffer one after another)
    by_host: dict[int, list[tuple[float, float]]] = {}
    for host, _, s, e in env.log:
        by_host.setdefault(host, []).append((s, e))
    for runs in by_host.values():
        runs.sort()
        for (_, e0), (s1, _) in itertools.pairwise(runs):
            assert s1 >= e0 - 1e-9
    if env.middleware == "boinc" and env.how != "duplicate":
        assert all(env._valid) and all(k >= env.p.min_quorum for k in env._n_okd)


# -- protocol -------------------------------------------------------------------------------------
@pytest.mark.parametrize("mw", MW)
def test_is_a_tail_environment(mw: str) -> None:
    env = DesktopGridEnv(mw, trace([(0, 1e5)]), [1e6])
    assert isinstance(env, TailEnvironment)
    assert env.middleware == mw and env.pools() == ["cloud"]
    assert env.pool_type("cloud").speed == 3.0
    with pytest.raises(ValueError):
        DesktopGridEnv("condor", trace([(0, 1)]), [1.0])


# -- hand-checked scenarios ------------------------------------------------------------------------
def test_xw_timeout_requeue() -> None:
    # A runs job 0 (2000 s) from 0, leaves at 1000: last keep-alive 960, timeout at 1860.
    # B is up from 1500: requests at 1500, 1530, 1590, 1710, 1950 -> gets the job at 1950.
    env = DesktopGridEnv(
        "xwhep",
        trace([(0, 1000), (9000, 1e5)], [(1500, 1e5)]),
        [2e6],
        powers=[1000, 1000],
        params=EXACT,
        record=True,
    )
    res = env.run()
    assert res.completion_times.tolist() == [3950.0]
    assert [(h, s) for h, _, s, _ in env.log] == [(0, 0.0), (1, 1950.0)]
    assert res.lost == 1


def test_xw_requeue_at_on_before_timeout() -> None:
    # A comes back at 1500 < 1860: the server requeues at ON and A gets the job back at once.
    env = DesktopGridEnv(
        "xwhep",
        trace([(0, 1000), (1500, 1e5)], [(1200, 1e5)]),
        [2e6],
        powers=[1000, 1000],
        params=EXACT,
        record=True,
    )
    res = env.run()
    assert [(h, s) for h, _, s, _ in env.log] == [(0, 0.0), (0, 1500.0)]
    assert res.completion_times.tolist() == [3500.0]


def test_boinc_suspend_resume() -> None:
    # One WU of 1500 s: A computes 0-1000, is suspended, resumes at 2000, returns at 2500;
    # B returns at 1500. Quorum 2 is met at 2500. The third replica is never sent (B holds the WU).
    env = DesktopGridEnv(
        "boinc",
        trace([(0, 1000), (2000, 1e5)], [(0, 1e5)]),
        [1.5e6],
        powers=[1000, 1000],
        params=EXACT,
        record=True,
    )
    res = env.run()
    assert res.completion_times.tolist() == [2500.0]
    assert sorted((h, s, e) for h, _, s, e in env.log) == [(0, 0.0, 2500.0), (1, 0.0, 1500.0)]
    assert res.assignment_times.tolist() == [0.0]


def test_boinc_deadline_resend() -> None:
    # A, B, C take the three replicas at 0; A and C leave at 1000 for good; B returns at 1500.
    # Deadlines (5000 s here) send A's and C's replicas again; D, up from 3000 and backing off
    # (3000, 3030, ..., 4950, 5250), gets one at 5250 and returns it at 6750: quorum met.
    params = DGParams(on_offset_max=0.0, delay_bound=5000.0)
    tr = trace([(0, 1000)], [(0, 1e5)], [(0, 1000)], [(3000, 1e5)])
    env = DesktopGridEnv("boinc", tr, [1.5e6], powers=[1000] * 4, params=params, record=True)
    res = env.run()
    assert res.completion_times.tolist() == [6750.0]
    assert (3, 0, 5250.0, 6750.0) in env.log
    assert res.lost == 2


def test_xw_reschedule_duplicates_running_job_once() -> None:
    # One DG node runs job 0 (1000 s); the CW boots at 150, takes the waiting job 1 (333 s),
    # then a copy of job 0 (rescheduled), which it finishes first at 816.7.
    pol = ActAt(0.0, 1, "reschedule")
    env = DesktopGridEnv("xwhep", trace([(0, 1e5)]), [1e6, 1e6], powers=[1000], params=EXACT, record=True)
    res = env.run(pol)
    assert res.completion_times == pytest.approx([150 + 1000 / 3, 150 + 2000 / 3])
    assert res.cw_tasks == 2 and env._dup[0] == 1
    assert [h for h, *_ in env.log] == [0, 1, 1]
    assert pol.up == [1] and pol.idle == [] and sorted(pol.done) == [0, 1]  # done: no idle call
    assert env.cw_name(1) == "spequloscw_0"


def test_xw_flat_cloud_worker_waits_like_any_worker() -> None:
    pol = ActAt(0.0, 1, "flat")
    env = DesktopGridEnv("xwhep", trace([(0, 1e5)]), [1e6, 1e6], powers=[1000], params=EXACT)
    res = env.run(pol)
    assert res.completion_times == pytest.approx([150 + 1000 / 3, 1000])
    assert res.cw_tasks == 1


@pytest.mark.parametrize("mw", MW)
def test_duplicate_copies_uncompleted_tasks_once(mw: str) -> None:
    # Two tasks on one slow DG node; at t=0 both are copied to the cloud server; the CW runs the
    # copies FIFO from 150 and completes both first.
    pol = ActAt(0.0, 1, "duplicate")
    nodes = [[(0, 1e5)]] * (1 if mw == "xwhep" else 2)
    env = DesktopGridEnv(mw, trace(*nodes), [1e6, 1e6], powers=[1000] * len(nodes), params=EXACT, record=True)
    res = env.run(pol)
    assert res.completion_times == pytest.approx([150 + 1000 / 3, 150 + 2000 / 3])
    assert res.cw_tasks == 2
    cw = env.n_nodes
    assert [t for h, t, *_ in env.log if h == cw] == [0, 1]


def test_boinc_reschedule_counts_one_replica() -> None:
    # Two slow DG clients hold replicas of WU 0; the CW (up at 150) takes the unsent third
    # replica and returns it at 483: one DONE result, so the WU still needs a DG one (at 1000).
    pol = ActAt(0.0, 1, "reschedule")
    env = DesktopGridEnv(
        "boinc", trace([(0, 1e5)], [(0, 1e5)]), [1e6], powers=[1000, 1000], params=EXACT, record=True
    )
    res = env.run(pol)
    cw = env.n_nodes
    assert [(h, t) for h, t, *_ in env.log if h == cw] == [(cw, 0)]  # the unsent 3rd replica
    assert res.completion_times.tolist() == [1000.0]
    env = DesktopGridEnv(
        "boinc",
        trace([(0, 1e5)], [(0, 1e5)]),
        [1e6, 1e6],
        powers=[1000, 1000],
        params=DGParams(on_offset_max=0.0, boot_std=0.0, target_nresult=2),
        record=True,
    )
    res = env.run(ActAt(0.0, 1, "reschedule"))
    # no unsent replica: the CW copies the first in-progress replica (client 0's) of WU 0 and of
    # WU 1; each WU is then validated by client 1's result (1000, 2000); client 0's are ignored.
    assert cw >= len(env._buf) or not env._buf[cw]  # the CW holds nothing at the end
    assert [t for h, t, *_ in env.log if h == cw] == [0, 1]
    assert res.completion_times.tolist() == [1000.0, 2000.0]
    assert list(env._od) == []


# -- against the naive reference simulators --------------------------------------------------------
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), mw=st.sampled_from(MW), random_arrivals=st.booleans())
def test_matches_reference(seed: int, mw: str, random_arrivals: bool) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 7))
    tr = random_trace(rng, n, 3e5, up=rng.uniform(300, 5000), down=rng.uniform(100, 3000))
    nt = int(rng.integers(1, 20))
    nops = rng.uniform(1e5, 4e6, nt)
    arr = np.sort(rng.uniform(0, 3000, nt)) if random_arrivals else np.zeros(nt)
    bot = DGBot("t", nops, arr)
    submit = float(rng.uniform(0, 5e4))
    powers = rng.uniform(400, 2000, n)
    kw = dict(submit_at=submit, seed=seed % 1000, powers=powers, record=True)
    env = DesktopGridEnv(mw, tr, bot, **kw)
    res = env.run()
    ref = ref_xwhep if mw == "xwhep" else ref_boinc
    rc, ra = ref(DesktopGridEnv(mw, tr, bot, **kw))
    assert res.completion_times == pytest.approx(rc, abs=1e-6)
    assert res.assignment_times == pytest.approx(ra, abs=1e-6)
    if res.completed == nt:
        check_invariants(env, res)


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), mw=st.sampled_from(MW))
def test_matches_reference_many_nodes(seed: int, mw: str) -> None:
    # more nodes than the candidate heap holds (64) and more tasks than nodes: exercises the
    # argpartition candidates, their exhaustion and the stale refresh of long-idle nodes
    rng = np.random.default_rng(seed)
    n = int(rng.integers(80, 150))
    tr = random_trace(rng, n, 2e5, up=rng.uniform(300, 5000), down=rng.uniform(100, 3000))
    nt = int(rng.integers(100, 400))
    bot = DGBot("t", rng.uniform(1e4, 2e6, nt), np.sort(rng.uniform(0, 3000, nt)))
    kw = dict(submit_at=float(rng.uniform(0, 5e4)), seed=seed % 1000)
    res = DesktopGridEnv(mw, tr, bot, **kw).run()
    rc, ra = (ref_xwhep if mw == "xwhep" else ref_boinc)(DesktopGridEnv(mw, tr, bot, **kw))
    assert res.completion_times == pytest.approx(rc, abs=1e-6)
    assert res.assignment_times == pytest.approx(ra, abs=1e-6)


# -- invariants, determinism, fairness ------------------------------------------------------------
@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    mw=st.sampled_from(MW),
    how=st.sampled_from(["flat", "reschedule", "duplicate"]),
    t_act=st.floats(0, 20000),
)
def test_fairness_and_invariants_with_policy(seed: int, mw: str, how: str, t_act: float) -> None:
    rng = np.random.default_rng(seed)
    tr = random_trace(rng, 8, 5e5, up=2000, down=1500)
    bot = DGBot("t", rng.uniform(1e5, 3e6, 40), np.sort(rng.uniform(0, 2000, 40)))
    base = DesktopGridEnv(mw, tr, bot, seed=seed).run()
    env = DesktopGridEnv(mw, tr, bot, seed=seed, record=True)
    pol = ActAt(t_act, 3, how)
    res = env.run(pol)
    pairs = ((base.completion_times, res.completion_times), (base.assignment_times, res.assignment_times))
    for a, b in pairs:
        assert np.array_equal(a[a < t_act], b[b < t_act])
    if res.completed == env.n_tasks:
        check_invariants(env, res)
        assert sorted(pol.done) == list(range(env.n_tasks))
    again = DesktopGridEnv(mw, tr, bot, seed=seed).run(ActAt(t_act, 3, how))
    assert np.array_equal(again.completion_times, res.completion_times)
    assert again.events == res.events and again.cw_tasks == res.cw_tasks


@pytest.mark.parametrize("mw", MW)
def test_same_seed_same_run_other_seed_other_run(mw: str) -> None:
    rng = np.random.default_rng(0)
    tr = random_trace(rng, 20, 3e5, up=2000, down=1000)
    bot = DGBot.homogeneous(60, 2e6)
    a = DesktopGridEnv(mw, tr, bot, seed=1).run()
    b = DesktopGridEnv(mw, tr, bot, seed=1).run()
    c = DesktopGridEnv(mw, tr, bot, seed=2).run()
    assert np.array_equal(a.completion_times, b.completion_times) and a.events == b.events
    assert not np.array_equal(a.completion_times, c.completion_times)


# -- event counts ------------------------------------------------------------------------------------
@pytest.mark.parametrize("mw", MW)
def test_events_do_not_grow_with_idle_time(mw: str) -> None:
    # Idle workers wait out a long task without any event: only its length changes (BOINC: kept
    # under the 1-day deadline, whose resends are real events).
    tr = trace(*([[(0, 1e9)]] * 5), end=1e9)
    counts = []
    for long in (1e7, 8e7 if mw == "boinc" else 1e10):
        bot = DGBot("t", np.array([long, *[1e6] * 8]), np.zeros(9))
        res = DesktopGridEnv(mw, tr, bot, seed=3, powers=[1000] * 5).run()
        assert res.completed == 9
        counts.append(res.events)
    assert counts[0] == counts[1]


@pytest.mark.parametrize("mw", MW)
def test_long_trace_tail_changes_nothing(mw: str) -> None:
    rng = np.random.default_rng(5)
    short = random_trace(rng, 10, 2e5, up=3000, down=1000)
    nodes = []
    for a in short.nodes:  # the same nodes, plus a churning month after the BoT is done
        extra = [(2e5 + 10 + 100 * k, 2e5 + 60 + 100 * k) for k in range(20000)]
        nodes.append(list(zip(a.starts.tolist(), a.ends.tolist(), strict=True)) + extra)
    long = trace(*nodes, end=2e5 + 2.1e6)
    bot = DGBot.homogeneous(30, 1e6)
    r1 = DesktopGridEnv(mw, short, bot, seed=4).run()
    r2 = DesktopGridEnv(mw, long, bot, seed=4).run()
    assert r1.completed == 30 and r2.completed == 30
    assert np.array_equal(r1.completion_times, r2.completion_times)
    assert r1.events == r2.events


def test_incomplete_bot_reports_inf() -> None:
    res = DesktopGridEnv("xwhep", trace([(0, 100)], end=1000), [1e6], powers=[1000]).run()
    assert res.completed == 0 and res.completion_s == float("inf")


def test_policy_finish_and_release_stop_billing() -> None:
    class Stop(Policy):
        def on_start(self, env) -> None:
            self.env = env
            env.acquire("cloud", 2)
            env.call_at(1000.0, self.stop)

        def stop(self) -> None:
            assert self.env.spent() == pytest.approx(2 * 1000 * 15 / 3600)
            self.env.finish()

    res = DesktopGridEnv("boinc", trace([(0, 1e6)], [(0, 1e6)]), [1e9, 1e9], powers=[1000, 1000]).run(Stop())
    assert res.end_s == 1000.0 and res.cw_count == 2
    assert res.cw_usage_s.tolist() == [1000.0, 1000.0]


@pytest.mark.parametrize("mw", MW)
def test_progress_queued_and_hosts_views(mw: str) -> None:
    seen = []

    class Watch(Policy):
        def on_start(self, env) -> None:
            self.env = env
            seen.append((env.progress(), env.queued(), env.pending()))
            env.call_at(500.0, self.look)

        def look(self) -> None:
            env = self.env
            seen.append((env.progress(), env.queued(), env.pending()))
            busy = [h for h in env.hosts("dg") if h.task is not None]
            assert busy and all(h.pool == "dg" and h.task_started_at is not None for h in busy)
            assert env.hosts() == [] and len(env.completion_times()) == env.progress().completed

    bot = DGBot("t", np.full(4, 1e6), np.array([0.0, 0.0, 100.0, 1e4]))
    env = DesktopGridEnv(mw, trace([(0, 1e5)], [(0, 1e5)], [(0, 1e5)]), bot, powers=[1000] * 3, params=EXACT)
    env.run(Watch())
    (p0, q0, n0), (p1, q1, n1) = seen
    assert (p0.submitted, p0.assigned, p0.completed, q0, n0) == (2, 0, 0, 2, 4)
    if mw == "xwhep":  # the idle third node polls (0, 30, 90, 210) and takes job 2 at 210
        assert (p1.submitted, p1.assigned, p1.completed, n1, q1) == (3, 3, 0, 4, 0)
    else:  # the three clients took both WUs' replicas at 0 and ask again only when done
        assert (p1.submitted, p1.assigned, p1.completed, n1, q1) == (3, 2, 0, 4, 1)


def test_boinc_small_on_a_seti_like_trace_is_fast() -> None:
    from skylease.sim.dg import make_bot
    from skylease.traces.dg import seti_like

    tr = seti_like(n_nodes=5000, duration_s=20 * 86400, seed=1)
    res = DesktopGridEnv("boinc", tr, make_bot("SMALL"), submit_at=86400.0, seed=1).run()
    assert res.completed == 1000
    assert res.wall_s < 1.0
    assert res.events < 10 * 3000  # grows with replicas, not with the 5000 nodes' churn
