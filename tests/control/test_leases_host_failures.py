"""Host failures in the lease scheduler: nodes down and up again (docs/decisions/host-failures.md)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from skylease.control.leases import (
    NAMED_CONFIGURATIONS,
    Lease,
    LeaseKind,
    LeaseScheduler,
    LeaseState,
    Reservation,
    ResourceTuple,
    SchedulerConfig,
)
from skylease.control.leases.records import lease_record

WHY = "host host2 not answering: no heartbeat for 5 s"
OVER = (LeaseState.DONE, LeaseState.REJECTED, LeaseState.CANCELLED)


def _be(i: int, submit: int, nodes: int, dur: int, real: int | None = None) -> Lease:
    real = dur if real is None else real
    return Lease(i, LeaseKind.BEST_EFFORT, submit, nodes, dur, real, real)


def _ar(i: int, submit: int, start: int, nodes: int, dur: int, real: int | None = None) -> Lease:
    real = dur if real is None else real
    return Lease(i, LeaseKind.ADVANCE_RESERVATION, submit, nodes, dur, real, real, start=start,
                 preemptible=False)


class _Log:
    """The enactment's calls: (what, lease id, kind, nodes, now)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, str, tuple[int, ...], int]] = []

    def start(self, rr: Reservation, now: int) -> None:
        self.calls.append(("start", rr.lease.id, rr.kind.value, rr.nodes, now))

    def stop(self, rr: Reservation, now: int) -> None:
        self.calls.append(("stop", rr.lease.id, rr.kind.value, rr.nodes, now))

    def vm_runs(self, lid: int) -> list[tuple[tuple[int, ...], int]]:
        return [(nodes, now) for what, i, kind, nodes, now in self.calls
                if what == "start" and i == lid and kind == "vm"]


def _run(sched: LeaseScheduler, now: int, until: float = math.inf) -> int:
    """Step from ``now`` to each next event while there is one before ``until``."""
    sched.step(now)
    while True:
        nxt = sched.next_event(now)
        if nxt == math.inf or nxt >= until:
            return now
        now = int(nxt)
        sched.step(now)


def test_a_running_best_effort_lease_is_requeued_and_runs_again_elsewhere_in_full():
    log = _Log()
    sched = LeaseScheduler(3, enactment=log)
    le = _be(1, 0, 1, 100)
    sched.submit(le)
    _run(sched, 0, until=30)
    assert sched.rr[1].nodes == (0,) and le.state is LeaseState.ACTIVE
    sched.nodes_down([0], 30, WHY)
    assert ("stop", 1, "vm", (0,), 30) in log.calls  # what ran there is stopped
    assert le.state is LeaseState.PENDING and le.remaining == 100 and le in sched.queue
    assert le.history[-1] == ("requeue", 30)
    _run(sched, 30)
    assert log.vm_runs(1) == [((0,), 0), ((1,), 30)]
    assert le.state is LeaseState.DONE and le.end == 130  # its whole duration again, from 30
    assert le.first_start == 0  # its first start is its history


def test_a_suspended_lease_whose_memory_is_on_the_down_node_starts_again_from_scratch():
    # NOVM-SR: two leases of 1000 s on the two nodes; an AR on one node at [600, 700) preempts one
    # of them, which is suspended there and waits. That node goes down at 650: the suspended
    # lease's memory is lost with it; the AR running there is degraded.
    cfg, _ = NAMED_CONFIGURATIONS["NOVM-SR"]
    log = _Log()
    sched = LeaseScheduler(2, config=cfg, enactment=log)
    a, b, ar = _be(1, 0, 1, 1000), _be(2, 0, 1, 1000), _ar(3, 500, 600, 1, 100)
    sched.submit(a)
    sched.submit(b)
    _run(sched, 0, until=500)
    sched.submit(ar)
    _run(sched, 500, until=650)
    (victim,) = [le for le in (a, b) if ("preempt", 500) in le.history]
    assert [w for w, _ in victim.history][-2:] == ["suspend", "reserve"]  # waits to resume at 700
    assert victim.remaining < 1000 and victim.last_nodes == sched.rr[3].nodes
    (node,) = victim.last_nodes
    sched.nodes_down([node], 650, WHY)
    assert victim.history[-1] == ("requeue", 650) and victim.remaining == 1000
    assert victim.state is LeaseState.PENDING and victim.last_nodes == () and victim.id not in sched.rr
    assert ar.degraded == WHY and ar.history[-1] == ("degraded", 650)
    sched.nodes_up([node], 800)
    _run(sched, 650)
    assert victim.state is LeaseState.DONE and log.vm_runs(victim.id)[-1][1] == victim.end - 1000
    assert not any(i == victim.id and kind == "resume" for _, i, kind, _, _ in log.calls)


