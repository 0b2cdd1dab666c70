"""SpeQuloS on the desktop-grid simulators: the invariants the issue states, under hypothesis.

Every task completes exactly once (BOINC: with its quorum, or from a cloud copy); the credits
billed never exceed the order and cover the cloud workers' use; no host runs two tasks at once;
with the same seed, a run with QoS is the run without it until the policy first rents a worker.
BOINC runs also draw BOINC's batch acceleration (alone or with a strategy), set to fire on tiny bags.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skylease.control.qos import STRATEGIES, SpeQuloS
from skylease.sim.dg import DesktopGridEnv, DGBot, DGParams
from skylease.sim.dg.accel import BatchAccel

from .test_dg_env import EXACT, ActAt, random_trace, trace

MW = ("xwhep", "boinc")


def _no_overlap(log: list[tuple[int, int, float, float]]) -> None:
    by_host: dict[int, list[tuple[float, float]]] = {}
    for host, _, s, e in log:
        by_host.setdefault(host, []).append((s, e))
    for runs in by_host.values():
        runs.sort()
        for (_, e0), (s1, _) in itertools.pairwise(runs):
            assert s1 >= e0 - 1e-9


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    mw=st.sampled_from(MW),
    strategy=st.sampled_from(["none", *STRATEGIES]),
    credits=st.floats(0, 60),
    tick=st.sampled_from([60.0, 240.0]),
    accel=st.sampled_from([None, 60.0, 600.0]),
)
def test_spequlos_runs_keep_every_invariant(
    seed: int, mw: str, strategy: str, credits: float, tick: float, accel: float | None
) -> None:
    rng = np.random.default_rng(seed)
    tr = random_trace(
        rng, int(rng.integers(3, 10)), 6e5, up=rng.uniform(500, 5000), down=rng.uniform(200, 3000)
    )
    nt = int(rng.integers(5, 40))
    bot = DGBot("t", rng.uniform(1e5, 3e6, nt), np.sort(rng.uniform(0, 2000, nt)))
    params = DGParams()
    if mw == "boinc" and accel is not None:  # batch acceleration, eager enough for a few nodes
        params = DGParams(accel=BatchAccel(min_results=1, min_hosts=0, min_ltt_share=0.0,
                                           min_frac_done=0.5, period=accel, max_results=5))
    base = DesktopGridEnv(mw, tr, bot, seed=seed, params=params).run()
    env = DesktopGridEnv(mw, tr, bot, seed=seed, record=True, params=params)
    pol = SpeQuloS(strategy, credits, tick=tick)
    res = env.run(pol)
    summ = pol.summary()

    # credits: never more than ordered, and the per-tick bill covers the CWs' actual use
    assert summ["credits_spent"] <= credits + 1e-9
    assert summ["credits_spent"] + 1e-9 >= res.spent - pol.tick_credits * len(pol.cws) - 1e-9
    assert res.cw_count == len(pol.cws)
    if strategy == "none" or credits < pol.tick_credits:
        assert res.cw_count == 0 and summ["credits_spent"] == 0
    # CWs are started once per BoT (decision S24 in docs/decisions/spequlos.md), all at the same tick
    assert len({c.started for c in pol.cws.values()}) <= 1

    # fairness: identical to the run without QoS until the first CW is rented
    t_act = summ["cw_started_at"] if summ["cw_started_at"] is not None else math.inf
    for a, b in (
        (base.completion_times, res.completion_times),
        (base.assignment_times, res.assignment_times),
    ):
        assert np.array_equal(a[a < t_act], b[b < t_act])
    if res.cw_count == 0:
        assert np.array_equal(base.completion_times, res.completion_times)

    # exactly once; BOINC quorum (or a cloud copy's result under duplication); no double-running
    assert len(res.completion_times) == res.completed <= nt
    assert np.all(np.diff(res.completion_times) >= 0)
    _no_overlap(env.log)
    if res.completed == nt:
        assert pol.completed_at is not None and all(c.stopped is not None for c in pol.cws.values())
        if mw == "boinc" and env.how != "duplicate":
            assert all(env._valid) and all(k >= env.p.min_quorum for k in env._n_okd)
    else:  # the trace ended first: the tasks left are reported, not dropped
        assert res.completion_s == math.inf and sum(env._done) == res.completed
    if mw == "boinc":  # a WU is validated once, and no WU holds more results than it has slots
        assert sum(env._valid) == res.completed
        if env._nres is not None:
            assert sum(env._nres) - nt * env.p.target_nresult == res.extra_results
            assert all(env.p.target_nresult <= k <= env._S for k in env._nres)
        else:
            assert res.extra_results == 0


def test_two_cws_copy_two_different_stuck_replicas() -> None:
    # Three clients each take a replica of the one WU and leave for good at 100 s: the WU needs two
    # more results. Two CWs (up at 150) must copy two *different* replicas, which validate it at
    # 150 + 1e6/3000; copying the same replica twice would leave it waiting for the 1-day deadline.
    tr = trace([(0, 100)], [(0, 100)], [(0, 100)], end=1e6)
    env = DesktopGridEnv("boinc", tr, [1e6], powers=[1000] * 3, params=EXACT, record=True)
    res = env.run(ActAt(0.0, 2, "reschedule"))
    cws = {env.n_nodes, env.n_nodes + 1}
    assert sorted(h for h, *_ in env.log if h in cws) == sorted(cws)
    assert res.completion_times.tolist() == [150 + 1e6 / 3000]
    assert res.cw_tasks == 1


def test_cw_skips_buffered_copies_of_validated_wus() -> None:
    # WU 0 (6e6 nops) goes to clients 0 and 1 (power 1000: done at 6000); WU 1 (3e6) arrives at
    # 10 s and goes to clients 2 and 3 at their next request (30 s; power 1500: done at 2030). The CW
    # (up at 150) copies one replica of each: [WU 0, WU 1], and computes WU 0 until 2150. WU 1 was
    # validated at 2030, so the paid CW drops that copy instead of computing it for 1000 s.
    p = DGParams(on_offset_max=0.0, boot_std=0.0, target_nresult=2)
    tr = trace(*([[(0, 1e5)]] * 4), end=1e6)
    bot = DGBot("t", np.array([6e6, 3e6]), np.array([0.0, 10.0]))
    env = DesktopGridEnv("boinc", tr, bot, powers=[1000, 1000, 1500, 1500], params=p, record=True)
    res = env.run(ActAt(0.0, 1, "reschedule"))
    cw = env.n_nodes
    assert res.completion_times.tolist() == [2030.0, 6000.0]
    assert [(t, s, e) for h, t, s, e in env.log if h == cw] == [(0, 150.0, 2150.0)]
