"""The dispatch core alone, without a clock: the rules both environments share."""

from __future__ import annotations

from skylease.control.dispatch import Dispatch
from skylease.model.host import Host, HostState
from skylease.model.instance import InstanceType

A, B = InstanceType("a"), InstanceType("b")


class World:
    """A Dispatch whose hooks record what they are told."""

    def __init__(self) -> None:
        self.started: list[tuple[int, int]] = []
        self.told: list[int] = []
        self.on_idle = None
        self.d = Dispatch(["a", "b"], self._run, self._idle)
        self.hosts: list[Host] = []

    def _run(self, h: Host, tid: int) -> None:
        assert h.state is HostState.BUSY and h.task == tid
        self.started.append((h.id, tid))

    def _idle(self, h: Host) -> None:
        self.told.append(h.id)
        if self.on_idle is not None:
            self.on_idle(h)

    def up(self, itype: InstanceType = A) -> Host:
        h = Host(len(self.hosts), itype.name, itype, requested_at=0.0)
        self.hosts.append(h)
        self.d.ready(h)
        self.d.settle()
        return h

    def done(self, h: Host) -> list[int]:
        tid = h.task
        assert tid is not None
        self.d.unassign(tid, h.id)
        self.d.ready(h)
        others = self.d.close(tid)
        for o in others:
            self.d.ready(self.hosts[o])
        self.d.settle()
        return others


def test_a_host_takes_its_pool_queue_first_then_the_shared_queue_fifo():
    w = World()
    for t in (0, 1):
        w.d.submit(t)
    w.d.submit(2, "a")
    w.d.submit(3, "b")
    h0, h1 = w.up(), w.up()
    hb = w.up(B)
    assert w.started == [(h0.id, 2), (h1.id, 0), (hb.id, 3)]
    assert w.d.queued() == 1 and w.d.pending() == 4


def test_idle_hosts_are_served_in_the_order_they_became_idle():
    w = World()
    w.d.submit(0)
    w.d.submit(1)
    h0, h1 = w.up(), w.up()
    w.d.submit(2)
    w.d.submit(3)
    w.done(h1)  # h1 idle first, then h0
    w.done(h0)
    assert w.started[-2:] == [(h1.id, 2), (h0.id, 3)]


def test_a_copy_duplicated_to_the_pool_where_the_task_runs_takes_another_host_and_the_first_result_wins():
    w = World()
    w.d.submit(0)
    h0, h1 = w.up(), w.up()
    assert w.told == [h1.id]
    assert w.d.duplicate(0, "a")
    w.d.settle()
    assert w.started == [(h0.id, 0), (h1.id, 0)] and w.d.queued() == 0
    assert w.done(h0) == [h1.id]  # the other copy is to stop
    assert w.d.pending() == 0 and not w.d.duplicate(0, "a")


def test_an_interrupted_copy_goes_back_to_the_head_unless_another_copy_runs_or_waits_there():
    w = World()
    for t in (0, 1, 2):
        w.d.submit(t)
    h0 = w.up()
    w.d.unassign(0, h0.id)
    assert w.d.requeue_head(0) and list(w.d.queue_any) == [0, 1, 2]
    assert not w.d.requeue_head(0)  # already waits there
    w.d.assign(1, h0.id)
    assert not w.d.requeue_head(1)  # a copy runs
    w.d.close(2)
    assert not w.d.requeue_head(2)  # done


def test_a_host_is_told_idle_once_per_idle_spell():
    w = World()
    h0 = w.up()
    w.d.settle()
    w.d.ready(h0)  # told again that it is idle, with nothing run in between
    w.d.settle()
    assert w.told == [h0.id]
    w.d.submit(0)
    w.d.settle()
    w.done(h0)
    assert w.told == [h0.id, h0.id]


def test_a_stopping_host_is_told_idle_at_once_when_nothing_waits_and_takes_work_once_stopped():
    w = World()
    w.d.submit(0)
    h0, h1 = w.up(), w.up()
    w.d.duplicate(0, "a")
    w.d.settle()
    w.d.unassign(0, h0.id)
    w.d.ready(h0)
    (other,) = w.d.close(0)
    w.d.stopping(w.hosts[other])
    w.d.settle()
    assert w.told[-2:] == [h0.id, h1.id] and h1.task is None
    w.d.submit(1)
    w.d.settle()
    assert w.started[-1] == (h0.id, 1)  # h1 is still stopping: it takes nothing
    w.d.submit(2)
    w.d.settle()
    assert w.started[-1] == (h0.id, 1)
    w.d.ready(h1)  # its call came back
    w.d.settle()
    assert w.started[-1] == (h1.id, 2)


def test_an_exclusive_pool_never_runs_two_copies_of_a_task():
    w = World()
    w.d.exclusive.add("a")
    w.d.submit(0)
    w.up()
    w.d.duplicate(0, "a")
    w.up()
    assert [t for _, t in w.started] == [0] and w.d.queued() == 0


def test_a_policy_acting_from_an_idle_notice_is_dispatched_before_settle_returns():
    w = World()

    def submit_once(h: Host) -> None:
        if not w.d.pending():
            w.d.submit(7)
            w.d.settle()  # what an environment's submit does: here it only marks the pass dirty
            assert w.started == []

    w.on_idle = submit_once
    h0 = w.up()
    assert w.started == [(h0.id, 7)]


def test_a_host_that_left_takes_nothing():
    w = World()
    h0 = w.up()
    w.d.leave(h0)
    h0.state = HostState.RELEASED
    w.d.submit(0)
    w.d.settle()
    assert w.started == [] and w.d.queued() == 1


def test_the_task_queue_knows_its_members_as_they_come_and_go():
    from skylease.control.dispatch import TaskQueue

    q = TaskQueue()
    for t in (1, 2, 1):
        q.append(t)
    q.appendleft(3)
    assert list(q) == [3, 1, 2, 1] and all(t in q for t in (1, 2, 3)) and 4 not in q
    assert q.popleft() == 3 and 3 not in q
    assert q.popleft() == 1 and 1 in q  # (its second entry waits still)
    q.extendleft([5, 6])
    assert list(q) == [6, 5, 2, 1] and 5 in q and 6 in q
    while q:
        q.popleft()
    assert not any(t in q for t in range(10))
