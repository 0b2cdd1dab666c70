"""Pluggable scheduling policies, as Haizea 1.0 has them (its ``policy.py``): **admission** (is a
request considered at all?), **preemption** (which leases an advance reservation may preempt, and
in which order) and **host selection** (which of the usable nodes a lease's VMs go to).

Each is a small :class:`~typing.Protocol`; the built-in rules of the scheduler are the default
implementations (:class:`AcceptAll`, :class:`ARPreemptsBestEffort`, :class:`Greedy`), so a
:class:`~skylease.control.leases.config.SchedulerConfig` without policies schedules exactly as
before. A site writes its own as a plain class with the one method and names it in a scheduler
configuration file as ``"module:Class"`` (keyword parameters beside it), see
``docs/howto/leases.md``; :func:`load_policy` resolves such a name.

Policies are pure: they get what they decide on (the lease, the candidate nodes, a read-only view
of the slot table, the time) and return a decision; the scheduler does the rest (checks the
decision, books, preempts, rejects with the policy's reason). They keep no state between calls,
so the lease service replaying its journal takes the same decisions again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from skylease.control import plugins
from skylease.control.leases.fairness import Fairness
from skylease.control.leases.lease import Lease, LeaseKind, Reservation
from skylease.control.leases.slottable import SlotTable


# -- the protocols ---------------------------------------------------------------------------------
@runtime_checkable
class AdmissionPolicy(Protocol):
    """Whether a request is considered for scheduling at all (before the scheduler looks for room:
    an AR the policy accepts may still be rejected for want of nodes)."""

    def admit(self, lease: Lease, now: int) -> str | None:
        """``None`` to accept ``lease`` (submitted at ``now``); else the reason it is refused
        (the lease's rejection reason)."""
        ...


@runtime_checkable
class PreemptionPolicy(Protocol):
    """Which leases an advance reservation may preempt, and in which order. Only best-effort VM
    reservations can be preempted at all (and, with ``preempt_future_resumptions``, a suspended
    lease's plan that has not started); the policy may forbid some of them."""

    def may_preempt(self, preemptor: Lease, preemptee: Lease, at: int) -> bool:
        """Whether ``preemptor`` (an AR starting at ``at``) may take ``preemptee``'s nodes."""
        ...

    def order(self, preemptor: Lease, victims: Sequence[Reservation], at: int) -> list[Reservation]:
        """The victims' plans (VM reservations, one per lease) in the order they are preempted;
        the same reservations, each once."""
        ...


@dataclass(frozen=True)
class HostRequest:
    """What a host-selection policy decides on: ``lease`` needs ``lease.nodes`` of the
    ``candidates`` (ascending ids; one VM per node), its VMs starting at ``at``.

    ``previous``: the nodes a suspended lease was suspended on (``()`` otherwise). ``victims``: for
    an advance reservation, the candidate nodes where it would preempt, with how many reservations
    each (the others are free). ``pooled``: the nodes whose image pool holds the lease's image.
    ``table`` is the slot table, to read only (``on_node(k)``, ``reservations_at(t)``,
    ``capacity``...)."""

    lease: Lease
    at: int
    candidates: tuple[int, ...]
    table: SlotTable
    previous: tuple[int, ...] = ()
    victims: Mapping[int, int] = field(default_factory=dict)
    pooled: frozenset[int] = frozenset()


@runtime_checkable
class HostSelectionPolicy(Protocol):
    """Which of the usable nodes a lease's VMs go to."""

    def select(self, request: HostRequest) -> Sequence[int]:
        """``request.lease.nodes`` distinct nodes of ``request.candidates``."""
        ...


# -- the built-in rules ----------------------------------------------------------------------------
@dataclass(frozen=True)
class AcceptAll:
    """Every request is considered (Haizea 1.0's ``accept-all``; the default)."""

    def admit(self, lease: Lease, now: int) -> str | None:
        return None


@dataclass(frozen=True)
class NoARs:
    """Every request but advance reservations (Haizea 1.0's ``no-ARs``)."""

    def admit(self, lease: Lease, now: int) -> str | None:
        if lease.kind is LeaseKind.ADVANCE_RESERVATION:
            return "refused by the admission policy no-ARs (no advance reservations)"
        return None


@dataclass(frozen=True)
class ARPreemptsBestEffort:
    """An AR may preempt any best-effort lease, most recently submitted first (the 2008 code, decision
    H7 in docs/decisions/haizea.md; Haizea 1.0's ``ar-preempts-everything`` without its 7-day aging; the
    default)."""

    def may_preempt(self, preemptor: Lease, preemptee: Lease, at: int) -> bool:
        return True

    def order(self, preemptor: Lease, victims: Sequence[Reservation], at: int) -> list[Reservation]:
        return sorted(victims, key=lambda rr: -rr.lease.submit)


@dataclass(frozen=True)
class NoPreemption(ARPreemptsBestEffort):
    """Nothing is ever preempted (Haizea 1.0's ``no-preemption``): an AR fits in free nodes or is
    rejected."""

    def may_preempt(self, preemptor: Lease, preemptee: Lease, at: int) -> bool:
        return False


@dataclass(frozen=True)
class Greedy:
    """The scheduler's node rules (the default): a resumed lease takes its old nodes first, then
    the lowest ids; an AR takes nodes needing no preemption first (with image reuse, those holding
    its image first), then those with the fewest preemptions (decision H7 in docs/decisions/haizea.md). The
    VMs of a
    lease that must be suspended go where they can run longest: the scheduler offers only those."""

    def select(self, request: HostRequest) -> Sequence[int]:
        n = request.lease.nodes
        if request.victims or request.pooled:  # an AR (a BE lease's pools decide its candidates)
            victims, pooled = request.victims, request.pooled
            free = [k for k in request.candidates if k not in victims]
            order = (sorted(free, key=lambda k: (k not in pooled, k))
                     + sorted(victims, key=lambda k: (victims[k], k not in pooled, k)))
            return tuple(sorted(order[:n]))
        nodes: Sequence[int] = request.candidates
        if request.previous:
            old = set(request.previous)
            nodes = sorted(nodes, key=lambda k: (k not in old, k))
        return tuple(sorted(nodes[:n]))


#: The defaults: the scheduler's built-in rules.
DEFAULT_ADMISSION = AcceptAll()
DEFAULT_PREEMPTION = ARPreemptsBestEffort()
DEFAULT_HOST_SELECTION = Greedy()


# -- naming policies in a configuration -----------------------------------------------------------
#: The three kinds of policy: configuration key -> (protocol, the methods a class needs, default).
POLICY_KINDS: dict[str, tuple[type, str, object]] = {
    "admission": (AdmissionPolicy, "admit", DEFAULT_ADMISSION),
    "preemption": (PreemptionPolicy, "may_preempt and order", DEFAULT_PREEMPTION),
    "host_selection": (HostSelectionPolicy, "select", DEFAULT_HOST_SELECTION),
}

#: Built-in policies by name (Haizea 1.0's names where it has the policy).
BUILTIN_POLICIES: dict[str, dict[str, type]] = {
    "admission": {"accept-all": AcceptAll, "no-ARs": NoARs, "fairness": Fairness},
    "preemption": {"ar-preempts-best-effort": ARPreemptsBestEffort, "no-preemption": NoPreemption},
    "host_selection": {"greedy": Greedy},
}


class PolicyError(ValueError):
    """A policy that cannot be used; ``param`` names the parameter at fault (None: the class)."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


def check_policy(kind: str, policy: object) -> None:
    """Raise :class:`PolicyError` unless ``policy`` (an instance) satisfies the ``kind``'s protocol."""
    protocol, methods, _ = POLICY_KINDS[kind]
    if not isinstance(policy, protocol):
        what = kind.replace("_", "-")
        cls = type(policy)
        article = "an" if what[0] == "a" else "a"
        raise PolicyError(f"{cls.__module__}:{cls.__qualname__} is not {article} {what} "
                          f"policy: it needs the method{'s' if ' and ' in methods else ''} {methods}")


def load_policy(kind: str, name: str, params: Mapping[str, Any] | None = None) -> object:
    """The ``kind`` policy called ``name`` (a built-in name, or ``"module:Class"`` /
    ``"file.py:Class"``, found by :mod:`skylease.control.plugins`), built with the keyword
    ``params``. Any mistake is a :class:`PolicyError` in one line (never the import's traceback)."""
    params = dict(params or {})
    builtins = BUILTIN_POLICIES[kind]
    try:
        if name in builtins:
            cls: Any = builtins[name]
        elif not plugins.is_spec(name):
            raise PolicyError(f"must be one of {', '.join(builtins)} or 'module:Class', got {name!r}")
        else:
            cls = plugins.load_class(name, what=f"{kind.replace('_', '-')} policy")
        policy = plugins.instantiate(cls, params, name)
    except plugins.PluginError as e:
        raise PolicyError(str(e), e.param) from None
    check_policy(kind, policy)
    return policy


def describe(policy: object) -> str:
    """A policy's stable identity: ``module:Class`` and its parameters (a configuration's identity
    in the lease service's journal must not depend on object addresses)."""
    cls = type(policy)
    state = getattr(policy, "__dict__", None) or {}
    params = ", ".join(f"{k}={v!r}" for k, v in sorted(state.items()))
    return f"{cls.__module__}:{cls.__qualname__}({params})"
