"""A run's tail cutting: SpeQuloS run locally on a reliable pool (``--tail-qos``) or a SpeQuloS
service's relay (``--qos URL``), beside the main policy (:class:`Policies`).

Decisions of ours (the issue is silent):

* With ``--tail-qos``, the main policy runs the volatile pools and the QoS policy rents the
  reliable pool with credits: ``--tail-credits`` (default: the budget left, in the pool's price
  units converted at 15 credits per CPU hour).
* With ``--qos``, the bag is registered (and its credits ordered) before any work, so a refusal
  stops the run before it starts; a service that cannot be reached is said once and the run goes
  on without QoS.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from skylease.control.env import Environment, HostView, Policy
from skylease.experiments.run_options import RunOptions, qos_strategy, tail_strategy
from skylease.experiments.run_pools import pool_itype
from skylease.model.task import Task
from skylease.runtime.credentials import option_warning, token_for


class Policies(Policy):
    """Two policies on one environment: the main one and the tail one (each sees every callback)."""

    def __init__(self, *policies: Policy) -> None:
        self.policies = policies

    def on_start(self, env: Environment) -> None:
        for p in self.policies:
            p.on_start(env)

    def on_host_up(self, host: HostView) -> None:
        for p in self.policies:
            p.on_host_up(host)

    def on_host_down(self, host: HostView) -> None:
        for p in self.policies:
            p.on_host_down(host)

    def on_host_idle(self, host: HostView) -> None:
        for p in self.policies:
            p.on_host_idle(host)

    def on_task_done(self, task: Task, host: HostView, runtime: float) -> None:
        for p in self.policies:
            p.on_task_done(task, host, runtime)

    def on_task_lost(self, task: Task, host: HostView) -> None:
        for p in self.policies:
            p.on_task_lost(task, host)


def tail_policy(opts: RunOptions, specs: Mapping[str, Mapping[str, Any]]) -> Policy:
    """The ``--tail-qos`` policy: SpeQuloS with the strategy given, on ``--reliable-pool``."""
    from skylease.control.qos import SpeQuloS
    from skylease.control.qos.credits import CREDITS_PER_CPU_HOUR

    strategy = tail_strategy(opts.tail_qos or "")
    assert opts.reliable_pool is not None
    it = pool_itype(opts.reliable_pool, specs[opts.reliable_pool], "pools")
    if opts.tail_credits is not None:
        credits = opts.tail_credits
    elif opts.budget is not None and it.price > 0:
        credits = opts.budget / it.price * it.billing_unit / 3600.0 * CREDITS_PER_CPU_HOUR
    else:
        credits = 1e9  # no budget on a free pool: credits do not bind
    return SpeQuloS(strategy, credits, tick=opts.tail_tick_s, pool=opts.reliable_pool, predict_at=0.5)


def qos_relay(opts: RunOptions, n_tasks: int, notice: Callable[[str], None]) -> tuple[Policy, Any]:
    """The relay to a SpeQuloS service, the bag registered there (or said unreachable, once)."""
    from skylease.control.qos.relay import QoSRelay, ServiceUnavailable
    from skylease.runtime.qos.remote import RemoteBag

    assert opts.qos is not None and opts.reliable_pool is not None
    infra = opts.qos_infrastructure or f"local-{opts.volatile_pool or opts.pool or 'default'}"
    strategy = qos_strategy(opts.qos_strategy, "--qos-strategy").name  # (the service lists 9C-C-R)
    registration = {"infrastructure": infra, "n_tasks": n_tasks, "strategy": strategy,
                    "tick": opts.tail_tick_s, "pool": opts.reliable_pool, "credits": opts.qos_credits or 0.0}
    token = token_for(opts.qos.strip(), opts.qos_token, "--qos-token")
    bag = RemoteBag(opts.qos.strip(), token, registration)
    relay = QoSRelay(bag.send, opts.reliable_pool, period=opts.tail_tick_s, on_unavailable=notice)
    try:
        bag.register()
        notice(f"QoS: bag {bag.bot} registered at {opts.qos.strip()} ({opts.qos_strategy}, "
               f"{opts.qos_credits or 0:g} credits)")
    except ServiceUnavailable as exc:
        notice(f"the QoS service is unreachable ({exc}); the run goes on without QoS")
        relay.attached = False
    except BaseException:
        bag.close()
        raise
    if opts.qos_token is not None:  # (once the bag is registered: a refusal stays one line)
        notice(f"warning: {option_warning('--qos-token')}")
    return relay, bag

