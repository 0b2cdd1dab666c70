"""Tasks and bags of independent tasks."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy is imported where arrays are made: a real run of commands never needs it
    import numpy as np


@dataclass(frozen=True, slots=True)
class Task:
    """One independent task.

    ``work`` is its runtime in seconds on a host of speed 1.0 (a host of speed s takes work / s).
    ``arrival`` is when it becomes known to the system, in seconds from the experiment start.
    """

    id: int
    work: float
    arrival: float = 0.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.work) and self.work >= 0):
            raise ValueError(f"task {self.id}: work must be a finite number >= 0, got {self.work!r}")
        if not (math.isfinite(self.arrival) and self.arrival >= 0):
            raise ValueError(
                f"task {self.id}: arrival must be a finite number >= 0, got {self.arrival!r}"
            )


@dataclass(frozen=True, slots=True)
class Bag:
    """A bag of independent tasks (ids unique)."""

    tasks: tuple[Task, ...]
    name: str = "bag"
    _index: dict[int, Task] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        index = {t.id: t for t in self.tasks}
        if len(index) != len(self.tasks):
            seen: set[int] = set()
            dup = next(t.id for t in self.tasks if t.id in seen or seen.add(t.id))
            raise ValueError(f"bag {self.name!r}: task id {dup} appears more than once")
        object.__setattr__(self, "_index", index)

    @classmethod
    def from_runtimes(
        cls,
        runtimes: Iterable[float] | np.ndarray,
        name: str = "bag",
        arrivals: Sequence[float] | None = None,
    ) -> Bag:
        """Build a bag from reference runtimes (ids 0..n-1)."""
        import numpy as np

        works = np.asarray(list(runtimes) if not isinstance(runtimes, np.ndarray) else runtimes, float)
        arr = np.zeros(len(works)) if arrivals is None else np.asarray(arrivals, float)
        if arr.shape != works.shape:
            raise ValueError("arrivals and runtimes differ in length")
        pairs = zip(works.tolist(), arr.tolist(), strict=True)
        return cls(tuple(Task(i, w, a) for i, (w, a) in enumerate(pairs)), name)

    def __len__(self) -> int:
        return len(self.tasks)

    def __iter__(self) -> Iterator[Task]:
        return iter(self.tasks)

    def __getitem__(self, task_id: int) -> Task:
        return self._index[task_id]

    @property
    def works(self) -> np.ndarray:
        """Reference runtimes as an array, in task order."""
        import numpy as np

        return np.fromiter((t.work for t in self.tasks), float, len(self.tasks))

    @property
    def total_work(self) -> float:
        return float(self.works.sum())
