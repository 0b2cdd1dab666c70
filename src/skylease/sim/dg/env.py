"""Desktop-grid middleware simulators (XWHEP, BOINC) with SpeQuloS cloud workers (decisions S7,
S11-S14 in docs/decisions/spequlos.md).

:class:`DesktopGridEnv` runs one bag of tasks (a :class:`~skylease.sim.dg.workload.DGBot`) on the
volunteer nodes of an availability trace, read from the submission time on, and implements the
:class:`~skylease.control.env.TailEnvironment` protocol so a QoS policy can rent cloud workers
(CW, pool ``"cloud"``) and choose how they are fed (:meth:`serve_cloud`). ``DesktopGridEnv("xwhep",
...)`` builds an :class:`XWHEPEnv`, ``DesktopGridEnv("boinc", ...)`` a :class:`BOINCEnv`.
Internally the clock is the trace's (the kernel starts at the submission time ``t0``); everything
a policy sees (``now``, timers, histories, host times) is relative: time 0 is the submission.

Analytic worker model (what makes the event count grow with tasks, not with simulated time)
------------------------------------------------------------------------------------------
A worker that holds no work ("idle") issues work requests at ``a``, ``a+30``, ``a+90``,
``a+210``, ``a+450``, then every 300 s (back-off 30 -> 300 s, doubling), where the anchor ``a`` is
its last completion or its last ON moment (a worker that comes ON requests at once: a new streak).
The request times are a pure function of the anchor and the node's trace, so they are not
simulated: empty replies change nothing. When the server has work, the dispatcher finds the idle
worker whose next request comes first (vectorised over all nodes with numpy; a small candidate
heap is built with ``argpartition`` for the next ``~2 x queue`` requests) and schedules that one
request as an event. While the queue stays empty no request event exists.

* XWHEP: a job given to a node completes at ``start + nops/power`` if the node stays up until
  then. Otherwise the node loses it when its interval ends; keep-alives (at the ON moment, then
  every 60 s) stop then, and the server puts the job back to WAITING at
  ``min(next ON, last keep-alive + 900)`` (ON: the worker reports it lost its job; else the 900 s
  timeout). That is one event, computed at assignment time; the node's next request is its next
  ON. No keep-alive, OFF or ON event is simulated.
* BOINC: a client's buffer runs FIFO; a replica suspended by an outage resumes at the next ON
  moment, so its completion time is found by walking the node's intervals at start (one event per
  replica). Deadlines (send + 86400 s) sit in a FIFO with one pending event for the earliest.

ON moments are ``interval start + offset``, offset uniform in ``0..min(300, len-1)`` ([RC]), from
a hash of (seed, interval index): see :mod:`skylease.sim.dg.flat`.

Fairness (same seed, with and without a policy): DG randomness (node powers, ON offsets) comes from
its own ``SeedSequence`` child and never depends on event order; CW boot delays come from another
child. Policy timers take two kernel hops (they run after every model event due at the same time,
as in :class:`~skylease.sim.env.SimEnvironment`) and never touch model state, so the model's events
are identical up to the policy's first ``acquire``.

Cloud workers (S7): power 3000, boot N(150, 15) clamped to [75, 300] (and >= 1), no failures,
host ids ``n_nodes + k`` named ``spequloscw_<k>`` (:meth:`DesktopGridEnv.cw_name`). Released =
worker OFF: XWHEP requeues its job after the 900 s timeout (from its last keep-alive); BOINC keeps
its replicas IN_PROGRESS until their deadline. ``on_host_idle`` is called once per idle spell
(when a CW's request finds nothing and it holds nothing), not at every back-off retry.

Choices where the paper and the decisions are silent ([R], also in the module's report)
--------------------------------------------------------------------------------------
* Back-off: a worker that comes ON requests at once and its period restarts at 30 s; after an empty
  reply it waits 30, 60, 120, 240, then 300 s. Nodes up at the submission time come ON then (plus
  their offset), as [RC] clips intervals to the window.
* Ties: volatile nodes' work requests due at the same instant are served in node order (integer
  ON offsets and back-off steps make such ties common for nodes up at submission); any other
  same-time events run in the order they were scheduled.
* XWHEP: a job ending exactly when its node leaves completes. A duplicate result is ignored; the
  slower copy keeps running (neither the DG worker nor a CW is told to stop).
* BOINC: "one result per user per WU" is kept for the WU's life (a client whose replica was re-sent
  after the deadline never gets that WU again). A replica is one result: the first of its copies
  to return (the late original after a resend, the DG client or the CW under Reschedule) makes it
  DONE; later copies are ignored. Volunteer clients keep computing replicas of validated WUs (the
  server only stops sending them), so a client asks for work when its whole buffer is done. A cloud
  worker, which is paid for, skips buffered copies of WUs validated meanwhile.
* Reschedule (BOINC): a CW copies the first IN_PROGRESS replica of a WU that no live CW is
  already copying (and of which this CW holds none), so two CWs complete the two results a
  stuck WU still needs instead of both copying the same replica, whose results count once.
* BOINC cloud workers ask for up to ``cw_buffer`` replicas per request (default 3, as a client;
  decision D3 exposes it: with 1 a CW holds no queue behind a stuck copy).
* Cloud duplication: BOINC cloud copies are sent up to ``cw_buffer`` per request, FIFO; both
  middlewares copy the tasks arrived and not completed at the first ``acquire``.
* BOINC batch acceleration (``DGParams.accel``, off by default): BOINC's server rules and the
  simulator's readings are in :mod:`skylease.sim.dg.accel`. A WU then has room for up to
  ``accel.max_results`` results; a client that is not low-turnaround and finds only high-priority
  work stays blocked until a pass of the accelerator or new ordinary work frees it.
* ``queued()``: XWHEP WAITING jobs; BOINC WUs none of whose replicas is out (all UNSENT).
  ``hosts()`` / ``hosts("cloud")``: the cloud workers not released; ``hosts("dg")``: snapshots of
  every volatile node. ``on_host_down`` / ``on_task_lost`` are not called (outages are not events).
"""

from __future__ import annotations

import bisect
import math
import time as _time
from array import array
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from heapq import heapify, heappop, heappush
from itertools import chain
from typing import Any

import numpy as np
from sortedcontainers import SortedList

from skylease.control.env import CLOUD_USAGE, BotProgress, Policy
from skylease.model.availability import AvailabilityTrace
from skylease.model.host import Host, HostId, HostState
from skylease.model.instance import InstanceType
from skylease.model.task import Task
from skylease.sim.dg.accel import BatchAccel, TurnaroundStats
from skylease.sim.dg.copy_order import CopyOrder
from skylease.sim.dg.flat import FlatTrace, flatten, on_offset_scalar, on_offsets
from skylease.sim.dg.workload import DGBot, node_powers
from skylease.sim.env import PolicyTimer
from skylease.sim.kernel import CalendarKernel, StopSimulation, Timer

__all__ = ["BOINCEnv", "DGParams", "DGResult", "DesktopGridEnv", "XWHEPEnv"]

INF = math.inf
#: Default end of a run, seconds after submission (a BoT stuck after the trace ends, under a policy
#: that keeps ticking, would otherwise run forever); ``horizon=None`` runs until no event is left.
DEFAULT_HORIZON = 365 * 86400.0
CLOUD = "cloud"
DG_POOL = "dg"
_XW_FUTURE, _XW_WAITING, _XW_RUNNING, _XW_DONE = 0, 1, 2, 3
_UNSENT, _INPROG, _DONE = 0, 1, 2


