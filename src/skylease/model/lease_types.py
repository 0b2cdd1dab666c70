"""The lease types a request may name, and which of them may be preempted: one rule for the XML
workloads of ``leases simulate`` (skylease.traces.lwf) and the requests of ``skylease serve``
(skylease.runtime.leases.manager), so that the two accept the same leases."""

from __future__ import annotations

__all__ = ["LWF_TYPES", "preemptible_refusal"]

#: The kinds of Haizea's lease workloads and the request types they are.
LWF_TYPES = {"BE": "best-effort", "AR": "advance-reservation", "IM": "immediate"}


def preemptible_refusal(lease_type: str, preemptible: bool | None) -> str | None:
    """Why a lease of ``lease_type`` (a request type: ``best-effort``, ...) cannot have
    ``preemptible`` (None: it can). Only best-effort leases are preemptible: an advance reservation
    or an immediate lease is promised its nodes for its whole duration."""
    if preemptible and lease_type != "best-effort":
        return f"an {lease_type} lease cannot be preemptible (only best-effort leases are)"
    return None
