"""The real Environment: the same policies rent, use and release real workers.

:class:`WorkerEnvironment` implements :class:`~skylease.control.env.Environment` (and the tail
environment of the QoS policy) on real worker processes, with the semantics the simulator keeps
(:mod:`skylease.control.env`): hosts are charged from the rent request, boot, come up; tasks are
dispatched by skylease itself, FIFO, one per idle host (one worker = one slot), so that a policy
sees the same sequence of decisions as in simulation; the first copy of a task to finish wins. Those
rules are the dispatch core both clocks share (:mod:`skylease.control.dispatch`); this module keeps
the wall clock and the workers, which a pool provides through
:class:`~skylease.runtime.backend.WorkerBackend`.

The driver is one thread: Dask calls back (from its own thread) into a queue, and the loop here
takes completions from it, fires the policy's timers and watches the workers. Time is wall-clock
seconds since the start of the run segment.

Decisions of ours (the issue is silent):

* A host released within :data:`RELEASE_GRACE_S` after a billing-unit boundary is billed as if
  released at the boundary: the policy asked for a release at the boundary and the driver's
  reaction time (milliseconds) must not buy a new unit. The lateness is measured
  (``max_release_lag_s``).
* A worker that dies on its own (not killed by ``--volatility``) is started again under the same
  host: the rent goes on, its task is requeued at the head of the queue.
* A task that exits non-zero is retried (at the back of the queue) up to ``retries`` times, then
  recorded as failed. It counts as finished for the policy (``on_task_done``), never as lost. The
  failure classes (:mod:`skylease.runtime.retries`): a retry goes to a machine the task has not
  failed on while one is live, after its backoff; a machine that fails task after task is set
  aside (its workers start again elsewhere); a lost host spends no retry.
* Tiny tasks are batched: once 4 tasks have finished, if their mean runtime is under
  :data:`BATCH_TARGET_S`, an idle worker gets a batch of queued tasks lasting about that long
  (at most :data:`BATCH_MAX`; as the queue drains, a worker's share of it, guided
  self-scheduling, but never under :data:`BATCH_FLOOR_S` of work, so the end stays balanced
  without a round trip per task). A worker running a batch has the next one queued behind it, so it
  never waits for the driver between batches. Tasks of a quarter second or more go one by one, as
  in the simulator. Results of a batch are recorded when the batch returns.
* A losing copy of a task is stopped: its worker's child processes are killed (shell tasks); a
  Python callable cannot be interrupted, so its host stays busy until the call returns.
"""

from __future__ import annotations

import heapq
import itertools
import math
import queue
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import CancelledError
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy is imported where arrays are made: a real run of commands never needs it
    import numpy as np

from skylease.control.dispatch import Dispatch
from skylease.control.env import CLOUD_USAGE, BotProgress, Policy
from skylease.model.host import Host, HostId, HostState
from skylease.model.instance import InstanceType
from skylease.model.task import Task
from skylease.runtime.backend import WorkerBackend, WorkerCall
from skylease.runtime.batch import batch_payload, run_batch
from skylease.runtime.execute import run_task
from skylease.runtime.files import TaskFiles
from skylease.runtime.retries import RetryRules
from skylease.runtime.store import ResultStore

RELEASE_GRACE_S = 0.5
POLL_S = 0.1
#: Seconds between checks that a worker still lives while its result is fetched.
FETCH_STEP_S = 1.0
#: While a host boots, its worker is looked for this often (a fork-served worker is up in ~20 ms).
BOOT_POLL_S = 0.01
#: Tasks shorter than this (mean measured runtime) are sent in batches lasting about this long.
BATCH_TARGET_S = 0.25
BATCH_MAX = 512
#: The least work (seconds, at the mean runtime) a batch carries while the queue drains.
BATCH_FLOOR_S = 0.05
#: A pool whose scheduler stays out of reach this long ends the run (its tasks wait for --resume).
POOL_LOST_S = 30.0
#: A host billed by its job's clock (Slurm) is charged, while it runs, from this long before the
#: second its job started: the scheduler counts whole seconds, and a release the policy times for a
#: unit boundary must reach it (scancel) before its own boundary. Once the job has ended, its charge
#: is recomputed from the scheduler's start and end.
JOB_CLOCK_LEAD_S = 0.5


