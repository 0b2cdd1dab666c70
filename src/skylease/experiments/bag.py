"""``skylease simulate bag``: any bag policy on the simulated cloud of ``skylease simulate a2ha``.

The policy is named as ``skylease run --policy`` names it (a built-in, ``MODULE:CLASS``,
``FILE.py:CLASS`` or an installed name, with ``--policy-arg KEY=VALUE``), loaded by the same
function (:func:`skylease.experiments.run_policies.parse_policy`), so the object simulated here is
the one a real run builds. The workload is what ``simulate a2ha --workload`` accepts.

:func:`bag_cell` is the same simulation as one cell of a campaign
(:func:`skylease.experiments.sweep.run_campaign`): a grid over ``policy`` compares a policy of
one's own with A2HA on the same bags, each row carrying the policy's ``describe()``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from skylease.control.env import Policy
from skylease.control.plugins import find_in_working_folder
from skylease.experiments.a2ha import (
    BOOT_S,
    METRICS,
    UNIT_S,
    Workload,
    check_cloud,
    check_time,
    optimal_hosts,
    run_metrics,
    summarize,
    workload,
)
from skylease.experiments.run_policies import describe_policy, parse_policy
from skylease.model.errors import UserError
from skylease.model.instance import InstanceType
from skylease.model.limits import check_seed, check_size
from skylease.model.task import Bag
from skylease.sim.env import simulate

#: Bytes one run holds until the study is summarised (its row of metrics).
RUN_BYTES = 2048


def policy_factory(spec: str, args: Sequence[str], pool: InstanceType,
                   budget: float | None) -> tuple[Callable[[], Policy], str]:
    """A fresh policy per run, built by ``skylease run``'s loader, and the dispatch order it
    needs (``random`` for A2HA, as in its paper; ``fifo`` otherwise). One is built here, so a bad
    spec or parameter is one line before any simulation (a file is loaded once: the loader keeps
    it while it is unchanged)."""
    _, order = parse_policy(spec, pool.name, budget, pool.billing_unit, args)
    return lambda: parse_policy(spec, pool.name, budget, pool.billing_unit, args)[0], order


def run_once(policy: Policy, bag: Bag, pool: InstanceType, order: str, seed: int) -> dict[str, float]:
    """One simulated run of ``policy`` on ``bag``: :func:`skylease.experiments.a2ha.run_metrics`.
    A policy of one's own that raises is one line (its file and line), not a traceback."""
    from skylease.control import plugins

    try:
        r = simulate(policy, bag, [pool], order=order, seed=seed)
    except Exception as e:  # the user's callback failed: say where, as the loader does
        where = plugins.failure(e, "")
        text = str(e).strip().splitlines()[0] if str(e).strip() else "(no message)"
        raise UserError(f"{type(policy).__qualname__} failed in simulation: {type(e).__name__}: {text}",
                        file=where.file, line=where.line, field="--policy") from None
    return run_metrics(r, bag, pool.billing_unit)


def study(spec: str, policy: str, policy_args: Sequence[str] = (), *, budget: float | None = None,
          orderings: int = 1, seed: int = 0, boot_s: float = BOOT_S, unit_s: float = UNIT_S,
          price: float = 1.0, progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """``skylease simulate bag``: ``orderings`` runs of one policy on workload ``spec``. Run i draws
    its seeds as ``simulate a2ha``'s run i does (``SeedSequence(seed)``), so two policies given
    the same ``seed`` see the same bags (and, under A2HA, the same task orders)."""
    find_in_working_folder()  # `--policy module:Class` is found as `skylease run` finds it
    seed = check_seed(seed)
    if isinstance(orderings, bool) or not isinstance(orderings, int) or orderings < 1:
        raise UserError(f"must be a whole number >= 1, got {orderings!r}", field="--orderings")
    check_size(orderings, "runs", RUN_BYTES, field="--orderings")
    pool = check_cloud(boot_s, unit_s, price, budget)
    factory, order = policy_factory(policy, policy_args, pool, budget)
    described = describe_policy(factory())
    wl: Workload = workload(spec)
    seeds = [tuple(int(x) for x in ss.generate_state(2))
             for ss in np.random.SeedSequence(seed).spawn(orderings)]
    first = wl.bag(seeds[0][1])
    check_time(len(first.tasks), optimal_hosts(first, pool.boot_time, pool.billing_unit), orderings, False)
    rows = []
    for i, (order_seed, draw_seed) in enumerate(seeds):
        bag = first if i == 0 else wl.bag(draw_seed)
        rows.append(run_once(factory(), bag, pool, order, order_seed))
        if progress is not None:
            progress(i + 1)
    return {
        "workload": wl.name, "tasks": len(first.tasks), "fixed_trace": wl.fixed,
        "policy": policy, "policy_args": list(policy_args), "policy_class": described, "order": order,
        "budget": budget, "orderings": orderings, "seed": seed,
        "boot_s": pool.boot_time, "unit_s": pool.billing_unit, "price": pool.price,
        "optimal_hosts": optimal_hosts(first, pool.boot_time, pool.billing_unit),
        **summarize(rows, (*METRICS, "unfinished")),
        "unfinished_runs": sum(1 for r in rows if r["unfinished"] > 0),
    }


def bag_cell(policy: str | Sequence[str], workload: str, seed: int, rep: int, *,
             budget: float | None = None, boot_s: float = BOOT_S, unit_s: float = UNIT_S,
             price: float = 1.0) -> dict[str, Any]:
    """One campaign cell: ``policy`` (a spec, or a list ``[spec, "KEY=VALUE", ...]``) on one bag
    of ``workload``. The bag is drawn from the repetition number ``rep`` alone, so every policy
    of a repetition runs on the same bag (a paired comparison); the task order (A2HA's) comes
    from the cell's ``seed``. The row holds the metrics of ``simulate bag`` and ``policy_class``,
    the policy's ``describe()``."""
    spec, args = (policy, []) if isinstance(policy, str) else (policy[0], list(policy[1:]))
    pool = check_cloud(boot_s, unit_s, price, budget)
    factory, order = policy_factory(spec, args, pool, budget)
    built = factory()
    bag = workload_bag(workload, rep)
    row: dict[str, Any] = {"policy_class": describe_policy(built), "tasks": len(bag.tasks)}
    row.update(run_once(built, bag, pool, order, seed))
    return row


def workload_bag(spec: str, rep: int) -> Bag:
    """The bag of repetition ``rep`` of ``spec`` (a fixed trace is the same bag every time)."""
    draw = int(np.random.SeedSequence([rep]).generate_state(1)[0])
    return workload(spec).bag(draw)
