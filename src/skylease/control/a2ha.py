"""A2HA: budget-aware adaptive host allocation for bags of tasks with unknown task times.

Silva, Veiga and Ferreira, J. Internet Serv. Appl. 2 (2011), Figs. 3, 5 and 7 and Sects. 3.1-3.6,
as read by the decisions of ``docs/decisions/a2ha.md`` (its section ALG is the algorithm followed
here; the tags A1-A29 below are the decisions of that file). The policy acts only through the
Environment protocol, so the same object runs on the simulator and on real workers. It relies on
the environment handing out queued tasks in the order they were submitted: submit the bag in a
random permutation (A2HA's random task selection, ``simulate(order="random")``); interrupted tasks
go back to the head of the queue (A10).

Beyond the paper, ``budget=`` is a hard cap on money: every charged unit is committed in a ledger
before it is bought (a new host buys one unit, keeping a host past its boundary buys one more),
and nothing is bought that would take the ledger past the budget. Hosts are released exactly at
their unit boundaries, so the environment never charges more than the ledger holds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from skylease.control.env import Environment, Handle, HostView, Policy
from skylease.model.host import HostId, HostState
from skylease.model.task import Task

PRESETS: dict[str, tuple[float, float]] = {"conservative": (0.5, 0.5), "aggressive": (0.75, 0.75)}


def round_half_away(x: float) -> int:
    """Python 2's ``round`` (the paper's code): halves go away from zero (A3)."""
    return math.floor(x + 0.5) if x >= 0 else -math.floor(-x + 0.5)


@dataclass(slots=True)
class _Lease:
    """The policy's view of one rented host: what it has committed to pay for."""

    view: HostView
    created: float
    k: int = 1  # charge units committed
    kplan: int = 1  # units planned by extensions (long tasks, the N/2 rule)
    continued: bool = False
    boundary: Handle | None = None
    ready_at: float = 0.0  # creation + boot: when it can start work
    window_end: float = 0.0  # W_h, kept current as k and kplan change


@dataclass(frozen=True, slots=True)
class Step:
    """One allocation decision, for the paper's trajectory figures (Figs. 4b, 6b)."""

    time: float
    finished: int
    mean_task_s: float
    possible: float
    necessary: int
    created: int
    creation_ratio: float
    alive: int


