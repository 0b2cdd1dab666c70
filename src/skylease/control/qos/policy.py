"""SpeQuloS: cloud workers bought with credits to remove the tail of a bag of tasks on a BE-DCI.

Delamare, Fedak, Kondo and Lodygensky, Cluster Computing 2013, as docs/decisions/spequlos.md reads it
(decision S6,
Algorithms 1 and 2, with the [RC] billing and stop details). Every ``tick`` seconds the scheduler
runs the bag loop, then the cloud-worker loop:

1. If no cloud worker (CW) was started yet, the order can pay one tick, and the strategy's WHEN rule
   holds: set the HOW usage and rent the HOW MANY count (capped by the credits for one tick). CWs
   are started once per bag (S24). The strategy is a
   :class:`~skylease.control.qos.strategy.CloudStrategy`: one of the paper's 18 (the Oracle's
   rules) or a user's own.
2. For every CW: stop it if the bag is complete or the order cannot pay a tick; stop it if it asked
   for work and got none since the last tick and still has no task (``stop_idle_cw``, S4); else
   bill it one tick (the start tick included, so boot is billed).

When the last task completes, every CW is stopped and the order is paid (the rest refunded). The
policy acts only through :class:`~skylease.control.env.TailEnvironment`.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass, replace
from typing import Any

from skylease.control.env import Environment, Handle, HostView, Policy, TailEnvironment
from skylease.control.qos.credits import CREDITS_PER_CPU_HOUR, CreditSystem
from skylease.control.qos.oracle import Snapshot
from skylease.control.qos.prediction import AlphaModel, Prediction
from skylease.control.qos.strategy import CloudStrategy, Strategy, parse_strategy, strategy_failed
from skylease.control.qos.tail import rank, t_c
from skylease.model.host import HostId, HostState
from skylease.model.task import Task


@dataclass(slots=True)
class CloudWorker:
    """One rented CW as the scheduler books it."""

    id: HostId
    started: float
    stopped: float | None = None
    billed: float = 0.0
    reason: str | None = None  # why it stopped: "complete", "credits", "idle" or "external"


class SpeQuloS(Policy):
    """The SpeQuloS scheduler for one bag (decision S6).

    ``strategy``: ``<WHEN>-<HOWMANY>-<HOW>`` such as ``9C-C-R`` (``none``: never rent, only
    predict), or a :class:`CloudStrategy` (a user's own); ``credits``: ordered for the bag from
    ``bank`` (default: a private bank holding just
    that much); ``tick``: monitoring and billing period (s); ``tick_credits``: credits per CW per
    tick (default 15/h, i.e. 1 per 240 s); ``predict_at``: completion ratio at which the completion
    time is predicted with ``alpha`` (None: never). ``threshold``, ``variance_factor``: the built-in
    WHEN rules' parameters (a strategy of one's own has its own).
    """

    def __init__(self, strategy: str | CloudStrategy | None = "9C-C-R", credits: float = 0.0, *,
                 tick: float = 240.0, stop_idle_cw: bool = True, tick_credits: float | None = None,
                 pool: str = "cloud", predict_at: float | None = 0.5, alpha: AlphaModel | None = None,
                 threshold: float = 0.9, variance_factor: float = 2.0, bank: CreditSystem | None = None,
                 user: Hashable = "user", bot: Hashable = "bot") -> None:
        if isinstance(strategy, str):
            strategy = parse_strategy(strategy)
        if not tick > 0:
            raise ValueError(f"tick must be > 0 seconds, got {tick!r}")
        if not credits >= 0:
            raise ValueError(f"credits must be >= 0, got {credits!r}")
        if predict_at is not None and not 0 < predict_at <= 1:
            raise ValueError(f"predict_at must be in (0, 1], got {predict_at!r}")
        if isinstance(strategy, Strategy):  # the built-ins' thresholds are this scheduler's
            strategy = replace(strategy, threshold=threshold, variance_factor=variance_factor)
        elif strategy is not None and not isinstance(strategy, CloudStrategy):
            raise TypeError(f"strategy must be a name or a CloudStrategy, got {type(strategy).__name__}")
        self.strategy: CloudStrategy | None = strategy
        self.credits, self.tick = float(credits), float(tick)
        self.stop_idle_cw, self.pool = stop_idle_cw, pool
        self.tick_credits = (CREDITS_PER_CPU_HOUR * self.tick / 3600.0 if tick_credits is None
                             else float(tick_credits))
        if not self.tick_credits > 0:
            raise ValueError(f"tick_credits must be > 0, got {tick_credits!r}")
        self.predict_at, self.alpha = predict_at, alpha if alpha is not None else AlphaModel()
        self._bank, self.user, self.bot = bank, user, bot
        self._reset()

    def _reset(self) -> None:
        self.env: TailEnvironment | None = None
        self.bank = self._bank if self._bank is not None else CreditSystem()
        self.ordered = False
        self.started_at: float | None = None  # the tick CWs were started
        self.cws: dict[HostId, CloudWorker] = {}
        self.prediction: Prediction | None = None
        self.completed_at: float | None = None
        self.refund = 0.0
        self._alive: list[HostId] = []
        self._idle: set[HostId] = set()
        self._served = False
        self._k = 0
        self._timer: Handle | None = None

    # -- callbacks --------------------------------------------------------------------------
    def on_start(self, env: Environment) -> None:
        if not isinstance(env, TailEnvironment):
            raise TypeError("SpeQuloS needs a TailEnvironment (progress, completion times, serve_cloud)")
        self._reset()
        self.env = env
        self._t0 = env.now
        if self._bank is None:
            self.bank.deposit(self.user, self.credits)
        self.ordered = self.bank.order(self.user, self.bot, self.credits)
        if env.pending() == 0:
            self._complete()
        elif self.strategy is not None and self.ordered:
            self._schedule()

    def on_host_idle(self, host: HostView) -> None:
        if host.id in self.cws:
            self._idle.add(host.id)

    def on_task_done(self, task: Task, host: HostView, runtime: float) -> None:
        env = self.env
        if env is None or self.completed_at is not None:
            return
        if self.prediction is None and self.predict_at is not None:
            self._maybe_predict(env)
        if env.pending() == 0:
            self._complete()

    # -- the scheduler ----------------------------------------------------------------------
    @property
    def spent(self) -> float:
        """Credits billed to this bag so far."""
        return self.bank.get(self.bot).spent if self.ordered else 0.0

    def skip_to(self, now: float) -> None:
        """Serve from ``now`` on a bag that started earlier (a service that attached it late, or
        after a restart): the next tick is the first after ``now``, not every tick since the bag's
        start at once (which would bill a new CW for ticks it never ran)."""
        if self._timer is None or self.env is None:
            return
        self._timer.cancel()
        self._k = max(self._k - 1, math.floor((now - self._t0) / self.tick))
        self._schedule()

    def _schedule(self) -> None:
        assert self.env is not None
        self._k += 1
        self._timer = self.env.call_at(self._t0 + self._k * self.tick, self._on_tick)

    def _on_tick(self) -> None:
        env = self.env
        assert env is not None and self.strategy is not None
        self._timer = None
        if self.completed_at is not None:
            return
        if self.started_at is None:
            self._monitor_bot(env, self.strategy)
        self._monitor_cloud_workers(env)
        # keep ticking while CWs run (the next tick stops or bills them) or may still be started
        if self._alive or (self.started_at is None and self.bank.has_credits(self.bot, self.tick_credits)):
            self._schedule()

    def _snapshot(self, env: TailEnvironment, strategy: CloudStrategy) -> Snapshot:
        pr = env.progress()
        if strategy.needs_times:
            return Snapshot(env.now - self._t0, pr.submitted, pr.assigned, pr.completed,
                            env.completion_times(), env.assignment_times())
        return Snapshot(env.now - self._t0, pr.submitted, pr.assigned, pr.completed)

    def _monitor_bot(self, env: TailEnvironment, strategy: CloudStrategy) -> None:
        """Algorithm 1: start the CWs once, when the WHEN rule holds and credits remain."""
        if env.pending() == 0 or not self.bank.has_credits(self.bot, self.tick_credits):
            return
        snap = self._snapshot(env, strategy)
        remaining = self.bank.get(self.bot).remaining
        try:
            if not strategy.should_use_cloud(snap):
                return
            wanted = int(strategy.cloud_workers_to_start(snap, remaining))
        except Exception as e:
            if isinstance(strategy, Strategy):
                raise
            raise strategy_failed(strategy, e) from None  # a user's strategy: one line, where it failed
        n = min(wanted, int(remaining // self.tick_credits))
        if n < 1:
            return  # e.g. C before any completion: look again at the next tick
        if not self._served:
            env.serve_cloud(strategy.usage)
            self._served = True
        ids = env.acquire(self.pool, n)
        if not ids:
            return
        now = env.now
        self.started_at = now
        for hid in ids:
            self.cws[hid] = CloudWorker(hid, now)
            self._alive.append(hid)

    def _monitor_cloud_workers(self, env: TailEnvironment) -> None:
        """Algorithm 2: stop or bill every running CW."""
        complete = env.pending() == 0
        keep: list[HostId] = []
        for hid in self._alive:
            state = env.host(hid).state
            if state is HostState.RELEASED:
                self._stopped(hid, "external")
            elif complete:
                self._stop(hid, "complete")
            elif not self.bank.has_credits(self.bot, self.tick_credits):
                self._stop(hid, "credits")
            elif self.stop_idle_cw and hid in self._idle and state is not HostState.BUSY:
                self._stop(hid, "idle")
            else:
                self.bank.bill(self.bot, hid, self.tick_credits)
                self.cws[hid].billed += self.tick_credits
                keep.append(hid)
        self._alive = keep
        self._idle.clear()

    def _stopped(self, hid: HostId, reason: str) -> None:
        assert self.env is not None
        cw = self.cws[hid]
        cw.stopped, cw.reason = self.env.now, reason
        self._idle.discard(hid)

    def _stop(self, hid: HostId, reason: str) -> None:
        assert self.env is not None
        self.env.release(hid)
        self._stopped(hid, reason)

    def _complete(self) -> None:
        """The bag is done: stop every CW and pay (refunding what is left)."""
        env = self.env
        assert env is not None
        self.completed_at = env.now
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for hid in self._alive:
            if env.host(hid).state is HostState.RELEASED:
                self._stopped(hid, "external")
            else:
                self._stop(hid, "complete")
        self._alive = []
        if self.ordered:
            self.refund = self.bank.pay(self.bot)

    def _maybe_predict(self, env: TailEnvironment) -> None:
        assert self.predict_at is not None
        pr = env.progress()
        if pr.submitted == 0 or pr.completed < rank(self.predict_at, pr.submitted):
            return
        t_c_r = t_c(env.completion_times(), self.predict_at, pr.submitted)
        self.prediction = self.alpha.predict(env.now - self._t0, t_c_r, self.predict_at)

    # -- results ----------------------------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        """What an experiment records of the run (plain values)."""
        p = self.prediction
        return {
            "strategy": self.strategy.name if self.strategy is not None else "none",
            "credits_ordered": self.credits if self.ordered else 0.0,
            "credits_spent": self.spent,
            "refund": self.refund,
            "cw_started_at": self.started_at,
            "cws": len(self.cws),
            "cws_stopped_idle": sum(1 for c in self.cws.values() if c.reason == "idle"),
            "completed_at": self.completed_at,
            "predict_r": p.r if p else None,
            "predict_p": p.p if p else None,
            "predict_alpha": p.alpha if p else None,
            "t_pred": p.t_pred if p else None,
        }

    def __repr__(self) -> str:
        name = self.strategy.name if self.strategy is not None else "none"
        return f"SpeQuloS({name!r}, credits={self.credits:g}, tick={self.tick:g})"
