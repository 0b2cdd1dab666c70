"""Desktops shared with their users, and the VMs placed on them (thesis ch. 6, decisions B1-B5 in
docs/decisions/thesis.md).

Per-item records (:class:`Desktop`, :class:`VM`) are what files hold; the planners work on the
array views (:class:`Desktops`, :class:`VMs`), one numpy entry per desktop or VM, in index order.

Units: VM durations in minutes (the thesis's unit), power in watts, energy in watt-hours.
Packing is by CPU cores only (decision B4): memory and disk are carried, never packed.
A desktop's user, if any, sits at it from t = 0 for ``user_minutes`` (the thesis's d_j);
``user_minutes == 0`` means no user.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from skylease.model.power import THESIS_POWER, PowerModel

__all__ = ["ECR_MON_W", "ECR_USER_W", "VM", "Desktop", "Desktops", "VMs"]

#: Monitor power while a user is present (Table 6.1, ECR_MON).
ECR_MON_W = 20.0
#: Mean desktop power with a user and no VM (Table 6.1, ECR_user). It is close to the thesis curve
#: at the users' 10 % load plus the monitor (66.3 + 20 W).
ECR_USER_W = 87.0


@dataclass(frozen=True, slots=True)
class VM:
    """A VM request: cores, requested duration (minutes), memory and disk (not packed)."""

    cores: int
    minutes: float
    memory_gb: float = 1.0
    disk_gb: float = 20.0
    name: str = ""


@dataclass(frozen=True, slots=True)
class Desktop:
    """A lab desktop: its cores, power model, monitor and user draw, and its user (if any)."""

    cores: int
    power: PowerModel = THESIS_POWER
    monitor_w: float = ECR_MON_W
    user_w: float = ECR_USER_W
    user_minutes: float = 0.0
    name: str = ""


def _cores(x: object, what: str) -> np.ndarray:
    """Validated read-only int64 core counts (whole numbers >= 1)."""
    c = np.asarray(x)
    if c.size and not np.all(np.equal(np.mod(c, 1), 0)):
        raise ValueError(f"{what} cores must be whole numbers")
    c = _arr(c, np.int64, None, "cores")
    if (c < 1).any():
        raise ValueError(f"every {what} needs at least 1 core")
    return c


def _arr(x: object, dtype: type, n: int | None, what: str) -> np.ndarray:
    a = np.array(x, dtype=dtype)  # a copy: the views own their arrays
    if a.ndim != 1 or (n is not None and len(a) != n):
        raise ValueError(f"{what} must be a 1-D array of length {n}, got shape {a.shape}")
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class VMs:
    """A batch of VM requests as arrays (index = VM number)."""

    cores: np.ndarray
    minutes: np.ndarray
    memory_gb: np.ndarray = field(default=None)  # type: ignore[assignment]
    disk_gb: np.ndarray = field(default=None)  # type: ignore[assignment]
    names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        cores = _cores(self.cores, "VM")
        n = len(cores)
        minutes = _arr(self.minutes, np.float64, n, "minutes")
        if not (np.isfinite(minutes).all() and (minutes > 0).all()):
            raise ValueError("VM durations must be finite and > 0 minutes")
        mem = _arr(np.ones(n) if self.memory_gb is None else self.memory_gb, np.float64, n, "memory_gb")
        disk = _arr(np.full(n, 20.0) if self.disk_gb is None else self.disk_gb, np.float64, n, "disk_gb")
        names = tuple(self.names) if self.names else tuple(f"vm{i + 1:03d}" for i in range(n))
        if len(names) != n:
            raise ValueError(f"{len(names)} names for {n} VMs")
        for k, v in (("cores", cores), ("minutes", minutes), ("memory_gb", mem), ("disk_gb", disk),
                     ("names", names)):
            object.__setattr__(self, k, v)

    @classmethod
    def from_list(cls, vms: Sequence[VM]) -> VMs:
        return cls(cores=[v.cores for v in vms], minutes=[v.minutes for v in vms],
                   memory_gb=[v.memory_gb for v in vms], disk_gb=[v.disk_gb for v in vms],
                   names=tuple(v.name or f"vm{i + 1:03d}" for i, v in enumerate(vms)))

    def __len__(self) -> int:
        return len(self.cores)


@dataclass(frozen=True, eq=False)
class Desktops:
    """A lab as arrays (index = desktop number); ``power_index`` points into ``power_models``."""

    cores: np.ndarray
    user_minutes: np.ndarray = field(default=None)  # type: ignore[assignment]
    monitor_w: np.ndarray = field(default=None)  # type: ignore[assignment]
    user_w: np.ndarray = field(default=None)  # type: ignore[assignment]
    power_index: np.ndarray = field(default=None)  # type: ignore[assignment]
    power_models: tuple[PowerModel, ...] = (THESIS_POWER,)
    names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        cores = _cores(self.cores, "desktop")
        n = len(cores)

        def col(x: object, default: float, what: str) -> np.ndarray:
            a = _arr(np.full(n, default) if x is None else x, np.float64, n, what)
            if not (np.isfinite(a).all() and (a >= 0).all()):
                raise ValueError(f"{what} must be finite and >= 0")
            return a

        user = col(self.user_minutes, 0.0, "user_minutes")
        mon = col(self.monitor_w, ECR_MON_W, "monitor_w")
        uw = col(self.user_w, ECR_USER_W, "user_w")
        pidx = _arr(np.zeros(n) if self.power_index is None else self.power_index, np.int64, n,
                    "power_index")
        models = tuple(self.power_models)
        if n and (pidx.min() < 0 or pidx.max() >= len(models)):
            raise ValueError("power_index out of range of power_models")
        names = tuple(self.names) if self.names else tuple(f"pc{i + 1:03d}" for i in range(n))
        if len(names) != n:
            raise ValueError(f"{len(names)} names for {n} desktops")
        for k, v in (("cores", cores), ("user_minutes", user), ("monitor_w", mon), ("user_w", uw),
                     ("power_index", pidx), ("power_models", models), ("names", names)):
            object.__setattr__(self, k, v)

    @classmethod
    def from_list(cls, desktops: Sequence[Desktop]) -> Desktops:
        models: list[PowerModel] = []
        index = []
        for d in desktops:
            if d.power not in models:
                models.append(d.power)
            index.append(models.index(d.power))
        return cls(cores=[d.cores for d in desktops], user_minutes=[d.user_minutes for d in desktops],
                   monitor_w=[d.monitor_w for d in desktops], user_w=[d.user_w for d in desktops],
                   power_index=index, power_models=tuple(models) or (THESIS_POWER,),
                   names=tuple(d.name or f"pc{i + 1:03d}" for i, d in enumerate(desktops)))

    def __len__(self) -> int:
        return len(self.cores)

    @property
    def user(self) -> np.ndarray:
        """True where a user sits at the desktop (the thesis's busy state)."""
        return self.user_minutes > 0

    @property
    def total_cores(self) -> int:
        return int(self.cores.sum())

    @functools.cached_property
    def watts_by_cores(self) -> tuple[np.ndarray, np.ndarray]:
        """Each desktop's power with 0, 1, ..., all its cores busy: (flat table, offset per desktop).

        Desktop j with u cores busy draws ``table[offset[j] + u]`` watts (load x = 100 u / cores,
        Eq. 6.6). Desktops sharing a power model and a core count share a row; computed once.
        """
        rows: dict[tuple[int, int], int] = {}
        parts: list[np.ndarray] = []
        size = 0
        offset = np.empty(len(self), np.int64)
        for j, key in enumerate(zip(self.power_index.tolist(), self.cores.tolist(), strict=True)):
            if key not in rows:
                model, c = key
                rows[key] = size
                parts.append(self.power_models[model].watts(100.0 * np.arange(c + 1) / c))
                size += c + 1
            offset[j] = rows[key]
        table = np.concatenate(parts) if parts else np.zeros(0)
        table.setflags(write=False)
        offset.setflags(write=False)
        return table, offset

    def with_users(self, user_minutes: np.ndarray) -> Desktops:
        """The same desktops with these users (session length per desktop, 0 = none)."""
        return Desktops(self.cores, user_minutes, self.monitor_w, self.user_w, self.power_index,
                        self.power_models, self.names)

    def take(self, order: np.ndarray) -> Desktops:
        """The desktops in another order (``order[k]`` = old index of new desktop k)."""
        o = np.asarray(order, dtype=np.int64)
        return Desktops(self.cores[o], self.user_minutes[o], self.monitor_w[o], self.user_w[o],
                        self.power_index[o], self.power_models, tuple(self.names[i] for i in o))
