"""VM placement over time on desktops shared with their users (issue 9, beyond the thesis).

The thesis places one batch of VMs on a lab frozen at t = 0. Here VMs arrive and leave, users
come and go, and a placement heuristic runs online on the event kernel:

- at every placement round the queued VMs are handed, with the lab's current state (free cores,
  which desktops run a VM, which have a user now), to the same pure planner as the batch study
  (:func:`skylease.planning.placement.place`); a round runs at each arrival and each VM end
  (``period=0``), or every ``period`` minutes while VMs wait. VMs that do not fit stay queued, in
  arrival order. There is no migration: a VM stays where it started.
- a VM runs its requested minutes of work, at 90 % speed while a user shares its desktop (L_free,
  Table 6.1: the user keeps 10 % of the CPU), so a session of d minutes costs it 0.1·d minutes:
  Eq. 6.1's τ + 0.1·τ_user, as the batch study applies it. The end of every VM on a desktop moves
  when a user arrives or leaves.
- energy is integrated over time, desktop by desktop, with Table 6.2's two states evaluated at
  every instant: a desktop running VMs costs ``P(x)`` without a user and
  ``max(0, P(x) + monitor − user_w)`` with one (the incremental ECR); a desktop without VMs costs
  nothing. This is Model B's reading; Model C (a desktop's state frozen at placement) has no
  meaning once users come and go (decision B3.5). A decision of ours, stated in the docs.
- a VM bigger than every desktop can never run: it is reported unplaced at arrival, never dropped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from skylease.model.desktop import Desktops, VMs
from skylease.planning.placement import USER_SLOWDOWN, place
from skylease.sim.kernel import Kernel, Timer

__all__ = ["USER_RATE", "OnlineResult", "simulate_online"]

#: A VM's speed while a user shares its desktop (L_free = 90 %).
USER_RATE = 1.0 - USER_SLOWDOWN


@dataclass(frozen=True, eq=False)
class OnlineResult:
    """What one online run produced (times in minutes, energy in Wh)."""

    policy: str
    period: float
    energy_wh: float
    per_desktop_wh: np.ndarray
    desktop: np.ndarray  # per VM, -1 if never placed
    arrival: np.ndarray
    start: np.ndarray  # NaN if never placed
    end: np.ndarray
    unplaced: dict[int, str]
    minutes_with_user: np.ndarray  # per VM, how long a user shared its desktop
    rounds: int
    events: int

    @property
    def placed(self) -> int:
        return int((self.desktop >= 0).sum())

    @property
    def desktops_used(self) -> int:
        """Desktops that ran at least one VM at some time."""
        return int(np.unique(self.desktop[self.desktop >= 0]).size)

    @property
    def mean_wait(self) -> float:
        ok = self.desktop >= 0
        return float((self.start[ok] - self.arrival[ok]).mean()) if ok.any() else math.nan

    @property
    def makespan(self) -> float:
        return float(np.nanmax(self.end)) if self.placed else 0.0

    def summary(self) -> dict[str, float | int | str]:
        ok = self.desktop >= 0
        run = (self.end - self.start)[ok]
        return {"policy": self.policy, "period_min": self.period, "energy_wh": self.energy_wh,
                "vms": len(self.desktop), "placed": self.placed, "unplaced": len(self.unplaced),
                "desktops_used": self.desktops_used, "mean_wait_min": self.mean_wait,
                "share_with_user": float(self.minutes_with_user[ok].sum() / run.sum()) if run.size else 0.0,
                "makespan_min": self.makespan, "rounds": self.rounds, "events": self.events}


class _Run:
    """The mutable state of one online run; callbacks of the event kernel."""

    def __init__(self, vms: VMs, arrivals: np.ndarray, lab: Desktops, policy: str, period: float,
                 secondary: str) -> None:
        self.vms, self.lab, self.policy, self.period, self.secondary = vms, lab, policy, period, secondary
        self.k = Kernel()
        n, m = len(vms), len(lab)
        self.arrival = np.asarray(arrivals, dtype=np.float64)
        self.desk = np.full(n, -1, np.int64)
        self.start = np.full(n, np.nan)
        self.end = np.full(n, np.nan)
        self.work = vms.minutes.astype(np.float64).copy()  # work left, in dedicated minutes
        self.since = np.zeros(n)  # when work was last brought up to date
        self.with_user = np.zeros(n)
        self.timer: list[Timer | None] = [None] * n
        self.cores = lab.cores.tolist()
        self.free = lab.cores.copy()
        self.running: list[set[int]] = [set() for _ in range(m)]
        self.present = np.zeros(m, np.int64)
        self.energy = np.zeros(m)
        self.last = np.zeros(m)
        self.extra = (lab.monitor_w - lab.user_w).tolist()  # the incremental ECR's offset, per desktop
        table, offset = lab.watts_by_cores  # power by whole busy cores, per desktop
        self.watts, self.offset = table.tolist(), offset.tolist()
        self.user_events: list[tuple[list[float], list[int]]] = [([], [])] * m
        self.user_next = [0] * m
        self.to_arrive = n
        self.n_running = 0
        self.queue: list[int] = []
        self.unplaced: dict[int, str] = {}
        self.round_timer: Timer | None = None
        self.rounds = 0

    # -- energy and progress bookkeeping -------------------------------------------------------
    def _power(self, j: int) -> float:
        used = self.cores[j] - int(self.free[j])
        if used == 0:
            return 0.0
        p = self.watts[self.offset[j] + used]
        if self.present[j]:
            p = max(0.0, p + self.extra[j])
        return p

    def _settle(self, j: int) -> None:
        """Bring desktop j's energy and its VMs' work up to now (before its state changes)."""
        now = self.k.now
        if not self.running[j]:  # nothing runs: no energy, no work
            self.last[j] = now
            return
        self.energy[j] += self._power(j) * (now - self.last[j]) / 60.0
        self.last[j] = now
        rate = USER_RATE if self.present[j] else 1.0
        for v in self.running[j]:
            dt = now - self.since[v]
            self.work[v] -= rate * dt
            if self.present[j]:
                self.with_user[v] += dt
            self.since[v] = now

    def _arm(self, j: int) -> None:
        """(Re)schedule the end of every VM on desktop j at its current rate."""
        rate = USER_RATE if self.present[j] else 1.0
        for v in self.running[j]:
            t = self.timer[v]
            if t is not None:
                t.cancel()
            self.timer[v] = self.k.call_at(self.k.now + max(0.0, self.work[v]) / rate, self._vm_end, v)

    # -- events --------------------------------------------------------------------------------
    def arrive(self, v: int) -> None:
        self.to_arrive -= 1
        biggest = max(self.cores)
        if self.vms.cores[v] > biggest:
            self.unplaced[v] = f"needs {self.vms.cores[v]} cores; the largest desktop has {biggest}"
            self._stop_if_done()
            return
        self.queue.append(v)
        self._want_round()

    def _stop_if_done(self) -> None:
        """Later user events are moot once every VM has arrived and ended."""
        if not self.to_arrive and not self.queue and not self.n_running:
            self.k.stop()

    def _want_round(self) -> None:
        if not self.queue:
            return
        if self.period <= 0:
            self._round()
        elif self.round_timer is None or self.round_timer.cancelled:
            at = math.ceil(self.k.now / self.period) * self.period
            self.round_timer = self.k.call_at(at, self._round)

    def _round(self) -> None:
        self.rounds += 1
        q = np.array(self.queue, dtype=np.int64)
        batch = VMs(cores=self.vms.cores[q], minutes=self.vms.minutes[q])
        view = self.lab.with_users((self.present > 0).astype(np.float64))
        has_vm = np.array([len(s) > 0 for s in self.running])
        p = place(self.policy, batch, view, free=self.free, has_vm=has_vm, secondary=self.secondary)
        for i in p.order.tolist():
            j = int(p.desktop[i])
            if j >= 0:
                self._start(int(q[i]), j)
        self.queue = [int(q[i]) for i in range(len(q)) if p.desktop[i] < 0]

    def _start(self, v: int, j: int) -> None:
        self._settle(j)
        self.desk[v] = j
        self.start[v] = self.since[v] = self.k.now
        self.free[j] -= self.vms.cores[v]
        self.running[j].add(v)
        self.n_running += 1
        rate = USER_RATE if self.present[j] else 1.0
        self.timer[v] = self.k.call_at(self.k.now + self.work[v] / rate, self._vm_end, v)

    def _vm_end(self, v: int) -> None:
        j = int(self.desk[v])
        self._settle(j)
        self.running[j].discard(v)
        self.n_running -= 1
        self.free[j] += self.vms.cores[v]
        self.end[v] = self.k.now
        self.timer[v] = None
        self._want_round()
        self._stop_if_done()

    def user(self, j: int) -> None:
        """The next user arrival (+1) or departure (-1) of desktop j; then schedule the one after."""
        times, deltas = self.user_events[j]
        i = self.user_next[j]
        self._settle(j)
        self.present[j] += deltas[i]
        if self.running[j]:
            self._arm(j)
        self.user_next[j] = i + 1
        if i + 1 < len(times):  # one pending user event per desktop keeps the heap small
            self.k.schedule(times[i + 1], self.user, j)


def simulate_online(vms: VMs, arrivals: np.ndarray, desktops: Desktops,
                    sessions: tuple[np.ndarray, np.ndarray, np.ndarray], policy: str, *,
                    period: float = 0.0, secondary: str = "time_desc") -> OnlineResult:
    """Run ``policy`` online on requests arriving at ``arrivals`` (minutes), with user ``sessions``.

    ``sessions`` = (desktop, start, end) arrays in minutes; overlapping sessions on one desktop are
    allowed (a desktop has a user while any session is open). Desktops' own ``user_minutes`` are
    ignored: users come from ``sessions``. Runs until every placeable VM has ended.
    """
    arrivals = np.asarray(arrivals, dtype=np.float64)
    if arrivals.shape != (len(vms),) or not np.isfinite(arrivals).all() or (arrivals < 0).any():
        raise ValueError("arrivals must be one finite time >= 0 (minutes) per VM")
    d, s, e = (np.asarray(a) for a in sessions)
    if not (d.shape == s.shape == e.shape) or (e < s).any() or (s < 0).any() or \
            (len(d) and (d.min() < 0 or d.max() >= len(desktops))):
        raise ValueError("sessions must be (desktop, start, end) arrays with 0 <= start <= end")
    if period < 0 or not math.isfinite(period):
        raise ValueError(f"period must be >= 0 minutes, got {period}")
    r = _Run(vms, arrivals, desktops.with_users(np.zeros(len(desktops))), policy, period, secondary)
    for v in np.argsort(arrivals, kind="stable").tolist():
        r.k.schedule(float(arrivals[v]), r.arrive, v)
    times = np.concatenate([s, e]).astype(np.float64)
    deltas = np.concatenate([np.ones(len(s), np.int64), -np.ones(len(e), np.int64)])
    desk = np.concatenate([d, d]).astype(np.int64)
    o = np.lexsort((-deltas, times, desk))  # per desktop, by time; an arrival before a tied departure
    bounds = np.searchsorted(desk[o], np.arange(len(desktops) + 1))
    for j in range(len(desktops)):
        sel = o[bounds[j]:bounds[j + 1]]
        r.user_events[j] = (times[sel].tolist(), deltas[sel].tolist())
        if len(sel):
            r.k.schedule(float(times[sel[0]]), r.user, j)
    if len(vms):
        r.k.run()
    for v in r.queue:  # cannot happen for a VM that fits an empty desktop; kept as a guard
        r.unplaced.setdefault(v, "still queued when the simulation ended")
    for arr in (r.desk, r.start, r.end, r.energy, r.with_user):
        arr.setflags(write=False)
    return OnlineResult(policy, period, float(r.energy.sum()), r.energy, r.desk, arrivals, r.start, r.end,
                        r.unplaced, r.with_user, r.rounds, r.k.events)

