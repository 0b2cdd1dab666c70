"""Plain data: tasks, bags, instance types and catalogs, hosts, availability, billing."""

from skylease.model.availability import Availability
from skylease.model.billing import Billing, Budget
from skylease.model.catalog import Catalog, InstanceType
from skylease.model.errors import UserError
from skylease.model.host import Host, HostId, HostState
from skylease.model.task import Bag, Task

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
