"""Fairness rules as admission policies (issue 40, item 5; docs/decisions/fairness-rules.md).

A site's rules about who may hold what (the reapers a testbed runs beside its lease service,
enforced here by the scheduler itself): ``max_duration`` (the longest lease), ``max_stacked`` (the
most unfinished leases a user holds at once), ``min_gap`` (the time a user's leases keep between
them), ``node_hours`` (node-hours a user's leases reserve in a rolling window). :class:`Fairness`
holds any of them; it is the built-in admission policy ``fairness`` of a scheduler configuration
(``[policies.admission] class = "fairness"``), so ``skylease serve`` enforces it and ``skylease
leases simulate`` evaluates it on the same scheduler.

The rules need the requester's other leases: an admission policy that also has
:meth:`OwnerAdmissionPolicy.admit_owner` is given an :class:`OwnerHistory` (a read-only view of the
leases of the same :attr:`Lease.owner`, as the scheduler holds them when the request arrives); a
plain :class:`~skylease.control.leases.policies.AdmissionPolicy` is called as before
(:func:`admission`). Decisions depend only on the scheduler's state, itself the replay of its
inputs, so the lease service's restart decides the same. A refusal's reason starts with the rule's
name and a colon (:func:`rule_of` reads it back).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from skylease.control.leases.idle import IdleReclaim
from skylease.control.leases.lease import Lease, LeaseKind, LeaseState, Reservation
from skylease.model.units import clock, parse_duration

__all__ = ["RULES", "Fairness", "OwnerAdmissionPolicy", "OwnerHistory", "Span", "admission", "idle_rule",
           "rule_of"]

#: The rules, in the order :class:`Fairness` checks them (a request breaking two is refused by the first).
RULES = ("max_duration", "max_stacked", "min_gap", "node_hours", "idle_reclaim")
_OVER = (LeaseState.DONE, LeaseState.REJECTED, LeaseState.CANCELLED)


@dataclass(frozen=True)
class Span:
    """What one lease holds as the rules count it: ``nodes`` from ``start`` to ``end`` (lease time)."""

    lease: int
    nodes: int
    start: int
    end: int


class OwnerHistory:
    """The other leases of one owner, read-only, as the scheduler holds them at ``now``.

    ``plans``: the scheduler's current VM reservation of each lease (its ``rr``), read to know
    where a lease not yet started is planned. ``leases`` is the scheduler's own list (not copied:
    a request does not pay for the owner's whole history), which only :meth:`forget` changes."""

    def __init__(self, owner: str | None, leases: Sequence[Lease], plans: Mapping[int, Reservation],
                 now: int) -> None:
        self.owner = owner
        self._leases = leases
        self._plans = plans
        self.now = now

    @property
    def who(self) -> str:
        """The owner as refusals name it (a workload without users is one user, "anonymous")."""
        return self.owner if self.owner is not None else "anonymous"

    def unfinished(self) -> list[Lease]:
        """The leases not over (pending, scheduled, active, suspended)."""
        return [le for le in self._leases if le.state not in _OVER]

    def forget(self, before: int) -> None:
        """Drop for good the leases that can count no more for a policy that looks back no further
        than ``before`` (the time of every later request is at least ``now``): those refused or
        cancelled before they started, and those over that ended by ``before``. Without it the
        history of a user with many leases makes each of their requests slower."""
        if isinstance(self._leases, list):
            self._leases[:] = [le for le in self._leases if not _gone(le, before)]

    def spans(self) -> list[Span]:
        """What each lease holds (none for a rejected lease, or one cancelled before it started):
        from its first start (or planned start) to its end (or planned end). A lease over ends at
        its end; one with a plan ends at its plan's VM end; an advance reservation not yet placed
        holds its requested window; a lease waiting in the queue holds from now for what it has
        left to run."""
        out = []
        for le in self._leases:
            s = _span(le, self._plans.get(le.id), self.now)
            if s is not None:
                out.append(s)
        return out


def _gone(le: Lease, before: int) -> bool:
    if le.state is LeaseState.REJECTED:
        return True
    if le.state in (LeaseState.DONE, LeaseState.CANCELLED):
        return le.first_start is None or le.end is None or le.end <= before
    return False


