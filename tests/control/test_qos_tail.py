"""Tail-effect metrics (decisions S1, S16 in docs/decisions/spequlos.md) against hand-computed values."""

import math

import numpy as np
import pytest

from skylease.control.qos.tail import (
    TRE,
    completion_time,
    execution_variance,
    ideal_time,
    normalized_completion_times,
    rank,
    t_c,
    tail_removal_efficiency,
    tail_slowdown,
    tail_stats,
    tail_task_share,
    tail_tasks,
    tail_time_share,
)

# 10 tasks: nine regular completions, one straggler.
TEN = [1, 2, 3, 4, 5, 6, 7, 8, 9, 30]
# 20 tasks: eighteen regular, two in the tail.
TWENTY = [*range(1, 19), 25, 40]


def test_t_c_is_the_ceil_x_n_th_completion():
    assert t_c(TEN, 0.5) == 5
    assert t_c(TEN, 0.55) == 6  # ceil(5.5)
    assert t_c(TEN, 0.9) == 9
    assert t_c(TEN, 1.0) == 30
    assert t_c(TEN, 0.0) == 0.0
    assert t_c(TEN, 0.1) == 1
    assert t_c(TEN, 1.0, n=12) == math.inf  # not reached yet
    assert t_c(TEN[:5], 0.5, n=10) == 5  # online: completions so far, denominator given


def test_rank_is_robust_to_float_noise():
    assert rank(0.9, 1000) == 900
    assert rank(0.7, 10) == 7  # 0.7 * 10 = 7.000000000000001
    assert rank(0.0, 5) == 0
    with pytest.raises(ValueError):
        rank(1.5, 10)


def test_ideal_slowdown_and_tail_shares_ten():
    assert ideal_time(TEN) == pytest.approx(10.0)
    assert completion_time(TEN) == 30
    assert tail_slowdown(TEN) == pytest.approx(3.0)  # actual / ideal (decision S1)
    assert tail_tasks(TEN) == 1
    assert tail_task_share(TEN) == pytest.approx(0.1)
    assert tail_time_share(TEN) == pytest.approx(2 / 3)


def test_tail_stats_twenty():
    s = tail_stats(TWENTY)
    assert s.n == 20
    assert s.ideal_time == pytest.approx(20.0)
    assert s.completion_time == 40
    assert s.slowdown == pytest.approx(2.0)
    assert s.tail_tasks == 2 and s.tail_task_share == pytest.approx(0.1)
    assert s.tail_time_share == pytest.approx(0.5)


def test_no_tail_when_the_rate_holds():
    times = np.arange(1, 101, dtype=float)
    s = tail_stats(times)
    assert s.slowdown == pytest.approx(1.0)
    assert s.tail_tasks == 0 and s.tail_time_share == pytest.approx(0.0)


def test_execution_variance_at_task_granularity():
    assert execution_variance([10, 20, 30], [1, 2, 3, 4]).tolist() == [9, 18, 27]


def test_tre_regular_clipped_and_negative():
    assert tail_removal_efficiency(150, 300, 100) == TRE(0.75, False)
    assert tail_removal_efficiency(100, 300, 100).value == pytest.approx(1.0)
    assert tail_removal_efficiency(80, 300, 100) == TRE(1.0, False)  # before t_ideal: full removal
    assert tail_removal_efficiency(500, 300, 100) == TRE(-1.0, False)  # QoS made it slower


def test_tre_no_tail_edge_cases_a16():
    v, excluded = tail_removal_efficiency(90, 100, 100)
    assert excluded and math.isnan(v)
    assert tail_removal_efficiency(90, 100, 100, no_tail="one") == TRE(1.0, False)
    assert tail_removal_efficiency(100, 100, 100, no_tail="one") == TRE(1.0, False)
    assert tail_removal_efficiency(120, 100, 100, no_tail="one").excluded
    assert tail_removal_efficiency(90, 100.5, 100, eps=1.0).excluded
    with pytest.raises(ValueError):
        tail_removal_efficiency(1, 2, 1, no_tail="zero")


def test_normalized_completion_time():
    assert normalized_completion_times([100, 200, 300]).tolist() == pytest.approx([0.5, 1.0, 1.5])
    assert normalized_completion_times([]).size == 0
