"""What a placement algorithm is, for ``skylease place --algorithm``: the built-ins and a user's own class.

A placement algorithm of one's own derives from :class:`PlacementAlgorithm` and implements
:meth:`~PlacementAlgorithm.assign`: given the VMs, the desktops and each desktop's free cores and
whether it runs a VM already, the desktop index of every VM, or -1 for a VM it leaves unplaced.
Its answer is checked (:class:`BadAnswer`: not one entry per VM, a desktop that does not exist, a
desktop given more cores than it has free) and every VM it leaves out gets its reason, as the
built-ins' do. The built-ins are :class:`Builtin` objects that call
:func:`~.algorithms.place` unchanged. Pure: no I/O; the loading of a class is the caller's
(``skylease.experiments.placement``). Why so: ``docs/decisions/map-place-plugins.md``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from skylease.model.desktop import Desktops, VMs

from .algorithms import ALGORITHMS, SECONDARY_KEYS, _state, place
from .placement import Placement

__all__ = ["BadAnswer", "Builtin", "PlacementAlgorithm", "check_placement"]


class BadAnswer(ValueError):
    """An algorithm's answer that is not a desktop (or -1) per VM within the desktops' free cores."""


class PlacementAlgorithm:
    """Base of a placement algorithm: subclass it and implement :meth:`assign`.

    ``name`` is what the result calls it (default: the class's name).
    """

    name: str = ""

    def assign(self, vms: VMs, desktops: Desktops, free: np.ndarray, has_vm: np.ndarray) -> Any:
        """The desktop index of every VM in request order, -1 for a VM left unplaced (a sequence of
        ints). ``free`` (free cores per desktop) and ``has_vm`` (0/1) are the algorithm's to change."""
        raise NotImplementedError(f"{type(self).__qualname__} does not implement "
                                  "assign(vms, desktops, free, has_vm)")

    def placement(self, vms: VMs, desktops: Desktops, *, free: np.ndarray | None = None,
                  has_vm: np.ndarray | None = None) -> Placement:
        """The checked :class:`Placement` of :meth:`assign`'s answer (VMs taken in request order)."""
        f, h, _ = _state(desktops, free, has_vm)
        answer = self.assign(vms, desktops, f.copy(), h.copy())
        return check_placement(answer, vms, desktops, f, self.name or type(self).__name__)


def check_placement(answer: Any, vms: VMs, desktops: Desktops, free: np.ndarray, name: str) -> Placement:
    """``answer`` (a desktop index or -1 per VM) as a :class:`Placement`, each VM left out with its
    reason; :class:`BadAnswer` when it is not one, or puts more cores on a desktop than it has free."""
    n, d = len(vms), len(desktops)
    if answer is None:
        raise BadAnswer("returned None, not a desktop index (or -1) per VM")
    try:
        arr = np.asarray(answer)
    except (TypeError, ValueError) as e:
        raise BadAnswer(f"returned something that is not a list of desktop indices ({e})") from None
    if arr.ndim != 1 or arr.shape[0] != n:
        raise BadAnswer(f"returned {arr.shape[0] if arr.ndim == 1 else f'shape {arr.shape}'} values; "
                        f"expected one desktop index (or -1) per VM ({n})")
    integral = arr.dtype.kind in "iu" or (arr.dtype.kind == "f" and bool(np.isfinite(arr).all())
                                          and np.array_equal(arr, np.round(arr)))
    if n and not integral:
        raise BadAnswer(f"returned {arr.dtype} values; expected desktop indices (integers, -1: unplaced)")
    desk = np.array(arr, dtype=np.int64)
    bad = np.flatnonzero((desk < -1) | (desk >= d))
    if bad.size:
        v = int(bad[0])
        raise BadAnswer(f"put VM {v} on desktop {int(desk[v])}; there are {d} desktops (0 to {d - 1}, "
                        "-1: unplaced)")
    placed = desk >= 0
    used = np.bincount(desk[placed], weights=vms.cores[placed], minlength=d).astype(np.int64)
    over = np.flatnonzero(used > free)
    if over.size:
        j = int(over[0])
        label = f" ({desktops.names[j]})" if desktops.names else ""
        raise BadAnswer(f"put {int(used[j])} cores on desktop {j}{label}, which has {int(free[j])} free")
    left = free - used
    most = int(left.max()) if d else 0
    biggest = int(desktops.cores.max()) if d else 0
    unplaced = {}
    for v in np.flatnonzero(~placed).tolist():
        c = int(vms.cores[v])
        if c > biggest:
            unplaced[v] = (f"needs {c} cores; the largest desktop has {biggest}" if biggest
                           else f"needs {c} cores; there is no desktop")
        else:
            unplaced[v] = f"needs {c} cores; {name} left it unplaced (at most {most} free afterwards)"
    desk.setflags(write=False)
    order = np.arange(n, dtype=np.int64)
    order.setflags(write=False)
    return Placement(name, desk, order, unplaced)


class Builtin(PlacementAlgorithm):
    """One of :data:`~.algorithms.ALGORITHMS` by name; ``secondary`` is Sorting's second VM key."""

    def __init__(self, name: str, secondary: str = "time_desc") -> None:
        if name not in ALGORITHMS:
            raise ValueError(f"unknown algorithm {name!r}; choose from {', '.join(ALGORITHMS)}")
        if secondary not in SECONDARY_KEYS:
            raise ValueError(f"secondary must be one of {', '.join(SECONDARY_KEYS)}, got {secondary!r}")
        self.name = name
        self.secondary = secondary

    def placement(self, vms: VMs, desktops: Desktops, *, free: np.ndarray | None = None,
                  has_vm: np.ndarray | None = None) -> Placement:
        return place(self.name, vms, desktops, free=free, has_vm=has_vm, secondary=self.secondary)

    def assign(self, vms: VMs, desktops: Desktops, free: np.ndarray, has_vm: np.ndarray) -> np.ndarray:
        return self.placement(vms, desktops, free=free, has_vm=has_vm).desktop