class A2HA(Policy):
    """Adaptive host allocation for one pool (decision ALG in docs/decisions/a2ha.md, with A1-A29).

    ``creation_ratio``/``increase_ratio``: damping (Fig. 5); ``budget_factor`` β: hosts work
    (U - boot)/β per unit (A21); ``budget``: a hard cap on money (``None``: none), or
    ``budget_units`` in charge units. ``possible="floor"|"fraction"`` (A2), ``periodic_alloc=
    "always"|"updated"`` (A5), ``half_rule`` (the N/2 rule, A8), ``guard`` (the starvation guard, A9),
    ``alpha`` (long-task mode threshold, A7), ``literal_fig7`` (the printed, dimensionally wrong
    Fig. 7 formula, A1; for comparison only). ``record=True`` keeps every :class:`Step`.
    """

    def __init__(self, creation_ratio: float = 0.5, increase_ratio: float = 0.5, budget_factor: float = 1.0,
                 initial_hosts: int = 1, adjust_period: float = 300.0, *, pool: str | None = None,
                 budget: float | None = None, budget_units: int | None = None,
                 host_processing_time: float | None = None, possible: str = "floor",
                 periodic_alloc: str = "always", half_rule: bool = True, guard: bool = True,
                 alpha: float = 1.0, literal_fig7: bool = False, record: bool = False) -> None:
        if not 0.0 <= creation_ratio <= 1.0:
            raise ValueError(f"creation_ratio must be in [0, 1], got {creation_ratio!r}")
        if not 0.0 <= increase_ratio <= 1.0:
            raise ValueError(f"increase_ratio must be in [0, 1], got {increase_ratio!r}")
        if not budget_factor >= 1.0:
            raise ValueError(f"budget_factor must be >= 1, got {budget_factor!r}")
        if initial_hosts < 0:
            raise ValueError(f"initial_hosts must be >= 0, got {initial_hosts!r}")
        if not adjust_period > 0:
            raise ValueError(f"adjust_period must be > 0 seconds, got {adjust_period!r}")
        if budget is not None and budget_units is not None:
            raise ValueError("give budget (money) or budget_units, not both")
        if budget is not None and not (budget >= 0 and math.isfinite(budget)):
            raise ValueError(f"budget must be a finite amount >= 0, got {budget!r}")
        if budget_units is not None and budget_units < 0:
            raise ValueError(f"budget_units must be >= 0, got {budget_units!r}")
        if possible not in ("floor", "fraction"):
            raise ValueError(f"possible must be 'floor' or 'fraction', got {possible!r}")
        if periodic_alloc not in ("always", "updated"):
            raise ValueError(f"periodic_alloc must be 'always' or 'updated', got {periodic_alloc!r}")
        self.cr0, self.ir, self.beta = creation_ratio, increase_ratio, budget_factor
        self.initial_hosts, self.period, self.pool = initial_hosts, adjust_period, pool
        self.budget, self.budget_units = budget, budget_units
        self.host_processing_time = host_processing_time
        self.possible, self.periodic_alloc = possible, periodic_alloc
        self.half_rule, self.guard, self.alpha, self.literal_fig7 = half_rule, guard, alpha, literal_fig7
        self.record = record
        self._reset()

    @classmethod
    def preset(cls, name: str, **kwargs: object) -> A2HA:
        """``conservative`` (0.5/0.5) or ``aggressive`` (0.75/0.75), the paper's Fig. 12 presets."""
        try:
            cr, ir = PRESETS[name]
        except KeyError:
            raise ValueError(f"unknown preset {name!r}; presets are {sorted(PRESETS)}") from None
        return cls(cr, ir, **kwargs)  # type: ignore[arg-type]

    def _reset(self) -> None:
        self.env: Environment | None = None
        self.creation_ratio = self.cr0
        self.mean_task: float | None = None  # T̄
        self.finished = 0
        self.total_processing = 0.0
        self.n_tasks = 0
        self.created = 0
        self.committed_units = 0
        self.gave_up = False
        self.steps: list[Step] = []
        self._leases: dict[HostId, _Lease] = {}
        self._tick: Handle | None = None

    # -- setup ------------------------------------------------------------------------------
    def on_start(self, env: Environment) -> None:
        self._reset()
        self.env = env
        pool = self.pool if self.pool is not None else env.pools()[0]
        self.pool = pool
        itype = env.pool_type(pool)
        self.unit = itype.billing_unit
        self.boot = itype.boot_time
        self.price = itype.price
        if self.boot >= self.unit:
            raise ValueError(f"A2HA needs a boot time shorter than the billing unit "
                             f"({self.boot:g} s >= {self.unit:g} s)")
        self.H = (self.host_processing_time if self.host_processing_time is not None
                  else (self.unit - self.boot) / self.beta)
        if self.budget_units is not None:
            self.max_units: float = self.budget_units
        elif self.budget is not None:
            # whole units the budget buys; a free pool is bounded by nothing
            self.max_units = math.inf if self.price == 0 else math.floor(self.budget / self.price + 1e-9)
        else:
            self.max_units = math.inf
        self.n_tasks = env.pending()
        if self.n_tasks == 0:
            return
        self._create(self.initial_hosts)
        if self.guard and not self._leases:
            self._create(1)
        self._tick = env.call_later(self.period, self._periodic)

    # -- money ------------------------------------------------------------------------------
    def _affordable(self, units: int = 1) -> bool:
        return self.committed_units + units <= self.max_units

    @property
    def committed(self) -> float:
        """Money committed so far: every unit bought, whether or not it has been used yet."""
        return self.committed_units * self.price

    def _create(self, n: int) -> int:
        env = self.env
        assert env is not None and self.pool is not None
        n = max(0, min(n, self.max_units - self.committed_units)) if self.max_units < math.inf else n
        if n <= 0:
            return 0
        ids = env.acquire(self.pool, int(n))
        now = env.now
        for hid in ids:
            lease = _Lease(env.host(hid), now, ready_at=now + self.boot)
            self._update_window(lease)
            lease.boundary = env.call_at(now + self.unit, self._boundary, hid)
            self._leases[hid] = lease
        self.committed_units += len(ids)
        self.created += len(ids)
        return len(ids)

    # -- callbacks --------------------------------------------------------------------------
    def on_host_up(self, host: HostView) -> None:
        """A host billed from another instant than its rent request (a batch job that waited in
        its scheduler's queue is billed from its start): its unit boundaries move with it."""
        env, lease = self.env, self._leases.get(host.id)
        if env is None or lease is None or host.requested_at == lease.created:
            return
        lease.created = host.requested_at
        self._update_window(lease)
        if lease.boundary is not None:
            lease.boundary.cancel()
            lease.boundary = env.call_at(lease.created + lease.k * self.unit, self._boundary, host.id)

    def on_task_done(self, task: Task, host: HostView, runtime: float) -> None:
        self.finished += 1
        self.total_processing += runtime
        self.mean_task = self.total_processing / self.finished  # Fig. 3, line 4
        if self.env is not None and self.env.pending() > 0:
            self._allocate()

    def _periodic(self) -> None:
        env = self.env
        assert env is not None
        if env.pending() == 0:
            return
        now = env.now
        # BOUNDARY comes before PERIODIC at the same instant (A24): settle boundaries due now first.
        for hid, lease in list(self._leases.items()):
            if lease.created + lease.k * self.unit <= now + 1e-9 and lease.boundary is not None:
                lease.boundary.cancel()
                self._boundary(hid)
        updated = self._fig7(now)
        if self.mean_task is not None and self.mean_task > 0 and (updated or self.periodic_alloc == "always"):
            self._allocate()
        self._stall_check()
        if not self.gave_up and env.pending() > 0:
            self._tick = env.call_later(self.period, self._periodic)

    def _fig7(self, now: float) -> bool:
        """Fig. 7 with the pooled mean (A1): count the elapsed time of running tasks."""
        running = 0
        elapsed = 0.0
        for lease in self._leases.values():
            v = lease.view
            if v.state is HostState.BUSY and v.task_started_at is not None:
                running += 1
                elapsed += now - v.task_started_at
        if running == 0:
            return False
        finished_avg = self.total_processing / self.finished if self.finished else 0.0
        if elapsed / running <= finished_avg:
            return False
        if self.literal_fig7:  # the printed formula: (avg + avg) / (count + count)
            self.mean_task = (elapsed / running + finished_avg) / (self.finished + running)
        else:
            self.mean_task = (elapsed + self.total_processing) / (self.finished + running)
        return True

    def _update_window(self, lease: _Lease) -> None:
        """W_h: the end of the host's planned useful window (A2)."""
        units = lease.k if lease.k > lease.kplan else lease.kplan
        lease.window_end = lease.created + self.boot + (units * self.unit - self.boot) / self.beta

    def _possible(self, now: float, mean: float) -> float:
        # The hot loop of a run (once per completion over every live host): plain float arithmetic.
        floor = self.possible == "floor"
        total = 0.0
        for lease in self._leases.values():
            start = lease.view.task_started_at  # None while booting or idle
            if start is None:
                start = now if now > lease.ready_at else lease.ready_at
            left = lease.window_end - start
            if left > 0:
                total += left // mean if floor else left / mean
        return total

    def _allocate(self) -> None:
        """Figs. 3 and 5 (lines 6-16), the N/2 rule and the starvation guard."""
        env = self.env
        assert env is not None
        mean = self.mean_task
        if mean is None or mean <= 0:  # A28
            self._stall_check()
            return
        now = env.now
        remaining = env.pending()
        possible = self._possible(now, mean)
        necessary = round_half_away((remaining - possible) * mean / self.H)
        n = 0
        if necessary >= 0:
            cr = self.creation_ratio
            n = necessary if cr == 1.0 else math.ceil(necessary * cr)
            alive = len(self._leases)
            if self.half_rule and alive + n > self.n_tasks / 2:
                n = 0
                self._extend_for_long_tasks(now, mean)
            if self.guard and not self._leases and env.queued() > 0:
                n = max(n, 1)
            n = self._create(n)
            self.creation_ratio = cr + (1.0 - cr) * self.ir
        if self.record:
            self.steps.append(Step(now, self.finished, mean, possible, necessary, n, self.creation_ratio,
                                   len(self._leases)))
        self._stall_check()

    def _extend_for_long_tasks(self, now: float, mean: float) -> None:
        """The N/2 rule (Sect. 3.6, A8): longer hosts instead of more (2 units at least, +1 if short)."""
        queued = self.env is not None and self.env.queued() > 0
        for lease in self._leases.values():
            lease.kplan = max(lease.kplan, 2)
            self._update_window(lease)
            if queued and lease.window_end - now < mean:
                lease.kplan += 1
                self._update_window(lease)

    def _boundary(self, hid: HostId) -> None:
        """At t = c + k·U (Sect. 3.5): release the host, or keep it one more unit (A6, A7)."""
        env = self.env
        lease = self._leases.get(hid)
        if env is None or lease is None:
            return
        lease.boundary = None
        v = lease.view
        now = env.now
        keep = False
        if v.state is HostState.BUSY and v.task_started_at is not None:
            mean = self.mean_task
            elapsed = now - v.task_started_at
            if lease.k < lease.kplan:
                keep = True
            elif mean is not None and (mean >= self.alpha * self.H or elapsed >= mean):
                keep = True
                lease.continued = True
        elif v.state is HostState.BOOTING:
            keep = True  # paid for and not yet able to work (only when boot is close to the unit)
        if keep and self._affordable():
            lease.k += 1
            self.committed_units += 1
            self._update_window(lease)
            lease.boundary = env.call_at(lease.created + lease.k * self.unit, self._boundary, hid)
            return
        del self._leases[hid]
        env.release(hid)  # a running task goes back to the head of the queue (A10)
        if self.guard and not self._leases and env.pending() > 0:
            self._create(1)
        self._stall_check()

    def _stall_check(self) -> None:
        """With the budget spent and no host left, stop: the environment reports what is unfinished."""
        env = self.env
        if env is None or self._leases or env.pending() == 0 or self.gave_up:
            return
        if not self._affordable():
            self.gave_up = True
            if self._tick is not None:
                self._tick.cancel()
            env.finish()

    def __repr__(self) -> str:
        extra = f", budget={self.budget!r}" if self.budget is not None else ""
        return f"A2HA({self.cr0}, {self.ir}, beta={self.beta}, initial={self.initial_hosts}{extra})"