def test_a_best_effort_lease_with_only_a_future_plan_there_keeps_its_work_and_waits_for_the_node():
    log = _Log()
    sched = LeaseScheduler(2, enactment=log)
    a, b = _be(1, 0, 1, 100), _be(2, 0, 2, 50)
    sched.submit(a)
    sched.submit(b)
    _run(sched, 0, until=10)
    assert sched.rr[2].start == 100 and sched.rr[2].nodes == (0, 1)  # a future reservation
    sched.nodes_down([1], 10, WHY)
    assert b.history[-1] == ("unschedule", 10) and b.state is LeaseState.PENDING and b in sched.queue
    assert b.remaining == 50 and not any(w == "requeue" for w, _ in b.history)
    assert a.state is LeaseState.ACTIVE  # untouched: node 0 is up
    assert sched.down == frozenset({1})
    _run(sched, 10, until=300)
    assert b.state is LeaseState.PENDING and log.vm_runs(2) == []  # two nodes needed, one is up
    sched.nodes_up([1], 300)
    _run(sched, 300)
    assert log.vm_runs(2) == [((0, 1), 300)] and b.end == 350  # node 1 used again
    assert sched.down == frozenset()


def _suspended_and_planned_elsewhere(config: str) -> tuple[LeaseScheduler, list[Lease], _Log]:
    """Three nodes, leases 1 and 2 of 1000 s on nodes 0 and 1, lease 3 of 650 s on node 2; an AR
    (lease 4) on one node at [600, 700) preempts lease 1, suspended on node 0, whose plan resumes
    it on node 2 once lease 3 ends (at 682); run to 620."""
    cfg, _ = NAMED_CONFIGURATIONS[config]
    log = _Log()
    sched = LeaseScheduler(3, config=cfg, enactment=log)
    leases = [_be(1, 0, 1, 1000), _be(2, 0, 1, 1000), _be(3, 0, 1, 650), _ar(4, 500, 600, 1, 100)]
    for le in leases[:3]:
        sched.submit(le)
    _run(sched, 0, until=500)
    sched.submit(leases[3])
    _run(sched, 500, until=620)
    vm = sched.rr[1]
    assert leases[0].last_nodes == (0,) and vm.nodes == (2,) and vm.resume is not None
    assert vm.resume.start == 682 and leases[3].state is LeaseState.ACTIVE
    return sched, leases, log


def test_a_suspended_lease_whose_future_resumption_was_on_the_down_node_keeps_its_work():
    sched, (a, _, c, ar), log = _suspended_and_planned_elsewhere("NOVM-SR")
    remaining = a.remaining
    assert remaining < 1000
    sched.nodes_down([2], 620, WHY)  # its memory is on node 0, up
    assert a.history[-1] == ("unschedule", 620) and a.state is LeaseState.SUSPENDED
    assert a.remaining == remaining and a.last_nodes == (0,) and a in sched.queue
    assert c.history[-1] == ("requeue", 620)  # lease 3 ran on node 2
    assert ar.degraded is None
    _run(sched, 620)
    assert any(i == 1 and kind == "resume" for _, i, kind, _, _ in log.calls)  # it resumes
    assert a.state is LeaseState.DONE and all(n != (2,) for n, _ in log.vm_runs(1)[1:])


@pytest.mark.parametrize("node", [0, 2])
def test_a_lease_migrating_from_or_to_the_down_node_loses_its_work(node):
    # Haizea 1.0 reserves the migration right after the suspension: at 620 the memory moves from
    # node 0 to node 2; either going down loses it.
    sched, (a, b, *_), log = _suspended_and_planned_elsewhere("HAIZEA-1.0")
    mig = sched.rr[1].migrate
    assert mig is not None and mig.state is LeaseState.ACTIVE
    sched.nodes_down([node], 620, WHY)
    assert a.history[-1] == ("requeue", 620) and a.state is LeaseState.PENDING
    assert ("stop", 1, "migrate", (2,), 620) in log.calls
    sched.nodes_up([node], 620)
    _run(sched, 620)
    assert a.state is LeaseState.DONE and b.state is LeaseState.DONE
    # its last run is as long as lease 2's, which ran its 1000 s whole from 0
    assert a.end - log.vm_runs(1)[-1][1] == b.end - log.vm_runs(2)[0][1]
    assert not any(i == 1 and kind == "resume" and now > 620 for _, i, kind, _, now in log.calls)


