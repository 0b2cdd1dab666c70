"""Failure classes of a real run: a failed task from a lost host, and a machine that keeps failing
(docs/decisions/failure-classes.md).

* **A lost host is not a failed task.** When a worker dies, or its machine or SSH connection is
  lost, its task goes back to the head of the queue. No retry is spent on it; the environment
  does this (:meth:`WorkerEnvironment._lost_tasks`).
* **A failed task runs again elsewhere.** A task that exits non-zero is retried (up to
  ``retries``). While the pool has a live machine it has not failed on, the retry is not given to
  a machine it failed on (:meth:`RetryRules.avoid`). GNU parallel retries on another computer in
  the same way.
* **Backoff.** Retry *n* of a task waits ``backoff_s × 2^(n-1)`` seconds, at most
  ``backoff_max_s``, before it is queued again. The default is 0 s: at once, as before.
* **A machine that keeps failing is set aside.** After ``set_aside_after`` failed tasks in a row
  on one machine (no success between them), the machine is set aside. Its workers are started
  again on other machines of the pool, and it is reported. A pool that cannot set it aside (it
  has no other machine, or it does not choose where its workers run) keeps it, and the run says
  so once.

These rules hold no clock and do no I/O. The environment asks them what to do and keeps the
times.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = ["RetryRules"]


@dataclass
class RetryRules:
    """The failure classes' state of one run (see the module docstring)."""

    set_aside_after: int = 3  # failed tasks in a row on one machine; 0: never set one aside
    backoff_s: float = 0.0  # the first retry's delay (seconds); doubled at each retry of a task
    backoff_max_s: float = 300.0
    #: task -> the machines it failed on
    failed_on: dict[int, set[str]] = field(default_factory=dict)
    #: machine -> its failed tasks since its last success
    in_a_row: dict[str, int] = field(default_factory=dict)
    #: machine -> why it was set aside (the pool set it aside) or kept (the pool could not)
    aside: dict[str, str] = field(default_factory=dict)
    kept: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.set_aside_after < 0 or self.backoff_s < 0 or self.backoff_max_s < 0:
            raise ValueError("set_aside_after, backoff_s and backoff_max_s must be >= 0")

    def delay(self, failures: int) -> float:
        """Seconds before a task that has failed ``failures`` times (1 for the first) is queued
        again."""
        if self.backoff_s <= 0 or failures <= 0:
            return 0.0
        return min(self.backoff_max_s, self.backoff_s * 2.0 ** min(failures - 1, 60))

    def failed(self, task: int, machine: str | None) -> bool:
        """``task`` failed on ``machine``: whether the machine has now failed ``set_aside_after`` tasks
        in a row (and is neither set aside nor kept already)."""
        if machine is None:
            return False
        self.failed_on.setdefault(task, set()).add(machine)
        self.in_a_row[machine] = self.in_a_row.get(machine, 0) + 1
        return (self.set_aside_after > 0 and self.in_a_row[machine] >= self.set_aside_after
                and machine not in self.aside and machine not in self.kept)

    def succeeded(self, machine: str | None) -> None:
        """A task succeeded on ``machine``: its run of failures ends."""
        if machine is not None:
            self.in_a_row[machine] = 0

    def avoid(self, task: int, machine: str | None, machines: Iterable[str]) -> bool:
        """Whether ``task`` should wait for another machine rather than run on ``machine``. It
        should when it failed there and ``machines`` (those that could run it now) include one
        it has not failed on."""
        tried = self.failed_on.get(task)
        if not tried or machine not in tried:
            return False
        return any(m not in tried and m not in self.aside for m in machines)

    def why(self, machine: str) -> str:
        n = self.in_a_row.get(machine, 0)
        return f"{n} failed task{'s' if n != 1 else ''} in a row"
