"""Changes to a lease (issue 40, item 2; docs/decisions/lease-extensions.md): an extension is
accepted where the lease's nodes are free, refused with the latest end and the earliest start that
fit, a best-effort lease is re-planned, and the same calls replayed give the same schedule."""

from __future__ import annotations

from tests.control.lease_steps import ar as _ar
from tests.control.lease_steps import be as _be
from tests.control.lease_steps import drive as _drive

from skylease.control.leases import LeaseScheduler, LeaseState, SchedulerConfig
from skylease.control.leases.changes import ExtensionRules, check_rules, extend, extensions_of
from skylease.control.leases.fairness import Fairness

SR = SchedulerConfig.novm_sr()  # suspensions and resumptions of 21 s (1024 MB at 50 MB/s)


def test_an_advance_reservation_is_extended_where_its_node_is_free_and_runs_to_its_new_end():
    sched = LeaseScheduler(2)
    ar = _ar(0, 0, 100, 1, 100)
    sched.submit(ar)
    _drive(sched, 150)
    change = extend(sched, 0, 50, 150)
    assert change.accepted and (change.old_end, change.new_end) == (200, 250)
    assert ar.duration == 150 and extensions_of(ar) == 1 and ("extended", 250) in ar.history
    _drive(sched, 1000, 150)
    assert ar.state is LeaseState.DONE and ar.end == 250


def test_one_that_does_not_fit_is_refused_with_the_latest_end_and_the_earliest_start():
    # node 0: AR 0 on [100, 200), AR 1 on [260, 300): AR 0 can end at 260 at the latest; at its new
    # length (200 s) a reservation of it fits from 300 on (after AR 1)
    sched = LeaseScheduler(1)
    a, b = _ar(0, 0, 100, 1, 100), _ar(1, 0, 260, 1, 40)
    sched.submit(a)
    sched.submit(b)
    sched.step(0)
    change = extend(sched, 0, 100, 10)
    assert not change.accepted and change.old_end == 200 and change.new_end is None
    assert change.latest_end == 260 and change.earliest_start == 300, change
    assert "not free until lease time 300" in str(change.reason)
    assert sched.rr[0].end == 200 and a.duration == 100 and extensions_of(a) == 0  # nothing changed
    assert extend(sched, 0, 60, 10).accepted  # the latest end offered is accepted
    _drive(sched, 1000, 10)
    assert (a.end, b.first_start, b.end) == (260, 260, 300)


def test_a_running_advance_reservation_gets_no_earliest_start_and_the_rules_refuse_first():
    sched = LeaseScheduler(1)
    a, b = _ar(0, 0, 10, 1, 100), _ar(1, 0, 110, 1, 40)
    sched.submit(a)
    sched.submit(b)
    _drive(sched, 20)
    change = extend(sched, 0, 5, 20)
    assert not change.accepted and change.latest_end is None and change.earliest_start is None
    rules = ExtensionRules(max_duration=150, extend_within=30, max_extensions=1)
    early = check_rules(sched, a, 10, 20, rules)
    assert early is not None and "from lease time 80" in str(early.reason)
    long = check_rules(sched, a, 60, 90, rules)
    assert long is not None and long.latest_end == 160 and "allows 150 s" in str(long.reason)
    assert check_rules(sched, a, 10, 90, rules) is None


def test_a_running_best_effort_lease_is_stretched_where_free_else_suspended_and_requeued():
    # BE 0 (1 node, 300 s) runs from 0; an AR on [400, 500). Extended by 50 at 100: free to 350.
    sched = LeaseScheduler(1, config=SR)
    be, ar = _be(0, 0, 1, 300), _ar(1, 0, 400, 1, 100)
    sched.submit(be)
    sched.submit(ar)
    _drive(sched, 100)
    assert extend(sched, 0, 50, 100).accepted and sched.rr[0].end == 350
    # by 100 more at 200: the AR is in the way at 400: suspended to be off the node by 350 (its old
    # end), queued again, and resumed after the AR with 100 s more to run
    change = extend(sched, 0, 100, 200)
    assert change.accepted and change.old_end == 350 and change.new_end is None
    assert sched.rr[0].suspend is not None and sched.rr[0].suspend.end == 350
    _drive(sched, 5000, 200)
    assert be.state is LeaseState.DONE and ar.first_start == 400
    assert be.duration == 450 and ("resume", 500) in be.history
    assert be.end == 500 + 21 + (450 - (350 - 21)), be.history  # resumed after the AR, ran what was left


