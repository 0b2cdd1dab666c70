"""Change counters for watchers (the dashboard's live pages, issue 21).

A service bumps a :class:`Changes` counter whenever its state changes; a watcher (a page's event
stream) waits on the counter's own condition, never on the service's lock: in a thread with
:meth:`Changes.wait`, or on an asyncio event loop with :meth:`Changes.wait_async`, which holds no
thread while it waits (a bump from any thread wakes it through its loop; see
docs/decisions/serve-fair-sharing.md). A :class:`ChangeLog` also remembers which object of which
owner each of the latest changes touched, so that a watcher is told only of changes to what its
user may see (a user learns nothing of another's runs or bags, not even that they moved).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque

__all__ = ["KEPT", "ChangeLog", "Changes"]

#: The latest changes a ChangeLog keeps (a watcher further behind is told "changed").
KEPT = 1024


class Changes:
    """A change counter: ``bump`` at each change, ``wait`` for one; ``close`` wakes every waiter
    (the server stops)."""

    def __init__(self) -> None:
        self.version = 0
        self.closed = False
        self._cond = threading.Condition(threading.Lock())
        # asyncio waiters: their loop -> their futures (woken through the loop, from any thread)
        self._waiters: dict[asyncio.AbstractEventLoop, set[asyncio.Future[None]]] = {}

    def bump(self) -> None:
        with self._cond:
            self.version += 1
            self._cond.notify_all()
            self._wake_async()

    def close(self) -> None:
        with self._cond:
            self.closed = True
            self._cond.notify_all()
            self._wake_async()

    def wait(self, since: int, timeout: float) -> int:
        """The version once it differs from ``since``, or after ``timeout`` seconds, or at close."""
        with self._cond:
            self._cond.wait_for(lambda: self.version != since or self.closed, timeout)
            return self.version

    async def wait_async(self, since: int, timeout: float) -> int:
        """As :meth:`wait`, awaited on the running event loop: no thread is held while it waits."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with self._cond:
            if self.version != since or self.closed:
                return self.version
            self._waiters.setdefault(loop, set()).add(future)
        try:
            await asyncio.wait((future,), timeout=timeout)
        finally:
            with self._cond:
                mine = self._waiters.get(loop)
                if mine is not None:
                    mine.discard(future)
                    if not mine:
                        del self._waiters[loop]
        return self.version

    def _wake_async(self) -> None:
        """Wake every asyncio waiter (called under ``_cond``): one call per loop, however many wait."""
        for loop, futures in self._waiters.items():
            with contextlib.suppress(RuntimeError):  # (a loop closed meanwhile: nothing waits there)
                loop.call_soon_threadsafe(_resolve, tuple(futures))


def _resolve(futures: tuple[asyncio.Future[None], ...]) -> None:
    for f in futures:
        if not f.done():
            f.set_result(None)


class ChangeLog(Changes):
    """A change counter that keeps, for its latest :data:`KEPT` changes, the object touched (``key``,
    None: none of the watched objects, e.g. a deposit to an account) and its owner."""

    def __init__(self, kept: int = KEPT) -> None:
        super().__init__()
        self.kept = kept
        self._touches: deque[tuple[int, int | None, str | None]] = deque(maxlen=kept)
        self._lock = threading.Lock()

    def touch(self, key: int | None, owner: str | None) -> None:
        """A change of ``owner``'s object ``key`` (owner None: anyone's, as a sweep of many)."""
        with self._lock:  # (recorded before a watcher wakes to the new version)
            self._touches.append((self.version + 1, key, owner))
            self.bump()

    def changed(self, caller: str | None, since: int, key: int | None = None) -> bool:
        """Whether an object ``caller`` reaches (None: an administrator, who reaches all), or the
        object ``key`` only, changed after version ``since`` (True too when ``since`` is further
        back than the changes kept)."""
        with self._lock:
            touches = list(self._touches)
        if touches and touches[0][0] > since + 1 and len(touches) == self.kept:
            return True
        return any(v > since and k is not None and (key is None or k == key)
                   and (caller is None or owner is None or owner == caller) for v, k, owner in touches)
