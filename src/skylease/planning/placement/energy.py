"""Energy of a batch placement (thesis §6.1.1, Eqs. 6.1 and 6.9-6.11; spec 004 B3.4-B3.5).

All VMs of the batch start at t = 0. A desktop's energy has the structure of Eq. 6.10: its VMs
sorted by run time, descending, and each interval between two VM ends costs the power at the load
of the VMs still running, times its length. The load x is the used share of the desktop's cores
(Eq. 6.6) and the power comes from the desktop's power model. A desktop with no VM is switched off,
or its power belongs to its user: it costs nothing (§6.1.3.1).

A VM on a desktop with a user runs longer, ``τ + 0.1·min(d, τ)`` (Eq. 6.1, d = the user's session),
in all three readings of the thesis's accounting (spec B3.5 [R]; the thesis's tables do not pin it
down):

- ``a`` -- Eqs. 6.2-6.11 literally: power ``z·P(x)``, z = 1.1 while the user is present (t < d).
  This makes busy desktops dearer, against the thesis's own Table 6.2.
- ``b`` -- incremental, user limited in time: ``max(0, P(x) + monitor − user_w)`` while the user
  is present, ``P(x)`` after (the desktop would otherwise be off).
- ``c`` -- incremental, state at placement time (Table 6.2 literally; recommended, the default):
  on a desktop with a user, ``max(0, P(x) + monitor − user_w)`` for the VMs' whole run; on a
  desktop without one, ``P(x)``.

Only under Model C do the thesis's claims hold together (spec B3.5); the reproduction reports
the other two beside it. Durations are minutes, energies watt-hours.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from skylease.model.desktop import Desktops, VMs

from .placement import Placement

__all__ = ["ENERGY_MODELS", "USER_SLOWDOWN", "Energy", "energy", "run_minutes"]

ENERGY_MODELS = ("a", "b", "c")
#: Eq. 6.1: a VM shares the CPU with the user (L_free = 90 %): τ = 1.1·τ_user + τ_free.
USER_SLOWDOWN = 0.1
#: Eq. 6.4: z = 1.1 while a user competes for the desktop (Model A).
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


def energy(placement: Placement | np.ndarray, vms: VMs, desktops: Desktops, model: str = "c") -> Energy:
    """Energy of a placement (or of a desktop-per-VM array, -1 = unplaced) under model a, b or c."""
    model = model.lower()
    if model not in ENERGY_MODELS:
        raise ValueError(f"energy model must be one of {', '.join(ENERGY_MODELS)}, got {model!r}")
    desk = np.asarray(placement.desktop if isinstance(placement, Placement) else placement, np.int64)
    n_d = len(desktops)
    if desk.shape != (len(vms),) or (desk >= n_d).any():
        raise ValueError(f"placement must give a desktop index < {n_d} (or -1) for each of {len(vms)} VMs")
    runs = run_minutes(desk, vms, desktops)
    vi = np.flatnonzero(desk >= 0)
    dj = desk[vi]
    used_cores = np.bincount(dj, weights=vms.cores[vi], minlength=n_d)
    # Events: every VM end; for models a and b also the user's departure (clipped to the desktop's
    # last VM end, so that no interval is costed after the desktop is empty).
    ev_desk, ev_time, ev_cores = dj, runs[vi], vms.cores[vi].astype(np.float64)
    user = desktops.user_minutes
    if model != "c":
        last = np.zeros(n_d)
        np.maximum.at(last, dj, runs[vi])
        ud = np.flatnonzero((used_cores > 0) & (user > 0))
        ev_desk = np.concatenate([ev_desk, ud])
        ev_time = np.concatenate([ev_time, np.minimum(user[ud], last[ud])])
        ev_cores = np.concatenate([ev_cores, np.zeros(len(ud))])
    o = np.lexsort((ev_time, ev_desk))  # per desktop, by time; VM ends before a tied departure
    ev_desk, ev_time, ev_cores = ev_desk[o], ev_time[o], ev_cores[o]
    first = np.ones(len(o), bool)
    first[1:] = ev_desk[1:] != ev_desk[:-1]
    # cores still running just before each event: the desktop's load minus what ended earlier
    ended = np.cumsum(ev_cores) - ev_cores
    ended -= np.maximum.accumulate(np.where(first, ended, 0.0))
    running = used_cores[ev_desk] - ended
    prev = np.empty_like(ev_time)
    prev[0:1] = 0.0
    prev[1:] = ev_time[:-1]
    length = ev_time - np.where(first, 0.0, prev)
    load = 100.0 * running / desktops.cores[ev_desk]
    p = _watts(desktops, ev_desk, load)
    with_user = user[ev_desk] > 0
    if model != "c":  # the user is there during the intervals that end by the departure
        with_user &= ev_time <= user[ev_desk]
    if model == "a":
        p = np.where(with_user, USER_POWER_FACTOR * p, p)
    else:
        incremental = np.maximum(0.0, p + desktops.monitor_w[ev_desk] - desktops.user_w[ev_desk])
        p = np.where(with_user, incremental, p)
    per_desktop = np.bincount(ev_desk, weights=p * length / 60.0, minlength=n_d)
    per_desktop.setflags(write=False)
    runs.setflags(write=False)
    return Energy(model, float(per_desktop.sum()), per_desktop, runs, int((used_cores > 0).sum()))


def _watts(desktops: Desktops, desk: np.ndarray, load: np.ndarray) -> np.ndarray:
    """Power at ``load`` % for the desktops ``desk``, each with its own power model."""
    models = desktops.power_models
    if len(models) == 1:
        return models[0].watts(load)
    pidx = desktops.power_index[desk]
    p = np.empty_like(load)
    for k, m in enumerate(models):
        sel = pidx == k
        if sel.any():
            p[sel] = m.watts(load[sel])
    return p