@dataclass(frozen=True)
class DGParams:
    """Middleware and cloud-worker parameters (decision S11; [RC] defaults)."""

    keep_alive: float = 60.0
    worker_timeout: float = 900.0
    req_min: float = 30.0
    req_max: float = 300.0
    on_offset_max: float = 300.0
    target_nresult: int = 3
    min_quorum: int = 2
    delay_bound: float = 86400.0
    buffer: int = 3
    #: BOINC: replicas a cloud worker asks for per request ([RC]: the same 3 as a client; decision D3
    #: exposes it). XWHEP workers hold one job, whatever this says.
    cw_buffer: int = 3
    cw_power: float = 3000.0
    boot_mean: float = 150.0
    boot_std: float = 15.0
    boot_min: float = 75.0
    boot_max: float = 300.0
    ref_power: float = 1000.0  # Task.work = nops / ref_power (seconds on an average DG node)
    cw_credits_per_hour: float = 15.0
    #: BOINC only: the server's batch acceleration (:mod:`skylease.sim.dg.accel`); None: off
    accel: BatchAccel | None = None


@dataclass(frozen=True)
class DGResult:
    """What one run produced (times in seconds after submission)."""

    middleware: str
    how: str
    n_tasks: int
    completed: int
    completion_s: float  # time of the last completion (inf if the BoT did not complete)
    completion_times: np.ndarray = field(repr=False)
    assignment_times: np.ndarray = field(repr=False)
    events: int  # model events (policy timer hops excluded)
    policy_events: int
    end_s: float
    cw_count: int
    cw_usage_s: np.ndarray = field(repr=False)  # per CW: release (or end) - request
    cw_tasks: int  # tasks whose first completion came from a CW
    spent: float  # credits: CW usage x 15 / 3600 (fine grained)
    lost: int  # XWHEP jobs lost by a leaving node / BOINC replicas re-sent at deadline
    wall_s: float
    extra_results: int = 0  # BOINC batch acceleration: results created beyond target_nresult
    accel_at_s: float | None = None  # when the batch was first accelerated (None: never)
    cw_first_up_s: float = math.nan  # when the first cloud worker finished booting (NaN: none did)

    def summary(self) -> dict[str, Any]:
        return {
            "middleware": self.middleware,
            "how": self.how,
            "n_tasks": self.n_tasks,
            "completed": self.completed,
            "completion_s": self.completion_s,
            "events": self.events,
            "policy_events": self.policy_events,
            "cw_count": self.cw_count,
            "cw_cpu_s": float(self.cw_usage_s.sum()),
            "cw_tasks": self.cw_tasks,
            "spent": self.spent,
            "lost": self.lost,
            "wall_s": self.wall_s,
            "extra_results": self.extra_results,
            "accel_at_s": self.accel_at_s,
            "cw_first_up_s": self.cw_first_up_s,
        }


class DGNodeView:
    """A volatile node as a policy sees it (read-only snapshot; satisfies HostView)."""

    __slots__ = ("id", "state", "task", "task_started_at")

    pool = DG_POOL
    requested_at = 0.0
    up_at = 0.0

    def __init__(self, hid: int, state: HostState, task: int | None, started: float | None) -> None:
        self.id = hid
        self.state = state
        self.task = task
        self.task_started_at = started

    def charged_units(self, now: float) -> int:
        return 0

    def cost(self, now: float) -> float:
        return 0.0

    def charged_until(self, now: float) -> float:
        return now


def _doubles(x: np.ndarray | Sequence[float] = ()) -> array[float]:
    """Numbers per task or per node as an ``array`` of doubles, not a list: the garbage collector
    walks every item of a live list at each collection of its generation (a cold float object per
    item, 240,000 of them per list for 80,000 tasks), and never looks inside an array."""
    return array("d", np.ascontiguousarray(x, dtype=float).tobytes())


def _counts(n: int, value: int = 0) -> array[int]:
    """``n`` integers equal to ``value``, as an ``array`` (see :func:`_doubles`)."""
    return array("q", [value]) * n


def _backoff_table(req_min: float, req_max: float) -> tuple[list[float], float]:
    table = [0.0]
    wait = req_min
    while wait < req_max:
        table.append(table[-1] + wait)
        wait *= 2
    return table, req_max


