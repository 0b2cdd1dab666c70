"""Dask's adaptive rule on the simulator: faithful to distributed's code, blind to billing."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skylease.control.dask_rule import DaskAdaptive
from skylease.control.fixed import FixedPool
from skylease.model.catalog import InstanceType
from skylease.model.task import Bag
from skylease.sim.env import simulate
from skylease.traces.synthetic import constant_bag, normal_bag

VM = InstanceType("vm", price=1.0, billing_unit=3600, boot_time=300)


def _each_task_once(r, n):
    assert r.done == n and r.unfinished == ()
    ids = [rec.task for rec in r.records]
    assert len(ids) == n and len(set(ids)) == n


def test_256_tasks_all_done_once_and_first_tick_asks_26_hosts():
    p = DaskAdaptive()
    r = simulate(p, constant_bag(256, 150), [VM])
    _each_task_once(r, 256)
    # first adapt() one interval after the start: ceil(256 * 0.5 s / 5 s) = 26
    assert p.log[0] == (1.0, "up", math.ceil(256 * 0.5 / 5)) == (1.0, "up", 26)
    assert sum(1 for h in r.host_table if h.requested_at == 1.0) == 26
    assert r.peak_hosts <= 256 and r.hosts <= 256
    assert r.interrupted == 0  # it never stops a busy host


def test_scales_to_the_queue_once_durations_are_known_and_closes_booting_hosts_first():
    p = DaskAdaptive()
    r = simulate(p, constant_bag(256, 150), [VM])
    # first results at 450 s: estimate 150 s, target capped at 230 tasks left: 204 more hosts
    assert p.log[1] == (451.0, "up", 204)
    # at 600 s 26 more are done: 26 hosts still booting are surplus, closed after 3 ticks
    down = [h for h in r.host_table if h.released_at is not None and h.released_at < 700]
    assert len(down) == 26 and all(h.up_at is None for h in down)


def test_normal_bag_done_once_and_never_more_hosts_than_tasks():
    r = simulate(DaskAdaptive(), normal_bag(256, 150, 30, seed=1), [VM], order="random", seed=2)
    _each_task_once(r, 256)
    assert r.peak_hosts <= 256 and r.hosts <= 256


@pytest.mark.parametrize("wait_count", [1, 3, 5])
def test_idle_host_released_after_wait_count_ticks_while_work_is_pending(wait_count):
    vm = InstanceType("vm", price=1.0, billing_unit=3600, boot_time=0)
    # one 1 s task and three 100 s tasks; a tiny target_duration asks for one host per task
    p = DaskAdaptive(target_duration=0.1, wait_count=wait_count)
    r = simulate(p, Bag.from_runtimes([1, 100, 100, 100]), [vm])
    _each_task_once(r, 4)
    assert r.hosts == 4 and r.interrupted == 0
    short = next(h for h in r.host_table if h.released_at is not None and h.released_at < 50)
    # the short task ends at t=2; proposed at each tick from then on, gone after wait_count ticks
    assert 2.0 + wait_count - 1 <= short.released_at <= 2.0 + wait_count
    assert r.makespan == pytest.approx(101.0)  # the other three were still running
    assert sum(1 for h in r.host_table if h.released_at is not None and h.released_at < 50) == 1


def test_huge_target_duration_keeps_one_host():
    p = DaskAdaptive(target_duration=1e9)
    r = simulate(p, constant_bag(64, 150), [VM])
    _each_task_once(r, 64)
    assert r.hosts == 1 and r.peak_hosts == 1
    assert r.makespan == pytest.approx(1 + 300 + 64 * 150)


def test_maximum_and_minimum_clip_the_target():
    r = simulate(DaskAdaptive(maximum=5), constant_bag(256, 150), [VM])
    _each_task_once(r, 256)
    assert r.peak_hosts == 5
    assert DaskAdaptive(minimum=2).minimum == 2
    with pytest.raises(ValueError):
        DaskAdaptive(maximum=2.5)
    with pytest.raises(ValueError):
        DaskAdaptive(target_duration=0)


def test_costs_far_more_than_a_fixed_pool_on_the_same_bag():
    bag = constant_bag(256, 150)
    dask = simulate(DaskAdaptive(), bag, [VM])
    fixed = simulate(FixedPool(13), bag, [VM])
    # measured: Dask rents 230 hosts for one hour each (cost 230, makespan 901 s);
    # 13 fixed hosts finish in 3300 s inside their first hour (cost 13)
    assert fixed.cost == 13.0 and fixed.makespan == 3300.0
    assert dask.cost == 230.0 and dask.makespan == pytest.approx(901.0)
    assert dask.cost > 10 * fixed.cost


def test_duration_estimate_follows_task_prefix_add_duration():
    p = DaskAdaptive()
    assert p.task_duration() == 0.5  # unknown-task-duration
    p.add_duration(10.0)
    assert p.task_duration() == 10.0  # the first duration as is
    p.add_duration(20.0)
    assert p.task_duration() == 15.0  # then 0.5 * new + 0.5 * old
    p.add_duration(5.0)
    assert p.task_duration() == 10.0


@settings(max_examples=25, deadline=None)
@given(
    runtimes=st.lists(st.floats(0.5, 400.0), min_size=1, max_size=20),
    boot=st.sampled_from([0.0, 30.0, 300.0]),
    unit=st.sampled_from([60.0, 3600.0]),
    target_duration=st.sampled_from([0.5, 5.0, 60.0]),
    wait_count=st.integers(1, 4),
)
def test_random_small_bags_done_once_and_hosts_bounded(runtimes, boot, unit, target_duration,
                                                      wait_count):
    vm = InstanceType("vm", price=1.0, billing_unit=unit, boot_time=boot)
    p = DaskAdaptive(target_duration=target_duration, wait_count=wait_count)
    r = simulate(p, Bag.from_runtimes(runtimes), [vm])
    _each_task_once(r, len(runtimes))
    assert r.peak_hosts <= len(runtimes)
    assert r.interrupted == 0
