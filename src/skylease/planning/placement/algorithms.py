"""VM placement heuristics of the thesis, chapter 6 (decision B4 in docs/decisions/thesis.md).

Pure functions returning a :class:`~skylease.planning.placement.placement.Placement`.

1-D bin packing by CPU cores onto desktops of different sizes. The heuristics and their
tie-breaks (decision B4):

- ``ff`` First-Fit: VMs in request order, each on the lowest-index desktop with enough free cores.
- ``rr`` the thesis's "custom Round Robin" (Alg. 10) with the missing ``break`` restored: it is then
  First-Fit, and gives the same placements.
- ``ffd`` First-Fit Decreasing: VMs by cores, then duration, descending; ties by request order.
- ``bf`` Best-Fit Decreasing: the same VM order as FFD (the thesis: "in First-Fit Decreasing and
  Best-Fit algorithms the items are sorted"), each VM on the feasible desktop leaving the fewest
  free cores; ties to the lowest index. ``bf-trace`` is Best-Fit in request order.
- ``sorting`` (Alg. 11): VMs by cores descending then a secondary key; each VM goes to the first
  desktop in the order (has a VM, has a user, free cores: all descending; then index) that fits,
  the order being re-sorted after every placement. Re-sorting and taking the first that fits is
  the lexicographic maximum over the fitting desktops, which is how it is computed (no sort).
  The secondary key is a parameter (decision B4): ``time_desc`` (the text, default), ``none`` (cores
  only, stable in request order: the only reading under which the Alg. 12 worked example puts
  {VM1, VM2 | VM3}) or ``time_asc``.
- ``similar`` (Alg. 12): desktops in the Alg. 11 order (sorted once), VMs as FFD; each desktop
  takes the first VM that fits, then keeps taking the unassigned VM whose requested duration is
  closest to that first VM's (decision B4: "similar" = least |τ_u − τ_v|; ties to the earlier VM
  in the order) until nothing else fits.

Every heuristic accepts the desktops' current state (``free`` cores, ``has_vm``), so the online
simulator can run the same code on a lab already running VMs. The loops are numba kernels over
int64 arrays; the wrappers validate once and explain every VM that did not fit.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numba import njit

from skylease.model.desktop import Desktops, VMs

from .placement import Placement

__all__ = [
    "ALGORITHMS",
    "SECONDARY_KEYS",
    "best_fit",
    "desktop_order",
    "first_fit",
    "first_fit_decreasing",
    "place",
    "round_robin",
    "similar_time",
    "sorting",
    "vm_order",
]

SECONDARY_KEYS = ("time_desc", "none", "time_asc")
_FF, _BF, _SORTING = 0, 1, 2
_MAX_CORES = 1 << 20  # the Sorting key packs (has_vm, user, free) into one int64


# ============================================================================================ kernels


@njit(cache=True)
def _greedy(order, vm_cores, free, has_vm, user, mode, desk, most_free):  # pragma: no cover - compiled
    """One pass over the VMs in ``order``; ``mode`` picks First-Fit, Best-Fit or Sorting's rule."""
    n_d = free.shape[0]
    for v in order:
        c = vm_cores[v]
        best = -1
        if mode == 0:  # first fit
            for j in range(n_d):
                if free[j] >= c:
                    best = j
                    break
        elif mode == 1:  # best fit: fewest cores left, lowest index on ties
            best_left = 1 << 62
            for j in range(n_d):
                left = free[j] - c
                if left >= 0 and left < best_left:
                    best = j
                    best_left = left
        else:  # sorting: max (has_vm, user, free), lowest index on ties
            best_key = -1
            for j in range(n_d):
                if free[j] >= c:
                    key = has_vm[j] * (1 << 42) + user[j] * (1 << 21) + free[j]
                    if key > best_key:
                        best = j
                        best_key = key
        if best < 0:
            desk[v] = -1
            m = 0
            for j in range(n_d):
                m = max(m, free[j])
            most_free[v] = m
        else:
            desk[v] = best
            free[best] -= c
            has_vm[best] = 1


