"""A payload the lease manager knows (its process, its journal row, the work it has run)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Live"]


@dataclass
class Live:
    """A payload process the manager knows, with its journal row.

    ``debt``: lease seconds it has run beyond its schedule (negative: less), up to lease time
    ``checked``; ``running``: whether it runs (not stopped) since then. Its schedule's stops and
    continues are enacted a little late (the journal is committed first), and not at all while the
    server is down: its work then ends ``debt`` before (after) the schedule's time, which a
    premature end puts right (:meth:`~skylease.runtime.leases.manager.LocalLeaseManager._payload_exits`)."""

    payload: Any  # local.Payload
    row: int
    run: int  # the lease time its VM reservation started when it was spawned
    checked: float
    running: bool = True
    debt: float = 0.0