class _WorkerGone(Exception):
    """The worker holding a finished call's result died before the result was fetched."""


class RealTimer:
    """A policy timer of the real clock."""

    __slots__ = ("args", "background", "cancelled", "due", "fn")

    def __init__(self, due: float, fn: Callable[..., Any], args: tuple, background: bool = False) -> None:
        self.due, self.fn, self.args = due, fn, args
        self.cancelled = False
        self.background = background  # does not keep a stalled run alive (volatility's clock)

    def cancel(self) -> None:
        self.cancelled = True


@dataclass
class RealResult:
    """What one run segment did."""

    outcome: str  # "done", "stalled", "interrupted" or "lost pool NAME"
    elapsed_s: float
    cost: float
    done: int
    failed: int
    unfinished: tuple[int, ...]
    hosts: int
    peak_hosts: int
    lost: int
    retried: int
    duplicates_won: int
    max_release_lag_s: float
    host_table: tuple[Host, ...]
    #: machines set aside (they failed task after task), and why; and those their pool kept
    set_aside: dict[str, str] | None = None
    kept: dict[str, str] | None = None


class WorkerEnvironment:
    """An Environment on real workers: local processes, a Dask cluster or Slurm jobs (see the
    module docstring). It was called ``DaskEnvironment``, though the local pool imports no Dask."""

    def __init__(
        self,
        pools: Mapping[str, WorkerBackend],
        tasks: Sequence[Mapping[str, Any]],
        store: ResultStore,
        policy: Policy,
        *,
        retries: int = 0,
        task_timeout_s: float | None = None,
        on_progress: Callable[[WorkerEnvironment], None] | None = None,
        progress_every_s: float = 0.5,
        rules: RetryRules | None = None,
        files: TaskFiles | None = None,
    ) -> None:
        if not pools:
            raise ValueError("at least one pool is needed")
        self.backends = dict(pools)
        self._types: dict[str, InstanceType] = {name: b.itype for name, b in self.backends.items()}
        self.store, self.policy = store, policy
        self.retries, self.task_timeout_s = int(retries), task_timeout_s
        self.files = files  # --transfer/--return: specs get their files when sent (runtime/files.py)
        self.on_progress, self.progress_every_s = on_progress, progress_every_s
        self._specs = {int(t["id"]): dict(t) for t in tasks}
        self._tasks = {tid: Task(tid, 0.0) for tid in self._specs}
        self._t0 = time.monotonic()
        self._wall0 = time.time()  # Unix time of the run clock's 0 (job schedulers speak Unix time)
        self._job_start: dict[HostId, float] = {}  # hosts billed by their job's clock: its start
        self._clock = 0.0
        self._timers: list[tuple[float, int, RealTimer]] = []
        self._seq = itertools.count()
        self._inbox: queue.SimpleQueue = queue.SimpleQueue()
        self._hosts: list[Host] = []
        self._live: dict[HostId, Host] = {}
        self._addr: dict[HostId, str] = {}
        self._future: dict[HostId, WorkerCall] = {}
        self._batch: dict[HostId, list[int]] = {}
        # a batch of tiny tasks queued on a busy worker behind its running one (future, tasks)
        self._ahead: dict[HostId, tuple[WorkerCall, list[int]]] = {}
        self._rt_sum, self._rt_n = 0.0, 0
        self._epoch: list[int] = []
        self._draining: set[HostId] = set()
        self._down_by_trace: set[HostId] = set()
        self.rules = RetryRules() if rules is None else rules
        self._machine: dict[HostId, str | None] = {}  # the machine of each host up (its worker's)
        self.dispatch = Dispatch(self.backends, self._run_on, lambda h: self.policy.on_host_idle(h),
                                 fallback=self._reschedule, avoid=self._avoid)
        self._closed = self.dispatch.closed
        self._attempts: dict[int, int] = {}
        self._assigned: set[int] = set()
        self._completion_t: list[float] = []
        self._assign_t: list[float] = []
        self._released_costs: list[float] = []
        self._done = self._failed = self._lost = self._retried = self._dup_won = 0
        self._peak = 0
        self._lag = 0.0
        self._usage = "flat"
        self._tail_pool: str | None = None
        self._finished = False
        self._outcome = "done"

    # -- clock ------------------------------------------------------------------------------
    @property
    def now(self) -> float:
        return self._clock

    def _tick_clock(self) -> float:
        self._clock = max(self._clock, time.monotonic() - self._t0)
        return self._clock

    def call_at(self, t: float, fn: Callable[..., Any], *args: Any) -> RealTimer:
        timer = RealTimer(float(t), fn, args)
        heapq.heappush(self._timers, (timer.due, next(self._seq), timer))
        return timer

    def call_later(self, delay: float, fn: Callable[..., Any], *args: Any) -> RealTimer:
        return self.call_at(self.now + delay, fn, *args)

    def call_background(self, t: float, fn: Callable[..., Any], *args: Any) -> RealTimer:
        """A timer of the environment's own machinery (volatility): it cannot rent hosts."""
        timer = RealTimer(float(t), fn, args, background=True)
        heapq.heappush(self._timers, (timer.due, next(self._seq), timer))
        return timer

    # -- hosts ------------------------------------------------------------------------------
    def pools(self) -> list[str]:
        return list(self.backends)

    def pool_type(self, pool: str) -> InstanceType:
        return self._types[pool]

    def acquire(self, pool: str, n: int = 1) -> list[HostId]:
        itype = self._types[pool]
        if self._finished or n <= 0:
            return []
        live_in_pool = sum(1 for h in self._live.values() if h.pool == pool)
        if itype.max_count is not None:
            n = min(n, itype.max_count - live_in_pool)
        ids = []
        now = self.now
        for _ in range(max(n, 0)):
            hid = len(self._hosts)
            host = Host(hid, pool, itype, requested_at=now)
            self._hosts.append(host)
            self._epoch.append(0)
            self._live[hid] = host
            self.backends[pool].start(self._name(hid))
            self.store.record_host(hid, pool, now)
            self.store.record_event(now, "acquire", host=hid)
            ids.append(hid)
        self._peak = max(self._peak, len(self._live))
        return ids

    def _name(self, hid: HostId) -> str:
        return f"{self._hosts[hid].pool}-{hid}"

    def release(self, host: HostId) -> None:
        h = self._live.get(host)
        if h is None:
            return
        self._stop_work(h, "released")
        self._epoch[host] += 1
        now = self.now
        unit = h.itype.billing.unit
        boundary = h.requested_at + math.floor((now - h.requested_at) / unit) * unit
        released_at = boundary if 0 < now - boundary <= RELEASE_GRACE_S and boundary > h.requested_at else now
        self._lag = max(self._lag, now - released_at)
        h.state, h.released_at, h.task = HostState.RELEASED, released_at, None
        self.dispatch.leave(h)
        del self._live[host]
        backend = self.backends[h.pool]
        backend.stop(self._name(host), self._addr.pop(host, None))
        ended = backend.ended_at(self._name(host))
        start = self._job_start.pop(host, None)
        if ended is not None and start is not None:  # billed as its job ran, by the job's clock
            h.requested_at = start
            h.released_at = released_at = max(start, ended - self._wall0)
        self._released_costs.append(h.cost(released_at))
        self.store.record_host(host, h.pool, h.requested_at, h.up_at, released_at, h.cost(released_at))
        self.store.record_event(released_at, "release", host=host, value=h.cost(released_at))
        self._settle()

    def hosts(self, pool: str | None = None) -> list[Host]:
        return [h for h in self._live.values() if pool is None or h.pool == pool]

    def host(self, host: HostId) -> Host:
        return self._hosts[host]

    # -- volatility: a host vanishes and comes back (its rent goes on) -------------------------
    def host_down(self, host: HostId) -> None:
        """Kill the host's worker now (a volatile node leaves); see :meth:`host_back`."""
        h = self._live.get(host)
        if h is None or h.state is HostState.DOWN:
            return
        self._down_by_trace.add(host)
        self.backends[h.pool].kill(self._name(host))
        self._lose(h)
        self._settle()  # its task, requeued at the head, goes to an idle host at once

    def host_back(self, host: HostId) -> None:
        """Start the host's worker again; it comes up when it reconnects."""
        h = self._live.get(host)
        self._down_by_trace.discard(host)
        if h is None or h.state is not HostState.DOWN:
            return
        h.state = HostState.BOOTING
        self.backends[h.pool].start(self._name(host))

    def _stop_work(self, h: Host, why: str) -> None:
        """The host stops: its task (if any) is requeued; a losing copy it still runs is dropped."""
        if h.state is HostState.BUSY and h.task is not None:
            self._interrupt(h, why)
        if h.id in self._draining:
            self._draining.discard(h.id)
            fut = self._future.pop(h.id, None)
            if fut is not None:
                fut.cancel()

    def _lose(self, h: Host) -> None:
        self._stop_work(h, "lost")
        self._epoch[h.id] += 1
        self._future.pop(h.id, None)
        self._addr.pop(h.id, None)
        self.dispatch.leave(h)
        h.state = HostState.DOWN
        self.store.record_event(self.now, "down", host=h.id)
        self.policy.on_host_down(h)

    # -- tasks ------------------------------------------------------------------------------
    def submit(self, tasks: Iterable[Task], pool: str | None = None) -> None:
        if pool is not None:
            self._pool(pool)
        for t in tasks:
            if t.id not in self._specs:
                raise ValueError(f"task {t.id} is not in the job")
            self._tasks[t.id] = t
            self.dispatch.submit(t.id, pool)
        self._settle()

    def duplicate(self, task: int, pool: str) -> None:
        self._pool(pool)
        if task in self._tasks and self.dispatch.duplicate(task, pool):
            self._settle()

    def _pool(self, pool: str) -> InstanceType:
        try:
            return self._types[pool]
        except KeyError:
            raise KeyError(f"no pool {pool!r}; pools are {list(self._types)}") from None

    def cancel(self, task: int) -> None:
        if task in self._closed or task not in self._tasks:
            return
        self._close(task)
        self._settle()

    def queued(self) -> int:
        return self.dispatch.queued()

    def pending(self) -> int:
        return self.dispatch.pending()

    def spent(self) -> float:
        now = self.now
        return math.fsum([*self._released_costs, *(h.cost(now) for h in self._live.values())])

    def finish(self) -> None:
        if self._finished:
            return
        self._finished = True
        for hid in list(self._live):
            self.release(hid)

    # -- the tail environment (QoS policy) ------------------------------------------------------
    def progress(self) -> BotProgress:
        return BotProgress(len(self._tasks), len(self._assigned), self._done + self._failed)

    def completion_times(self) -> np.ndarray:
        import numpy as np

        return np.asarray(self._completion_t, float)

    def assignment_times(self) -> np.ndarray:
        import numpy as np

        return np.asarray(self._assign_t, float)

    def serve_cloud(self, how: str) -> None:
        if how not in CLOUD_USAGE:
            raise ValueError(f"cloud usage must be one of {CLOUD_USAGE}, got {how!r}")
        self._usage = how
        if how != "flat" and self._tail_pool is not None:
            # the reliable pool serves copies of the bag: never two of one task at once
            self.dispatch.exclusive.add(self._tail_pool)
        if how == "duplicate" and self._tail_pool is not None:
            for tid in self._tasks:
                self.dispatch.duplicate(tid, self._tail_pool)

    def set_tail_pool(self, pool: str) -> None:
        """The reliable pool the QoS policy rents (``reschedule``/``duplicate`` serve it)."""
        self._tail_pool = pool

    # -- the loop -----------------------------------------------------------------------------
    def run(self, tasks: Iterable[Task]) -> RealResult:
        """Submit ``tasks`` (in that order), start the policy and run until nothing is pending.

        Ctrl-C (KeyboardInterrupt), even while the policy starts, releases every host and sets the
        outcome ``interrupted`` before it goes on up: :meth:`result` then describes the stop.
        """
        last_progress = last_beat = -math.inf
        try:
            self.submit(tasks)
            self.policy.on_start(self)
            self._settle()
            while not self._finished:
                if self.dispatch.pending() == 0:
                    self.finish()
                    break
                now = self._tick_clock()
                due = self._timers[0][0] if self._timers else math.inf
                booting = any(h.state is HostState.BOOTING for h in self._live.values())
                wait = min(max(due - now, 0.0), BOOT_POLL_S if booting else POLL_S)
                try:
                    item = self._inbox.get(timeout=wait) if wait > 0 else self._inbox.get_nowait()
                except queue.Empty:
                    item = None
                while item is not None:
                    self._tick_clock()
                    self._on_result(*item)
                    try:
                        item = self._inbox.get_nowait()
                    except queue.Empty:
                        item = None
                self._fire_timers()
                self._watch_workers()
                now = self.now
                if now - last_progress >= self.progress_every_s and self.on_progress is not None:
                    self.on_progress(self)
                    last_progress = now
                if now - last_beat >= 1.0:
                    self.store.heartbeat(self.spent())
                    last_beat = now
                lost = self._lost_pool()
                if lost is not None:
                    self._outcome = f"lost pool {lost}"
                    self.finish()
                elif self._stalled():
                    self._outcome = "stalled"
                    self.finish()
        except KeyboardInterrupt:
            self._outcome = "interrupted"
            self.finish()
            raise
        finally:
            if not self._finished:
                self.finish()
        return self.result()

    def _lost_pool(self) -> str | None:
        """A pool whose scheduler has been out of reach for POOL_LOST_S."""
        for name, backend in self.backends.items():
            if backend.unreachable_for() >= POOL_LOST_S:
                return name
        return None

    def _stalled(self) -> bool:
        """Tasks pending, no host alive, no timer that could rent one: nothing can progress."""
        return self.dispatch.pending() > 0 and not self._live and not any(
            not t.cancelled and not t.background for _, _, t in self._timers)

    def _fire_timers(self) -> None:
        while self._timers and self._timers[0][0] <= time.monotonic() - self._t0 and not self._finished:
            due, _, timer = heapq.heappop(self._timers)
            if timer.cancelled:
                continue
            timer.cancelled = True
            self._clock = max(self._clock, due)
            timer.fn(*timer.args)
            self._settle()

    def _watch_workers(self) -> None:
        """Hosts that came up, and hosts whose worker died on its own."""
        if not self._live:
            return
        by_pool: dict[str, dict[str, str]] = {}
        for h in list(self._live.values()):
            backend = self.backends[h.pool]
            name = self._name(h.id)
            if h.state is HostState.BOOTING:
                if h.id not in self._down_by_trace and backend.gone(name):
                    backend.start(name)  # its worker died before it came up: start it again
                    continue
                if h.pool not in by_pool:
                    by_pool[h.pool] = backend.workers()
                addr = by_pool[h.pool].get(name)
                if addr is None and backend.claimed:
                    addr = self._claim(h, by_pool[h.pool])
                if addr is not None:
                    self._host_up(h, addr)
            elif h.state in (HostState.IDLE, HostState.BUSY) and not backend.alive(name):
                self._lose(h)
                if h.id not in self._down_by_trace:  # died on its own: start it again
                    h.state = HostState.BOOTING
                    backend.start(name)

    def _claim(self, h: Host, workers: dict[str, str]) -> str | None:
        """A worker of an external cluster not yet bound to a host."""
        taken = set(self._addr.values())
        for _name, addr in sorted(workers.items()):
            if addr not in taken:
                return addr
        return None

    def _host_up(self, h: Host, addr: str) -> None:
        now = self.now
        self._addr[h.id] = addr
        self.backends[h.pool].bind(self._name(h.id), addr)
        self._machine[h.id] = self.backends[h.pool].machine(self._name(h.id))
        first = h.up_at is None
        self.dispatch.ready(h)
        if first:
            h.up_at = now
            backend = self.backends[h.pool]
            started = backend.started_at(self._name(h.id))
            if started is not None:  # a job that waited in a queue is billed from its start
                self._job_start[h.id] = started - self._wall0
                h.requested_at = min(now, started - self._wall0) - JOB_CLOCK_LEAD_S
            self.store.record_host(h.id, h.pool, h.requested_at, now)
        self.store.record_event(now, "up", host=h.id)
        self.policy.on_host_up(h)
        self._settle()

    # -- dispatch -------------------------------------------------------------------------------
    def _settle(self) -> None:
        """Dispatch and tell idle hosts (the dispatch core); nothing once the run is finished."""
        if not self._finished:
            self.dispatch.settle()

    def _run_on(self, h: Host, tid: int) -> None:
        """The dispatch core gave ``tid`` to ``h``: send it, with tiny tasks batched behind it."""
        self._start(h, [tid, *self._take(h, self._batch_size() - 1)])

    def _take(self, h: Host, n: int) -> list[int]:
        """Up to ``n`` more queued tasks for ``h`` (each is then a copy it runs)."""
        tids: list[int] = []
        for _ in range(n):
            nxt = self.dispatch.take(h.pool, h.id)
            if nxt is None:
                break
            self.dispatch.assign(nxt, h.id)
            tids.append(nxt)
        return tids

    def _reschedule(self, pool: str) -> int | None:
        """With nothing queued, a host of the tail pool serving ``reschedule`` takes a copy of the
        task running longest on another pool (the likely straggler)."""
        if self._usage != "reschedule" or pool != self._tail_pool:
            return None
        best, best_t = None, math.inf
        for tid, hids in self.dispatch.running.items():
            if any(self._hosts[x].pool == pool for x in hids):
                continue
            t = min(self._hosts[x].task_started_at or math.inf for x in hids)
            if t < best_t:
                best, best_t = tid, t
        return best

    def _batch_size(self) -> int:
        if self._rt_n < 4:
            return 1
        mean = self._rt_sum / self._rt_n
        if mean >= BATCH_TARGET_S:
            return 1
        mean = max(mean, 1e-4)
        workers = max(1, sum(1 for h in self._live.values() if h.state in (HostState.IDLE, HostState.BUSY)))
        # guided self-scheduling: a worker's share of the queue, so the workers end together, but
        # never under BATCH_FLOOR_S of work (below that the round trip costs more than the imbalance)
        share = max(math.ceil(len(self.dispatch.queue_any) / workers), int(BATCH_FLOOR_S / mean))
        return max(1, min(BATCH_MAX, int(BATCH_TARGET_S / mean), share))

    def _start(self, h: Host, tids: list[int]) -> None:
        h.state, h.task, h.task_started_at = HostState.BUSY, tids[0], self.now
        self._batch[h.id] = tids
        self._future[h.id] = self._send(h, tids)
        if len(tids) > 1:
            self._prefetch(h)

    def _prefetch(self, h: Host) -> None:
        """Queue the next batch of tiny tasks on the worker behind its running one, so that it
        never waits for the driver's round trip (submit, fetch, record) between batches."""
        tids = self._take(h, self._batch_size())
        if tids:
            self._ahead[h.id] = (self._send(h, tids), tids)

    def _send(self, h: Host, tids: list[int]) -> WorkerCall:
        """Submit ``tids`` to the host's worker (one call, or one batch call); returns the future."""
        now = self.now
        for tid in tids:
            if tid not in self._assigned:
                self._assigned.add(tid)
                self._assign_t.append(now)
        attempts = [self._attempts.get(tid, 0) + 1 for tid in tids]
        epoch = self._epoch[h.id]
        backend, addr = self.backends[h.pool], self._addr[h.id]
        specs = [self._specs[t] if self.files is None else self.files.spec(self._specs[t]) for t in tids]
        if len(tids) == 1:
            fut = backend.submit(addr, run_task, specs[0], attempts[0], self.task_timeout_s)
        else:
            fut = backend.submit(addr, run_batch, batch_payload(specs, attempts), self.task_timeout_s)
        fut.add_done_callback(lambda f, hid=h.id, e=epoch: self._inbox.put((hid, e, f)))
        return fut

    def _on_result(self, hid: HostId, epoch: int, fut: WorkerCall) -> None:
        h = self._hosts[hid]
        if hid in self._draining and self._future.get(hid) is fut:
            self._draining.discard(hid)
            self._future.pop(hid, None)
            self._batch.pop(hid, None)
            if h.state is HostState.BUSY:
                self.dispatch.ready(h)  # its losing copy has stopped
            self._settle()
            return
        if epoch != self._epoch[hid] or self._finished or h.state is not HostState.BUSY:
            return
        if self._future.get(hid) is not fut:
            ahead = self._ahead.get(hid)
            if ahead is not None and ahead[0] is fut:
                self._inbox.put((hid, epoch, fut))  # ran after the running batch: wait for that one
            return
        tids = self._batch.pop(hid)
        started = h.task_started_at or 0.0
        now = self.now
        self._future.pop(hid, None)
        for tid in tids:
            self.dispatch.unassign(tid, hid)
        ahead = self._ahead.pop(hid, None)
        if ahead is not None and fut.status == "finished":
            # the worker already runs the batch queued behind this one: it becomes the running
            # batch, and the next one is queued behind it before we fetch and record results
            h.task, h.task_started_at = ahead[1][0], now
            self._future[hid], self._batch[hid] = ahead
            self._prefetch(h)
        else:
            self.dispatch.ready(h)
            if ahead is not None:
                self._drop_ahead(hid, ahead)
        try:
            res = self._fetch(h, fut)
            outs = res if len(tids) > 1 else [res]
        except Exception as e:
            # tasks' own errors come back as results (run_task catches them): a call cancelled by
            # Dask (its scheduler connection was lost) or a result lost in transit is lost work
            if isinstance(e, _WorkerGone | CancelledError | OSError) or hid in self._down_by_trace \
                    or not self.backends[h.pool].alive(self._name(hid)):
                self._lost_tasks(h, tids, "lost")  # the watcher handles the host itself
                return
            outs = [{"exit_code": -1, "stderr_tail": f"{type(e).__name__}: {e}"[-2048:],
                     "runtime_s": (now - started) / len(tids)} for _ in tids]
        t = started
        with self.store.batch():
            for tid, out in zip(tids, outs, strict=True):
                rt = float(out.get("runtime_s") or 0.0)
                end = min(now, t + rt) if len(tids) > 1 else now
                self._finish_one(h, tid, out, t, end)
                t = end
        self._settle()

    def _fetch(self, h: Host, fut: WorkerCall) -> Any:
        """The result of a finished call, fetched from its worker.

        A worker that dies after finishing but before we fetch takes the result with it, and Dask
        would wait forever for a rerun on that (only allowed) worker: so we wait in steps and give
        up as soon as the worker is gone.
        """
        backend, name, addr = self.backends[h.pool], self._name(h.id), self._addr.get(h.id)
        while True:
            try:
                return fut.result(timeout=FETCH_STEP_S)
            except TimeoutError:
                if not backend.alive(name) or h.id in self._down_by_trace or addr is None \
                        or addr not in backend.workers().values():
                    raise _WorkerGone(name) from None

    def _finish_one(self, h: Host, tid: int, out: dict[str, Any], started: float, ended: float) -> None:
        """One task's outcome: its result (or a retry), and the policy told."""
        if tid in self._closed:
            return
        rt = float(out.get("runtime_s") or ended - started)
        self._rt_sum += rt
        self._rt_n += 1
        attempt = self._attempts.get(tid, 0) + 1
        machine = self._machine.get(h.id)
        if out.get("exit_code") == 0:
            self.rules.succeeded(machine)
        elif self.rules.failed(tid, machine):
            self._set_aside(h, machine)  # type: ignore[arg-type]
        if out.get("exit_code") == 0 or attempt > self.retries:
            if self.files is not None:  # the final result's returned files: written, then recorded
                out = self.files.returned(tid, out, self.store)
            status = "ok" if out.get("exit_code") == 0 else "failed"
            self.store.record_result(tid, status, out, attempt=attempt, host=h.id, pool=h.pool,
                                     worker=self._addr.get(h.id), started_s=started, ended_s=ended)
            if self.dispatch.running.get(tid):
                self._dup_won += 1  # another copy was still running: this one won the race
            self._close(tid)
            if status == "ok":
                self._done += 1
            else:
                self._failed += 1
            self._completion_t.append(ended)
            self.store.record_event(ended, status, host=h.id, task=tid, value=rt)
            self.policy.on_task_done(self._tasks[tid], h, rt)
        else:
            self._attempts[tid] = attempt
            self._retried += 1
            self.store.record_attempt(tid, attempt, "failed", ended, exit_code=out.get("exit_code"),
                                      host=h.id, stderr_tail=out.get("stderr_tail"),
                                      machine=machine or out.get("host"))
            delay = self.rules.delay(attempt)
            if delay > 0:  # (a timer, not a background one: the run waits for it, not stalled)
                self.call_later(delay, self._retry, tid)
            else:
                self.dispatch.retry(tid)

    def _retry(self, tid: int) -> None:
        """A failed task's backoff is over: it is queued again (at the back)."""
        self.dispatch.retry(tid)

    def _avoid(self, tid: int, hid: HostId) -> bool:
        """The dispatch core's ``avoid``: a retry waits for a live machine it has not failed on."""
        if tid not in self.rules.failed_on:
            return False
        machines = set()
        for x, h in self._live.items():  # (a booting host's machine too: its worker is on its way)
            m = self._machine.get(x) if h.state is not HostState.BOOTING else \
                self.backends[h.pool].machine(self._name(x))
            if m is not None and h.state is not HostState.DOWN:
                machines.add(m)
        return self.rules.avoid(tid, self._machine.get(hid), machines)

    def _set_aside(self, h: Host, machine: str) -> None:
        """``machine`` failed task after task: its pool starts no more workers there, and its hosts'
        workers start again elsewhere (their tasks requeued, no retry spent); or the pool keeps it
        (it has no other machine, or does not choose where its workers run)."""
        backend = self.backends[h.pool]
        if not backend.set_aside(machine):
            self.rules.kept[machine] = self.rules.why(machine)
            return
        self.rules.aside[machine] = self.rules.why(machine)
        self.store.record_event(self.now, "set-aside", host=h.id)
        there = [x for x in self._live.values() if x.pool == h.pool and self._machine.get(x.id) == machine]
        for other in there:
            name = self._name(other.id)
            backend.kill(name)  # (its machine stays known until it is up elsewhere: what it ran is said)
            if other.state in (HostState.IDLE, HostState.BUSY):
                self._lose(other)
            other.state = HostState.BOOTING
            backend.start(name)  # (on another machine: the pool set this one aside)

    def _close(self, tid: int) -> None:
        """The task is finished: stop its other copies (first result wins)."""
        for other in self.dispatch.close(tid):
            oh = self._hosts[other]
            self.store.record_attempt(tid, self._attempts.get(tid, 0) + 1, "cancelled", self.now,
                                      host=other)
            fut = self._future.get(other)
            if fut is not None and self._batch.get(other) == [tid]:
                self._draining.add(other)  # busy until its call returns; its result is ignored
                self.dispatch.stopping(oh)
                addr = self._addr.get(other)
                if addr is not None:
                    self.backends[oh.pool].stop_task(addr, fut)
                fut.cancel()
            # a copy in a batch of tiny tasks runs on (its result is ignored): the batch goes on

    def _drop_ahead(self, hid: HostId, ahead: tuple[WorkerCall, list[int]]) -> None:
        """A queued batch that will not run: its tasks go back to the head of the queue (they never
        started, so no attempt is counted)."""
        fut, tids = ahead
        fut.cancel()
        for tid in reversed(tids):
            self.dispatch.unassign(tid, hid)
            self.dispatch.requeue_head(tid)

    def _interrupt(self, h: Host, why: str) -> None:
        """The host stops mid-work: every task of its batch goes back to the head of the queue."""
        self._epoch[h.id] += 1
        ahead = self._ahead.pop(h.id, None)
        if ahead is not None:
            self._drop_ahead(h.id, ahead)
        fut = self._future.pop(h.id, None)
        if fut is not None:
            fut.cancel()
        tids = self._batch.pop(h.id, [h.task] if h.task is not None else [])
        h.state, h.task, h.task_started_at = HostState.IDLE, None, None
        for tid in tids:
            self.dispatch.unassign(tid, h.id)
        self._lost_tasks(h, tids, why)

    def _lost_tasks(self, h: Host, tids: list[int], why: str) -> None:
        """Tasks a host was running when it stopped: recorded, back to the head of the queue."""
        for tid in reversed(tids):
            if tid in self._closed:
                continue
            self._lost += 1
            self.store.record_attempt(tid, self._attempts.get(tid, 0) + 1, why, self.now, host=h.id,
                                      machine=self._machine.get(h.id))
            self.dispatch.requeue_head(tid)
            if not self._finished:
                self.policy.on_task_lost(self._tasks[tid], h)

    # -- results --------------------------------------------------------------------------------
    def result(self) -> RealResult:
        now = self.now
        hosts = tuple(self._hosts)
        cost = math.fsum(h.cost(h.released_at if h.released_at is not None else now) for h in hosts)
        return RealResult(
            outcome=self._outcome, elapsed_s=now, cost=cost, done=self._done, failed=self._failed,
            unfinished=tuple(t for t in self._tasks if t not in self._closed), hosts=len(hosts),
            peak_hosts=self._peak, lost=self._lost, retried=self._retried, duplicates_won=self._dup_won,
            max_release_lag_s=self._lag, host_table=hosts, set_aside=dict(self.rules.aside),
            kept=dict(self.rules.kept),
        )

