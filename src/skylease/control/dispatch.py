"""The dispatch core: which idle host runs which copy of which task, on any clock.

Both the simulated cloud (:mod:`skylease.sim.env`) and the real environment
(:mod:`skylease.runtime.env`) hold one :class:`Dispatch` and keep only what differs between them:
their clock, and how a host starts, runs a task and ends. The rules here are the semantics of
:mod:`skylease.control.env`, written once:

* Queues: one shared queue, and one per pool. A host takes its own pool's queue first, then the
  shared one, FIFO. Each queue entry is one copy of a task: ``duplicate`` adds a copy for a pool,
  also the pool where the task already runs (another host of it takes the copy; see
  docs/decisions/dispatch-core.md).
* Idle hosts are served in the order they became idle, pool by pool.
* A copy interrupted (host released or lost) goes back to the head of the shared queue, unless
  another copy runs or waits there: work is never dropped, and never doubled by a requeue.
* The first result of a task wins: :meth:`Dispatch.close` returns the hosts of its other copies,
  which the environment stops (at once in simulation; a real worker's call may take a moment to
  return, the host is then *stopping*).
* Idle after dispatch: once every idle host took what it may, each host that became idle and
  got nothing is told idle, once per idle spell. A stopping host with nothing it could take is told
  idle at once, as the simulated host (stopped at once) is.

The core holds no clock and does no I/O: the environment passes the hooks that start a task on a
host (``run``) and tell the policy a host is idle (``idle``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable

from skylease.model.host import Host, HostId, HostState


class TaskQueue(deque):
    """A FIFO of task ids (copies) whose membership test costs one dict lookup: it keeps how many
    entries each id has. An interrupted copy's check (:meth:`Dispatch.requeue_head`, "unless
    another copy waits there") scanned the whole queue, which at a million tasks was nearly all of a
    run's time. Only the methods the core uses keep the count."""

    def __init__(self) -> None:
        super().__init__()
        self._n: dict[int, int] = {}

    def _add(self, task: int) -> None:
        self._n[task] = self._n.get(task, 0) + 1

    def _drop(self, task: int) -> None:
        left = self._n[task] - 1
        if left:
            self._n[task] = left
        else:
            del self._n[task]

    def append(self, task: int) -> None:
        super().append(task)
        self._add(task)

    def appendleft(self, task: int) -> None:
        super().appendleft(task)
        self._add(task)

    def popleft(self) -> int:
        task = super().popleft()
        self._drop(task)
        return task

    def extendleft(self, tasks: Iterable[int]) -> None:
        tasks = list(tasks)
        super().extendleft(tasks)
        for t in tasks:
            self._add(t)

    def __contains__(self, task: object) -> bool:
        return task in self._n