@njit(cache=True)
def _similar(vm_order, desk_order, vm_cores, minutes, free, has_vm, desk):  # pragma: no cover - compiled
    """Alg. 12: fill each desktop in turn with VMs of durations close to its first VM's."""
    nv = vm_order.shape[0]
    for j in desk_order:
        for a in range(nv):
            v = vm_order[a]
            if desk[v] >= 0 or vm_cores[v] > free[j]:
                continue
            desk[v] = j
            free[j] -= vm_cores[v]
            has_vm[j] = 1
            anchor = minutes[v]
            while free[j] > 0:
                best = -1
                best_d = np.inf
                for b in range(nv):
                    u = vm_order[b]
                    if desk[u] < 0 and vm_cores[u] <= free[j]:
                        d = abs(minutes[u] - anchor)
                        if d < best_d:
                            best = u
                            best_d = d
                if best < 0:
                    break
                desk[best] = j
                free[j] -= vm_cores[best]
            break  # nothing unassigned fits j any more: the scan of the other VMs would be a no-op


# ============================================================================================ wrappers


def vm_order(vms: VMs, secondary: str = "time_desc") -> np.ndarray:
    """VM indices by cores descending, then ``secondary``, then request order."""
    if secondary not in SECONDARY_KEYS:
        raise ValueError(f"secondary must be one of {', '.join(SECONDARY_KEYS)}, got {secondary!r}")
    idx = np.arange(len(vms))
    if secondary == "none":
        return np.argsort(-vms.cores, kind="stable")
    minutes = -vms.minutes if secondary == "time_desc" else vms.minutes
    return np.lexsort((idx, minutes, -vms.cores))


