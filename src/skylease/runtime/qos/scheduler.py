"""The SpeQuloS Scheduler as a service (decision S29): one SpeQuloS policy per served bag of tasks.

Each bag a run registers with credits gets the very policy a simulation uses
(:class:`skylease.control.qos.SpeQuloS`: the Oracle's WHEN and HOW MANY rules, billing per tick,
stopping CWs when credits run out or the bag completes), on a :class:`RemoteBot`: a
TailEnvironment whose state is what the run reported (:class:`~skylease.control.qos.relay.Report`)
and whose actions (serve, acquire, release) become the :class:`~skylease.control.qos.relay.Instructions`
of the answer. Time is the bag's own: seconds since the run started it, as the run reports them;
the policy's timers fire when a report reaches their time (the answer says when the next one is
due, so a run that reports on time is served exactly as in a simulation).

The bank is any object with the interface of :class:`skylease.control.qos.credits.CreditSystem`:
the database ledger in the service, an in-memory one in a test.
"""

from __future__ import annotations

import heapq
import itertools
import math
import threading
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from skylease.control.env import BotProgress, Handle
from skylease.control.qos.policy import SpeQuloS
from skylease.control.qos.prediction import AlphaModel
from skylease.control.qos.relay import Instructions, Report
from skylease.model.errors import UserError
from skylease.model.host import HostId, HostState
from skylease.model.instance import InstanceType
from skylease.model.task import Task

__all__ = ["QoSScheduler", "RemoteBot"]

#: The most CWs one bag may have had, started or asked for (the answer lists them).
MAX_CWS = 100_000


class _Timer:
    __slots__ = ("cancelled",)

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


@dataclass(slots=True)
class _CW:
    """A cloud worker as the service knows it: what the run last said of it."""

    id: HostId
    pool: str
    requested_at: float
    state: HostState = HostState.BOOTING
    up_at: float | None = None
    task: int | None = None
    task_started_at: float | None = None

    def charged_units(self, now: float) -> int:  # credits, not money, pay for CWs (the bank)
        return 0

    def cost(self, now: float) -> float:
        return 0.0

    def charged_until(self, now: float) -> float:
        return now


