"""The real clock of the lease service: wall time turned into the scheduler's integer seconds.

The scheduler never reads a clock (``step(now)``, ``next_event(now)``); the simulator drives it with
its event kernel, the service with a :class:`RealClock`. Lease time is whole seconds since the
server's *epoch* (the Unix time of its first start), times ``scale``: at ``--time-scale 60`` one real
second is a lease minute, so a workload of hours runs in minutes for demos and tests.

The epoch and the scale are stored with the server's state, so a restarted server (even after
``kill -9``) continues the same clock instead of starting again at 0. Wall time (``time.time``), not
a monotonic clock, is what survives a restart; a wall clock stepped backwards (NTP) makes lease time
stand still rather than go back (:meth:`now` never decreases within a process).
"""

from __future__ import annotations

import math
import threading
import time


class RealClock:
    """``now()`` = ``floor((time.time() - epoch) * scale)`` lease seconds, never decreasing."""

    def __init__(self, epoch: float, scale: float = 1.0) -> None:
        if not (math.isfinite(scale) and scale > 0):
            raise ValueError(f"time scale must be a finite number > 0, got {scale!r}")
        if not math.isfinite(epoch):
            raise ValueError(f"epoch must be finite, got {epoch!r}")
        self.epoch = float(epoch)
        self.scale = float(scale)
        self._last = 0
        self._lock = threading.Lock()

    def now(self) -> int:
        """Lease seconds since the epoch (whole: the scheduler's times are integers)."""
        t = max(0, math.floor((time.time() - self.epoch) * self.scale))
        with self._lock:
            self._last = max(self._last, t)
            return self._last

    def lease_at(self, unix: float) -> float:
        """The lease time of the Unix time ``unix`` (not rounded: :meth:`real_at`'s inverse)."""
        return (unix - self.epoch) * self.scale

    def real_at(self, t: float) -> float:
        """The Unix time at which lease time ``t`` begins."""
        return self.epoch + t / self.scale

    def seconds_until(self, t: float) -> float:
        """Real seconds from now until lease time ``t`` begins (0 if it has)."""
        return max(0.0, self.real_at(t) - time.time())

    def real_seconds(self, lease_seconds: float) -> float:
        """A lease duration in real seconds."""
        return lease_seconds / self.scale