def _span(le: Lease, plan: Reservation | None, now: int) -> Span | None:
    if le.state is LeaseState.REJECTED:
        return None
    if le.state in _OVER:  # done or cancelled: what it held
        if le.first_start is None or le.end is None:
            return None
        return Span(le.id, le.nodes, le.first_start, max(le.end, le.first_start))
    if plan is not None:
        first = (plan.resume or plan).start
        start = le.first_start if le.first_start is not None else first
        return Span(le.id, le.nodes, start, max(plan.end, start))
    if le.kind is LeaseKind.ADVANCE_RESERVATION and le.start is not None:  # (not stepped yet)
        return Span(le.id, le.nodes, le.start, le.start + le.remaining)
    start = le.first_start if le.first_start is not None else max(now, le.submit)
    return Span(le.id, le.nodes, start, max(now, start) + le.remaining)


@runtime_checkable
class OwnerAdmissionPolicy(Protocol):
    """An admission policy that decides with the requester's other leases."""

    def admit_owner(self, lease: Lease, now: int, history: OwnerHistory) -> str | None:
        """``None`` to accept ``lease`` (submitted at ``now`` by ``lease.owner``); else why not."""
        ...


def admission(policy: object, lease: Lease, now: int, history: Callable[[], OwnerHistory]) -> str | None:
    """``policy``'s decision on ``lease``: with the owner's ``history`` (built only when the policy
    asks for it) for an :class:`OwnerAdmissionPolicy`, else as a plain admission policy."""
    # (the method looked up, not isinstance of the protocol: that costs ~27 us a request)
    admit_owner = getattr(policy, "admit_owner", None)
    if admit_owner is not None:
        return admit_owner(lease, now, history())
    return policy.admit(lease, now)  # type: ignore[attr-defined]


def rule_of(reason: str | None) -> str | None:
    """The fairness rule a refusal's reason names (``"max_stacked: ..."``), or None."""
    if not reason:
        return None
    head = reason.split(":", 1)[0]
    return head if head in RULES and reason.startswith(head + ": ") else None


def window_of(lease: Lease, now: int) -> tuple[int, int]:
    """The window a request asks for, as the rules count it: an advance reservation's requested
    start, else now (its earliest start), for its requested duration."""
    start = lease.start if lease.kind is LeaseKind.ADVANCE_RESERVATION and lease.start is not None else now
    return start, start + lease.duration


