"""Several tiny tasks in one Dask call: the dispatch round trip is paid once per batch."""

from __future__ import annotations

from typing import Any

from skylease.runtime.execute import run_task


def run_batch(tasks: list[dict[str, Any]], attempts: list[int], timeout_s: float | None = None) -> list[dict]:
    """Run ``tasks`` one after the other on this worker; one outcome per task, in order."""
    return [run_task(t, a, timeout_s) for t, a in zip(tasks, attempts, strict=True)]
