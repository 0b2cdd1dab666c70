"""A kind of host that can be rented (:class:`InstanceType`), apart from the catalogs that list them
(:mod:`skylease.model.catalog`, whose file schemas need pydantic): the simulators and the control
layer use instance types without loading the file machinery (0.01-0.02 s of every call)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from skylease.model.billing import Billing

__all__ = ["InstanceType"]


@dataclass(frozen=True, slots=True)
class InstanceType:
    """A kind of host that can be rented.

    ``speed`` is relative to the reference host (a task of work w takes w / speed seconds);
    ``price`` is per started ``billing_unit`` seconds (0, free, unless given: the same default as a
    pools file and ``skylease run``'s own pool); ``boot_time`` is charged but does no work;
    ``max_count`` of None means unlimited.
    """

    name: str
    speed: float = 1.0
    price: float = 0.0
    billing_unit: float = 3600.0
    boot_time: float = 0.0
    max_count: int | None = None
    location: str = "default"
    min_units: int = 1

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("instance type name must not be empty")
        if not (self.speed > 0 and math.isfinite(self.speed)):
            raise ValueError(f"{self.name}: speed must be > 0, got {self.speed!r}")
        if not (self.boot_time >= 0 and math.isfinite(self.boot_time)):
            raise ValueError(f"{self.name}: boot_time must be >= 0, got {self.boot_time!r}")
        if self.max_count is not None and self.max_count < 0:
            raise ValueError(f"{self.name}: max_count must be >= 0, got {self.max_count!r}")
        Billing(self.billing_unit, self.price, self.min_units)  # validates the billing fields

    @property
    def billing(self) -> Billing:
        return Billing(self.billing_unit, self.price, self.min_units)