class RemoteBot:
    """A bag of tasks running elsewhere, as a TailEnvironment fed by the run's reports."""

    def __init__(self, pool: str, n_tasks: int) -> None:
        self.pool, self.n_tasks = pool, n_tasks
        self._now = 0.0
        self._heap: list[tuple[float, int, _Timer, Callable[..., Any], tuple[Any, ...]]] = []
        self._seq = itertools.count()
        self._ids = itertools.count(1)
        self._cws: dict[HostId, _CW] = {}
        self._orphans: set[HostId] = set()
        self._progress = BotProgress(0, 0, 0)
        self._ctimes: list[float] = []
        self._atimes: list[float] = []
        self.serve: str | None = None
        self._serve_sent = False
        self._start: list[HostId] = []
        self._stop: list[HostId] = []
        self.finished = False

    # -- the Environment the policy sees -------------------------------------------------------
    @property
    def now(self) -> float:
        return self._now

    def call_at(self, t: float, fn: Callable[..., Any], *args: Any) -> Handle:
        timer = _Timer()
        heapq.heappush(self._heap, (max(t, self._now), next(self._seq), timer, fn, args))
        return timer

    def call_later(self, delay: float, fn: Callable[..., Any], *args: Any) -> Handle:
        return self.call_at(self._now + delay, fn, *args)

    def pools(self) -> Sequence[str]:
        return [self.pool]

    def pool_type(self, pool: str) -> InstanceType:
        return InstanceType(pool)

    def acquire(self, pool: str, n: int = 1) -> list[HostId]:
        n = max(0, min(n, MAX_CWS - len(self._cws)))
        ids = [next(self._ids) for _ in range(n)]
        for hid in ids:
            self._cws[hid] = _CW(hid, pool, self._now)
        self._start.extend(ids)
        return ids

    def release(self, host: HostId) -> None:
        cw = self._cws[host]
        if cw.state is not HostState.RELEASED:
            cw.state = HostState.RELEASED
            self._stop.append(host)

    def hosts(self, pool: str | None = None) -> Sequence[_CW]:
        return [c for c in self._cws.values()
                if c.state is not HostState.RELEASED and (pool is None or c.pool == pool)]

    def host(self, host: HostId) -> _CW:
        return self._cws[host]

    def submit(self, tasks: Any, pool: str | None = None) -> None:
        raise NotImplementedError("a served bag's tasks are submitted by its run, not by the service")

    def duplicate(self, task: int, pool: str) -> None:
        raise NotImplementedError("the run duplicates tasks (serve_cloud), not the service")

    def cancel(self, task: int) -> None:
        raise NotImplementedError("the run cancels tasks, not the service")

    def queued(self) -> int:
        p = self._progress
        return max(0, p.submitted - p.assigned)

    def pending(self) -> int:
        return max(0, self.n_tasks - self._progress.completed)

    def spent(self) -> float:
        return 0.0

    def finish(self) -> None:
        self.finished = True

    def progress(self) -> BotProgress:
        return self._progress

    def completion_times(self) -> np.ndarray:
        return np.asarray(self._ctimes, dtype=float)

    def assignment_times(self) -> np.ndarray:
        return np.asarray(self._atimes, dtype=float)

    def serve_cloud(self, how: str) -> None:
        self.serve = how

    # -- what the service does with it ---------------------------------------------------------
    def apply(self, r: Report) -> tuple[int, list[int]]:
        """Take a report in: returns how many tasks completed with it and the CWs newly idle."""
        if r.t < self._now:
            raise UserError(f"a report at t={r.t:g} s comes after one at t={self._now:g} s", field="t")
        if not (0 <= r.completed <= r.assigned <= r.submitted <= self.n_tasks):
            raise UserError(f"counts must satisfy 0 <= completed <= assigned <= submitted <= {self.n_tasks} "
                            f"(the bag's size); got {r.completed}, {r.assigned}, {r.submitted}",
                            field="completed")
        self._now = float(r.t)
        done = r.completed - self._progress.completed
        if done < 0:
            raise UserError(f"completed went back from {self._progress.completed} to {r.completed}",
                            field="completed")
        self._progress = BotProgress(r.submitted, r.assigned, r.completed)
        _extend(self._ctimes, r.since_c, r.completions, r.completed, "completions")
        _extend(self._atimes, r.since_a, r.assignments, r.assigned, "assignments")
        for sid, state in r.workers.items():
            try:
                new = HostState(state)
            except ValueError:
                raise UserError(f"worker {sid}: unknown state {state!r}", field="workers") from None
            cw = self._cws.get(int(sid))
            if cw is None:
                # started by an earlier incarnation of the service (before a restart): nobody
                # bills it now, so it stops; new ids never reuse its id
                self._ids = itertools.count(max(int(sid) + 1, next(self._ids)))
                if new is not HostState.RELEASED and int(sid) not in self._orphans:
                    self._orphans.add(int(sid))
                    self._stop.append(int(sid))
                continue
            if cw.state is not HostState.RELEASED:  # (released by the service: that stands)
                if new is not HostState.BOOTING and cw.up_at is None:
                    cw.up_at = self._now
                cw.state = new
        idle = [int(s) for s in r.idle if int(s) in self._cws]
        return done, idle

    def advance(self, now: float) -> None:
        """Move the bag's clock to ``now`` (a bag attached after its start)."""
        self._now = max(self._now, float(now))

    def acknowledged(self) -> tuple[int, int]:
        """How many completion and assignment times the service holds."""
        return len(self._ctimes), len(self._atimes)

    def fire(self) -> None:
        """Run the policy's timers that are due."""
        while self._heap and self._heap[0][0] <= self._now:
            _, _, timer, fn, args = heapq.heappop(self._heap)
            if not timer.cancelled:
                fn(*args)

    def next_t(self) -> float | None:
        """When the next live timer is due (None: none)."""
        while self._heap and self._heap[0][2].cancelled:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    def take_orders(self) -> tuple[str | None, tuple[int, ...], tuple[int, ...]]:
        """The serve usage (once), the CWs to start and to stop, since the last call."""
        serve = None
        if self.serve is not None and not self._serve_sent:
            serve, self._serve_sent = self.serve, True
        start, stop = tuple(self._start), tuple(self._stop)
        self._start, self._stop = [], []
        return serve, start, stop


