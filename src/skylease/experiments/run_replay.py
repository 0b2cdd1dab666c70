"""``skylease simulate replay``: a finished real run simulated again, with its measured task
runtimes, its policy and pools, beside what it really did (workers, peak, cost, time)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from skylease.experiments.run_next import resume_command
from skylease.experiments.run_options import stored_options
from skylease.experiments.run_policies import describe_policy, parse_policy
from skylease.experiments.run_pools import DEFAULT_BOOT_S, pool_itype, pool_types
from skylease.experiments.run_results import open_run
from skylease.model.errors import UserError

#: The most simulated runs one replay makes (each is a column of the table it prints).
MAX_REPLAY_SEEDS = 100


def replay(out: str | Path, seeds: Sequence[int] = (0,)) -> dict[str, Any]:
    """Simulate a finished real run again: its measured task runtimes, its policy and pools.

    Boot time is the run's measured mean boot; the simulated hosts and cost sit beside the real.
    A run with tasks left (stopped, interrupted) is refused: its measured times are a part of the
    bag, and its real cost is that of a part, so the comparison would mean nothing.
    """
    from skylease.control.plugins import find_in_working_folder
    from skylease.sim.env import simulate

    find_in_working_folder()  # the run's `--policy module:Class` is found as `skylease run` found it
    if len(seeds) > MAX_REPLAY_SEEDS:
        raise UserError(f"at most {MAX_REPLAY_SEEDS} (one simulated run, and one column, per seed), "
                        f"got {len(seeds):,}", field="--seeds")
    store = open_run(out)
    try:
        meta = store.meta()
        counts = store.counts()
        rows = store.query("SELECT task, runtime_s FROM results ORDER BY task")
        # boot is from the rent request (its "acquire" event) to the worker up: a host billed from
        # its job's start (Slurm) waited in the queue before, and the simulator must wait too
        hosts = store.query(
            "SELECT h.pool, COALESCE((SELECT MIN(e.t_s) FROM events e WHERE e.segment = h.segment AND "
            "e.host = h.host AND e.kind = 'acquire'), h.requested_s) AS requested_s, h.up_s "
            "FROM hosts h WHERE h.up_s IS NOT NULL")
        sfile = Path(out) / "summary.json"
        summary = json.loads(sfile.read_text()) if sfile.exists() else {}
    finally:
        store.close()
    if "fingerprint" not in meta or not rows:
        raise UserError("the run has no recorded task", file=out)
    opts = stored_options(meta)
    if counts["left"]:
        opts.out = Path(out)
        raise UserError(f"the run did not finish ({counts['left']} of {counts['tasks']} tasks have no "
                        f"result); finish it with `{resume_command(str(meta['job']), opts)}`, then "
                        "replay it", file=out)
    specs = pool_types(opts)
    boots = [h["up_s"] - h["requested_s"] for h in hosts]
    import numpy as np

    boot = float(np.mean(boots)) if boots else DEFAULT_BOOT_S
    pools = {}
    for name, spec in specs.items():
        spec = dict(spec, boot_time=boot)
        pools[name] = pool_itype(name, spec, "pools")
    main_pool = opts.pool or next(iter(pools))
    from skylease.model.task import Bag

    bag = Bag.from_runtimes([max(0.0, float(r["runtime_s"] or 0.0)) for r in rows], name="replay")
    sims = []
    described = None
    for seed in seeds:
        try:
            policy, order = parse_policy(opts.policy, main_pool, opts.budget, pools[main_pool].billing_unit,
                                         opts.policy_args)
            described = describe_policy(policy)
        except UserError as e:  # the run's own policy, gone or changed since it ran (say a file)
            raise UserError(f"cannot load the run's policy {opts.policy!r}: {e}", file=out) from None
        r = simulate(policy, bag, pools, order=order, seed=seed)
        sims.append({"seed": seed, "hosts": r.hosts, "peak_hosts": r.peak_hosts, "cost": r.cost,
                     "makespan_s": r.makespan, "charged_units": r.charged_units})
    return {"out": str(out), "policy": opts.policy, "policy_args": list(opts.policy_args),
            "policy_class": described, "boot_s": boot, "tasks": len(rows),
            "real": {"hosts": summary.get("hosts"), "peak_hosts": summary.get("peak_hosts"),
                     "cost": summary.get("cost"), "elapsed_s": summary.get("elapsed_s")},
            "simulated": sims}
