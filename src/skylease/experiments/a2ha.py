"""A2HA experiments: many task orderings of one workload under one policy, and the baselines.

A run draws one ordering (and, for the redrawn workloads, one set of task times), simulates the
policy on a cloud pool with the paper's boot delay and hourly billing, and reports the paper's
observables. Statistics are mean and standard deviation over orderings.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from skylease.control.a2ha import A2HA
from skylease.control.dask_rule import DaskAdaptive
from skylease.control.env import Policy
from skylease.control.fixed import FixedPool
from skylease.model.errors import UserError
from skylease.model.instance import InstanceType
from skylease.model.limits import TIME_BUDGET_S, check_number, check_seed, check_size
from skylease.model.task import Bag
from skylease.sim.env import SimResult, simulate
from skylease.traces.bot import a2ha_workload, is_fixed, load_workload

METRICS = ("hosts", "wall_s", "speedup", "charged_hours", "cost", "interrupted_tasks", "wasted_s",
           "continued_hosts")
BOOT_S = 300.0  # [PAPER] "for all experiments"
UNIT_S = 3600.0
#: Seconds of simulation per task completion and live host: A2HA weighs every live host at every
#: completion (Fig. 3), so a run costs about tasks x hosts of these (1.3e-7 s measured with 30,000
#: tasks on 910 hosts; the --compare baselines add three times as much, Dask's rule renting a host
#: per task).
HOST_VISIT_S = 1.5e-7
#: Seconds of simulation each ordering costs whatever its size (a fresh policy, pool and kernel:
#: 0.18 ms measured on 10 tasks).
ORDERING_S = 2e-4
#: Bytes one ordering holds until the study is summarised (its seed and its row of metrics, with
#: the baselines' rows under --compare: about 1.6 kB measured).
ORDERING_BYTES = 2048
#: Bytes one simulated host costs (its record, its billing and its events).
HOST_BYTES = 2048


def cloud_pool(boot_s: float = BOOT_S, unit_s: float = UNIT_S, price: float = 1.0) -> InstanceType:
    """The paper's cloud: unlimited hosts, 5-min boot, billed per started hour."""
    return InstanceType("cloud", price=price, billing_unit=unit_s, boot_time=boot_s)


@dataclass(frozen=True)
class Workload:
    """A workload that yields one bag per run: a fixed trace, or task times redrawn from a seed."""

    name: str
    draw: Callable[[int], Bag]
    fixed: bool

    def bag(self, run_seed: int) -> Bag:
        return self.draw(run_seed)


def workload(spec: str | Bag) -> Workload:
    """A paper workload by name (image, synthetic, outsystems, long), a file or a synthetic spec."""
    if isinstance(spec, Bag):
        return Workload(spec.name, lambda _s, b=spec: b, True)
    try:
        fixed = is_fixed(spec)
    except (KeyError, ValueError):
        fixed = None
    if fixed is not None:
        if fixed:
            bag = a2ha_workload(spec)
            return Workload(spec, lambda _s: bag, True)
        return Workload(spec, lambda s: a2ha_workload(spec, seed=s), False)
    redrawn = spec.split(":", 1)[0] in ("normal", "gamma", "lognormal")
    if redrawn:
        load_workload(spec, seed=0)  # validate once, with a one-line error
        return Workload(spec, lambda s: load_workload(spec, seed=s), False)
    bag = load_workload(spec)
    return Workload(bag.name, lambda _s: bag, True)


def run_metrics(r: SimResult, bag: Bag, unit_s: float = UNIT_S) -> dict[str, float]:
    """The paper's observables of one run: wall time from t = 0, speedup = serial / wall (decision A23)."""
    serial = math.fsum(t.work for t in bag.tasks)
    end = r.end_time
    continued = sum(1 for h in r.host_table if h.charged_units(end) > 1)
    return {
        "hosts": float(r.hosts),
        "wall_s": r.makespan,
        "speedup": serial / r.makespan if r.makespan > 0 else math.nan,
        "charged_hours": r.charged_units * unit_s / 3600.0,
        "cost": r.cost,
        "interrupted_tasks": float(r.interrupted),
        "wasted_s": r.wasted_s,
        "continued_hosts": float(continued),
        "done": float(r.done),
        "unfinished": float(len(r.unfinished)),
        "serial_s": serial,
    }