class Dispatch:
    """Queues, copies and idle hosts of one experiment (see the module docstring).

    ``run(host, task)`` is called once the core gave ``task`` to ``host`` (the host is already
    marked busy with it); ``idle(host)`` tells the policy. ``fallback(pool)``, when given, is asked
    for a task when both queues a host of ``pool`` reads are empty (a task to copy, say); it must
    not change anything. ``avoid(task, host)``, when given, says a queued task should not go to that
    host now: it stays queued for another host (a real run's retry waiting for a machine the task
    has not failed on); the simulator gives none.
    """

    def __init__(
        self,
        pools: Iterable[str],
        run: Callable[[Host, int], None],
        idle: Callable[[Host], None],
        fallback: Callable[[str], int | None] | None = None,
        avoid: Callable[[int, HostId], bool] | None = None,
    ) -> None:
        self.queue_any = TaskQueue()
        self.queue_pool: dict[str, TaskQueue] = {p: TaskQueue() for p in pools}
        self.running: dict[int, list[HostId]] = {}  # hosts running a copy of each open task
        self.closed: set[int] = set()  # done or cancelled
        #: pools whose hosts never take a second copy of a task their pool runs (a tail policy's
        #: reliable pool serving copies of the whole bag)
        self.exclusive: set[str] = set()
        self._run, self._idle, self._fallback, self._avoid = run, idle, fallback, avoid
        self._pending = 0
        self._future = 0
        self._hosts: dict[HostId, Host] = {}
        self._free: dict[HostId, int] = {}  # idle hosts that may take a task -> their idle spell
        self._spell = 0
        self._idle_q: dict[str, deque[tuple[HostId, int]]] = {p: deque() for p in self.queue_pool}
        self._stopping: set[HostId] = set()
        self._told: set[HostId] = set()
        self._just_idle: list[HostId] = []
        self._settling = False
        self._dirty = False

    # -- tasks --------------------------------------------------------------------------------
    def submit(self, task: int, pool: str | None = None) -> None:
        """A new task, queued now (at the back)."""
        self._pending += 1
        (self.queue_any if pool is None else self.queue_pool[pool]).append(task)

    def expect(self, task: int) -> None:
        """A new task that arrives later (:meth:`arrive`): pending, not yet queued."""
        self._pending += 1
        self._future += 1

    def arrive(self, task: int, pool: str | None = None) -> None:
        """An expected task arrives: queued unless it was cancelled meanwhile."""
        self._future -= 1
        if task not in self.closed:
            (self.queue_any if pool is None else self.queue_pool[pool]).append(task)

    def duplicate(self, task: int, pool: str) -> bool:
        """One more copy of an open task for ``pool``; whether it was queued."""
        if task in self.closed:
            return False
        self.queue_pool[pool].append(task)
        return True

    def retry(self, task: int) -> None:
        """A failed attempt is tried again, at the back of the shared queue (unless a copy runs)."""
        if task not in self.closed and task not in self.running:
            self.queue_any.append(task)

    def requeue_head(self, task: int) -> bool:
        """An interrupted copy goes back to the head, unless another copy runs or waits there."""
        if task in self.closed or task in self.running or task in self.queue_any:
            return False
        self.queue_any.appendleft(task)
        return True

    def assign(self, task: int, host: HostId) -> None:
        """``host`` runs (or has queued behind its running call) a copy of ``task``."""
        self.running.setdefault(task, []).append(host)

    def unassign(self, task: int, host: HostId) -> None:
        """The copy of ``task`` on ``host`` no longer runs."""
        run = self.running.get(task)
        if run is not None and host in run:
            run.remove(host)
            if not run:
                del self.running[task]

    def close(self, task: int) -> list[HostId]:
        """The task is done or cancelled: the hosts still running its other copies (to stop)."""
        self.closed.add(task)
        self._pending -= 1
        return self.running.pop(task, [])

    def pending(self) -> int:
        """Tasks submitted and neither done nor cancelled."""
        return self._pending

    def queued(self) -> int:
        """Tasks waiting for a host (arrived, not running; extra copies not counted)."""
        return self._pending - self._future - len(self.running)

    def take(self, pool: str, host: HostId | None = None) -> int | None:
        """The next copy a host of ``pool`` (``host``, when known) runs (removed from its queue), or
        None. Copies ``avoid`` keeps from ``host`` stay where they are in the queue."""
        exclusive = pool in self.exclusive
        avoid = self._avoid if host is not None else None
        for q in (self.queue_pool[pool], self.queue_any):
            kept: list[int] = []
            try:
                while q:
                    tid = q.popleft()
                    if tid in self.closed:
                        continue
                    if exclusive and any(self._hosts[h].pool == pool for h in self.running.get(tid, ())):
                        continue  # its pool already runs it: the entry is spent
                    if avoid is not None and avoid(tid, host):  # type: ignore[arg-type]
                        kept.append(tid)
                        continue
                    return tid
            finally:
                q.extendleft(reversed(kept))
        return self._fallback(pool) if self._fallback is not None else None

    def _has_work(self, pool: str) -> bool:
        """Whether a host of ``pool`` would find a task now (nothing is taken)."""
        for q in (self.queue_pool[pool], self.queue_any):
            if any(t not in self.closed for t in q):
                return True
        return self._fallback is not None and self._fallback(pool) is not None

    # -- hosts --------------------------------------------------------------------------------
    def ready(self, h: Host) -> None:
        """``h`` is up, or done with its task, or its stopped copy ended: idle, it may take a task."""
        self._hosts[h.id] = h
        self._stopping.discard(h.id)
        h.state, h.task, h.task_started_at = HostState.IDLE, None, None
        self._spell += 1
        self._free[h.id] = self._spell
        self._idle_q[h.pool].append((h.id, self._spell))
        self._just_idle.append(h.id)

    def stopping(self, h: Host) -> None:
        """``h``'s copy lost and is being stopped: it runs no task, takes none until :meth:`ready`."""
        self._stopping.add(h.id)
        h.task, h.task_started_at = None, None
        self._just_idle.append(h.id)

    def leave(self, h: Host) -> None:
        """``h`` is released or down: it takes nothing (its task, if any, was dealt with)."""
        self._free.pop(h.id, None)
        self._stopping.discard(h.id)
        self._told.discard(h.id)

    def is_stopping(self, host: HostId) -> bool:
        return host in self._stopping

    def _start(self, h: Host, tid: int) -> None:
        del self._free[h.id]
        self._told.discard(h.id)
        h.state, h.task = HostState.BUSY, tid
        self.assign(tid, h.id)
        self._run(h, tid)

    def dispatch(self) -> None:
        """Give queued copies to idle hosts, pool by pool, hosts in the order they became idle."""
        for pool, idle in self._idle_q.items():
            passed: list[tuple[HostId, int]] = []  # idle hosts every queued copy avoids
            while idle:
                hid, spell = idle[0]
                if self._free.get(hid) != spell:
                    idle.popleft()  # stale: since busy, released or down
                    continue
                tid = self.take(pool, hid)
                if tid is None:
                    if self._avoid is not None and self._has_work(pool):
                        passed.append(idle.popleft())  # (the next idle host may take one)
                        continue
                    break
                idle.popleft()
                self._start(self._hosts[hid], tid)
            idle.extendleft(reversed(passed))

    def settle(self) -> None:
        """Dispatch, then tell the policy which hosts are left idle (re-entrant safe: a policy
        acting from ``idle`` gets its changes dispatched before this returns)."""
        if self._settling:
            self._dirty = True
            return
        self._settling = True
        try:
            while True:
                self._dirty = False
                self.dispatch()
                idle, self._just_idle = self._just_idle, []
                for hid in idle:
                    h = self._hosts[hid]
                    if hid in self._told:
                        continue
                    if hid in self._free or (hid in self._stopping and not self._has_work(h.pool)):
                        self._told.add(hid)
                        self._idle(h)
                if not self._dirty and not self._just_idle:
                    break
        finally:
            self._settling = False
