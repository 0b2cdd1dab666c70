"""What the live display of a real run shows, read from its environment at one instant: tasks done,
running and left, each pool's workers, the money spent, and what a QoS policy of the run knows (the
Oracle's predicted completion, a QoS service's credits). The CLI prints it; the policies' own
attributes are read here, not there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PoolWorkers:
    pool: str
    up: int  # booted and not lost: idle or busy
    rented: int


@dataclass(frozen=True)
class QoSCredits:
    """The last answer of a QoS service serving the run's tail (``skylease run --qos``)."""

    spent: float
    ordered: float
    attached: bool  # False: the service did not answer the last call


@dataclass(frozen=True)
class RunProgress:
    now_s: float
    done: int
    running: int
    left: int  # not started
    pools: tuple[PoolWorkers, ...]
    spent: float
    predicted_s: float | None  # the QoS Oracle's predicted completion, once it has one
    qos: tuple[QoSCredits, ...]


def run_progress(env: Any) -> RunProgress:
    """The figures of a running :class:`~skylease.runtime.env.WorkerEnvironment` (``env`` as the
    run's ``on_progress`` callback gets it)."""
    running = sum(1 for h in env.hosts() if h.task is not None)
    pools = []
    for p in env.pools():
        hs = env.hosts(p)
        up = sum(1 for h in hs if h.up_at is not None and h.state.value in ("idle", "busy"))
        pools.append(PoolWorkers(p, up, len(hs)))
    policies = getattr(env.policy, "policies", (env.policy,))  # a tail-QoS run: the bag's and the tail's
    qos = []
    for p in policies:
        last = getattr(p, "last", None)  # a run served by a QoS service: its last answer
        if last is not None:
            qos.append(QoSCredits(float(last.credits_spent), float(last.credits_ordered), bool(p.attached)))
    return RunProgress(now_s=env.now, done=env.progress().completed, running=running,
                       left=env.pending() - running, pools=tuple(pools), spent=env.spent(),
                       predicted_s=_predicted(policies), qos=tuple(qos))


def _predicted(policies: Any) -> float | None:
    for p in policies:
        pr = getattr(p, "prediction", None)
        if pr is not None:
            return float(pr.t_pred)
    return None