def test_a_future_advance_reservation_moves_to_a_free_node():
    log = _Log()
    sched = LeaseScheduler(3, enactment=log)
    ar = _ar(1, 0, 100, 2, 50)
    sched.submit(ar)
    _run(sched, 0, until=10)
    assert sched.rr[1].nodes == (0, 1)
    sched.nodes_down([0], 10, WHY)
    assert sched.rr[1].nodes == (1, 2) and ar.degraded is None  # kept node 1, node 2 for node 0
    assert [w for w, _ in ar.history] == ["reserve"]
    _run(sched, 10)
    assert log.vm_runs(1) == [((1, 2), 100)] and ar.end == 150


def test_a_future_advance_reservation_that_cannot_move_is_kept_and_degraded_preempting_nothing():
    log = _Log()
    sched = LeaseScheduler(2, enactment=log)
    be, ar = _be(1, 0, 1, 1000), _ar(2, 0, 100, 1, 50)
    sched.submit(be)
    sched.submit(ar)
    _run(sched, 0, until=10)
    assert sched.rr[2].nodes == (0,) and sched.rr[1].nodes == (1,)  # (ARs are admitted first)
    sched.nodes_down([0], 10, WHY)
    assert sched.rr[2].nodes == (0,) and ar.degraded == WHY and ar.history[-1] == ("degraded", 10)
    assert [w for w, _ in be.history] == ["schedule", "start"]  # not preempted for the move
    rec = lease_record(ar, [])
    assert rec["degraded"] == WHY and list(rec)[-2:] == ["degraded", "events"]


def test_a_running_advance_reservation_is_degraded_and_keeps_its_other_nodes():
    log = _Log()
    sched = LeaseScheduler(3, enactment=log)
    ar, be = _ar(1, 0, 0, 2, 100, real=80), _be(2, 0, 1, 200)
    sched.submit(ar)
    sched.submit(be)
    _run(sched, 0, until=50)
    assert sched.rr[1].nodes == (0, 1) and sched.rr[2].nodes == (2,)
    sched.nodes_down([1], 50, WHY)
    assert ar.state is LeaseState.ACTIVE and sched.rr[1].nodes == (0, 1) and ar.degraded == WHY
    assert not [c for c in log.calls if c[0] == "stop"]  # nothing stopped
    assert be.state is LeaseState.ACTIVE and [w for w, _ in be.history] == ["schedule", "start"]
    sched.nodes_down([2], 60, "host host3 not answering")
    assert ar.degraded == WHY  # its first reason stays
    assert be.history[-1] == ("requeue", 60)
    _run(sched, 60)
    assert ar.state is LeaseState.DONE and ar.end == 80  # it ends early, still on the down node
    assert ar.degraded == WHY  # a degraded lease stays degraded: it is its history


def test_a_degraded_lease_kept_on_a_down_node_can_end_early_or_be_cancelled():
    sched = LeaseScheduler(2)
    ar1, ar2 = _ar(1, 0, 0, 2, 100), _ar(2, 0, 200, 2, 100)
    sched.submit(ar1)
    sched.submit(ar2)
    _run(sched, 0, until=50)
    sched.nodes_down([1], 50, WHY)
    assert ar1.degraded == WHY and ar2.degraded == WHY  # ar2 has nowhere to go
    assert sched.premature_end(1, 60)  # its payload exited: the plan is cut on the down node too
    sched.step(60)
    assert ar1.state is LeaseState.DONE and ar1.end == 60
    assert sched.cancel(2, 70).state is LeaseState.CANCELLED
    assert not sched.table.on_node(1) and sched.down == {1}


def test_nothing_starts_on_a_down_node_and_it_is_used_again_once_up():
    log = _Log()
    sched = LeaseScheduler(2, enactment=log)
    sched.nodes_down([0], 0, WHY)
    leases = [_be(i, 0, 1, 100) for i in range(1, 4)]
    for le in leases:
        sched.submit(le)
    _run(sched, 0, until=150)
    assert [nodes for what, _, _, nodes, _ in log.calls if what == "start"] == [(1,), (1,)]
    sched.nodes_up([0], 150)
    _run(sched, 150)
    assert log.vm_runs(3) == [((0,), 150)]
    assert all(le.state is LeaseState.DONE for le in leases)