def _extend(times: list[float], since: int, new: Sequence[float], total: int, what: str) -> None:
    """Append the times of a report from index ``since`` (what was acknowledged may be resent)."""
    if since < 0 or since > len(times):
        raise UserError(f"{what} from index {since}, but {len(times)} were acknowledged", field=what)
    if since + len(new) > total:
        raise UserError(f"{since + len(new)} {what} times for {total} counted", field=what)
    arr = [float(x) for x in new]
    if any(not math.isfinite(x) or x < 0 for x in arr):
        raise UserError(f"{what}: times must be finite seconds >= 0", field=what)
    del times[since:]
    times.extend(arr)
    if any(b < a for a, b in itertools.pairwise(times[max(0, since - 1):])):
        raise UserError(f"{what}: times must be in ascending order", field=what)


@dataclass(slots=True)
class _Served:
    owner: str
    env: RemoteBot
    policy: SpeQuloS


class QoSScheduler:
    """Every served bag's SpeQuloS policy, fed by reports; thread-safe (one lock)."""

    def __init__(self, bank: Any) -> None:
        self.bank = bank
        self._bots: dict[Hashable, _Served] = {}
        self._lock = threading.Lock()

    def attach(self, bot: Hashable, owner: str, *, n_tasks: int, strategy: str, credits: float,
               pool: str = "cloud", tick: float = 240.0, alpha: AlphaModel | None = None,
               predict_at: float | None = 0.5, now: float = 0.0) -> SpeQuloS:
        """Serve ``bot``: its policy orders ``credits`` from ``owner``'s account at once (it is
        served without credits, only predicted, when the balance is short). ``now``: the bag's
        time when it is attached (its last report's), if later than its start."""
        with self._lock:
            if bot in self._bots:
                raise UserError(f"bag {bot} is already served", field="bot")
            env = RemoteBot(pool, n_tasks)
            policy = SpeQuloS(strategy, credits, tick=tick, pool=pool, bank=self.bank, user=owner,
                              bot=bot, alpha=alpha, predict_at=predict_at)
            policy.on_start(env)
            if now > 0:
                env.advance(now)
                policy.skip_to(now)
            self._bots[bot] = _Served(owner, env, policy)
            return policy

    def detach(self, bot: Hashable) -> None:
        """Stop serving ``bot`` (its run is gone): its policy is dropped, nothing more is billed."""
        with self._lock:
            self._bots.pop(bot, None)

    def served(self, bot: Hashable) -> SpeQuloS | None:
        s = self._bots.get(bot)
        return None if s is None else s.policy

    def report(self, bot: Hashable, r: Report) -> Instructions:
        """Take a run's report in, let the policy act, and answer with what the run must do."""
        with self._lock:
            s = self._bots.get(bot)
            if s is None:
                raise KeyError(bot)
            env, policy = s.env, s.policy
            done, idle = env.apply(r)
            for hid in idle:
                policy.on_host_idle(env.host(hid))
            for _ in range(done):  # (the policy reads the counts, not the task)
                policy.on_task_done(_NO_TASK, _NO_HOST, 0.0)
            env.fire()
            serve, start, stop = env.take_orders()
            p = policy.prediction
            complete = policy.completed_at is not None
            if complete:
                del self._bots[bot]
            acked_c, acked_a = env.acknowledged()
            return Instructions(serve=serve, start=start, stop=stop, acked_c=acked_c, acked_a=acked_a,
                                next_t=None if complete else env.next_t(),
                                t_pred=None if p is None else p.t_pred,
                                credits_ordered=policy.credits if policy.ordered else 0.0,
                                credits_spent=policy.spent, done=complete)


_NO_TASK = Task(-1, 0.0)
_NO_HOST = _CW(-1, "", 0.0)