def _state(desktops: Desktops, free: np.ndarray | None, has_vm: np.ndarray | None
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Writeable int64 copies of (free cores, has_vm, has_user), validated."""
    n = len(desktops)
    f = desktops.cores.copy() if free is None else np.array(free, dtype=np.int64)
    h = np.zeros(n, np.int64) if has_vm is None else np.array(has_vm, dtype=np.int64)
    if f.shape != (n,) or h.shape != (n,):
        raise ValueError(f"free and has_vm must have one entry per desktop ({n})")
    if (f < 0).any() or (f > desktops.cores).any():
        raise ValueError("free cores must be between 0 and each desktop's cores")
    if n and desktops.cores.max() >= _MAX_CORES:
        raise ValueError(f"desktops with {_MAX_CORES} cores or more are not supported")
    return f, (h != 0).astype(np.int64), desktops.user.astype(np.int64)


def _finish(name: str, vms: VMs, desktops: Desktops, order: np.ndarray, desk: np.ndarray,
            most_free: np.ndarray) -> Placement:
    biggest = int(desktops.cores.max()) if len(desktops) else 0
    unplaced = {}
    for v in np.flatnonzero(desk < 0).tolist():
        c = int(vms.cores[v])
        if c > biggest:
            unplaced[v] = (f"needs {c} cores; the largest desktop has {biggest}" if biggest
                           else f"needs {c} cores; there is no desktop")
        else:
            unplaced[v] = (f"needs {c} cores; no desktop had {c} free when it was placed "
                           f"(at most {int(most_free[v])})")
    desk.setflags(write=False)
    order.setflags(write=False)
    return Placement(name, desk, order, unplaced)


def _run_greedy(name: str, mode: int, order: np.ndarray, vms: VMs, desktops: Desktops,
                free: np.ndarray | None, has_vm: np.ndarray | None) -> Placement:
    f, h, u = _state(desktops, free, has_vm)
    n = len(vms)
    desk = np.full(n, -1, np.int64)
    most_free = np.zeros(n, np.int64)
    order = np.ascontiguousarray(order, dtype=np.int64)
    _greedy(order, np.array(vms.cores), f, h, u, mode, desk, most_free)
    return _finish(name, vms, desktops, order, desk, most_free)


def first_fit(vms: VMs, desktops: Desktops, *, free: np.ndarray | None = None,
              has_vm: np.ndarray | None = None) -> Placement:
    return _run_greedy("ff", _FF, np.arange(len(vms)), vms, desktops, free, has_vm)


def round_robin(vms: VMs, desktops: Desktops, *, free: np.ndarray | None = None,
                has_vm: np.ndarray | None = None) -> Placement:
    """Alg. 10 as printed assigns a VM to every desktop it fits; with the break it is First-Fit."""
    return _run_greedy("rr", _FF, np.arange(len(vms)), vms, desktops, free, has_vm)


def first_fit_decreasing(vms: VMs, desktops: Desktops, *, free: np.ndarray | None = None,
                         has_vm: np.ndarray | None = None) -> Placement:
    return _run_greedy("ffd", _FF, vm_order(vms), vms, desktops, free, has_vm)


def best_fit(vms: VMs, desktops: Desktops, *, free: np.ndarray | None = None,
             has_vm: np.ndarray | None = None, decreasing: bool = True) -> Placement:
    """Best-Fit Decreasing (default) or, with ``decreasing=False``, Best-Fit in request order."""
    order = vm_order(vms) if decreasing else np.arange(len(vms))
    return _run_greedy("bf" if decreasing else "bf-trace", _BF, order, vms, desktops, free, has_vm)


def sorting(vms: VMs, desktops: Desktops, *, free: np.ndarray | None = None,
            has_vm: np.ndarray | None = None, secondary: str = "time_desc") -> Placement:
    """Alg. 11: busy desktops (running a VM, then with a user) first, the freest among them."""
    return _run_greedy("sorting", _SORTING, vm_order(vms, secondary), vms, desktops, free, has_vm)


def desktop_order(desktops: Desktops, free: np.ndarray, has_vm: np.ndarray) -> np.ndarray:
    """Desktops by (has a VM, has a user, free cores) descending, then index (Algs. 11-12)."""
    return np.lexsort((np.arange(len(desktops)), -free, -desktops.user.astype(np.int64), -has_vm))


def similar_time(vms: VMs, desktops: Desktops, *, free: np.ndarray | None = None,
                 has_vm: np.ndarray | None = None) -> Placement:
    """Alg. 12: Sorting's orders, and each desktop filled with VMs of similar durations."""
    f, h, _ = _state(desktops, free, has_vm)
    order = vm_order(vms)
    desk = np.full(len(vms), -1, np.int64)
    _similar(order, desktop_order(desktops, f, h), np.array(vms.cores), np.array(vms.minutes), f, h, desk)
    most_free = np.full(len(vms), f.max() if len(f) else 0, np.int64)  # free cores never grow
    return _finish("similar", vms, desktops, order, desk, most_free)


ALGORITHMS: dict[str, Callable[..., Placement]] = {
    "ff": first_fit,
    "ffd": first_fit_decreasing,
    "bf": best_fit,
    "sorting": sorting,
    "similar": similar_time,
    "rr": round_robin,
    "bf-trace": lambda vms, desktops, **kw: best_fit(vms, desktops, decreasing=False, **kw),
}


def place(algorithm: str, vms: VMs, desktops: Desktops, *, free: np.ndarray | None = None,
          has_vm: np.ndarray | None = None, secondary: str = "time_desc") -> Placement:
    """Run one heuristic by name (``ALGORITHMS``); ``secondary`` applies to ``sorting`` only."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algorithm!r}; choose from {', '.join(ALGORITHMS)}")
    if algorithm == "sorting":
        return sorting(vms, desktops, free=free, has_vm=has_vm, secondary=secondary)
    return ALGORITHMS[algorithm](vms, desktops, free=free, has_vm=has_vm)