def test_a_node_coming_up_is_used_at_once_by_a_lease_the_queue_had_given_up_on():
    # The one future reservation is held (lease 2, after lease 1 on node 0), so a queued lease that
    # failed is not tried again until nodes are freed (or CPU is): a node coming up counts as both.
    log = _Log()
    sched = LeaseScheduler(2, enactment=log)
    sched.nodes_down([1], 0, WHY)
    for le in (_be(1, 0, 1, 1000), _be(2, 0, 1, 10), _be(3, 0, 1, 10)):
        sched.submit(le)
    _run(sched, 0, until=100)
    assert sched.reserved == 1 and sched.rr[2].start == 1000 and 3 not in sched.rr
    sched.nodes_up([1], 100)
    sched.step(100)
    assert log.vm_runs(3) == [((1,), 100)]
    # the same with a lease that was tried and failed (it needs two nodes, one was free)
    log = _Log()
    sched = LeaseScheduler(3, enactment=log)
    sched.nodes_down([2], 0, WHY)
    for le in (_be(1, 0, 1, 1000), _be(2, 0, 2, 10), _be(3, 0, 2, 10)):
        sched.submit(le)
    _run(sched, 0, until=100)
    assert sched.rr[2].start == 1000 and 3 in sched._stale  # its failure remembered
    sched.nodes_up([2], 100)
    sched.step(100)
    assert log.vm_runs(3) == [((1, 2), 100)]


def test_a_lease_is_not_rejected_because_a_node_is_down_right_now():
    sched = LeaseScheduler(2)
    sched.nodes_down([1], 0, WHY)
    le = _be(1, 0, 2, 10)
    sched.submit(le)
    _run(sched, 0)
    assert le.state is LeaseState.PENDING and le.reason is None
    sched.nodes_up([1], 100)
    _run(sched, 100)
    assert le.state is LeaseState.DONE and le.end == 110


def test_down_and_up_are_idempotent():
    sched = LeaseScheduler(3)
    le = _be(1, 0, 1, 100)
    sched.submit(le)
    sched.step(0)
    sched.nodes_down([0, 1], 10, WHY)
    version, history = sched.table.version, list(le.history)
    sched.nodes_down([1, 0], 20, "again")
    sched.nodes_up([2], 20)
    assert sched.table.version == version and le.history == history and sched.down == {0, 1}
    sched.nodes_up([0], 30)
    sched.nodes_up([0], 40)
    assert sched.down == {1}
    with pytest.raises(ValueError, match="node 7"):
        sched.nodes_down([7], 50, WHY)
    with pytest.raises(ValueError, match="node -1"):
        sched.nodes_up([-1, 0], 50)
    assert sched.down == {1}


def test_a_record_shows_degraded_only_when_set():
    le = _ar(1, 0, 10, 1, 10)
    assert "degraded" not in lease_record(le, [])
    le.degraded = WHY
    assert lease_record(le, [])["degraded"] == WHY


# -- the property: random workloads, random hosts down and up --------------------------------------
CONFIGS = {"default": SchedulerConfig(), "conservative": SchedulerConfig.conservative(),
           **{name: cfg for name, (cfg, _) in NAMED_CONFIGURATIONS.items()}}


@st.composite
def _scenario(draw: Any) -> dict[str, Any]:
    n = draw(st.integers(2, 4))
    leases = []
    for i in range(1, draw(st.integers(1, 7)) + 1):
        submit = draw(st.integers(0, 300))
        nodes = draw(st.integers(1, n))
        dur = draw(st.integers(10, 300))
        real = draw(st.integers(1, dur))
        kind = draw(st.sampled_from(["BE", "BE", "AR", "IM"]))
        start = submit + draw(st.integers(0, 300)) if kind == "AR" else None
        leases.append((i, kind, submit, nodes, dur, real, start, draw(st.sampled_from(["a.img", "b.img"]))))
    calls = []
    for _ in range(draw(st.integers(1, 6))):  # hosts down and up, and the owners' calls among them
        t = draw(st.integers(0, 600))
        what = draw(st.sampled_from(["down", "down", "up", "up", "cancel", "early"]))
        if what in ("down", "up"):
            ks = draw(st.sets(st.integers(0, n - 1), min_size=1, max_size=n))
            calls.append((t, what, tuple(sorted(ks))))
        else:
            calls.append((t, what, draw(st.integers(1, len(leases)))))
    calls.sort(key=lambda c: c[0])
    last = calls[-1][0]
    calls.append((last + draw(st.integers(0, 300)), "up", tuple(range(n))))  # all up in the end
    one_vm, two_vms = ResourceTuple(1.0, 1024, 20000, 12.5), ResourceTuple(2.0, 2048, 40000, 25.0)
    cap = draw(st.sampled_from([one_vm, two_vms]))
    return {"n": n, "leases": leases, "calls": calls, "config": draw(st.sampled_from(sorted(CONFIGS))),
            "capacity": cap}