class DesktopGridEnv:
    """One BoT on a desktop grid (XWHEP or BOINC) plus rentable cloud workers (module docstring).

        ``trace``: the volatile nodes (an AvailabilityTrace or its :class:`FlatTrace`); ``bot``: the
        tasks (:class:`DGBot`, or an array of nops all submitted at once); ``submit_at``: submission
        time as an offset from the trace start; ``seed``: an int (or SeedSequence) for every random
        choice; ``powers``: node powers in nops/s (default: drawn per Table 4 from the trace name, from
        the seed); ``horizon``: stop this many seconds after submission (default one year; None: when
    no event is left); ``record``: keep :attr:`log`.
    """

    middleware = "?"

    def __new__(cls, middleware: str = "xwhep", *args: Any, **kwargs: Any) -> DesktopGridEnv:
        if cls is DesktopGridEnv:
            key = middleware.lower()
            if key in ("xw", "xwhep"):
                cls = XWHEPEnv
            elif key == "boinc":
                cls = BOINCEnv
            else:
                raise ValueError(f"middleware must be 'boinc' or 'xwhep', got {middleware!r}")
        return super().__new__(cls)

    def __init__(
        self,
        middleware: str,
        trace: AvailabilityTrace | FlatTrace,
        bot: DGBot | np.ndarray | Sequence[float],
        *,
        submit_at: float = 0.0,
        seed: int | np.random.SeedSequence | None = 0,
        powers: np.ndarray | Sequence[float] | None = None,
        params: DGParams | None = None,
        horizon: float | None = DEFAULT_HORIZON,
        record: bool = False,
    ) -> None:
        #: with ``record=True``: one ``(host, task, start, end)`` per execution (absolute times;
        #: ``end`` is when the run completes or, XWHEP, when the node leaves and loses it).
        self.log: list[tuple[int, int, float, float]] | None = [] if record else None
        self.p = p = params if params is not None else DGParams()
        self.flat = flat = flatten(trace)
        if not isinstance(bot, DGBot):
            arr = np.asarray(bot, float)
            bot = DGBot("custom", arr, np.zeros(len(arr)))
        self.bot = bot
        n = self.n_nodes = flat.n_nodes
        self.t0 = t0 = flat.t_start + float(submit_at)
        self.horizon = horizon
        ss = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
        ss_nodes, ss_power, ss_cw = ss.spawn(3)
        self._hkey = int(ss_nodes.generate_state(1, np.uint64)[0])
        if powers is None:
            powers = node_powers(flat.name, n, np.random.default_rng(ss_power))
        pw = np.asarray(powers, float)
        if pw.shape != (n,) or (pw <= 0).any():
            raise ValueError(f"powers must be {n} positive numbers")
        self._pw = _doubles(pw)
        self._cw_rng = np.random.default_rng(ss_cw)
        # a calendar: on seti every busy client (up to 24,000) holds a pending completion
        self.kernel = CalendarKernel(start=t0)
        self.policy: Policy = Policy()
        self.how = "flat"
        self._bo_table, self._bo_step = _backoff_table(p.req_min, p.req_max)
        self._bo_arr = np.array(self._bo_table)
        self._bo_last = self._bo_table[-1]
        self._ends = flat.ends
        self._hi = flat.hi
        self._hi_l = array("q", flat.hi.astype(np.int64).tobytes())

        # tasks
        nt = self.n_tasks = len(bot)
        self._nops = _doubles(bot.nops)
        self._arrival = _doubles(bot.arrival)
        self._done = bytearray(nt)
        self._assigned = bytearray(nt)
        self._ctimes = _doubles()  # completion times, in order
        self._atimes = _doubles()  # first-assignment times, in order
        self._n_done = 0
        self._n_arrived = 0
        self._cw_tasks = 0
        self._lost = 0
        self._tasks: list[Task] | None = None

        # idle-node request model (over DG nodes)
        j0 = flat.first_after(np.arange(n, dtype=np.int64), t0)
        ok = j0 < flat.hi
        on = np.full(n, INF)
        if ok.any():
            on[ok] = on_offsets(flat, j0[ok], t0, self._hkey, p.on_offset_max)
        self._anc = on.copy()
        self._kiv = np.where(ok, j0, -1).astype(np.int64)
        self._nreq = on
        self._blocked = np.zeros(n, bool)
        self._blocked_list: list[int] = []
        self._cand: list[tuple[float, int]] = []
        self._thr = -INF
        self._active = False
        self._disp_timer: Timer | None = None

        # cloud workers
        self._itype = InstanceType(
            CLOUD,
            speed=p.cw_power / p.ref_power,
            price=p.cw_credits_per_hour / 3600.0,
            billing_unit=1.0,
            boot_time=p.boot_mean,
            min_units=0,
        )
        self._cws: list[Host] = []
        self._cw_epoch: list[int] = []
        self._cw_anchor: list[float] = []
        self._cw_idle: set[int] = set()
        self._cw_blocked: set[int] = set()
        self._cw_signaled: list[bool] = []
        self._cw_timer: Timer | None = None
        self._cw_timer_t = INF
        self._acquired = False

        self._finished = False
        self._running = False
        self._end_time: float | None = None
        self._policy_events = 0
        self._views: dict[int, DGNodeView] = {}
        self._cb_done = False
        self._cb_idle = False
        self._cb_up = False
        self._init_model()

    # ------------------------------------------------------------------------------------------
    # model hooks (subclasses)
    def _init_model(self) -> None:
        raise NotImplementedError

    def _has_work_dg(self) -> bool:
        raise NotImplementedError

    def _work_count(self) -> int:
        raise NotImplementedError

    def _serve_dg(self, i: int) -> bool:
        raise NotImplementedError

    def _arrive(self, j: int) -> None:
        raise NotImplementedError

    def _has_work_cw(self) -> bool:
        raise NotImplementedError

    def _serve_cw(self, c: int) -> bool:
        raise NotImplementedError

    def _cw_released(self, c: int) -> None:
        raise NotImplementedError

    def _start_duplication(self) -> None:
        raise NotImplementedError

    def _task_state(self, i: int) -> tuple[int | None, float | None]:
        return None, None

    # ------------------------------------------------------------------------------------------
    # Environment protocol
    @property
    def now(self) -> float:
        return self.kernel.now - self.t0

    def call_at(self, t: float, fn: Callable[..., Any], *args: Any) -> PolicyTimer:
        timer = PolicyTimer(fn, args)
        timer.first = self.kernel.call_at(max(t + self.t0, self.kernel.now), self._hop, timer)
        return timer

    def call_later(self, delay: float, fn: Callable[..., Any], *args: Any) -> PolicyTimer:
        return self.call_at(self.now + delay, fn, *args)

    def _hop(self, timer: PolicyTimer) -> None:
        self._policy_events += 1
        self.kernel.schedule(self.kernel.now, self._fire, timer)

    def _fire(self, timer: PolicyTimer) -> None:
        self._policy_events += 1
        if not self._finished and not timer.cancelled:
            timer.cancelled = True
            timer.fn(*timer.args)

    def pools(self) -> list[str]:
        return [CLOUD]

    def pool_type(self, pool: str) -> InstanceType:
        if pool != CLOUD:
            raise KeyError(f"no rentable pool {pool!r}; pools are ['cloud']")
        return self._itype

    def serve_cloud(self, how: str) -> None:
        if how not in CLOUD_USAGE:
            raise ValueError(f"how must be one of {CLOUD_USAGE}, got {how!r}")
        if self._acquired:
            raise RuntimeError("serve_cloud must be called before the first acquire")
        self.how = how

    def cw_name(self, host: HostId) -> str:
        return f"spequloscw_{host - self.n_nodes}"

    def acquire(self, pool: str, n: int = 1) -> list[HostId]:
        self.pool_type(pool)
        if n < 0:
            raise ValueError(f"cannot acquire {n} hosts")
        if self._finished or n == 0:
            return []
        if not self._acquired:
            self._acquired = True
            if self.how == "duplicate":
                self._start_duplication()
        p = self.p
        boots = np.maximum(
            np.clip(self._cw_rng.normal(p.boot_mean, p.boot_std, n), p.boot_min, p.boot_max), 1.0
        ).tolist()
        now = self.kernel.now
        ids = []
        for b in boots:
            c = len(self._cws)
            hid = self.n_nodes + c
            self._cws.append(Host(hid, CLOUD, self._itype, requested_at=now - self.t0))
            self._cw_epoch.append(0)
            self._cw_anchor.append(INF)
            self._cw_signaled.append(False)
            self.kernel.schedule(now + b, self._cw_up, c)
            ids.append(hid)
        return ids

    def release(self, host: HostId) -> None:
        c = host - self.n_nodes
        if not 0 <= c < len(self._cws):
            raise KeyError(f"host {host} is not a cloud worker")
        h = self._cws[c]
        if h.state is HostState.RELEASED:
            return
        busy = h.state is HostState.BUSY
        h.state = HostState.RELEASED
        h.released_at = self.now
        h.task = None
        self._cw_epoch[c] += 1
        self._cw_idle.discard(c)
        self._cw_blocked.discard(c)
        if busy and not self._finished:
            self._cw_released(c)

    def hosts(self, pool: str | None = None) -> list[Any]:
        if pool == DG_POOL:
            return [self.host(i) for i in range(self.n_nodes)]
        return [h for h in self._cws if h.state is not HostState.RELEASED]

    def host(self, host: HostId) -> Any:
        if host >= self.n_nodes:
            return self._cws[host - self.n_nodes]
        return self._view(host)

    def _view(self, i: int) -> DGNodeView:
        task, started = self._task_state(i)
        state = HostState.BUSY if task is not None else HostState.IDLE
        return DGNodeView(i, state, task, started)

    def submit(self, tasks: Iterable[Task], pool: str | None = None) -> None:
        raise NotImplementedError("the BoT is fixed at construction")

    def duplicate(self, task: int, pool: str) -> None:
        raise NotImplementedError("use serve_cloud('reschedule' | 'duplicate')")

    def cancel(self, task: int) -> None:
        raise NotImplementedError("tasks of a desktop-grid BoT cannot be withdrawn")

    def pending(self) -> int:
        return self.n_tasks - self._n_done

    def queued(self) -> int:
        """Tasks waiting for a worker: XWHEP WAITING jobs; BOINC WUs with no replica out."""
        raise NotImplementedError

    def spent(self) -> float:
        now = self.now
        return math.fsum(h.cost(now) for h in self._cws)

    def progress(self) -> BotProgress:
        return BotProgress(self._n_arrived, len(self._atimes), self._n_done)

    def completion_times(self) -> np.ndarray:
        return np.array(self._ctimes)

    def assignment_times(self) -> np.ndarray:
        return np.array(self._atimes)

    def finish(self) -> None:
        if self._finished:
            return
        self._finished = True
        self._end_time = self.kernel.now
        for h in self._cws:
            if h.state is not HostState.RELEASED:
                self.release(h.id)
        if self._running:
            raise StopSimulation

    # ------------------------------------------------------------------------------------------
    # running
    def run(self, policy: Policy | None = None) -> DGResult:
        """Run the BoT under ``policy`` (None: no QoS) and return the result."""
        wall = _time.perf_counter()
        pol = policy if policy is not None else Policy()
        self.policy = pol
        kind = type(pol)
        self._cb_done = kind.on_task_done is not Policy.on_task_done
        self._cb_idle = kind.on_host_idle is not Policy.on_host_idle
        self._cb_up = kind.on_host_up is not Policy.on_host_up
        # arrivals: at submission (no event) or one event per distinct later arrival time
        arr = self._arrival
        k = 0
        while k < self.n_tasks and arr[k] <= 0.0:
            k += 1
        self._n_arrived = k
        for j in range(k):
            self._arrive(j)
        groups: dict[float, list[int]] = {}
        for j in range(k, self.n_tasks):
            groups.setdefault(arr[j], []).append(j)
        for t, js in groups.items():
            self.kernel.schedule(self.t0 + t, self._arrive_group, js)
        if k:
            self._work_appeared()
        self._running = True
        try:
            if self.n_tasks == 0:
                self.finish()
            pol.on_start(self)
            until = None if self.horizon is None else self.t0 + self.horizon
            self.kernel.run(until=until)
        except StopSimulation:
            pass
        finally:
            self._running = False
        if not self._finished:
            self._running = False
            self.finish()
        return self._result(_time.perf_counter() - wall)

    def _result(self, wall: float) -> DGResult:
        end = self._end_time if self._end_time is not None else self.kernel.now
        complete = self._n_done == self.n_tasks
        usage = np.array(
            [
                ((h.released_at if h.released_at is not None else end - self.t0) - h.requested_at)
                for h in self._cws
            ]
        )
        return DGResult(
            middleware=self.middleware,
            how=self.how,
            n_tasks=self.n_tasks,
            completed=self._n_done,
            completion_s=(self._ctimes[-1] if self._ctimes else 0.0) if complete else INF,
            completion_times=np.array(self._ctimes),
            assignment_times=np.array(self._atimes),
            events=self.kernel.events - self._policy_events,
            policy_events=self._policy_events,
            end_s=end - self.t0,
            cw_count=len(self._cws),
            cw_usage_s=usage,
            cw_tasks=self._cw_tasks,
            spent=float(usage.sum()) * self.p.cw_credits_per_hour / 3600.0,
            lost=self._lost,
            wall_s=wall,
            cw_first_up_s=min((h.up_at for h in self._cws if h.up_at is not None), default=math.nan),
            **self._extra_result(),
        )

    def _extra_result(self) -> dict[str, Any]:
        return {}

    @property
    def events(self) -> int:
        return self.kernel.events - self._policy_events

    # ------------------------------------------------------------------------------------------
    # task bookkeeping
    def _arrive_group(self, js: list[int]) -> None:
        self._n_arrived += len(js)
        for j in js:
            self._arrive(j)
        self._work_appeared()

    def _first_assign(self, j: int) -> None:
        if not self._assigned[j]:
            self._assigned[j] = 1
            self._atimes.append(self.kernel.now - self.t0)

    def _task(self, j: int) -> Task:
        if self._tasks is None:
            ref = self.p.ref_power
            pairs = zip(self._nops, self._arrival, strict=True)
            self._tasks = [Task(i, w / ref, a) for i, (w, a) in enumerate(pairs)]
        return self._tasks[j]

    def _complete(self, j: int, host: int, runtime: float, start: float | None) -> None:
        self._done[j] = 1
        self._n_done += 1
        self._ctimes.append(self.kernel.now - self.t0)
        if host >= self.n_nodes:
            self._cw_tasks += 1
        if self._cb_done:
            if host >= self.n_nodes:
                hv: Any = self._cws[host - self.n_nodes]
            else:
                hv = DGNodeView(host, HostState.BUSY, j, None if start is None else start - self.t0)
            self.policy.on_task_done(self._task(j), hv, runtime)
        if self._n_done == self.n_tasks:
            self.finish()

    # ------------------------------------------------------------------------------------------
    # idle-worker request model
    def _bo_ge(self, d: float) -> float:
        """Smallest back-off offset >= d (d = t - anchor)."""
        if d <= 0.0:
            return 0.0
        last = self._bo_last
        if d <= last:
            tab = self._bo_table
            return tab[bisect.bisect_left(tab, d)]
        step = self._bo_step
        return last + step * math.ceil((d - last) / step)

    def _bo_gt(self, d: float) -> float:
        """Smallest back-off offset > d."""
        last = self._bo_last
        if d < last:
            tab = self._bo_table
            return tab[bisect.bisect_right(tab, d)]
        step = self._bo_step
        return last + step * (math.floor((d - last) / step) + 1)

    def _on1(self, j: int) -> float:
        return on_offset_scalar(self.flat, j, self.t0, self._hkey, self.p.on_offset_max)

    def _refresh(self, idx: np.ndarray, t: float) -> None:
        """Recompute the first request time >= t of idle nodes ``idx`` (vectorised)."""
        flat = self.flat
        a = self._anc[idx]
        k = self._kiv[idx]
        d = t - a
        off = self._bo_vec(d)
        r = a + off
        bad = r >= self._ends[k]
        if bad.any():
            bi = idx[bad]
            # no request left in interval k: the streak restarts at a later interval's ON
            j = np.maximum(flat.first_after(bi, t), k[bad] + 1)
            hi = self._hi[bi]
            ok = j < hi
            jj = np.where(ok, j, 0)
            on = on_offsets(flat, jj, self.t0, self._hkey, self.p.on_offset_max)
            r2 = on + self._bo_vec(t - on)
            over = r2 >= self._ends[jj]
            j3 = jj + 1
            ok3 = j3 < hi
            on3 = on_offsets(flat, np.where(ok3, j3, 0), self.t0, self._hkey, self.p.on_offset_max)
            rf = np.where(over, np.where(ok3, on3, INF), r2)
            rf[~ok] = INF
            self._anc[bi] = np.where(over, on3, on)
            self._kiv[bi] = np.where(over, j3, jj)
            r[bad] = rf
        self._nreq[idx] = r

    def _bo_vec(self, d: np.ndarray) -> np.ndarray:
        tab = self._bo_arr
        last = self._bo_last
        small = tab[np.minimum(np.searchsorted(tab, np.maximum(d, 0.0), side="left"), len(tab) - 1)]
        big = last + self._bo_step * np.ceil((d - last) / self._bo_step)
        return np.where(d <= last, small, big)

    def _after_empty(self, i: int) -> None:
        """Node ``i`` (up, interval kiv[i]) got an empty reply now: its next request."""
        now = self.kernel.now
        a = float(self._anc[i])
        k = int(self._kiv[i])
        r = a + self._bo_gt(now - a)
        if r < self._ends[k]:
            self._nreq[i] = r
            return
        k1 = k + 1
        if k1 < self._hi_l[i]:
            on = self._on1(k1)
            self._anc[i] = on
            self._kiv[i] = k1
            self._nreq[i] = on
        else:
            self._nreq[i] = INF

    def _set_future(self, i: int, k1: int) -> None:
        """Node ``i`` will next request when it comes ON in interval ``k1`` (or never)."""
        if k1 < self._hi_l[i]:
            on = self._on1(k1)
            self._anc[i] = on
            self._kiv[i] = k1
            self._nreq[i] = on
            if self._active and on <= self._thr:
                heappush(self._cand, (on, i))
                if self._disp_timer is None or on < self._disp_timer[0]:
                    self._schedule_dispatch()
        else:
            self._kiv[i] = -1
            self._nreq[i] = INF

    def _request_dg(self, i: int) -> None:
        """Node ``i`` asks for work now (it is up)."""
        self._nreq[i] = INF
        if self._serve_dg(i):
            self._after_take()
            return
        self._after_empty(i)
        if self._has_work_dg():  # BOINC: nothing this client may take
            self._blocked[i] = True
            self._blocked_list.append(i)

    def _after_take(self) -> None:
        if not self._has_work_dg():
            self._deactivate()

    def _deactivate(self) -> None:
        if self._disp_timer is not None:
            self._disp_timer.cancel()
            self._disp_timer = None
        self._cand = []
        self._thr = -INF
        self._active = False

    def _work_appeared(self, unblock: bool = False) -> None:
        if unblock and self._blocked_list:
            self._blocked[self._blocked_list] = False
            self._blocked_list = []
            if self._active:
                self._rebuild()
        if not self._active and self._has_work_dg():
            self._rebuild()
        if self._cw_idle:
            self._cw_blocked.clear()
            self._kick_cw()

    def _rebuild(self) -> None:
        now = self.kernel.now
        nreq = self._nreq
        stale = np.flatnonzero(nreq < now)
        if stale.size:
            self._refresh(stale, now)
        eff = np.where(self._blocked, INF, nreq) if self._blocked_list else nreq
        self._active = True
        n = len(eff)
        if n == 0:
            self._cand = []
            self._thr = -INF
            return
        need = self._work_count()
        k = max(64, 2 * need)
        if k >= n:
            idx = np.flatnonzero(eff < INF)
            thr = INF
        else:
            thr = float(np.partition(eff, k - 1)[k - 1])
            idx = np.flatnonzero(eff <= thr) if thr < INF else np.flatnonzero(eff < INF)
        times = eff[idx]
        order = np.lexsort((idx, times))
        self._cand = list(zip(times[order].tolist(), idx[order].tolist(), strict=True))
        self._thr = thr
        self._schedule_dispatch()

    def _schedule_dispatch(self) -> None:
        cand = self._cand
        nreq = self._nreq
        blocked = self._blocked
        while cand:
            t, i = cand[0]
            if nreq[i] != t or blocked[i]:
                heappop(cand)
                continue
            timer = self._disp_timer
            if timer is not None:
                if timer[0] == t and timer[2] is not None:
                    return
                timer.cancel()
            self._disp_timer = self.kernel.call_at(t, self._dispatch)
            return
        if self._disp_timer is not None:
            self._disp_timer.cancel()
            self._disp_timer = None
        if self._thr < INF and self._active:
            self._thr = INF  # candidates exhausted: rebuild from every node
            self._rebuild()

    def _dispatch(self) -> None:
        self._disp_timer = None
        if not self._active:
            return
        cand = self._cand
        nreq = self._nreq
        now = self.kernel.now
        while cand:
            t, i = cand[0]
            if nreq[i] != t or self._blocked[i]:
                heappop(cand)
                continue
            if t > now:
                break
            heappop(cand)
            self._request_dg(i)
            break
        if self._active:
            self._schedule_dispatch()

    # ------------------------------------------------------------------------------------------
    # cloud workers
    def _cw_up(self, c: int) -> None:
        h = self._cws[c]
        if h.state is HostState.RELEASED or self._finished:
            return
        h.state = HostState.IDLE
        h.up_at = self.now
        if self._cb_up:
            self.policy.on_host_up(h)
        if h.state is HostState.RELEASED or self._finished:
            return
        self._cw_anchor[c] = self.kernel.now
        self._cw_request(c)

    def _cw_request(self, c: int) -> None:
        h = self._cws[c]
        if self._serve_cw(c):
            self._cw_idle.discard(c)
            self._cw_blocked.discard(c)
            h.state = HostState.BUSY
            self._after_take()
            return
        if c not in self._cw_idle:
            self._cw_idle.add(c)
            self._cw_anchor[c] = self.kernel.now
            self._cw_signaled[c] = False
            h.state = HostState.IDLE
            h.task = None
            h.task_started_at = None
        if self._has_work_cw():
            self._cw_blocked.add(c)
        if not self._cw_signaled[c]:
            self._cw_signaled[c] = True
            if self._cb_idle:
                self.policy.on_host_idle(h)

    def _cw_idle_again(self, c: int) -> None:
        """CW ``c`` finished its work: it requests at once."""
        h = self._cws[c]
        h.task = None
        h.task_started_at = None
        self._cw_anchor[c] = self.kernel.now
        self._cw_request(c)

    def _kick_cw(self) -> None:
        """Schedule the first idle CW's next request if the CWs have work."""
        if not self._cw_idle or not self._has_work_cw():
            if self._cw_timer is not None:
                self._cw_timer.cancel()
                self._cw_timer = None
            return
        now = self.kernel.now
        best = (INF, -1)
        for c in self._cw_idle:
            if c in self._cw_blocked:
                continue
            a = self._cw_anchor[c]
            t = a + self._bo_ge(now - a)
            if (t, c) < best:
                best = (t, c)
        timer = self._cw_timer
        if timer is not None:
            if timer[0] == best[0] and timer[3] == (best[1],) and timer[2] is not None:
                return
            timer.cancel()
            self._cw_timer = None
        if best[1] >= 0:
            self._cw_timer = self.kernel.call_at(best[0], self._cw_dispatch, best[1])

    def _cw_dispatch(self, c: int) -> None:
        self._cw_timer = None
        if c in self._cw_idle and c not in self._cw_blocked:
            self._cw_request(c)
        self._kick_cw()


