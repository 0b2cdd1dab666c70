"""A lease's view built from a snapshot (docs/decisions/serve-fair-sharing.md).

The lease manager's state changes under its lock; a view of it (:class:`LeaseView`: the lease's
record, its events with their nodes and ends, where it runs, its payloads, its plan) takes time to
build, most of it in the events' assembly and pydantic's validation. So the manager copies under its
lock only what a view is made of (:class:`ViewParts`: a few numbers, and tuples of its immutable
event, run and transfer records) and the view is built from that copy after the lock is released:
a list of a thousand leases holds the lock for the copies, not for the views.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from skylease.control.leases.records import Event, Run, TransferRun, lease_events
from skylease.runtime.leases.api import LeaseView

__all__ = ["ViewParts", "build_view", "build_views"]


@dataclass(frozen=True)
class ViewParts:
    """What one lease's view is made of, copied under the manager's lock: ``record`` is the lease's
    record without its events (``lease_record``'s fields), the rest as :class:`LeaseView` has them."""

    record: dict[str, Any]
    owner: str
    events: tuple[Event, ...]
    runs: tuple[Run, ...]
    transfers: tuple[TransferRun, ...]
    running_on: tuple[str, ...]
    payloads: tuple[dict[str, Any], ...]
    ended_payloads: tuple[dict[str, Any], ...]
    planned: tuple[dict[str, Any], ...]
    overheads: tuple[dict[str, Any], ...] = ()
    late_starts: tuple[dict[str, Any], ...] = ()
    extensions: tuple[dict[str, Any], ...] = ()
    warnings: tuple[dict[str, Any], ...] = ()  # warnings before its end given (runtime/leases/notices.py)


def build_view(parts: ViewParts) -> LeaseView:
    """The view of one lease from its snapshot (no lock needed: nothing here is shared)."""
    lid = parts.record["id"]
    events = lease_events(parts.events, parts.runs, parts.transfers).get(lid, [])
    _extension_events(events, parts.extensions)
    if parts.warnings:  # (not the scheduler's events: the manager's own, after them at equal times)
        events = sorted([*events, *({k: v for k, v in w.items() if k != "webhook"} for w in parts.warnings)],
                        key=lambda ev: ev["time"])
    failed = sum(1 for p in parts.ended_payloads
                 if p.get("state") == "failed" or (p.get("state") == "exited" and p.get("exit_code")))
    return LeaseView(owner=parts.owner, running_on=list(parts.running_on), payloads=list(parts.payloads),
                     ended_payloads=list(parts.ended_payloads), failed_payloads=failed,
                     planned=list(parts.planned), overheads=list(parts.overheads),
                     late_starts=list(parts.late_starts), extensions=list(parts.extensions), events=events,
                     warnings=list(parts.warnings),
                     **parts.record)


def _extension_events(events: list[dict[str, Any]], extensions: tuple[dict[str, Any], ...]) -> None:
    """Each ``extended`` event with its extension's old and new end (the scheduler's event carries
    one time; the manager keeps both, in the same order: docs/decisions/lease-extensions.md)."""
    given = iter(extensions)
    for ev in events:
        if ev["event"] == "extended":
            x = next(given, None)
            if x is not None:
                ev.update(old_end=x["old_end"], new_end=x["new_end"], seconds=x["seconds"])


def build_views(parts: list[ViewParts]) -> list[LeaseView]:
    return [build_view(p) for p in parts]