class _Checked:
    """An enactment that fails if a reservation starts on a node that is down (but the plan of an
    AR kept there, degraded, which was booked before the node went down)."""

    def __init__(self) -> None:
        self.sched: LeaseScheduler | None = None
        self.calls: list[tuple[str, int, str, tuple[int, ...], int]] = []

    def start(self, rr: Reservation, now: int) -> None:
        assert self.sched is not None
        down = self.sched.down
        if set(rr.nodes) & down:
            assert rr.lease.kind is not LeaseKind.BEST_EFFORT and rr.lease.degraded is not None, (
                f"lease {rr.lease.id}'s {rr.kind.value} starts at {now} on {rr.nodes}; down: {down}")
        self.calls.append(("start", rr.lease.id, rr.kind.value, rr.nodes, now))

    def stop(self, rr: Reservation, now: int) -> None:
        self.calls.append(("stop", rr.lease.id, rr.kind.value, rr.nodes, now))


def _within_capacity(sched: LeaseScheduler) -> None:
    """No node over its configured capacity at any instant; on a node down, only the plans of
    degraded AR or IM leases (kept there)."""
    table = sched.table
    for k in table.down:
        for rr in table.on_node(k):
            assert rr.lease.kind is not LeaseKind.BEST_EFFORT and rr.lease.degraded is not None, (k, rr)
    for k in range(table.n_nodes):
        row = table.on_node(k)
        for p in {rr.start for rr in row}:
            used = ResourceTuple(0.0, 0, 0, 0.0)
            for rr in row:
                if rr.start <= p < rr.end:
                    for _ in range(rr.nodes.count(k)):
                        used = used.plus(rr.usage)
            assert used.fits_in(table.capacity[k]), f"node {k} over capacity at {p}: {used}"


def _play(sc: dict[str, Any]) -> tuple[list[tuple[str, int, int]], list[Lease], list[tuple]]:
    """Run a scenario: submissions, down/up calls, cancellations and early ends at their times (each
    call followed by a step, as the lease manager does), checking the table at each step."""
    enact = _Checked()
    events: list[tuple[str, int, int]] = []
    sched = LeaseScheduler(sc["n"], capacity=sc["capacity"], config=CONFIGS[sc["config"]], enactment=enact,
                           on_event=lambda what, le, t: events.append((what, le.id, t)))
    enact.sched = sched
    make = {"BE": lambda i, s, n, d, r, _: _be(i, s, n, d, r), "AR": _ar,
            "IM": lambda i, s, n, d, r, _: Lease(i, LeaseKind.IMMEDIATE, s, n, d, r, r, preemptible=False)}
    leases = [make[kind](i, s, start, n, d, r) if kind == "AR" else make[kind](i, s, n, d, r, None)
              for i, kind, s, n, d, r, start, _ in sc["leases"]]
    for le, spec in zip(leases, sc["leases"], strict=True):
        le.image, le.image_size = spec[7], 200
    actions = sorted([(le.submit, 0, "submit", le) for le in leases]
                     + [(t, 1, what, ks) for t, what, ks in sc["calls"]], key=lambda a: (a[0], a[1]))
    now, i = 0, 0
    for _ in range(10_000):  # bounded
        while i < len(actions) and actions[i][0] <= now:
            _, _, what, arg = actions[i]
            if what == "submit":
                sched.submit(arg)
            else:
                if what == "down":
                    sched.nodes_down(arg, now, f"nodes {arg} down")
                elif what == "up":
                    sched.nodes_up(arg, now)
                elif what == "cancel" and leases[arg - 1].state not in OVER and leases[arg - 1].submit <= now:
                    sched.cancel(arg, now)
                elif what == "early":
                    sched.premature_end(arg, now)
                sched.step(now)
                _within_capacity(sched)
            i += 1
        sched.step(now)
        _within_capacity(sched)
        nxt = min(sched.next_event(now), actions[i][0] if i < len(actions) else math.inf)
        if nxt == math.inf:
            break
        now = int(nxt)
    else:
        raise AssertionError("the scenario did not end in 10,000 steps")
    return events, leases, enact.calls


@seed(37)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_scenario())
def test_random_workloads_with_hosts_down_and_up(sc):
    events, leases, calls = _play(sc)
    for le in leases:
        ends = [w for w, _ in le.history if w in ("end", "reject", "cancel")]
        assert len(ends) == 1 and le.state in OVER, (le.id, le.state, le.history)
    again, leases2, calls2 = _play(sc)  # the same calls on a fresh scheduler: the same schedule
    assert again == events and calls2 == calls
    assert [le.history for le in leases2] == [le.history for le in leases]
