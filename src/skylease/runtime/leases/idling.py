"""The ``idle_reclaim`` fairness rule under the lease service's clock (control/leases/idle.py;
docs/decisions/fairness-rules.md).

Every sampling interval the server asks each machine, once, how much CPU the payloads of each
running lease have used (its process groups: the payload's processes, or a VM's QEMU), and
compares it with the cores the lease holds over that interval: below the rule's ``idle_cpu``, the
lease was idle the whole interval (:class:`~skylease.control.leases.idle.IdleWatch` keeps from
when). A lease idle for the rule's time is reclaimed: the scheduler's premature end, journaled as
an ``end`` input with the reason (CPU samples are not replayed: the replay takes the decision as
it was made), and its payloads are ended as at any end. What cannot be told (a host that does not
answer, a payload with no process left, a lease with a payload stopped) counts as busy: the rule
never ends a lease on a guess.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from skylease.control.leases.fairness import idle_rule
from skylease.control.leases.idle import IdleReclaim, IdleWatch
from skylease.control.leases.lease import LeaseState
from skylease.runtime.leases.journal import InputKind

__all__ = ["Idling", "sampling_interval"]

log = logging.getLogger(__name__)

#: The shortest and longest sampling intervals (real seconds): a tenth of the rule's time between
#: them (one pass over /proc per machine and interval; a reclaim comes at most one interval late).
MIN_SAMPLE_S = 1.0
MAX_SAMPLE_S = 60.0


def sampling_interval(rule: IdleReclaim, time_scale: float) -> float:
    """Real seconds between two CPU samples under ``rule`` at ``time_scale`` lease seconds a second."""
    return min(MAX_SAMPLE_S, max(MIN_SAMPLE_S, rule.after / time_scale / 10))


@dataclass(frozen=True)
class _Sample:
    at: float  # Unix time
    lease_time: float
    cpu_s: float
    payloads: frozenset[tuple[int, int]]  # (pid, start ticks): the same processes, or no comparison


class Idling:
    """The lease manager's side (a mixin of :class:`~skylease.runtime.leases.manager.LocalLeaseManager`,
    called with its lock held): sample the running leases' CPU, reclaim those idle long enough."""

    def _idle_init(self) -> None:
        m: Any = self
        self._idle_rule = idle_rule(m.config.admission)
        self._idle_watch = None if self._idle_rule is None else IdleWatch(self._idle_rule)
        self._idle_samples: dict[int, _Sample] = {}
        self._idle_next = 0.0

    def _reclaim_idle(self, now: int) -> None:
        if self._idle_watch is None or self._idle_rule is None:
            return
        m: Any = self
        if time.monotonic() >= self._idle_next:
            self._idle_next = time.monotonic() + sampling_interval(self._idle_rule, m.clock.scale)
            self._sample(m)
        for lid, since in self._idle_watch.due(now):
            self._idle_watch.forget(lid)
            self._idle_samples.pop(lid, None)
            reason = self._idle_rule.reason(since)
            t = max(now, m._stepped)
            if m.sched.premature_end(lid, t, reclaimed=reason):
                log.warning("lease %d: reclaimed at %d: %s", lid, t, reason)
                m._batch.inputs.append((t, InputKind.END, lid, {"reclaimed": reason}))
                m._enact.touched.add(lid)
                m._step(t)

    def _sample(self, m: Any) -> None:
        assert self._idle_watch is not None and self._idle_rule is not None
        lives: dict[int, list[Any]] = {}
        for (lid, _), live in sorted(m._live.items()):
            lives.setdefault(lid, []).append(live)
        running = {lid: ls for lid, ls in lives.items()
                   if (vm := m.sched.rr.get(lid)) is not None and vm.state is LeaseState.ACTIVE
                   and all(live.running for live in ls)}
        for lid in set(self._idle_samples) - set(running):
            self._idle_samples.pop(lid)
        for lid in [lid for lid in self._idle_watch.since if lid not in running]:
            self._idle_watch.forget(lid)
        payloads = [live.payload for ls in running.values() for live in ls]
        used = iter(m.nodes.cpu_seconds(payloads) if payloads else [])
        at = time.time()
        lease_time = m.clock.lease_at(at)
        for lid, ls in running.items():
            cpu = [next(used) for _ in ls]
            if any(c is None for c in cpu):  # (cannot be told: busy)
                self._idle_watch.busy(lid)
                self._idle_samples.pop(lid, None)
                continue
            sample = _Sample(at, lease_time, sum(c for c in cpu if c is not None),
                             frozenset((live.payload.pid, live.payload.start_ticks) for live in ls))
            prev = self._idle_samples.get(lid)
            self._idle_samples[lid] = sample
            if prev is None or prev.payloads != sample.payloads or sample.at <= prev.at:
                continue
            cores = m.sched.rr[lid].lease.cpu * len(ls)
            share = (sample.cpu_s - prev.cpu_s) / (sample.at - prev.at) / max(cores, 1e-9)
            if share < self._idle_rule.cpu:
                self._idle_watch.idle(lid, int(prev.lease_time))
            else:
                self._idle_watch.busy(lid)
