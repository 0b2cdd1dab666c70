"""What a lease simulation records besides its metrics: the decision log, the transfers, ``until``."""

from __future__ import annotations

import gc

import pytest

from skylease.control.leases import Lease, LeaseKind, LeaseState, SchedulerConfig
from skylease.control.leases.records import Event, EventLog, Run, RunLog
from skylease.sim.leases import simulate_leases


def _be(i: int, submit: int, nodes: int, dur: int, image: str | None = None) -> Lease:
    return Lease(i, LeaseKind.BEST_EFFORT, submit, nodes, dur, dur, dur, image=image,
                 image_size=1000 if image else 0)


def _ar(i: int, submit: int, start: int, nodes: int, dur: int) -> Lease:
    return Lease(i, LeaseKind.ADVANCE_RESERVATION, submit, nodes, dur, dur, dur, start=start,
                 preemptible=False)


def test_the_log_holds_every_history_event_with_the_time_it_was_decided():
    leases = [_be(0, 0, 2, 100), _be(1, 10, 2, 50)]
    run = simulate_leases(leases, 2)
    for le in leases:
        assert [(e.what, e.at) for e in run.log if e.lease == le.id] == le.history
    # lease 1 is reserved at its arrival (t = 10) for t = 100, when lease 0 ends
    assert ("reserve", 100, 10) in [(e.what, e.at, e.now) for e in run.log if e.lease == 1]


def test_until_all_runs_the_reservations_left_after_the_best_effort_work():
    def leases():
        return [_be(0, 0, 1, 100), _ar(1, 0, 500, 1, 60)]

    best_effort = simulate_leases(ls := leases(), 1)
    assert ls[1].state is LeaseState.SCHEDULED and ls[1].end is None and best_effort.all_best_effort == 100
    everything = simulate_leases(ls := leases(), 1, until="all")
    assert ls[1].state is LeaseState.DONE and (ls[1].first_start, ls[1].end) == (500, 560)
    assert everything.runs[-1] == (1, "vm", 500, 560, (0,)) and everything.all_best_effort == 100
    with pytest.raises(ValueError, match="until"):
        simulate_leases(leases(), 1, until="never")


def test_transfers_carried_out_are_recorded_with_their_users():
    cfg = SchedulerConfig.vm_mult()
    leases = [_be(0, 0, 1, 100, "a.img"), _be(1, 0, 1, 100, "a.img"), _be(2, 0, 1, 100, "b.img")]
    run = simulate_leases(leases, 3, config=cfg)
    t = cfg.transfer_s(leases[0])  # 1000 MB at 12.5 MB/s: 80 s
    # one multicast of a.img for leases 0 and 1 (piggybacking), then b.img after it on the FIFO channel
    assert [(tr.image, tr.start, tr.end, tr.channel) for tr in run.transfers] == [
        ("a.img", 0, t, "be"), ("b.img", t, 2 * t, "be")]
    assert run.transfers[0].users == ((0, (0,)), (1, (1,))) and run.transfers[1].users == ((2, (2,)),)
    assert simulate_leases([_be(0, 0, 1, 100, "a.img")], 1).transfers == []  # NOVM: no transfers


def test_a_runs_log_and_reservations_are_kept_as_numbers_not_objects():
    # a full collection walks every object a run keeps: 4 or more per lease when each event and
    # each reservation carried out was a tuple (issue 25: the cost per lease grew with the run)
    leases = [_be(i, 10 * i, 1 + i % 2, 40) for i in range(300)]
    run = simulate_leases(leases, 4)
    gc.collect()
    assert len(run.log) == 3 * 300 and len(run.runs) == 300
    kept = [o for rec in (run.log, run.runs) for o in gc.get_referents(rec)
            if gc.is_tracked(o) and not isinstance(o, type)]
    assert sum(len(gc.get_referents(o)) for o in kept) <= 20  # the few event and run kinds
    # read back as the records they were
    assert run.log[0] == Event(0, "schedule", 0, 0) and run.log[-1] == list(run.log)[-1]
    assert run.runs[1] == Run(1, "vm", 10, 50, (1, 2)) and run.runs[1:3] == list(run.runs)[1:3]
    assert [(e.what, e.at) for e in run.log if e.lease == 7] == leases[7].history


def test_the_record_logs_behave_as_lists_of_records():
    events = [Event(3, "schedule", 0, 0), Event(3, "end", 40, 40), Event(2**40, "reserve", -5, 1)]
    runs = [Run(3, "vm", 0, 40, (0, 1)), Run(4, "suspend", 40, 41, ()), Run(5, "vm", 1, 2, (7,))]
    elog, rlog = EventLog(events), RunLog(runs)
    assert elog == events and list(elog) == events and elog[-1] == events[-1] and elog[::2] == events[::2]
    assert rlog == runs and list(rlog) == runs and rlog[-2] == runs[-2] and tuple(rlog) == tuple(runs)
    assert rlog != runs[:2] and elog != rlog and EventLog() == [] and len(rlog) == 3
    assert repr(EventLog(events[:1])) == "EventLog([Event(lease=3, what='schedule', at=0, now=0)])"
    with pytest.raises(IndexError):
        rlog[3]
    with pytest.raises(TypeError):
        hash(elog)