# ================================================================================================
class XWHEPEnv(DesktopGridEnv):
    """XtremWeb-HEP (decision S11): FCFS queue, no replication, work lost when a node leaves."""

    middleware = "xwhep"

    def _init_model(self) -> None:
        if self.p.accel is not None:
            raise ValueError("batch acceleration is a BOINC server feature; XWHEP has none")
        nt = self.n_tasks
        self._state = bytearray(nt)
        self._assignee = [-1] * nt
        self._aver = [0] * nt
        self._dup = bytearray(nt)
        self._waiting: list[int] = []
        self._n_waiting = 0
        self._resched: list[int] = []
        self._cloud: list[int] = []
        self._node_job: dict[int, tuple[int, float]] = {}
        self._cw_job: list[int] = []
        self._cw_start: list[float] = []

    def _task_state(self, i: int) -> tuple[int | None, float | None]:
        hit = self._node_job.get(i)
        return (None, None) if hit is None else (hit[0], hit[1] - self.t0)

    def _arrive(self, j: int) -> None:
        self._state[j] = _XW_WAITING
        heappush(self._waiting, j)
        self._n_waiting += 1

    def _has_work_dg(self) -> bool:
        return self._n_waiting > 0

    def queued(self) -> int:
        return self._n_waiting

    def _work_count(self) -> int:
        return self._n_waiting

    def _pop_waiting(self) -> int:
        w = self._waiting
        st = self._state
        while w:
            j = heappop(w)
            if st[j] == _XW_WAITING:
                self._n_waiting -= 1
                return j
        return -1

    def _assign(self, j: int, hid: int) -> None:
        self._state[j] = _XW_RUNNING
        self._assignee[j] = hid
        self._aver[j] += 1
        self._first_assign(j)

    def _serve_dg(self, i: int) -> bool:
        j = self._pop_waiting()
        if j < 0:
            return False
        self._assign(j, i)
        now = self.kernel.now
        k = int(self._kiv[i])
        e = float(self._ends[k])
        fin = now + self._nops[j] / self._pw[i]
        if self.how == "reschedule":
            heappush(self._resched, j)
        if self.log is not None:
            self.log.append((i, j, now, min(fin, e)))
        if fin <= e:
            self._node_job[i] = (j, now)
            self.kernel.schedule(fin, self._done_dg, i, j, now)
        else:
            # lost when the node leaves at e: requeued at min(next ON, last keep-alive + timeout)
            p = self.p
            on_k = self._on1(k)
            nka = math.ceil((e - on_k) / p.keep_alive) - 1
            last_ka = on_k + p.keep_alive * max(nka, 0)
            k1 = k + 1
            nxt = self._on1(k1) if k1 < self._hi_l[i] else INF
            self._lost += 1
            self.kernel.schedule(min(nxt, last_ka + p.worker_timeout), self._requeue, j, self._aver[j])
            self._set_future(i, k1)
        if self._cw_idle and self.how == "reschedule":
            self._cw_blocked.clear()
            self._kick_cw()
        return True

    def _done_dg(self, i: int, j: int, start: float) -> None:
        del self._node_job[i]
        if self._state[j] != _XW_DONE:
            self._state[j] = _XW_DONE
            self._complete(j, i, self.kernel.now - start, start)
        self._anc[i] = self.kernel.now
        self._request_dg(i)

    def _requeue(self, j: int, ver: int) -> None:
        if self._state[j] == _XW_RUNNING and self._aver[j] == ver:
            self._state[j] = _XW_WAITING
            self._assignee[j] = -1
            heappush(self._waiting, j)
            self._n_waiting += 1
            self._work_appeared()

    # -- cloud workers --------------------------------------------------------------------------
    def serve_cloud(self, how: str) -> None:
        super().serve_cloud(how)
        if how == "reschedule":
            st, asg, n = self._state, self._assignee, self.n_nodes
            self._resched = [j for j in range(self.n_tasks) if st[j] == _XW_RUNNING and 0 <= asg[j] < n]

    def _has_work_cw(self) -> bool:
        how = self.how
        if how == "duplicate":
            cl, st = self._cloud, self._state
            while cl and st[cl[0]] == _XW_DONE:
                heappop(cl)
            return bool(cl)
        if self._n_waiting > 0:
            return True
        if how == "reschedule":
            return self._peek_resched() >= 0
        return False

    def _peek_resched(self) -> int:
        rs, st, asg, dup, n = self._resched, self._state, self._assignee, self._dup, self.n_nodes
        while rs:
            j = rs[0]
            if st[j] == _XW_RUNNING and 0 <= asg[j] < n and not dup[j]:
                return j
            heappop(rs)
        return -1

    def _serve_cw(self, c: int) -> bool:
        hid = self.n_nodes + c
        how = self.how
        if how == "duplicate":
            if not self._has_work_cw():
                return False
            j = heappop(self._cloud)
            self._first_assign(j)
        else:
            j = self._pop_waiting()
            if j >= 0:
                self._assign(j, hid)
            elif how == "reschedule":
                j = self._peek_resched()
                if j < 0:
                    return False
                heappop(self._resched)
                self._dup[j] = 1
                self._assignee[j] = hid
                self._aver[j] += 1  # the regular worker's timeout no longer requeues it
            else:
                return False
        while len(self._cw_job) <= c:
            self._cw_job.append(-1)
            self._cw_start.append(0.0)
        now = self.kernel.now
        self._cw_job[c] = j
        self._cw_start[c] = now
        if self.log is not None:
            self.log.append((self.n_nodes + c, j, now, now + self._nops[j] / self.p.cw_power))
        h = self._cws[c]
        h.task = j
        h.task_started_at = now - self.t0
        self.kernel.schedule(now + self._nops[j] / self.p.cw_power, self._done_cw, c, j, self._cw_epoch[c])
        return True

    def _done_cw(self, c: int, j: int, epoch: int) -> None:
        if epoch != self._cw_epoch[c]:
            return
        self._cw_job[c] = -1
        if self._state[j] != _XW_DONE:
            self._state[j] = _XW_DONE
            start = self._cw_start[c]
            self._complete(j, self.n_nodes + c, self.kernel.now - start, start)
        if self._finished or self._cws[c].state is HostState.RELEASED:
            return
        self._cw_idle_again(c)

    def _cw_released(self, c: int) -> None:
        j = self._cw_job[c] if c < len(self._cw_job) else -1
        if j < 0 or self._state[j] == _XW_DONE:
            return
        self._cw_job[c] = -1
        p = self.p
        up = self._cws[c].up_at
        up_abs = (up if up is not None else self.now) + self.t0
        now = self.kernel.now
        last_ka = up_abs + p.keep_alive * math.floor((now - up_abs) / p.keep_alive)
        when = max(now, last_ka + p.worker_timeout)
        if self.how == "duplicate":
            self.kernel.schedule(when, self._cloud_requeue, j)
        elif self._assignee[j] == self.n_nodes + c:
            self.kernel.schedule(when, self._requeue, j, self._aver[j])

    def _cloud_requeue(self, j: int) -> None:
        if self._state[j] != _XW_DONE:
            heappush(self._cloud, j)
            self._work_appeared()

    def _start_duplication(self) -> None:
        st = self._state
        self._cloud = [j for j in range(self.n_tasks) if st[j] in (_XW_WAITING, _XW_RUNNING)]
        heapify(self._cloud)