def make_policy(name: str, *, creation_ratio: float | None = None, increase_ratio: float | None = None,
                budget: float | None = None, **a2ha_kwargs: Any) -> Callable[[], Policy]:
    """A factory for a fresh policy per run: ``a2ha[:preset]``, ``fixed:N``, ``dask``, ``per-task``."""
    head, _, arg = name.partition(":")
    if head == "a2ha":
        preset = arg or "conservative"
        if preset not in ("conservative", "aggressive"):
            raise UserError(f"unknown A2HA preset {preset!r}; use conservative or aggressive", field="policy")
        cr, ir = {"conservative": (0.5, 0.5), "aggressive": (0.75, 0.75)}[preset]
        cr = cr if creation_ratio is None else creation_ratio
        ir = ir if increase_ratio is None else increase_ratio
        for field, v in (("--creation-ratio", cr), ("--increase-ratio", ir)):
            check_number(v, field, minimum=0, maximum=1)
        if budget is not None:
            check_number(budget, "--budget", minimum=0)
        return lambda: A2HA(cr, ir, budget=budget, **a2ha_kwargs)
    if head == "fixed":
        try:
            n = int(arg)
        except ValueError:
            n = 0
        if n < 1:
            raise UserError(f"fixed needs a host count >= 1, e.g. fixed:12 (got {name!r})", field="policy")
        return lambda: FixedPool(n)
    if head == "dask":
        return lambda: DaskAdaptive()
    raise UserError(f"unknown policy {name!r}; use a2ha[:conservative|aggressive], fixed:N or dask",
                    field="policy")


def run_orderings(policy: Callable[[], Policy], wl: Workload, orderings: int = 200, seed: int = 0, *,
                  pool: InstanceType | None = None,
                  progress: Callable[[int], None] | None = None) -> list[dict[str, float]]:
    """Simulate ``orderings`` runs; run i uses ordering seed (seed, i) and, if redrawn, task times too."""
    if orderings < 1:
        raise UserError(f"must be >= 1, got {orderings}", field="--orderings")
    pool = pool if pool is not None else cloud_pool()
    seeds = np.random.SeedSequence(seed).spawn(orderings)
    rows = []
    for i, ss in enumerate(seeds):
        order_seed, draw_seed = (int(x) for x in ss.generate_state(2))
        bag = wl.bag(draw_seed)
        r = simulate(policy(), bag, [pool], order="random", seed=order_seed)
        rows.append(run_metrics(r, bag, pool.billing_unit))
        if progress is not None:
            progress(i + 1)
    return rows


def summarize(rows: Sequence[dict[str, float]], keys: Sequence[str] = METRICS) -> dict[str, dict[str, float]]:
    """Mean and (population) standard deviation of each metric over runs."""
    out = {}
    for k in keys:
        v = np.array([r[k] for r in rows], float)
        out[k] = {"mean": float(v.mean()), "std": float(v.std())}
    return out


def optimal_hosts(bag: Bag, boot_s: float = BOOT_S, unit_s: float = UNIT_S) -> int:
    """The paper's lower bound for short tasks: total work over the usable unit, rounded up (Sect. 4)."""
    return math.ceil(math.fsum(t.work for t in bag.tasks) / (unit_s - boot_s) - 1e-9)


def analytic_baselines(bag: Bag, unit_s: float = UNIT_S) -> dict[str, dict[str, float]]:
    """Table 2's analytic rows for one draw: serial, optimal packing, one host per task (no boot)."""
    d = np.array([t.work for t in bag.tasks], float)
    serial, longest = float(d.sum()), float(d.max())
    return {
        "serial": {"hosts": 1.0, "wall_s": serial, "speedup": 1.0, "charged_hours": serial / 3600.0},
        "optimal": {"hosts": float(math.ceil(serial / longest - 1e-9)), "wall_s": longest,
                    "speedup": serial / longest, "charged_hours": serial / 3600.0},
        "one host per task": {"hosts": float(len(d)), "wall_s": longest, "speedup": serial / longest,
                              "charged_hours": float(np.ceil(d / unit_s - 1e-9).sum()) * unit_s / 3600.0},
    }


def check_time(tasks: int, hosts: int, orderings: int, compare: bool) -> None:
    """Refuse a study that would take more than the time budget (:mod:`skylease.model.limits`)."""
    visits = orderings * tasks * max(1, hosts) * (4 if compare else 1)
    most = int(TIME_BUDGET_S / HOST_VISIT_S)
    seconds = visits * HOST_VISIT_S + orderings * ORDERING_S * (3 if compare else 1)
    if seconds > TIME_BUDGET_S:
        raise UserError(
            f"{orderings:,} orderings of {tasks:,} tasks on about {hosts:,} hosts"
            f"{' with the baselines' if compare else ''} would take about "
            f"{seconds / 3600:,.1f} h here; at most {most:,} task completions x live "
            f"hosts (about {TIME_BUDGET_S / 3600:g} h): "
            f"give fewer --orderings or a smaller --workload", field="--orderings")


