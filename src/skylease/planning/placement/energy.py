"""Energy of a batch placement (thesis §6.1.1, Eqs. 6.1 and 6.9-6.11; decisions B3.4-B3.5 in
docs/decisions/thesis.md).

All VMs of the batch start at t = 0. A desktop's energy has the structure of Eq. 6.10: its VMs
sorted by run time, descending, and each interval between two VM ends costs the power at the load
of the VMs still running, times its length. The load x is the used share of the desktop's cores
(Eq. 6.6) and the power comes from the desktop's power model. A desktop with no VM is switched off,
or its power belongs to its user: it costs nothing (§6.1.3.1).

A VM on a desktop with a user runs longer, ``τ + 0.1·min(d, τ)`` (Eq. 6.1, d = the user's session),
in all three readings of the thesis's accounting (decision B3.5; the thesis's tables do not pin it
down):

- ``a`` -- Eqs. 6.2-6.11 literally: power ``z·P(x)``, z = 1.1 while the user is present (t < d).
  This makes busy desktops dearer, against the thesis's own Table 6.2.
- ``b`` -- incremental, user limited in time: ``max(0, P(x) + monitor − user_w)`` while the user
  is present, ``P(x)`` after (the desktop would otherwise be off).
- ``c`` -- incremental, state at placement time (Table 6.2 literally; recommended, the default):
  on a desktop with a user, ``max(0, P(x) + monitor − user_w)`` for the VMs' whole run; on a
  desktop without one, ``P(x)``.

Only under Model C do the thesis's claims hold together (decision B3.5); the reproduction reports
the other two beside it. Durations are minutes, energies watt-hours.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from skylease.model.desktop import Desktops, VMs

from .placement import Placement

__all__ = ["ENERGY_MODELS", "USER_SLOWDOWN", "Energy", "energy", "run_minutes"]

ENERGY_MODELS = ("a", "b", "c")
#: Eq. 6.1: a VM shares the CPU with the user (L_free = 90 %): τ = 1.1·τ_user + τ_free.
USER_SLOWDOWN = 0.1
#: Eq. 6.4: z = 1.1 while a user competes for the desktop (Model A; the kernel spells it out).
USER_POWER_FACTOR = 1.1


@dataclass(frozen=True, eq=False)
class Energy:
    """Total and per-desktop energy of a placement under one accounting model."""

    model: str
    total_wh: float
    per_desktop_wh: np.ndarray  # float64 (n_desktops,)
    run_minutes: np.ndarray  # float64 (n_vms,), how long each VM ran (NaN if unplaced)
    desktops_used: int


def run_minutes(desktop: np.ndarray, vms: VMs, desktops: Desktops) -> np.ndarray:
    """Each VM's run time: τ, or τ + 0.1·min(d, τ) on a desktop with a user (NaN if unplaced)."""
    d = np.asarray(desktop, dtype=np.int64)
    out = np.full(len(vms), np.nan)
    placed = d >= 0
    tau = vms.minutes[placed]
    out[placed] = tau + USER_SLOWDOWN * np.minimum(desktops.user_minutes[d[placed]], tau)
    return out


_MODEL_CODES = {"a": 0, "b": 1, "c": 2}


@njit(cache=True)
def _energy_kernel(desk, runs, vm_cores, user, watts, offset, extra, model, out):  # pragma: no cover
    """Eq. 6.10 per desktop: its VMs by run time, each interval at the load still running.

    Fills ``out`` (Wh per desktop); returns (total Wh, desktops used).
    """
    n_d = out.shape[0]
    count = np.zeros(n_d + 1, np.int64)
    for v in range(desk.shape[0]):
        if desk[v] >= 0:
            count[desk[v] + 1] += 1
    for j in range(n_d):
        count[j + 1] += count[j]
    members = np.empty(count[n_d], np.int64)
    fill = count[:n_d].copy()
    for v in range(desk.shape[0]):
        if desk[v] >= 0:
            members[fill[desk[v]]] = v
            fill[desk[v]] += 1
    total = 0.0
    n_used = 0
    for j in range(n_d):
        vs = members[count[j]:count[j + 1]]
        if vs.shape[0] == 0:
            continue
        n_used += 1
        ends = runs[vs]
        order = np.argsort(ends)  # the VM that ends first leaves first
        used = 0
        for v in vs:
            used += vm_cores[v]
        d = user[j]
        e = 0.0
        prev = 0.0
        for i in range(order.shape[0]):
            v = vs[order[i]]
            t = runs[v]
            p = watts[offset[j] + used]
            if d > 0.0 and model == 2:  # Model C: the state at placement, for the whole run
                e += max(0.0, p + extra[j]) * (t - prev)
            elif d > 0.0 and prev < d:  # Models A and B: the user is there until d
                split = min(d, t)
                pu = 1.1 * p if model == 0 else max(0.0, p + extra[j])
                e += pu * (split - prev) + p * (t - split)
            else:
                e += p * (t - prev)
            prev = t
            used -= vm_cores[v]
        out[j] = e / 60.0
        total += out[j]
    return total, n_used


def energy(placement: Placement | np.ndarray, vms: VMs, desktops: Desktops, model: str = "c") -> Energy:
    """Energy of a placement (or of a desktop-per-VM array, -1 = unplaced) under model a, b or c."""
    model = model.lower()
    if model not in ENERGY_MODELS:
        raise ValueError(f"energy model must be one of {', '.join(ENERGY_MODELS)}, got {model!r}")
    desk = np.array(placement.desktop if isinstance(placement, Placement) else placement, dtype=np.int64)
    n_d = len(desktops)
    if desk.shape != (len(vms),) or (desk >= n_d).any() or (desk < -1).any():
        raise ValueError(f"placement must give a desktop index < {n_d} (or -1) for each of {len(vms)} VMs")
    runs = run_minutes(desk, vms, desktops)
    watts, offset = desktops.watts_by_cores
    per_desktop = np.zeros(n_d)
    total, used = _energy_kernel(desk, runs, vms.cores, desktops.user_minutes, watts, offset,
                                 desktops.monitor_w - desktops.user_w, _MODEL_CODES[model], per_desktop)
    per_desktop.setflags(write=False)
    runs.setflags(write=False)
    return Energy(model, float(total), per_desktop, runs, int(used))