def test_a_queued_best_effort_lease_runs_longer_and_one_not_started_is_planned_again():
    sched = LeaseScheduler(1)
    first, queued = _be(0, 0, 1, 100), _be(1, 0, 1, 100)
    for lease in (first, queued):
        sched.submit(lease)
    sched.step(0)
    assert sched.rr.get(1) is None or sched.rr[1].state is LeaseState.SCHEDULED
    # aggressive backfilling gave lease 1 a future reservation [100, 200); an AR on [250, 300)
    sched.submit(_ar(2, 0, 250, 1, 50))
    sched.step(0)
    change = extend(sched, 1, 100, 10)  # [100, 300) meets the AR: planned again from scratch
    assert change.accepted and ("unschedule", 10) in queued.history
    _drive(sched, 5000, 10)
    assert queued.state is LeaseState.DONE and queued.end is not None
    assert queued.end - queued.first_start == 200 and queued.first_start >= 300


def test_the_same_calls_replayed_give_the_same_schedule():
    def run() -> tuple[list, list]:
        sched = LeaseScheduler(2, config=SR)
        leases = [_be(0, 0, 2, 300), _ar(1, 0, 400, 1, 100), _be(2, 0, 1, 200), _ar(3, 0, 50, 1, 30)]
        for le in leases:
            sched.submit(le)
        changes: list = []
        calls = {60: lambda t: changes.append(extend(sched, 3, 20, t)),  # the running AR: in place
                 120: lambda t: changes.append(extend(sched, 0, 200, t)),  # suspended BE: more to run
                 130: lambda t: changes.append(extend(sched, 2, 40, t)),  # running BE: in place
                 140: lambda t: changes.append(extend(sched, 1, 500, t))}  # the AR at 400 (lease 0 queued)
        _drive(sched, 10_000, 0, at=calls)
        return changes, [(le.id, le.state, le.end, tuple(le.history)) for le in leases]

    changes, leases = run()
    assert (changes, leases) == run()
    assert [(c.accepted, c.old_end, c.new_end) for c in changes] == [
        (True, 80, 100), (True, None, None), (True, 250, 290), (True, 500, 1000)]
    assert all(state is LeaseState.DONE for _, state, _, _ in leases)
    assert [end for _, _, end, _ in leases] == [1492, 1000, 290, 100]  # lease 0 resumed after the AR


def test_an_extension_is_held_to_the_admission_policy_at_its_new_length():
    # fairness: at most 200 s a lease; 250 node-seconds per owner in any 1,000 s; alice holds two ARs
    # of 100 s on one node each (200 node-seconds), bob one (his counts nothing for alice)
    fair = Fairness(max_duration=200, node_hours=250 / 3600, window=1000)
    sched = LeaseScheduler(3, config=SchedulerConfig(admission=fair))
    a, b, c = _ar(1, 0, 0, 1, 100), _ar(2, 0, 0, 1, 100), _ar(3, 0, 0, 1, 100)
    a.owner, b.owner, c.owner = "alice", "alice", "bob"
    for lease in (a, b, c):
        sched.submit(lease)
    sched.step(0)
    assert all(le.state is not LeaseState.REJECTED for le in (a, b, c))
    assert check_rules(sched, a, 40, 10, ExtensionRules()) is None  # 140 s; 240 node-seconds
    hours = check_rules(sched, a, 60, 10, ExtensionRules())  # 160 s; 260 node-seconds
    assert hours is not None and "node_hours" in hours.reason, hours
    longest = check_rules(sched, a, 110, 10, ExtensionRules())  # 210 s
    assert longest is not None and "max_duration" in longest.reason, longest
