"""When a lease's warning before its end is due (skylease.control.leases.warnings;
docs/decisions/before-end-warnings.md), read from the real scheduler's plan: ``before_end`` before
the end of the VM reservation that completes the lease, not before it starts; none while a
suspension is planned at its end or while it is suspended; and a plan that moves moves it."""

from __future__ import annotations

from skylease.control.leases import Lease, LeaseKind, LeaseScheduler, SchedulerConfig
from skylease.control.leases.warnings import Due, due, planned_end


def _steps(sched: LeaseScheduler, t: int, until: int) -> None:
    while (n := sched.next_event(t)) <= until:
        t = int(n)
        sched.step(t)


def test_due_before_the_planned_end_and_not_before_the_start():
    sched = LeaseScheduler(2)
    sched.submit(Lease(1, LeaseKind.BEST_EFFORT, 0, 1, 1000, 1000, 1000))
    sched.submit(Lease(2, LeaseKind.ADVANCE_RESERVATION, 0, 1, 100, 100, 100, start=500, preemptible=False))
    sched.step(0)
    assert due(sched.rr[1], 60) == Due(1, 1000, 940)  # running now: 60 s before its end
    assert due(sched.rr[2], 60) == Due(2, 600, 540)  # an AR to come: 60 s before its end
    assert due(sched.rr[2], 300) == Due(2, 600, 500)  # shorter than before_end: at its start
    assert due(sched.rr[1], 1000) == Due(1, 1000, 0)  # (exactly its length: at its start)
    for off in (None, 0):
        assert due(sched.rr[1], off) is None
    assert due(None, 60) is None


def test_a_preempted_lease_gets_its_new_end_and_a_suspended_one_none_until_it_is_planned_again():
    sched = LeaseScheduler(1, config=SchedulerConfig.novm_sr())  # (suspends what it preempts)
    sched.submit(Lease(1, LeaseKind.BEST_EFFORT, 0, 1, 1000, 1000, 1000))
    sched.step(0)
    assert due(sched.rr[1], 60) == Due(1, 1000, 940)
    # an AR at 500 preempts it: it runs until its suspension, which ends its VM reservation
    sched.submit(Lease(2, LeaseKind.ADVANCE_RESERVATION, 10, 1, 100, 100, 100, start=500, preemptible=False))
    sched.step(10)
    vm = sched.rr[1]
    assert vm.suspend is not None and vm.end < 500
    assert planned_end(vm) is None and due(vm, 60) is None  # not planned to end there
    _steps(sched, 10, 499)  # suspended: no VM reservation planned
    assert due(sched.rr.get(1), 60) is None
    _steps(sched, 499, 500)  # the AR starts; its resumption is planned after it
    vm = sched.rr[1]
    assert vm.start > 600 and vm.suspend is None
    assert due(vm, 60) == Due(1, vm.end, vm.end - 60)  # its new end
    _steps(sched, 500, vm.end)
    assert sched.lease(1).state.value == "done" and due(sched.rr.get(1), 60) is None
