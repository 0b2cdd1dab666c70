import pytest

from skylease.control.scheduled import ScheduledPool
from skylease.model import Bag, InstanceType
from skylease.sim.env import simulate


def test_follows_a_step_schedule_and_bills_started_units():
    vm = InstanceType("vm", boot_time=0, billing_unit=3600, price=0.12)
    # 4 hosts for the first hour, then 2: 40 tasks of 600 s
    r = simulate(ScheduledPool({"vm": [(0, 4), (3600, 2)]}), Bag.from_runtimes([600] * 40), [vm])
    assert r.done == 40 and r.interrupted == 0
    # 24 tasks in hour 1 (4 hosts x 6), 16 left on 2 hosts: 8 x 600 s more
    assert r.makespan == 3600 + 8 * 600
    assert r.cost == pytest.approx(0.12 * (2 * 1 + 2 * 3))


def test_shrinking_interrupts_busy_hosts_but_loses_no_task():
    vm = InstanceType("vm", boot_time=0, billing_unit=60, price=1.0)
    r = simulate(ScheduledPool({"vm": [(0, 3), (90, 1)]}), Bag.from_runtimes([100] * 6), [vm])
    assert r.done == 6 and r.unfinished == ()
    assert r.interrupted == 2 and r.wasted_s == 180


def test_rejects_unsorted_schedule():
    with pytest.raises(ValueError):
        ScheduledPool({"vm": [(10, 1), (0, 2)]})
