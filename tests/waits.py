"""Waiting on what a test can observe (the enactment's tests, local and on hosts)."""

from __future__ import annotations

import time
from typing import Any


def until(cond, timeout: float = 5.0, step: float = 0.01) -> Any:
    """Poll ``cond`` until it is truthy (its value) or the timeout passes (its last value)."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(step)


def waited(what: str, check, timeout: float = 60.0, step: float = 0.1) -> Any:
    """``check()`` until it gives something true (its value), failing the test after ``timeout``
    seconds with ``what`` was not seen."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(step)


def collect(nodes: Any, n: int, timeout: float = 10.0) -> list[Any]:
    """The first ``n`` payloads ``nodes.exited()`` reports within ``timeout`` (fewer if not)."""
    out: list[Any] = []
    until(lambda: out.extend(nodes.exited()) or len(out) >= n, timeout)
    return out
