"""SpeQuloS strategies of one's own, loaded by tests/experiments/test_spequlos_strategies.py from this
file (``FILE.py:CLASS``), as a user's would be."""

from skylease.control.qos import CloudStrategy
from skylease.control.qos.oracle import Snapshot, greedy, when_completed


class AtShare(CloudStrategy):
    """Start ``workers`` cloud workers once ``at`` of the submitted tasks are done; they duplicate
    the tasks still running. Every question and answer is kept in ``asked``."""

    usage = "duplicate"

    def __init__(self, at: float = 0.8, workers: int = 5) -> None:
        if not 0 < at <= 1:
            raise ValueError(f"at must be in (0, 1], got {at}")
        self.at, self.workers = at, workers
        self.asked: list[tuple[float, int, int, bool]] = []

    def should_use_cloud(self, s: Snapshot) -> bool:
        yes = s.submitted > 0 and s.completed >= self.at * s.submitted
        self.asked.append((s.elapsed, s.completed, s.submitted, yes))
        return yes

    def cloud_workers_to_start(self, s: Snapshot, credits: float) -> int:
        return self.workers


class NinetyGreedy(CloudStrategy):
    """The paper's 9C-G-R written as a user would: 90 % completed, all the credits at once."""

    usage = "reschedule"

    @property
    def greedy(self) -> bool:
        return True

    def should_use_cloud(self, s: Snapshot) -> bool:
        return when_completed(s, 0.9)

    def cloud_workers_to_start(self, s: Snapshot, credits: float) -> int:
        return greedy(credits)


class Broken(AtShare):
    """Fails the first time it is asked how many."""

    def cloud_workers_to_start(self, s: Snapshot, credits: float) -> int:
        return {}["workers"]


class Times(AtShare):
    """Reads the completion times (``needs_times``): starts its workers once the last 10 tasks took
    more than ``gap`` seconds to complete."""

    needs_times = True

    def __init__(self, gap: float = 600.0, workers: int = 5) -> None:
        super().__init__(0.5, workers)
        self.gap = gap
        self.seen = 0

    def should_use_cloud(self, s: Snapshot) -> bool:
        assert s.ctimes is not None and s.atimes is not None
        self.seen += 1
        done = s.ctimes[: s.completed]
        return s.completed > 10 and float(done[-1] - done[-11]) > self.gap
