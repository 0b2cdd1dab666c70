"""The SIGKILLs a shutdown schedules after its grace: one queue for the local enactment and for a
host's (the earliest first; a payload is named by its group leader's pid and start ticks, so a pid
reused meanwhile is not taken for it)."""

from __future__ import annotations

import heapq
import time

__all__ = ["GraceKills"]


class GraceKills:
    """Kills due at monotonic times. Not thread-safe: its owner's lock guards it."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, int, int]] = []  # (deadline, seq, pid, start ticks)
        self._seq = 0

    def add(self, pid: int, start_ticks: int, grace_s: float) -> None:
        """Kill the group of ``pid`` in ``grace_s`` seconds (at once if not positive)."""
        self._seq += 1
        heapq.heappush(self._heap, (time.monotonic() + max(0.0, grace_s), self._seq, pid, start_ticks))

    def next_deadline(self) -> float | None:
        """The monotonic time of the next kill, or None."""
        return self._heap[0][0] if self._heap else None

    def due(self) -> list[tuple[int, int]]:
        """The (pid, start ticks) whose grace is over, taken off the queue."""
        now, out = time.monotonic(), []
        while self._heap and self._heap[0][0] <= now:
            _, _, pid, ticks = heapq.heappop(self._heap)
            out.append((pid, ticks))
        return out