# ================================================================================================
class BOINCEnv(DesktopGridEnv):
    """BOINC (decision S11): 3 replicas per WU, quorum 2, client buffers, suspend/resume, deadlines."""

    middleware = "boinc"

    def _init_model(self) -> None:
        nt = self.n_tasks
        R = self._R = self.p.target_nresult
        self._Q = self.p.min_quorum
        acc = self._acc = self.p.accel
        # slots per WU: the replicas, plus room for batch acceleration's extra results
        S = self._S = R if acc is None else max(R, acc.max_results)
        self._slot = bytearray(nt * S)
        self._sver = _counts(nt * S)  # per slot: how many times it was sent
        self._nres: array[int] | None = None
        if acc is not None:
            self._nres = _counts(nt, R)  # results each WU has (target_nresult + extra results)
            self._sent = _doubles(np.zeros(nt * S))  # when each result was last sent...
            self._sholder = _counts(nt * S, -1)  # ...and to whom (-1: unsent, or timed out)
            self._hp = bytearray(nt)  # WU priority: 1 = high (the batch is accelerated)
            self._n_hp = 0
            self._tstats = TurnaroundStats(self.n_nodes)
            self._n_extra = 0
            self._accel_at: float | None = None
        # "one result per user per WU": the client each slot was last sent to (-1: never), and the
        # hosts a WU went to that are no longer there (the client of a result re-sent after its
        # deadline, a cloud worker copying one under Reschedule); no object per WU (performance.md)
        self._sent_to = _counts(nt * S, -1)
        self._held_before: dict[int, tuple[int, ...]] = {}
        self._arrived = bytearray(nt)
        self._n_unsent = _counts(nt)
        self._n_okd = _counts(nt)
        self._valid = bytearray(nt)
        # WUs with an unsent result, in id order: a sorted list, since a WU leaves it (and may come
        # back) anywhere, and a plain list's del/insort cost O(WUs) each (quadratic over a run)
        self._unsent: SortedList = SortedList()
        self._od: CopyOrder | None = None  # under Reschedule: what cloud workers may copy
        # results sent, by deadline (a FIFO: every result gets the same delay bound): when, which
        # slot (w * S + r) and the slot's send count then; entries before _dl_head are past. Arrays
        # rather than a deque of tuples: the garbage collector tracks a tuple per result sent and
        # walks every item of a deque (240,000 at 80,000 tasks) at each collection.
        self._dl_at = _doubles()
        self._dl_slot = _counts(0)
        self._dl_ver = _counts(0)
        self._dl_head = 0
        self._dl_timer = False
        # Per client (host id: the DG nodes, then the cloud workers), lists indexed by host rather
        # than dicts of deques: on seti every one of 24,000 clients holds work at once, and a deque
        # per client (760 bytes) plus three dict entries put the run's working set out of the
        # CPU caches (docs/performance.md, "Scaling").
        n = self.n_nodes
        #: buffered replicas, the head LAST (``pop()`` takes the FIFO's head), None: empty. A replica
        #: is a number, not a (wu, slot) tuple: ``w * S + r`` for result r of WU w, ``~w`` for a
        #: cloud copy of WU w (duplication); :meth:`_wu` reads the WU back
        self._buf: list[list[int] | None] = [None] * n
        self._run_start = _doubles(np.zeros(n))  # when the head replica started (host views)
        # bound once: a new bound method per scheduled completion is one more object per event
        self._on_done_dg = self._done_dg
        self._cloud: list[int] = []
        self._cw_sent: dict[int, float] = {}
        self._cw_dup: set[int] = set()  # replica slots (w*S + r) a live CW is computing a copy of
        if acc is not None:
            self.kernel.schedule(self.t0 + acc.period, self._accel_pass)

    def _task_state(self, i: int) -> tuple[int | None, float | None]:
        buf = self._buf[i]
        if not buf:
            return None, None
        return self._wu(buf[-1]), self._run_start[i] - self.t0

    def _wu(self, x: int) -> int:
        """The WU of replica ``x`` (``w * S + r``, or ``~w`` for a cloud copy)."""
        return x // self._S if x >= 0 else ~x

    def _arrive(self, j: int) -> None:
        self._n_unsent[j] = self._R
        self._arrived[j] = 1
        self._unsent.add(j)
        if self._od is not None:
            self._od.append(j)

    def _has_work_dg(self) -> bool:
        return bool(self._unsent)

    def queued(self) -> int:
        R, nu, nres = self._R, self._n_unsent, self._nres
        if nres is None:
            return sum(1 for w in self._unsent if nu[w] == R)
        return sum(1 for w in self._unsent if nu[w] == nres[w])

    def _work_count(self) -> int:
        return len(self._unsent)

    def _fill(self, holder: int, want: int) -> list[int]:
        out: list[int] = []
        if want <= 0:
            return out
        unsent = self._unsent
        sent_to, before = self._sent_to, self._held_before
        slot = self._slot
        S = self._S
        now = self.kernel.now
        deadline = now + self.p.delay_bound
        emptied = []
        od = self._od
        sent = None
        if self._acc is not None:
            sent, sholder = self._sent, self._sholder
        for w in (unsent if sent is None else self._accel_order(holder)):
            base = w * S
            if holder in sent_to[base:base + S] or (before and holder in before.get(w, ())):
                continue
            r = 0
            while slot[base + r] != _UNSENT:
                r += 1
            slot[base + r] = _INPROG
            if od is not None:
                od.wake(w)
            if sent_to[base + r] >= 0:  # re-sent after its deadline: its first client stays barred
                before[w] = (*before.get(w, ()), sent_to[base + r])
            sent_to[base + r] = holder
            if sent is not None:
                sent[base + r] = now
                sholder[base + r] = holder
            v = self._sver[base + r] + 1
            self._sver[base + r] = v
            self._dl_at.append(deadline)
            self._dl_slot.append(base + r)
            self._dl_ver.append(v)
            self._n_unsent[w] -= 1
            if self._n_unsent[w] == 0:
                emptied.append(w)
            self._first_assign(w)
            out.append(base + r)
            if len(out) == want:
                break
        for w in emptied:
            unsent.remove(w)
        if out and not self._dl_timer:
            self._dl_timer = True
            self.kernel.schedule(self._dl_at[self._dl_head], self._deadline)
        return out

    def _serve_dg(self, i: int) -> bool:
        got = self._fill(i, self.p.buffer)
        if not got:
            return False
        got.reverse()
        self._buf[i] = got
        self._start_dg(i, int(self._kiv[i]))
        if self._cw_idle and self.how == "reschedule":
            self._cw_blocked.clear()
            self._kick_cw()
        return True

    def _start_dg(self, i: int, k: int, e: float | None = None) -> None:
        """Client ``i`` (up now, interval k, which ends at ``e`` if the caller knows it) starts its
        buffer's head replica."""
        now = self.kernel.now
        w = self._buf[i][-1] // self._S
        rem = self._nops[w] / self._pw[i]
        s = now
        ends = self._ends
        if e is None:
            e = ends[k]
        while s + rem > e:
            rem -= e - s
            k += 1
            if k >= self._hi_l[i]:
                self._run_start[i] = now
                return  # the trace ends first: never completes
            s = self._on1(k)
            e = ends[k]
        self._run_start[i] = now
        if self.log is not None:
            self.log.append((i, w, now, s + rem))
        # the completion carries its interval's end: the next replica starts in it, and a read of
        # the trace (one cold page per client) is the costliest memory access of an event
        self.kernel.schedule(s + rem, self._on_done_dg, i, k, now, e)

    def _done_dg(self, i: int, k: int, start: float, end: float) -> None:
        """Client ``i``'s head replica, started at ``start``, completes now, in interval ``k``
        (which ends at ``end``)."""
        buf = self._buf[i]
        self._got_result(buf.pop(), i, start)
        if self._finished:
            return
        if buf:
            self._start_dg(i, k, end)
            return
        self._buf[i] = None
        self._kiv[i] = k
        self._anc[i] = self.kernel.now
        self._request_dg(i)

    def _got_result(self, idx: int, host: int, start: float) -> None:
        """Replica ``idx`` (see ``_buf``), started at ``start``, came back from ``host``."""
        if idx < 0:  # a cloud copy (quorum 1)
            w = ~idx
            if not self._valid[w]:
                self._validate(w, host, start)
            return
        if self._acc is not None:
            self._turnaround(idx, host)
        w = idx // self._S
        if self._valid[w]:
            return
        st = self._slot[idx]
        if st == _DONE:
            return
        if st == _UNSENT:
            self._drop_unsent(w, 1)
        self._slot[idx] = _DONE
        self._n_okd[w] += 1
        if self._n_okd[w] >= self._Q:
            self._validate(w, host, start)

    def _drop_unsent(self, w: int, k: int) -> None:
        n = self._n_unsent[w]
        if n == 0:
            return
        self._n_unsent[w] = n - k
        if n - k == 0:
            u = self._unsent
            u.remove(w)
            if not u:
                self._after_take()

    def _validate(self, w: int, host: int, start: float) -> None:
        self._valid[w] = 1
        self._drop_unsent(w, self._n_unsent[w])
        if self._od is not None:
            self._od.remove(w)
        self._complete(w, host, self.kernel.now - start, start)

    def _deadline(self) -> None:
        dq, dslot, dver = self._dl_at, self._dl_slot, self._dl_ver
        now = self.kernel.now
        slot, sver, valid, S = self._slot, self._sver, self._valid, self._S
        appeared = False
        h, end = self._dl_head, len(dq)
        while h < end and dq[h] <= now:
            idx = dslot[h]
            v = dver[h]
            h += 1
            w = idx // S
            if self._acc is not None and slot[idx] == _INPROG and sver[idx] == v:
                self._timed_out(idx)
            if not valid[w] and slot[idx] == _INPROG and sver[idx] == v:
                slot[idx] = _UNSENT
                if self._n_unsent[w] == 0:
                    self._unsent.add(w)
                self._n_unsent[w] += 1
                self._lost += 1
                appeared = True
        self._dl_head = h
        if h < end:
            self.kernel.schedule(dq[h], self._deadline)
        else:
            self._dl_timer = False
        if appeared:
            self._work_appeared(unblock=True)

    def _arrive_group(self, js: list[int]) -> None:
        self._n_arrived += len(js)
        for j in js:
            self._arrive(j)
        self._work_appeared(unblock=True)

    # -- batch acceleration (skylease.sim.dg.accel) ----------------------------------------------
    def _accel_order(self, holder: int) -> Iterable[int]:
        """The WUs the scheduler may send ``holder``: high priority only to a low-turnaround host,
        and to it first (sched_score.cpp); then the others in id order (the feeder, #6687)."""
        unsent = self._unsent
        if not self._n_hp:
            return unsent
        hp = self._hp
        low = (w for w in unsent if not hp[w])
        if self._tstats.is_ltt(holder):
            return chain((w for w in unsent if hp[w]), low)
        return low

    def _turnaround(self, idx: int, host: int) -> None:
        """A result came back: its turnaround counts for its host (not a late one, see accel)."""
        now = self.kernel.now
        if host >= self.n_nodes:
            tt = now - self._cw_sent.get(host - self.n_nodes, now)
        elif self._sholder[idx] == host:
            tt = now - self._sent[idx]
        else:
            return
        self._tstats.success(host, tt)

    def _timed_out(self, idx: int) -> None:
        h = self._sholder[idx]
        if h >= 0:
            self._tstats.timeout(h)
            self._sholder[idx] = -1

    def _accel_pass(self) -> None:
        """One run of batch_stats.php + batch_accel.php."""
        if self._finished:
            return
        acc = self._acc
        assert acc is not None and self._nres is not None
        now = self.kernel.now
        if now < self.flat.t_end or self.hosts():  # else nothing can change any more
            self.kernel.schedule(now + acc.period, self._accel_pass)
        arrived, done = self._n_arrived, self._n_done
        due = arrived > 0 and (done / arrived > acc.min_frac_done or arrived - done < acc.max_not_done)
        if not due and not self._n_hp:
            return
        expire, accelerable, changed = self._tstats.classify(acc)
        if due and not accelerable and self._n_hp:  # "batch is not accelerable; resetting"
            self._hp = bytearray(self.n_tasks)
            self._n_hp = 0
            changed = True
        elif due and accelerable:
            if self._accel_at is None:
                self._accel_at = now - self.t0
            changed |= self._accelerate(arrived, now - expire)
        if changed:
            self._work_appeared(unblock=True)

    def _accelerate(self, arrived: int, recent: float) -> bool:
        """batch_accel.php's do_batch: every unfinished WU high priority; one more result for a WU
        with no unsent result and no result sent after ``recent``. True if anything changed."""
        hp, nres, nu, slot, sent, S = self._hp, self._nres, self._n_unsent, self._slot, self._sent, self._S
        assert nres is not None
        changed = False
        todo = np.flatnonzero(np.frombuffer(self._valid, np.uint8, count=arrived) == 0).tolist()
        for w in todo:
            if not hp[w]:
                hp[w] = 1
                self._n_hp += 1
                changed = True
            n = nres[w]
            if n >= S or nu[w]:
                continue
            base = w * S
            if any(slot[base + r] == _INPROG and sent[base + r] > recent for r in range(n)):
                continue
            nres[w] = n + 1  # slot base + n is UNSENT: it was never used
            nu[w] = 1
            self._unsent.add(w)
            self._n_extra += 1
            changed = True
        return changed

    def _work_appeared(self, unblock: bool = False) -> None:
        if unblock and self._acc is not None and self._n_hp and self._blocked_list:
            hp = self._hp
            if all(hp[w] for w in self._unsent):
                # only high-priority work: the clients that are not low-turnaround stay blocked
                is_ltt = self._tstats.is_ltt
                bl = self._blocked_list
                free = [i for i in bl if is_ltt(i)]
                if free:
                    self._blocked[free] = False
                    self._blocked_list = [i for i in bl if not is_ltt(i)]
                    if self._active:
                        self._rebuild()
                unblock = False
        super()._work_appeared(unblock)

    def _extra_result(self) -> dict[str, Any]:
        if self._acc is None:
            return {}
        return {"extra_results": self._n_extra, "accel_at_s": self._accel_at}

    # -- cloud workers --------------------------------------------------------------------------
    def serve_cloud(self, how: str) -> None:
        super().serve_cloud(how)
        if how == "reschedule" and self._od is None:
            self._od = CopyOrder(
                w for w in range(self.n_tasks) if self._arrived[w] and not self._valid[w]
            )

    def _has_work_cw(self) -> bool:
        how = self.how
        if how == "duplicate":
            cl, valid = self._cloud, self._valid
            while cl and valid[cl[0]]:
                heappop(cl)
            return bool(cl)
        if self._unsent:
            return True
        return how == "reschedule" and bool(self._od)

    def _serve_cw(self, c: int) -> bool:
        hid = self.n_nodes + c
        want = self.p.cw_buffer
        how = self.how
        if how == "duplicate":
            got = []
            cl, valid = self._cloud, self._valid
            while cl and len(got) < want:
                w = heappop(cl)
                if not valid[w]:
                    got.append(~w)
                    self._first_assign(w)
        else:
            got = self._fill(hid, want)
            if how == "reschedule" and len(got) < want and self._od:
                got += self._resched_fill(hid, want - len(got))
        if not got:
            return False
        if hid >= len(self._buf):  # a new cloud worker
            grow = hid + 1 - len(self._buf)
            self._buf += [None] * grow
            self._run_start += _doubles(np.zeros(grow))
        got.reverse()
        self._buf[hid] = got
        self._cw_sent[c] = self.kernel.now
        self._start_cw(c)
        return True

    def _resched_fill(self, hid: int, want: int) -> list[int]:
        od = self._od
        assert od is not None
        out: list[int] = []
        idle: list[int] = []
        sent_to, before = self._sent_to, self._held_before
        slot, S, R, nres = self._slot, self._S, self._R, self._nres
        for w in od:
            base = w * S
            if hid in sent_to[base:base + S] or hid in before.get(w, ()):
                continue
            dup = self._cw_dup
            for r in range(R if nres is None else nres[w]):
                if slot[base + r] == _INPROG and base + r not in dup:
                    break
            else:
                idle.append(w)  # nothing to copy, for any worker: parked until it has
                continue
            dup.add(base + r)
            before[w] = (*before.get(w, ()), hid)
            out.append(base + r)
            if len(out) == want:
                break
        for w in idle:
            od.park(w)
        for x in out:
            od.to_back(x // S)
        return out

    def _start_cw(self, c: int) -> None:
        hid = self.n_nodes + c
        now = self.kernel.now
        w = self._wu(self._buf[hid][-1])
        self._run_start[hid] = now
        h = self._cws[c]
        h.task = w
        h.task_started_at = now - self.t0
        fin = now + self._nops[w] / self.p.cw_power
        if self.log is not None:
            self.log.append((hid, w, now, fin))
        self.kernel.schedule(fin, self._done_cw, c, self._cw_epoch[c])

    def _done_cw(self, c: int, epoch: int) -> None:
        if epoch != self._cw_epoch[c]:
            return
        hid = self.n_nodes + c
        buf = self._buf[hid]
        x = buf.pop()
        self._drop_cw_copy(x)
        self._got_result(x, hid, self._run_start[hid])
        if self._finished or self._cws[c].state is HostState.RELEASED:
            return
        while buf and self._valid[self._wu(buf[-1])]:  # [R] a CW skips copies of WUs validated meanwhile
            self._drop_cw_copy(buf.pop())
        if buf:
            self._start_cw(c)
            return
        self._buf[hid] = None
        self._cw_idle_again(c)

    def _cw_released(self, c: int) -> None:
        # worker OFF: its DG replicas stay IN_PROGRESS until their deadline; its cloud copies
        # (quorum 1 on the cloud server) are queued again when theirs passes
        hid = self.n_nodes + c
        buf = self._buf[hid] if hid < len(self._buf) else None
        if buf:
            self._buf[hid] = None
            when = self._cw_sent.get(c, self.kernel.now) + self.p.delay_bound
            for x in reversed(buf):  # FIFO order
                self._drop_cw_copy(x)
                if x < 0:
                    self.kernel.schedule(when, self._cloud_requeue, ~x)

    def _drop_cw_copy(self, x: int) -> None:
        if x >= 0:
            self._cw_dup.discard(x)
            if self._od is not None:
                self._od.wake(x // self._S)

    def _cloud_requeue(self, w: int) -> None:
        if not self._valid[w]:
            heappush(self._cloud, w)
            self._work_appeared()

    def _start_duplication(self) -> None:
        valid = self._valid
        self._cloud = [w for w in range(self.n_tasks) if self._arrived[w] and not valid[w]]
        heapify(self._cloud)
