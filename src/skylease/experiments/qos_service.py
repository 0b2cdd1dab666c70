"""A simulated bag of tasks served by the SpeQuloS service logic in process (issue 20, item 6).

:func:`simulate_served` runs one BoT of :func:`skylease.experiments.spequlos.run_once` (the
desktop-grid simulator and the SpeQuloS policy, unchanged) and has it meet the service's
Information module and Oracle (:class:`~skylease.runtime.qos.bots.BotRegistry`) as a real run
does, minus HTTP:

* the BoT is registered when the simulation starts (its size: the whole bag, arrived or not);
* its progress (completed, ever assigned, queued) is reported every ``period`` s of simulated time
  (the scheduler's tick by default), skipping ticks where nothing changed (the series only needs
  changes, and a BoT the trace never lets finish would otherwise report for a simulated year);
* it is reported once more at the completion that makes half the bag, with that exact time as
  ``t_half``, and the Oracle's prediction is taken then: the prediction made at half completion;
* it is finished with its completion time (or abandoned if the simulation ends first).

The policy predicts with the α the registry has learned for the infrastructure, so for a bag
submitted at once its own prediction and the Oracle's are the same number.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from skylease.control.env import Environment, HostView, Policy, TailEnvironment
from skylease.control.qos import SpeQuloS
from skylease.control.qos.tail import rank
from skylease.experiments.spequlos import run_once
from skylease.model.limits import check_number
from skylease.model.task import Task
from skylease.runtime.qos.bots import PREDICT_AT, BotRegistry, BotView, PredictionView

__all__ = ["ServedRun", "simulate_served"]


@dataclass(frozen=True)
class ServedRun:
    """What :func:`simulate_served` returns: the BoT as the registry holds it at the end, the
    Oracle's prediction made at half completion (None if the bag never got there), and the
    simulation's own row of metrics (:func:`~skylease.experiments.spequlos.run_once`)."""

    bot: BotView
    prediction: PredictionView | None
    row: dict[str, Any]


class _Reporter(Policy):
    """Passes every callback on to the SpeQuloS policy and reports the bag to the registry."""

    def __init__(self, inner: SpeQuloS, registry: BotRegistry, owner: str, infrastructure: str,
                 strategy: str, period: float | None) -> None:
        self.inner, self.registry = inner, registry
        self.owner, self.infrastructure, self.strategy = owner, infrastructure, strategy
        self.period = inner.tick if period is None else period
        self.bot: int | None = None
        self.prediction: PredictionView | None = None
        self.done = False
        self._last: tuple[int, int, int] | None = None
        self._k = 0

    def on_start(self, env: Environment) -> None:
        assert isinstance(env, TailEnvironment)
        self.env = env
        n = env.pending() + env.progress().completed
        self.bot = self.registry.register(self.owner, self.infrastructure, n, self.strategy).id
        self.half = rank(PREDICT_AT, n)
        self.inner.on_start(env)
        self._tick()

    def _tick(self) -> None:
        if self.done:
            return
        self._report()
        self._k += 1
        self.env.call_at(self._k * self.period, self._tick)

    def _report(self, t_half: float | None = None) -> None:
        assert self.bot is not None
        pr = self.env.progress()
        counts = (pr.completed, pr.assigned, self.env.queued())
        if counts != self._last or t_half is not None:
            self._last = counts
            self.registry.report(self.bot, self.env.now, *counts, t_half=t_half)

    def on_task_done(self, task: Task, host: HostView, runtime: float) -> None:
        self.inner.on_task_done(task, host, runtime)
        assert self.bot is not None
        if self.env.progress().completed == self.half:
            self._report(t_half=self.env.now)
            self.prediction = self.registry.predict(self.bot)
        if self.env.pending() == 0 and not self.done:
            self.done = True
            self.registry.finish(self.bot, self.env.now)

    def on_host_up(self, host: HostView) -> None:
        self.inner.on_host_up(host)

    def on_host_down(self, host: HostView) -> None:
        self.inner.on_host_down(host)

    def on_host_idle(self, host: HostView) -> None:
        self.inner.on_host_idle(host)

    def on_task_lost(self, task: Task, host: HostView) -> None:
        self.inner.on_task_lost(task, host)