def check_cloud(boot_s: float, unit_s: float, price: float, budget: float | None) -> InstanceType:
    """The simulated cloud of ``simulate a2ha`` and ``simulate bag``, its options checked."""
    unit_s = check_number(unit_s, "--billing-unit", above=0)
    boot_s = check_number(boot_s, "--boot-time", minimum=0, below=unit_s,
                          hint=f"a host must have time to work in its first unit of {unit_s:g} s")
    price = check_number(price, "--price", minimum=0)
    if budget is not None:
        check_number(budget, "--budget", minimum=0, hint="leave it out for no cap")
        if budget < price:
            raise UserError(f"${budget:g} does not buy one billing unit (${price:g}): no host could "
                            "be rented and no task would run", field="--budget")
    return cloud_pool(boot_s, unit_s, price)


def study(spec: str, *, preset: str | None = None, creation_ratio: float | None = None,
          increase_ratio: float | None = None, budget: float | None = None, budget_factor: float = 1.0,
          initial_hosts: int = 1, orderings: int = 200, seed: int = 0, boot_s: float = BOOT_S,
          unit_s: float = UNIT_S, price: float = 1.0, compare: bool = False,
          progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """``skylease simulate a2ha``: A2HA over many orderings, and (``compare``) the baselines beside it."""
    if preset is not None and (creation_ratio is not None or increase_ratio is not None):
        raise UserError("give --preset or --creation-ratio/--increase-ratio, not both", field="--preset")
    if preset is not None and preset not in ("conservative", "aggressive"):
        raise UserError(f"unknown preset {preset!r}; use conservative or aggressive", field="--preset")
    seed = check_seed(seed)
    if isinstance(orderings, bool) or not isinstance(orderings, int) or orderings < 1:
        raise UserError(f"must be a whole number >= 1, got {orderings!r}", field="--orderings")
    if isinstance(initial_hosts, bool) or not isinstance(initial_hosts, int) or initial_hosts < 0:
        raise UserError(f"must be a whole number >= 0, got {initial_hosts!r}", field="--initial-hosts")
    check_size(orderings, "orderings", ORDERING_BYTES, field="--orderings")
    check_size(initial_hosts, "initial hosts", HOST_BYTES, field="--initial-hosts")
    check_number(budget_factor, "--budget-factor", minimum=1)
    pool = check_cloud(boot_s, unit_s, price, budget)
    boot_s, unit_s = float(boot_s), float(unit_s)
    wl = workload(spec)
    name = f"a2ha:{preset or 'conservative'}"
    factory = make_policy(name, creation_ratio=creation_ratio, increase_ratio=increase_ratio, budget=budget,
                          budget_factor=budget_factor, initial_hosts=initial_hosts)
    first = wl.bag(int(np.random.SeedSequence(seed).spawn(1)[0].generate_state(2)[1]))
    policy = factory()
    assert isinstance(policy, A2HA)
    check_time(len(first.tasks), optimal_hosts(first, boot_s, unit_s), orderings, compare)
    rows = run_orderings(factory, wl, orderings, seed, pool=pool, progress=progress)
    result: dict[str, Any] = {
        "workload": wl.name, "tasks": len(first.tasks), "fixed_trace": wl.fixed,
        "policy": f"A2HA(creation_ratio={policy.cr0}, increase_ratio={policy.ir}, "
                  f"budget_factor={budget_factor}, initial_hosts={initial_hosts})",
        "budget": budget, "orderings": orderings, "seed": seed,
        "optimal_hosts": optimal_hosts(first, boot_s, unit_s),
        **summarize(rows, (*METRICS, "unfinished")),
        "unfinished_runs": sum(1 for r in rows if r["unfinished"] > 0),
    }
    if compare:
        n_opt = result["optimal_hosts"]
        result["baselines"] = {
            f"fixed:{n_opt}": summarize(run_orderings(make_policy(f"fixed:{n_opt}"), wl, orderings, seed,
                                                      pool=pool)),
            "dask": summarize(run_orderings(make_policy("dask"), wl, orderings, seed, pool=pool)),
        }
    return result
