"""``skylease leases simulate --rules FILE``: a site's fairness rules evaluated before it enforces
them (issue 40, item 5; docs/decisions/fairness-rules.md).

The workload runs twice through the lease scheduler the server uses: under the configuration
with the default admission (every request considered), and with the admission policy of ``FILE``
(a scheduler configuration file, its ``[policies.admission]`` table: the ``fairness`` rules of
:mod:`skylease.control.leases.fairness`, or any admission policy); the configuration is ``FILE``
itself unless one is given. The report compares the two:
leases refused (by rule), waits (mean, 95th percentile), utilisation, and the same per user.

Users: an XML workload's ``<lease-request user="...">``, an SWF log's user id (``user<id>``), and
``--users`` for the leases that name nobody (round-robin, in submission order).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skylease.control.leases import Lease, LeaseKind, LeaseState
from skylease.control.leases.fairness import rule_of
from skylease.control.leases.policies import DEFAULT_ADMISSION, AcceptAll
from skylease.experiments.leases import (
    LeaseConfig,
    LeaseSimulation,
    Workload,
    finite,
    load_config,
    load_workload,
    simulate_workload,
)
from skylease.model.errors import UserError

__all__ = ["FairnessReport", "assign_users", "fairness_report", "load_rules", "run_metrics", "wait_of"]

#: Users of ``--users N``: ``user1`` ... ``userN``.
MAX_USERS = 10_000


def assign_users(leases: list[Lease], spec: str | None) -> None:
    """Give the leases that name no owner one of ``spec``'s users, round-robin in submission order
    (``"alice,bob"``; a number N: ``user1``..``userN``). ``None`` changes nothing."""
    if spec is None:
        return
    text = spec.strip()
    if text.isdigit():
        n = int(text)
        if not 1 <= n <= MAX_USERS:
            raise UserError(f"must be 1..{MAX_USERS:,} users, got {n}", field="--users")
        names = [f"user{i}" for i in range(1, n + 1)]
    else:
        names = [u.strip() for u in text.split(",")]
        if not text or any(not u for u in names):
            raise UserError(f"give user names separated by commas (alice,bob) or a count, got {spec!r}",
                            field="--users")
    unnamed = sorted((le for le in leases if le.owner is None), key=lambda le: (le.submit, le.id))
    for i, le in enumerate(unnamed):
        le.owner = names[i % len(names)]


def load_rules(path: str | Path) -> LeaseConfig:
    """The scheduler configuration file ``path``, which must name an admission policy (the rules)."""
    path = Path(path)
    if not path.exists():  # (a file, not a configuration's name: load_config would take one)
        raise UserError("file not found", file=path)
    cfg = load_config(path)
    if isinstance(cfg.scheduler.admission, AcceptAll):
        # (no line holds what is missing: line 1, as a workload reader says of an empty workload)
        raise UserError('no rules: give a [policies.admission] table (class = "fairness" and its rules)',
                        file=path, line=1, field="policies.admission")
    return cfg


def wait_of(lease: Lease) -> int | None:
    """How long a lease waited: from its requested start (an advance reservation) or its submission
    (otherwise) to its first start; None if it never started."""
    if lease.first_start is None:
        return None
    asked = lease.submit
    if lease.kind is LeaseKind.ADVANCE_RESERVATION and lease.start is not None:
        asked = lease.start
    return lease.first_start - asked


def _p95(values: list[int]) -> float:
    """The 95th percentile, nearest rank (NaN for no value)."""
    if not values:
        return math.nan
    s = sorted(values)
    return float(s[max(0, math.ceil(0.95 * len(s)) - 1)])


def _mean(values: list[int]) -> float:
    return sum(values) / len(values) if values else math.nan


def _node_seconds(sim: LeaseSimulation) -> dict[int, int]:
    """Node-seconds of VM runs, per lease."""
    out: Counter[int] = Counter()
    for r in sim.run.runs:
        if r.kind == "vm":
            out[r.lease] += (r.stop - r.start) * len(r.nodes)
    return dict(out)


def _horizon(sim: LeaseSimulation) -> int:
    return max((r.stop for r in sim.run.runs), default=0)


def run_metrics(sim: LeaseSimulation, leases: list[Lease], horizon: int) -> dict[str, Any]:
    """One run's figures over ``leases``: requests, refused (by rule; ``other``: the scheduler's own
    refusals, e.g. no room for an advance reservation), reclaimed (ended idle: ``idle_reclaim``),
    waits, node-hours run and utilisation (VM node-seconds over ``n_nodes × horizon``; ``horizon``
    the same for both runs)."""
    refused = Counter(rule_of(le.reason) or "other" for le in leases if le.state is LeaseState.REJECTED)
    waits = [w for w in (wait_of(le) for le in leases) if w is not None]
    used = _node_seconds(sim)
    ran = sum(used.get(le.id, 0) for le in leases)
    capacity = sim.workload.n_nodes * horizon
    return {"leases": len(leases), "refused": sum(refused.values()),
            "refused_by": dict(sorted(refused.items())),
            "reclaimed": sum(le.reclaimed is not None for le in leases),
            "started": len(waits), "mean_wait_s": _mean(waits), "p95_wait_s": _p95(waits),
            "node_hours": ran / 3600, "utilisation": ran / capacity if capacity else math.nan}


@dataclass
class FairnessReport:
    """The workload without and with the rules (:func:`fairness_report`)."""

    without: LeaseSimulation
    with_rules: LeaseSimulation
    rules: str  # the rules file's name

    def horizon(self) -> int:
        """The later of the two runs' last VM end: utilisation of both is over ``[0, horizon)``."""
        return max(_horizon(self.without), _horizon(self.with_rules))

    def summary(self) -> dict[str, Any]:
        h = self.horizon()
        w = self.with_rules.workload
        return {"workload": w.name, "format": w.format, "nodes": w.n_nodes,
                "configuration": self.without.config.name, "rules": self.rules,
                "policy": self.with_rules.config.scheduler.admission.__class__.__name__, "horizon_s": h,
                "without": run_metrics(self.without, self.without.workload.leases, h),
                "with": run_metrics(self.with_rules, w.leases, h)}

    def users(self) -> list[dict[str, Any]]:
        """Per user (in name order; "anonymous" for leases that name nobody): both runs' figures."""
        h = self.horizon()
        rows = []
        for user in sorted({_who(le) for le in self.with_rules.workload.leases}):
            mine = {name: [le for le in sim.workload.leases if _who(le) == user]
                    for name, sim in (("without", self.without), ("with", self.with_rules))}
            rows.append({"user": user, "without": run_metrics(self.without, mine["without"], h),
                         "with": run_metrics(self.with_rules, mine["with"], h)})
        return rows

    def refused(self) -> list[dict[str, Any]]:
        """The leases the rules refused (with the rules; the scheduler's own refusals are not
        listed), in id order."""
        return [{"id": le.id, "user": _who(le), "rule": rule_of(le.reason), "reason": le.reason}
                for le in sorted(self.with_rules.workload.leases, key=lambda le: le.id)
                if le.state is LeaseState.REJECTED and rule_of(le.reason) is not None]

    def to_json(self) -> dict[str, Any]:
        return finite({"summary": self.summary(), "users": self.users(), "refused": self.refused()})


def _who(le: Lease) -> str:
    return le.owner if le.owner is not None else "anonymous"


def fairness_report(workload: str | Path, rules: str | Path, *, inject: str | Path | None = None,
                    config: str | Path | None = None, users: str | None = None,
                    image_seed: int | None = None) -> FairnessReport:
    """Simulate ``workload`` under ``config`` (None: the ``rules`` file itself, as ``skylease serve
    --scheduler`` would run it) with the default admission, then with the admission policy of the
    configuration file ``rules``; each run on its own copy of the workload."""
    ruling = load_rules(rules)
    policy = ruling.scheduler.admission
    base = ruling if config is None else load_config(config)
    plain = LeaseConfig(base.name, base.scheduler.with_(admission=DEFAULT_ADMISSION), base.images, base.seed)
    ruled = LeaseConfig(base.name, base.scheduler.with_(admission=policy), base.images, base.seed)
    runs = []
    for cfg in (plain, ruled):
        w: Workload = load_workload(workload, inject)
        assign_users(w.leases, users)
        runs.append(simulate_workload(w, config=cfg, image_seed=image_seed))
    return FairnessReport(runs[0], runs[1], Path(rules).name)
