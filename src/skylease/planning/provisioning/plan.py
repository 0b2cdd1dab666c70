"""The result of every provisioning model and baseline: what to start, when, what it costs."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Plan:
    """A provisioning plan.

    ``instances`` maps a type name to its count per phase (MapReduce: [map, reduce]; single cluster:
    [count]) or per interval (Watershed). ``billed_units`` is billed instance-hours (hourly billing)
    or instance-minutes (minute billing) per type; ``detail["billing_unit"]`` says which.
    """

    status: str  # "optimal" | "infeasible" | "error"
    cost: float
    makespan_s: float
    instances: dict[str, list[int]]
    starts: dict[str, Any] | None
    billed_units: dict[str, int]
    solve_ms: float
    model: str
    deadline_s: float | None
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "optimal"

    @property
    def makespan_min(self) -> float:
        return self.makespan_s / 60.0

    @property
    def makespan_h(self) -> float:
        return self.makespan_s / 3600.0

    def to_json(self) -> dict[str, Any]:
        def num(v: float) -> float | None:
            return None if (isinstance(v, float) and math.isnan(v)) else v

        return {
            "status": self.status,
            "model": self.model,
            "cost": num(round(self.cost, 6)) if not math.isnan(self.cost) else None,
            "makespan_s": num(self.makespan_s),
            "deadline_s": self.deadline_s,
            "instances": {k: list(v) for k, v in self.instances.items()},
            "starts": self.starts,
            "billed_units": dict(self.billed_units),
            "solve_ms": round(self.solve_ms, 3),
            "detail": _jsonable(self.detail),
        }


def _jsonable(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, float) and math.isnan(v):
        return None
    if hasattr(v, "item"):  # numpy scalar
        return v.item()
    return v


def infeasible(model: str, deadline_s: float | None, message: str, solve_ms: float = 0.0,
               **detail: Any) -> Plan:
    """A plan that says no: cost and makespan NaN, one-line ``detail["message"]``."""
    return Plan("infeasible", math.nan, math.nan, {}, None, {}, solve_ms, model, deadline_s,
                {"message": message, **detail})
