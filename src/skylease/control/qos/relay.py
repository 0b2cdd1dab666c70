"""A run's side of SpeQuloS as a service: report the bag's progress, do what the service says.

SpeQuloS is "an on-line multi-BoT, multi-users service" (decision S29): the Scheduler that decides
when and how many cloud workers (CWs) a bag gets runs in the service, not in the run. The run
keeps a :class:`QoSRelay` as its policy: it sends a :class:`Report` (counts, the completion and
first-assignment times since the last report, its CWs' states) to ``send`` and enacts the
:class:`Instructions` it gets back (how CWs are served, which to start, which to stop). ``send``
is the service's scheduler called in process (a simulation) or over HTTP (a real run); the relay
is the same either way, as are the SpeQuloS policy and credits on the other side.

CWs have the service's ids; the relay maps them to the environment's hosts. A start the pool
cannot grant is reported back as released at once, so the service stops billing it.

``send`` may fail (raise :class:`ServiceUnavailable`): the run then goes on without QoS, keeps
the CWs it has (the service bills nothing meanwhile, so it stops them if its credits ran out) and
reports again at the next period; the report is whole (counts and every time not yet
acknowledged), so nothing is lost by a missed one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from skylease.control.env import Environment, Handle, HostView, Policy, TailEnvironment
from skylease.model.host import HostId, HostState
from skylease.model.task import Task

__all__ = ["Instructions", "QoSRelay", "Report", "ServiceUnavailable"]


class ServiceUnavailable(Exception):
    """The QoS service did not answer (unreachable, restarting, or an error on its side)."""


@dataclass(frozen=True, slots=True)
class Report:
    """What a run tells the service: ``t`` seconds since the bag started.

    ``completions``/``assignments``: times of the completions and first assignments from index
    ``since_c``/``since_a`` on (what the service has not acknowledged); ``workers``: the state of
    each CW (service id -> :class:`HostState` value); ``idle``: CWs that asked for work and got
    none since the last report; ``queued``: tasks waiting for a worker.
    """

    t: float
    submitted: int
    assigned: int
    completed: int
    since_c: int = 0
    completions: tuple[float, ...] = ()
    since_a: int = 0
    assignments: tuple[float, ...] = ()
    workers: dict[int, str] = field(default_factory=dict)
    idle: tuple[int, ...] = ()
    queued: int = 0


@dataclass(frozen=True, slots=True)
class Instructions:
    """The service's answer: ``serve`` (how CWs get work, once), CWs to ``start`` and to
    ``stop`` (service ids), ``next_t`` (when the service's scheduler looks next, in the bag's
    seconds: the next report is due then at the latest), and what the run may show: the
    prediction and the credits."""

    serve: str | None = None
    start: tuple[int, ...] = ()
    stop: tuple[int, ...] = ()
    acked_c: int = 0
    acked_a: int = 0
    next_t: float | None = None
    t_pred: float | None = None
    credits_ordered: float = 0.0
    credits_spent: float = 0.0
    done: bool = False


class QoSRelay(Policy):
    """The policy of a run served by SpeQuloS: reports every ``period`` seconds (and at each
    completion when ``eager``: a simulation's exactness) and enacts the answers on ``pool``."""

    def __init__(self, send: Callable[[Report], Instructions], pool: str, *, period: float = 240.0,
                 eager: bool = False, on_unavailable: Callable[[str], None] | None = None) -> None:
        if not period > 0:
            raise ValueError(f"period must be > 0 seconds, got {period!r}")
        self.send, self.pool, self.period, self.eager = send, pool, float(period), eager
        self.on_unavailable = on_unavailable
        self.env: TailEnvironment | None = None
        self.last: Instructions | None = None
        self.attached = True
        self.reports = 0
        self._acked_c = self._acked_a = 0
        self._hosts: dict[int, HostId] = {}  # service id -> the environment's host
        self._gone: set[int] = set()  # service ids never granted: reported released
        self._cws: set[HostId] = set()
        self._idle: set[int] = set()
        self._timer: Handle | None = None
        self._t0 = 0.0

    @property
    def prediction(self) -> Instructions | None:
        """The service's last answer when it holds a prediction (it has ``t_pred``)."""
        return self.last if self.last is not None and self.last.t_pred is not None else None

    def summary(self) -> dict[str, Any]:
        """What a run records of its service: the last answer's credits and prediction."""
        last = self.last or Instructions()
        return {"service": True, "attached": self.attached, "reports": self.reports,
                "credits_ordered": last.credits_ordered, "credits_spent": last.credits_spent,
                "t_pred": last.t_pred, "cws": len(self._hosts), "done": last.done}

    # -- callbacks ------------------------------------------------------------------------------
    def on_start(self, env: Environment) -> None:
        if not isinstance(env, TailEnvironment):
            raise TypeError("QoSRelay needs a TailEnvironment (progress, completion times, serve_cloud)")
        self.env, self._t0 = env, env.now
        self._report()

    def on_host_idle(self, host: HostView) -> None:
        if host.id in self._cws:
            sid = next(s for s, h in self._hosts.items() if h == host.id)
            self._idle.add(sid)

    def on_task_done(self, task: Task, host: HostView, runtime: float) -> None:
        assert self.env is not None
        if self.eager or self.env.pending() == 0:  # the end is reported at once: CWs stop, the bill closes
            self._report()

    # -- reporting ------------------------------------------------------------------------------
    def _report(self) -> None:
        env = self.env
        assert env is not None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        pr = env.progress()
        ct, at = env.completion_times(), env.assignment_times()
        workers = {sid: env.host(h).state.value for sid, h in self._hosts.items()}
        workers.update({sid: HostState.RELEASED.value for sid in self._gone})
        report = Report(env.now - self._t0, pr.submitted, pr.assigned, pr.completed,
                        self._acked_c, _times(ct[self._acked_c:]), self._acked_a, _times(at[self._acked_a:]),
                        workers, tuple(sorted(self._idle)), env.queued())
        self.reports += 1
        try:
            answer = self.send(report)
        except ServiceUnavailable as exc:
            if self.attached and self.on_unavailable is not None:
                self.on_unavailable(f"the QoS service is unreachable ({exc}); the run goes on without QoS")
            self.attached = False
        else:
            if not self.attached and self.on_unavailable is not None:
                self.on_unavailable("the QoS service is back; the run is served again")
            self.attached = True
            self._idle.clear()
            self._acked_c, self._acked_a = answer.acked_c, answer.acked_a
            self.last = answer
            self._enact(answer)
        if env.pending() > 0:
            due = env.now + self.period
            if self.attached and self.last is not None and self.last.next_t is not None \
                    and self._t0 + self.last.next_t > env.now:  # (a time already past would loop)
                due = min(due, self._t0 + self.last.next_t)
            self._timer = env.call_at(due, self._report)

    def _enact(self, answer: Instructions) -> None:
        env = self.env
        assert env is not None
        if answer.serve is not None:
            env.serve_cloud(answer.serve)
        for sid in answer.stop:
            h = self._hosts.get(sid)
            if h is not None and env.host(h).state is not HostState.RELEASED:
                env.release(h)
        if answer.start:
            got = env.acquire(self.pool, len(answer.start))
            for sid, h in zip(answer.start, got, strict=False):
                self._hosts[sid] = h
                self._cws.add(h)
            self._gone.update(answer.start[len(got):])


def _times(a: np.ndarray) -> tuple[float, ...]:
    return tuple(float(x) for x in a)
