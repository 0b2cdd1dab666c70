"""The journal's group commit (docs/decisions/serve-throughput.md).

Every command of the lease manager adds its inputs and events to the batch being gathered, under the
manager's lock. A batch is *taken* under that lock (it gets the next number) and *written* after it
is released, one transaction each, in the order the batches were taken: the journal holds the inputs
in the order the scheduler saw them, as the replay needs. A request is answered once the batch
holding its inputs is written (:meth:`GroupCommit.wait_for`): while one batch is being written, the
requests that arrive join the next one, which is taken and written, in one transaction, as soon as
the first is done. So under load a commit is paid once per batch, not per request, and the
manager's lock is not held while the database writes.

If a write fails, nothing after it is written (a later batch would leave a hole in the journal's
order): every waiter for that batch or a later one gets :class:`JournalFailed` (the service's
503: a part of it has stopped), and the manager stops (``on_failure``: its journal is the truth; a
restart replays it).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from skylease.runtime.health import Unavailable

__all__ = ["GroupCommit", "JournalFailed"]

B = TypeVar("B")


class JournalFailed(Unavailable):
    """A batch of the journal could not be written (nor, then, any batch after it)."""


class GroupCommit(Generic[B]):
    """Numbered batches written by ``write`` in the order they are taken (:meth:`taken`, called
    under the manager's lock), each by the thread that took it, none while an earlier one is;
    ``on_failure`` is told the first write that failed."""

    def __init__(self, write: Callable[[B], None], on_failure: Callable[[BaseException], None]) -> None:
        self._write, self._on_failure = write, on_failure
        self._cv = threading.Condition()
        self._taken = 0  # the number of the last batch taken
        self._written = 0  # the number of the last batch written
        self._failed: BaseException | None = None

    @property
    def next(self) -> int:
        """The number the batch being gathered will get (read under the manager's lock)."""
        return self._taken + 1

    @property
    def busy(self) -> bool:
        """A batch taken is not written yet (a write is under way)."""
        return self._written < self._taken

    def written(self, n: int) -> bool:
        """Batch ``n`` is written."""
        return self._written >= n

    def taken(self) -> int:
        """A batch was taken (under the manager's lock): its number."""
        with self._cv:
            self._taken += 1
            return self._taken

    def write(self, n: int, batch: B) -> None:
        """Write batch ``n`` once every batch before it is written (raises :class:`JournalFailed`
        if one failed, or if this one does)."""
        with self._cv:
            while self._written < n - 1 and self._failed is None:
                self._cv.wait()
            self._check(n)
        try:
            self._write(batch)
        except BaseException as exc:
            with self._cv:
                self._failed = exc
                self._cv.notify_all()
            self._on_failure(exc)
            raise JournalFailed(f"the lease journal could not be written: {exc}") from exc
        with self._cv:
            self._written = n
            self._cv.notify_all()

    def should_take(self, n: int) -> bool:
        """Wait until batch ``n`` is written (False), or until it should be taken by this thread
        (True: it is not taken yet and no write is under way, so the requests that came during the
        last write join it)."""
        with self._cv:
            while True:
                self._check(n)
                if self._written >= n:
                    return False
                if self._taken < n and self._written == self._taken:
                    return True
                self._cv.wait()

    def wait_for(self, n: int) -> None:
        """Until batch ``n`` is written."""
        with self._cv:
            while self._written < n:
                self._check(n)
                self._cv.wait()

    def _check(self, n: int) -> None:
        if self._failed is not None and self._written < n:
            raise JournalFailed(f"the lease journal could not be written: {self._failed}")
