"""A resumed run's figures over all its segments: ``summary.json`` and ``report.md`` describe the
whole run (its wall time, workers, peak, lost tasks, retries) beside its whole cost and tasks, and
list the segments it was run in.

The earlier segments' figures are read back from the store (their segment rows, hosts and
attempts), so a segment whose driver was killed counts too. Decisions of ours (the issue is silent):

* ``wall_s`` and ``elapsed_s`` add the segments' durations (the time between them, when nothing ran,
  is not the run's); a killed segment lasts until its last heartbeat.
* ``peak_hosts`` is the most workers rented at once in any one segment (segments never overlap).
* ``retried`` counts the tries that failed and were run again (a ``--retry-failed`` resume reruns
  a failed task: that is a retry too); ``lost`` the tries stopped with their worker (lost,
  released or interrupted: any recorded try that neither failed nor was a cancelled copy).
* ``duplicate_races`` and ``max_release_lag_s`` are not in the store: they add up (or take the most)
  over the segments that recorded theirs in the store's meta when they ended.
"""

from __future__ import annotations

from typing import Any


def _peak(hosts: list[dict[str, Any]], end_s: float) -> int:
    """Most hosts rented at once, from their rent and release times (not released: ``end_s``)."""
    marks = []
    for h in hosts:
        marks.append((float(h["requested_s"]), 1))
        marks.append((float(h["released_s"]) if h["released_s"] is not None else end_s, -1))
    most = now = 0
    for _, step in sorted(marks, key=lambda m: (m[0], m[1])):  # a release before a rent at one instant
        now += step
        most = max(most, now)
    return most


def whole_run(store: Any, segment: int, this: dict[str, Any]) -> dict[str, Any]:
    """The whole run's figures: this segment's (``this``: the summary's keys) with the earlier
    segments' added, and ``per_segment`` (one row each: segment, outcome, wall_s, spent, hosts)."""
    segs = [dict(r) for r in store.query("SELECT * FROM segments ORDER BY segment")]
    hosts = [dict(r) for r in store.query("SELECT * FROM hosts")]
    stats = store.meta().get("segment_stats") or {}
    total = dict(this)
    rows = []
    for s in segs:
        k = s["segment"]
        mine = [h for h in hosts if h["segment"] == k]
        if k == segment:
            rows.append({"segment": k, "outcome": this["outcome"], "wall_s": this["wall_s"],
                         "spent": this["cost_this_segment"], "hosts": this["hosts"]})
            continue
        got = stats.get(str(k)) or {}
        last = s["ended_unix"] if s["ended_unix"] is not None else s["heartbeat_unix"]
        dur = max(0.0, float(last if last is not None else s["started_unix"]) - float(s["started_unix"]))
        dur = float(got.get("wall_s", dur))  # a segment that ended says its own; a killed one its heartbeat
        rows.append({"segment": k, "outcome": s["outcome"] or "killed", "wall_s": dur, "spent": s["spent"],
                     "hosts": len(mine)})
        total["wall_s"] += dur
        total["elapsed_s"] += dur
        total["hosts"] += len(mine)
        for h in mine:
            total["hosts_per_pool"][h["pool"]] = total["hosts_per_pool"].get(h["pool"], 0) + 1
        total["peak_hosts"] = max(total["peak_hosts"], _peak(mine, dur))
        total["duplicate_races"] += int(got.get("duplicate_races", 0))
        total["max_release_lag_s"] = max(total["max_release_lag_s"], float(got.get("max_release_lag_s", 0.0)))
    # a try that stopped with its worker is recorded with why (lost, released, interrupted...)
    earlier = store.query("SELECT SUM(outcome NOT IN ('failed', 'cancelled')) AS lost, "
                          "SUM(outcome = 'failed') AS failed "
                          "FROM attempts WHERE segment < ?", (segment,))
    total["lost"] += int(earlier[0]["lost"] or 0)
    total["retried"] += int(earlier[0]["failed"] or 0)
    total["segments"] = len(rows)
    total["per_segment"] = rows
    return total


def record_segment(store: Any, segment: int, res: Any, wall_s: float | None = None) -> None:
    """Keep what the store's tables do not hold of a segment (read back by :func:`whole_run`): its
    duplicate races, longest release lag, and the wall time its own summary gave (``wall_s``)."""
    stats = store.meta().get("segment_stats") or {}
    stats[str(segment)] = {"duplicate_races": res.duplicates_won, "max_release_lag_s": res.max_release_lag_s,
                           **({} if wall_s is None else {"wall_s": float(wall_s)})}
    store.set_meta({"segment_stats": stats})
