"""The estimated time left of a running bag of tasks (the ETA of ``skylease run``'s live display).

Decision of ours (the issue is silent): the rate is the *running* rate, tasks finished per second
over the last :data:`WINDOW` completions (from the completion before them, or the segment's start
when there are fewer, to now), and the time left is the tasks not finished (queued and running)
over that rate. A window rather than the whole run's mean follows a pool that grows or shrinks
(A2HA renting workers, a volatile pool losing them) within a few tasks; measuring up to *now*
rather than to the last completion makes the estimate grow while nothing finishes. There is no
estimate ("-") before the first task of the segment finishes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

#: Completions the running rate is measured over.
WINDOW = 20


def eta_s(completions: Sequence[float], now: float, left: int, window: int = WINDOW) -> float | None:
    """Seconds left for ``left`` tasks at the rate of the last ``window`` ``completions`` (times in
    seconds since the segment started, ascending) up to ``now``; 0 when nothing is left, None when
    nothing has finished yet (no rate to go by)."""
    if left <= 0:
        return 0.0
    n = len(completions)
    if n == 0 or now <= 0:
        return None
    k = min(n, window)
    since = float(completions[n - k - 1]) if n > k else 0.0
    span = now - since
    if span <= 0:
        return None
    return left * span / k


def run_eta(env: Any) -> float | None:
    """The ETA of a running :class:`~skylease.runtime.env.WorkerEnvironment` (see :func:`eta_s`)."""
    return eta_s(list(env.completion_times()), float(env.now), int(env.pending()))
