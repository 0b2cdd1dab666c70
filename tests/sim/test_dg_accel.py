"""BOINC's batch acceleration in the BOINC model (issue 23, Build 2; skylease.sim.dg.accel).

The rules are BOINC's (html/ops/batch_stats.php, batch_accel.php, sched/sched_score.cpp); the
run-level checks (seti/nd x SMALL/BIG/RANDOM, faster than no QoS on seti/SMALL) are in
tests/test_cli_spequlos_accel.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from skylease.sim.dg import DesktopGridEnv, DGParams
from skylease.sim.dg.accel import BatchAccel, TurnaroundStats

from .test_dg_env import EXACT, trace

#: fires on tiny runs: a median from one result, any host count, no LTT share needed
EAGER = BatchAccel(min_results=1, min_hosts=0, min_ltt_share=0.0, min_frac_done=0.0, period=100.0)


def test_classify_follows_batch_stats() -> None:
    p = BatchAccel()
    st = TurnaroundStats(4)
    for tt in [100.0] * 60 + [300.0] * 41:  # 101 results: median (upper, as PHP's) = 100
        st.success(0 if tt == 100.0 else 1, tt)
    st.timeout(2)
    expire, accel, changed = st.classify(p)
    assert expire == 100.0
    # host 0: mean normalized TT 1.0, not < 1; host 1: 3.0; host 2: timeouts only (10); 3: unseen
    assert st.ltt.tolist() == [False, False, False, False] and not changed
    st.success(3, 50.0)  # the median is still 100; host 3 averages 0.5: low turnaround
    expire, accel, changed = st.classify(p)
    assert st.ltt.tolist() == [False, False, False, True] and changed
    assert not accel  # 3 hosts returned results: not more than 100
    # a timeout counts as 10: one fast result and one timeout average (0.5 + 10) / 2 > 1
    st.timeout(3)
    st.classify(p)
    assert not st.ltt[3]


def test_classify_needs_min_results_and_accelerable_share() -> None:
    st = TurnaroundStats(0)
    for h in range(99):
        st.success(h, 10.0 + h)
    assert st.classify(BatchAccel()) == (0.0, False, False)  # < 100 results: expire_time = 0
    for h in range(99, 202):  # 202 hosts, one result each; those below the median are LTT
        st.success(h, 10.0 + h)
    expire, accel, _ = st.classify(BatchAccel())
    assert expire == 111.0 and int(st.ltt.sum()) == 101 and accel  # 101 > 25 % of 202 hosts
    _, accel, _ = st.classify(BatchAccel(min_ltt_share=0.5))
    assert not accel  # 101 is not more than half of 202


def test_params_are_checked() -> None:
    with pytest.raises(ValueError, match="min_frac_done"):
        BatchAccel(min_frac_done=1.5)
    with pytest.raises(ValueError, match="period"):
        BatchAccel(period=0.0)
    with pytest.raises(ValueError, match="BOINC"):
        DesktopGridEnv("xwhep", trace([(0, 10)]), [1.0], params=DGParams(accel=BatchAccel()))


def _stuck_run(accel: BatchAccel | None) -> tuple[DesktopGridEnv, object]:
    # Node 0 (power 4000: 1000 s a task) and nodes 1, 3 (1000: 4000 s) stay up; node 2 takes a
    # replica of WU 1 at 0 and leaves for good at 100 s. Without acceleration WU 1 waits for the
    # one-day deadline. With it, at 4000 s the turnarounds are 1000, 1000 (node 0), 4000, 4000:
    # median 4000, node 0 alone is LTT; WU 1 has no unsent result and its in-progress one is as
    # old as the median, so one more result is created, high priority, and only node 0 may take it.
    p = DGParams(on_offset_max=0.0, boot_std=0.0, buffer=1, target_nresult=2, accel=accel)
    tr = trace([(0, 1e6)], [(0, 1e6)], [(0, 100)], [(0, 1e6)], end=1e6)
    env = DesktopGridEnv("boinc", tr, [4e6] * 3, powers=[4000, 1000, 1000, 1000], params=p, record=True)
    return env, env.run()


def test_extra_result_goes_to_a_low_turnaround_host() -> None:
    env, base = _stuck_run(None)
    assert base.completion_s > 86400 and base.extra_results == 0 and base.accel_at_s is None
    env, res = _stuck_run(EAGER)
    assert res.accel_at_s == 4000.0 and res.extra_results == 1
    # WU 2's last result (node 1, sent at 4000) ends the bag at 8000; WU 1 is validated by node 3's
    # result and the extra one, computed by node 0
    assert res.completed == 3 and res.completion_s == 8000.0
    assert env._nres[1] == 3 and env._n_okd[1] == 2
    late = [(h, w) for h, w, s, _ in env.log if s > res.accel_at_s]
    assert late == [(0, 1)]  # node 3, idle and not LTT, never got the high-priority result


def test_without_accel_the_model_is_unchanged() -> None:
    # the same run with a batch-acceleration that can never fire keeps every completion time
    never = BatchAccel(min_frac_done=1.0, max_not_done=0)
    rng = np.random.default_rng(5)
    nops = rng.uniform(1e5, 3e6, 30)
    tr = trace(*[[(0, 5e4), (6e4, 1e6)]] * 5, end=1e6)
    a = DesktopGridEnv("boinc", tr, nops, params=EXACT, seed=3).run()
    b = DesktopGridEnv("boinc", tr, nops, params=DGParams(on_offset_max=0.0, boot_std=0.0, accel=never),
                       seed=3).run()
    assert np.array_equal(a.completion_times, b.completion_times)
    assert b.extra_results == 0 and b.accel_at_s is None
