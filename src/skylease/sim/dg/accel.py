"""BOINC's batch acceleration (BOINC/boinc PRs #6643, #6682, #6894; the server since late 2025).

BOINC's own answer to the tail of a batch: "send the tail jobs (last 10 % or so) to hosts with low
average turnaround time". The server side, read from ``html/ops/batch_stats.php``,
``html/ops/batch_accel.php`` and ``sched/sched_score.cpp``:

* ``batch_stats.php`` (run at the start of every ``batch_accel.php`` pass): a batch with at least
  100 success results gets its median turnaround time (``received - sent``), stored as
  ``batch.expire_time``; otherwise ``expire_time = 0`` and the batch adds nothing to the host
  statistics. Each host's turnaround is the mean, over its results, of the *normalized* turnaround
  ``tt / median``, a timeout (outcome NO_REPLY) counting as 10. A host is low-turnaround (LTT) when
  that mean is < 1. An app is *accelerable* when more than 100 hosts returned results for it and
  more than 25 % of them are LTT.
* ``batch_accel.php``: a batch in progress is accelerated when the fraction of its jobs done is
  above ``BATCH_ACCEL_MIN_FRAC_DONE`` (0.85; #6682) or fewer than ``BATCH_ACCEL_MAX_NOT_DONE`` (20;
  #6894) jobs are not done. If its app is accelerable, every unfinished work unit (WU) becomes high
  priority, and one more result is created for a WU (``target_nresults`` + 1 and, since
  #6886, ``max_total_results`` + 1) when it has no unsent result and no in-progress result
  sent less than ``expire_time`` ago. If the app is not accelerable, the batch's priorities go back
  to 0.
* Scheduler (``<batch_accel/>``): a high-priority job is never sent to a host that is not LTT, and
  LTT hosts get high-priority jobs first (score + 10; the feeder orders by priority, then id, #6687).

How the simulator reads it (:class:`~skylease.sim.dg.env.BOINCEnv`, [R] where BOINC is silent):

* The bag is one batch of one app; its WUs are the tasks arrived so far (``count($wus)``).
* ``batch_accel.php`` is a periodic server task whose period is the project's choice: every
  :attr:`BatchAccel.period` seconds after submission.
* A result's turnaround is counted when it is returned, from the moment it was sent (a cloud
  worker's: from its request). A result whose deadline passed counts as a timeout of its host,
  and its late return, if any, is not counted again.
* BOINC keeps raising ``max_total_results`` with each extra result, so it sets no limit; the
  simulator stores at most :attr:`BatchAccel.max_results` results per WU (memory), after which no
  extra result is created for that WU.
* The issue that led to the PRs (#6612) planned a *recent* (exponentially weighted) average per
  host; the merged code averages over the batches of the last 30 days, which for one bag is every
  result of the bag. The simulator follows the merged code.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["BatchAccel", "TurnaroundStats"]


@dataclass(frozen=True)
class BatchAccel:
    """Batch-acceleration parameters, named after BOINC's (defaults: BOINC's)."""

    #: ``BATCH_ACCEL_MIN_FRAC_DONE``: accelerate once more than this fraction of the jobs is done.
    min_frac_done: float = 0.85
    #: ``BATCH_ACCEL_MAX_NOT_DONE``: ... or once fewer than this many jobs are not done.
    max_not_done: int = 20
    #: [R] seconds between two runs of ``batch_accel.php`` (a project's periodic task).
    period: float = 300.0
    #: batch_stats.php: success results a batch needs for its median turnaround (``expire_time``).
    min_results: int = 100
    #: batch_stats.php: the normalized turnaround a timeout counts as.
    timeout_ntt: float = 10.0
    #: batch_stats.php: an app is accelerable with more than this many hosts that returned results...
    min_hosts: int = 100
    #: ... and more than this share of them low-turnaround.
    min_ltt_share: float = 0.25
    #: [R] at most this many results per WU are stored (BOINC has no limit); then no extra result.
    max_results: int = 16

    def __post_init__(self) -> None:
        if not 0.0 <= self.min_frac_done <= 1.0:
            raise ValueError(f"min_frac_done must be in [0, 1], got {self.min_frac_done!r}")
        if not self.max_not_done >= 0:
            raise ValueError(f"max_not_done must be >= 0, got {self.max_not_done!r}")
        if not (math.isfinite(self.period) and self.period > 0):
            raise ValueError(f"period must be > 0 seconds, got {self.period!r}")
        if not self.min_results >= 1:
            raise ValueError(f"min_results must be >= 1, got {self.min_results!r}")
        if not self.max_results >= 1:
            raise ValueError(f"max_results must be >= 1, got {self.max_results!r}")


class TurnaroundStats:
    """Per-host turnaround sums and the batch's turnaround times (batch_stats.php's inputs)."""

    def __init__(self, n_hosts: int) -> None:
        self.tts: list[float] = []
        self.tt_sum = np.zeros(n_hosts)
        self.n_ok = np.zeros(n_hosts, np.int64)
        self.n_timeout = np.zeros(n_hosts, np.int64)
        #: LTT flag per host, as of the last :meth:`classify` (hosts never seen: False)
        self.ltt = np.zeros(n_hosts, bool)

    def _grow(self, host: int) -> None:
        n = max(host + 1, 2 * len(self.tt_sum))
        for name in ("tt_sum", "n_ok", "n_timeout", "ltt"):
            old = getattr(self, name)
            new = np.zeros(n, old.dtype)
            new[: len(old)] = old
            setattr(self, name, new)

    def success(self, host: int, tt: float) -> None:
        if host >= len(self.tt_sum):
            self._grow(host)
        self.tts.append(tt)
        self.tt_sum[host] += tt
        self.n_ok[host] += 1

    def timeout(self, host: int) -> None:
        if host >= len(self.tt_sum):
            self._grow(host)
        self.n_timeout[host] += 1

    def is_ltt(self, host: int) -> bool:
        return host < len(self.ltt) and bool(self.ltt[host])

    def classify(self, p: BatchAccel) -> tuple[float, bool, bool]:
        """batch_stats.php: ``(expire_time, accelerable, ltt_changed)``; updates :attr:`ltt`."""
        n = len(self.tts)
        if n < p.min_results:  # no median: the batch adds nothing, no host is LTT
            new = np.zeros(len(self.ltt), bool)
            changed = bool(self.ltt.any())
            self.ltt = new
            return 0.0, False, changed
        median = float(np.partition(np.asarray(self.tts), n // 2)[n // 2])
        seen = self.n_ok + self.n_timeout
        ntt_sum = self.tt_sum / median + p.timeout_ntt * self.n_timeout
        new = (seen > 0) & (ntt_sum < seen)  # mean normalized turnaround < 1
        changed = not np.array_equal(new, self.ltt)
        self.ltt = new
        hosts = self.n_ok > 0
        n_hosts = int(hosts.sum())
        accel = n_hosts > p.min_hosts and int((new & hosts).sum()) > p.min_ltt_share * n_hosts
        return median, accel, changed
