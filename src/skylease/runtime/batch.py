"""Several tiny tasks in one call to a worker (local or Dask): the dispatch round trip is paid once per
batch."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from typing import Any

from skylease.runtime.execute import Starter, run_task


def batch_payload(tasks: Sequence[dict[str, Any]], attempts: Sequence[int]) -> str:
    """The batch as one JSON string: Dask walks list and dict arguments looking for futures (0.1 s
    of the driver's CPU per 2,000 tasks), a string it passes as it is."""
    return json.dumps({"tasks": list(tasks), "attempts": list(attempts)})


def run_batch(payload: str, timeout_s: float | None = None, start: Starter = subprocess.Popen) -> list[dict]:
    """Run the tasks of ``payload`` (:func:`batch_payload`) one after the other on this worker; one
    outcome per task, in order (``start``: as :func:`run_task`'s)."""
    batch = json.loads(payload)
    tasks, attempts = batch["tasks"], batch["attempts"]
    if len(tasks) != len(attempts):  # (not zip's strict=: a worker on an SSH host may run Python 3.9)
        raise ValueError(f"{len(tasks)} tasks but {len(attempts)} attempts")
    return [run_task(tasks[i], attempts[i], timeout_s, start) for i in range(len(tasks))]
