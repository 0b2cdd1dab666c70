"""Plain data: tasks, bags, instance types and catalogs, hosts, availability, billing.

The names are looked up on first use (PEP 562): importing :mod:`skylease.model.errors` (which the
CLI does at start) must not import numpy and pydantic through this package's other modules.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from skylease.model.availability import Availability
    from skylease.model.billing import Billing, Budget
    from skylease.model.catalog import Catalog, InstanceType
    from skylease.model.errors import UserError
    from skylease.model.host import Host, HostId, HostState
    from skylease.model.task import Bag, Task

_WHERE = {
    "Availability": "availability",
    "Bag": "task",
    "Billing": "billing",
    "Budget": "billing",
    "Catalog": "catalog",
    "Host": "host",
    "HostId": "host",
    "HostState": "host",
    "InstanceType": "catalog",
    "Task": "task",
    "UserError": "errors",
}

__all__ = [
    "Availability",
    "Bag",
    "Billing",
    "Budget",
    "Catalog",
    "Host",
    "HostId",
    "HostState",
    "InstanceType",
    "Task",
    "UserError",
]


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(f"skylease.model.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'skylease.model' has no attribute {name!r}")
