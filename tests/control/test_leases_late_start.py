"""A lease whose work began late (a real resumption took longer than its window,
docs/decisions/vm-overruns.md): the scheduler gives back what it lost, as a premature end gives
back what a lease did not use."""

from __future__ import annotations

from tests.control.lease_steps import ar as _ar
from tests.control.lease_steps import be as _be
from tests.control.lease_steps import drive as _drive

from skylease.control.leases import Lease, LeaseScheduler, LeaseState, SchedulerConfig

SR = SchedulerConfig.novm_sr()  # 21 s suspensions and resumptions


def test_a_lease_that_runs_to_its_end_is_extended_by_what_it_lost():
    # BE 1000 s, suspended for an AR on [500, 600) and resumed (RESUME [600, 621), VM from 621 for
    # its 521 s left: to 1142). Its resumption really ended at 630: 9 s late; its VM now ends at 1151.
    sched = LeaseScheduler(1, config=SR)
    be, ar = _be(0, 0, 1, 1000), _ar(1, 10, 500, 1, 100)
    sched.submit(be)
    _drive(sched, 9)
    sched.submit(ar)
    _drive(sched, 5000, 10, at={630: lambda t: _assert(sched.late_start(0, t, 9))})
    assert ("start", 621) in be.history and be.end == 1151 and be.state is LeaseState.DONE


def test_a_lease_to_be_suspended_again_has_that_much_more_left_to_run():
    # BE 2000 s on 1 node; two ARs: [500, 600) and [1000, 1100). After the first it resumes at 621
    # and is planned to suspend again before 1000; 9 s late at 630: 9 s more to run after the second
    # AR than without (the lease ends 9 s later than the same run told nothing).
    def run(late: bool) -> Lease:
        sched = LeaseScheduler(1, config=SR)
        be = _be(0, 0, 1, 2000)
        sched.submit(be)
        sched.submit(_ar(1, 0, 500, 1, 100))
        sched.submit(_ar(2, 0, 1000, 1, 100))
        calls = {630: lambda t: _assert(sched.late_start(0, t, 9))} if late else {}
        _drive(sched, 10000, 0, at=calls)
        assert be.state is LeaseState.DONE
        return be

    assert run(late=True).end == run(late=False).end + 9


def test_nothing_planned_after_it_may_move_and_an_ar_never_moves():
    # a BE lease with an AR right after it on its node: not extended (the AR keeps its start)
    sched = LeaseScheduler(1)
    be, ar = _be(0, 0, 1, 100), _ar(1, 0, 100, 1, 50)
    sched.submit(be)
    sched.submit(ar)
    sched.step(0)
    assert not sched.late_start(0, 10, 5)
    assert sched.rr[0].end == 100
    _drive(sched, 1000, 10)
    assert be.end == 100 and ar.first_start == 100
    # an advance reservation that started late keeps its window
    sched = LeaseScheduler(1)
    ar = _ar(0, 0, 10, 1, 50)
    sched.submit(ar)
    _drive(sched, 10)
    assert not sched.late_start(0, 12, 2) and sched.rr[0].end == 60
    # not running, no such lease, no time lost
    assert not sched.late_start(0, 5, 0) and not sched.late_start(9, 12, 2)


def _assert(ok: bool) -> None:
    assert ok