def _seconds(name: str, value: str | float | None) -> int | None:
    if value is None:
        return None
    try:
        s = parse_duration(value)
    except ValueError as e:
        raise ValueError(f"{name}: {e}") from None
    return int(-(-s // 1))


class Fairness:
    """The built-in admission policy ``fairness``: any of the rules (None: not applied).

    ``max_duration``: a lease asks for at most this long (a duration: seconds, ``7d``, ``12h``...).
    ``max_stacked``: a user holds at most this many unfinished leases (a new one is refused when
    they already hold that many). ``min_gap``: a user's new lease keeps at least this long away
    from each of their other leases (starts that long after one ends, or ends that long before one
    starts; 0 refuses overlapping leases only). ``node_hours``: the node-hours a user's leases
    reserve (nodes × time, what they hold: :meth:`OwnerHistory.spans`) within the ``window`` (a
    duration, default 30 days) that ends where the new lease ends, the new lease included, are at
    most this many. ``idle_reclaim``: a running lease idle this long (its payloads below
    ``idle_cpu``, default 5 %, of the cores it holds) is ended (not an admission rule: applied to
    running leases; :func:`idle_rule`)."""

    def __init__(self, max_duration: str | float | None = None, max_stacked: int | None = None,
                 min_gap: str | float | None = None, node_hours: float | None = None,
                 window: str | float = "30d", idle_reclaim: str | float | None = None,
                 idle_cpu: float = 0.05) -> None:
        self.max_duration = _seconds("max_duration", max_duration)
        self.min_gap = _seconds("min_gap", min_gap)
        self.window = _seconds("window", window)
        if self.max_duration is not None and self.max_duration < 1:
            raise ValueError("max_duration: must be at least 1 s")
        if not self.window:
            raise ValueError("window: must be at least 1 s")
        if max_stacked is not None and max_stacked < 1:
            raise ValueError(f"max_stacked: must be >= 1, got {max_stacked}")
        if node_hours is not None and not node_hours > 0:
            raise ValueError(f"node_hours: must be > 0, got {node_hours}")
        self.max_stacked = max_stacked
        self.node_hours = None if node_hours is None else float(node_hours)
        after = _seconds("idle_reclaim", idle_reclaim)
        # (not an admission: the lease service and the simulator apply it to running leases, idle.py)
        self.idle_reclaim = None if after is None else IdleReclaim(after, float(idle_cpu))

    def rules(self) -> list[str]:
        """The rules applied (names of :data:`RULES`)."""
        return [r for r in RULES if getattr(self, r) is not None]

    def admit(self, lease: Lease, now: int) -> str | None:
        """Without the owner's history (a scheduler that has none): the lease alone."""
        return self.admit_owner(lease, now, OwnerHistory(lease.owner, (), {}, now))

    def horizon(self) -> int:
        """How far back from a request the rules look: the leases over that ended earlier count
        no more (``min_gap`` reaches that far before the request's start, ``node_hours`` the
        ``window`` before its end; both are at least now)."""
        return max(self.min_gap or 0, self.window if self.node_hours is not None else 0)

    def admit_owner(self, lease: Lease, now: int, history: OwnerHistory) -> str | None:
        history.forget(now - self.horizon())
        for check in (self._duration, self._stacked, self._gap, self._node_hours):
            why = check(lease, now, history)
            if why is not None:
                return why
        return None

    def _duration(self, lease: Lease, now: int, history: OwnerHistory) -> str | None:
        if self.max_duration is None or lease.duration <= self.max_duration:
            return None
        return f"max_duration: asks for {clock(lease.duration)}; at most {clock(self.max_duration)}"

    def _stacked(self, lease: Lease, now: int, history: OwnerHistory) -> str | None:
        if self.max_stacked is None:
            return None
        n = len(history.unfinished())
        if n < self.max_stacked:
            return None
        return (f"max_stacked: {history.who} has {n} unfinished lease{'s' * (n != 1)} "
                f"(at most {self.max_stacked})")

    def _gap(self, lease: Lease, now: int, history: OwnerHistory) -> str | None:
        if self.min_gap is None:
            return None
        g = self.min_gap
        start, end = window_of(lease, now)
        for s in sorted(history.spans(), key=lambda s: (s.start, s.lease)):
            if start < s.end + g and s.start < end + g:
                between = (f"({clock(g)} between a user's leases)" if g
                           else "(a user's leases may not overlap)")
                if start >= s.start:
                    return (f"min_gap: {history.who}'s lease {s.lease} ends at {clock(s.end)}; their next "
                            f"lease may start from {clock(s.end + g)} {between}")
                return (f"min_gap: {history.who}'s lease {s.lease} starts at {clock(s.start)}; a lease "
                        f"before it must end by {clock(s.start - g)} {between}")
        return None

    def _node_hours(self, lease: Lease, now: int, history: OwnerHistory) -> str | None:
        if self.node_hours is None:
            return None
        start, end = window_of(lease, now)
        lo = end - self.window
        held = sum(s.nodes * _overlap(s.start, s.end, lo, end) for s in history.spans())
        held += lease.nodes * _overlap(start, end, lo, end)
        if held <= self.node_hours * 3600:
            return None
        return (f"node_hours: {history.who} would hold {held / 3600:,.6g} node-hours in the "
                f"{clock(self.window)} up to {clock(end)} (at most {self.node_hours:,g})")


def _overlap(a: int, b: int, lo: int, hi: int) -> int:
    return max(0, min(b, hi) - max(a, lo))


def idle_rule(policy: object) -> IdleReclaim | None:
    """The ``idle_reclaim`` rule of a scheduler's admission policy (a :class:`Fairness` that has
    it), or None."""
    return getattr(policy, "idle_reclaim", None) if isinstance(policy, Fairness) else None