def simulate_served(registry: BotRegistry, owner: str, middleware: str, trace: str, bot: str,
                    strategy: str = "9C-C-R", seed: int = 0, *, infrastructure: str | None = None,
                    period: float | None = None, credits: float | None = None,
                    data_dir: str | os.PathLike[str] | None = None) -> ServedRun:
    """One simulated BoT (as :func:`~skylease.experiments.spequlos.run_once`) served by ``registry``.

    ``owner``: the user it is registered for; ``infrastructure``: its name in the registry (default
    ``MIDDLEWARE/TRACE``, e.g. ``xwhep/nd``), whose history gives α; ``period``: seconds of
    simulated time between reports (default: the SpeQuloS tick, 240 s).
    """
    if period is not None:
        period = check_number(period, "period", above=0)
    infra = infrastructure if infrastructure is not None else f"{middleware.strip().lower()}/{trace}"
    alpha = registry.alpha(infra).alpha
    reporters: list[_Reporter] = []

    def wrap(policy: SpeQuloS) -> Policy:
        reporters.append(_Reporter(policy, registry, owner, infra, strategy, period))
        return reporters[-1]

    row = run_once(middleware, trace, bot, strategy, seed, data_dir=data_dir, alpha=alpha, credits=credits,
                   wrap=wrap)
    rep = reporters[0]
    assert rep.bot is not None
    if not rep.done:
        registry.abandon(rep.bot)
    return ServedRun(registry.bot(rep.bot), rep.prediction, row)


# -- the whole service: a simulated bag served by the Scheduler through the relay -------------------
class _Served(Policy):
    """Registers the bag with the service when the simulation starts (ordering the credits its
    SpeQuloS policy would have had), then is the bag's :class:`QoSRelay`: the service's Scheduler,
    not a policy in the simulation, decides its cloud workers."""

    def __init__(self, service: Any, owner: str, infrastructure: str, inner: SpeQuloS) -> None:
        self.service, self.owner, self.infrastructure, self.inner = service, owner, infrastructure, inner
        self.bot: int | None = None
        self.relay: Any = None

    def on_start(self, env: Environment) -> None:
        from skylease.control.qos.relay import QoSRelay

        assert self.inner.strategy is not None
        n = int(env.n_tasks)  # type: ignore[attr-defined]  # (the whole bag, arrived or not)
        view = self.service.register(self.owner, self.infrastructure, n, strategy=self.inner.strategy.name,
                                     tick=self.inner.tick, pool=self.inner.pool, credits=self.inner.credits)
        self.bot = view.id
        self.relay = QoSRelay(lambda r: self.service.report(self.owner, view.id, r), self.inner.pool,
                              period=self.inner.tick)
        self.relay.on_start(env)

    def on_host_idle(self, host: HostView) -> None:
        self.relay.on_host_idle(host)

    def on_task_done(self, task: Task, host: HostView, runtime: float) -> None:
        self.relay.on_task_done(task, host, runtime)


def serve_simulated(service: Any, owner: str, middleware: str, trace: str, bot: str, strategy: str,
                    seed: int = 0, *, infrastructure: str | None = None,
                    data_dir: str | os.PathLike[str] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """One simulated bag served by ``service`` (a :class:`~skylease.runtime.qos.service.QoSService`)
    in process, as a real run is over HTTP: registered with ``owner``'s credits (decision S28's 10 % of
    the bag's workload), its cloud workers decided by the service's Scheduler, billed to ``owner``'s
    account. Returns the service's view of the bag (order, prediction) and the simulation's row."""
    infra = infrastructure or f"{middleware}/{trace}"
    holder: dict[str, _Served] = {}

    def wrap(inner: SpeQuloS) -> Policy:
        holder["p"] = _Served(service, owner, infra, inner)
        return holder["p"]

    row = run_once(middleware, trace, bot, strategy, seed, data_dir=data_dir, wrap=wrap)
    bag = holder["p"].bot
    assert bag is not None
    return service.bot(owner, bag), row
