"""A run's pools: the default local pool or those of a pools file (``[pools.NAME]`` tables), their
backends (local worker processes, a Dask cluster or scheduler, Slurm jobs), their billing, and
the volatility trace played on one of them.

Decisions of ours (the issue is silent):

* The default local pool is named ``local``: at most as many workers as this machine has cores,
  billed ``--price`` per started ``--billing-unit`` (default free, 60 s), boot estimate 2 s.
* The least a worker costs is its pool's price times its minimum billed units, at least one
  (:func:`least_charge`): what a budget must still hold to rent one more.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from skylease.experiments.run_options import DEFAULT_POOL, RunOptions
from skylease.model.errors import UserError
from skylease.model.instance import InstanceType

#: The boot time the default local pool is estimated at (a worker process starting).
DEFAULT_BOOT_S = 2.0

def pool_types(opts: RunOptions) -> dict[str, dict[str, Any]]:
    """Pool name -> its description (instance type fields plus ``cluster``/``kwargs``/``address``)."""
    if opts.hosts is not None:  # the --hosts shorthand (check_options: no pools file with it)
        from skylease.experiments.run_hosts import HOSTS_POOL, hosts_option

        hosts = hosts_option(opts.hosts, opts.slots)
        most = [n for n in (opts.max_workers, opts.slots and opts.slots * len(hosts)) if n]
        return {HOSTS_POOL: {"price": opts.price, "billing_unit": opts.billing_unit,
                             "min_units": opts.min_units, "boot_time": DEFAULT_BOOT_S, "hosts": hosts,
                             **({"slots": opts.slots} if opts.slots is not None else {}),
                             **({"max_count": min(most)} if most else {})}}
    if opts.pools_file is None:
        cores = os.cpu_count() or 2
        return {DEFAULT_POOL: {"price": opts.price, "billing_unit": opts.billing_unit,
                               "min_units": opts.min_units, "boot_time": DEFAULT_BOOT_S,
                               "max_count": opts.max_workers or cores}}
    from skylease.experiments.pools_file import read_pools_file  # (pydantic: only with a pools file)

    return read_pools_file(Path(opts.pools_file))


def pool_itype(name: str, spec: Mapping[str, Any], where: str) -> InstanceType:
    """Pool ``name``'s instance type from its description (a wrong value is one line naming ``where``)."""
    fields = {k: spec[k] for k in ("price", "billing_unit", "min_units", "boot_time", "max_count", "speed")
              if k in spec}
    try:
        return InstanceType(name, **fields)
    except (TypeError, ValueError) as e:
        raise UserError(str(e), file=where, field=f"pools.{name}") from None


def make_backends(opts: RunOptions, specs: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The backends (connected) of the pools ``specs`` (:func:`pool_types`)."""
    from skylease.runtime.pools import ClusterPool, LocalPool
    from skylease.runtime.slurm import SlurmPool, is_slurm_cluster, run_token

    # (--hosts: its errors name the option alone)
    where = str(opts.pools_file) if opts.pools_file else None if opts.hosts else "--price/--billing-unit"
    backends: dict[str, Any] = {}
    for name, spec in specs.items():
        itype = pool_itype(name, spec, where or "--hosts")
        if "hosts" in spec:
            from skylease.experiments.run_hosts import make_ssh_pool  # (the lease site's schema)

            backends[name] = make_ssh_pool(name, itype, spec, run_token(opts.out),
                                           "--hosts" if opts.hosts else f"pools.{name}.hosts")
        elif is_slurm_cluster(spec.get("cluster")):
            backends[name] = SlurmPool(itype, cluster=spec["cluster"], kwargs=spec.get("kwargs", {}),
                                       token=run_token(opts.out))
        elif "cluster" in spec or "address" in spec:
            backends[name] = ClusterPool(itype, cluster=spec.get("cluster"), kwargs=spec.get("kwargs", {}),
                                         address=spec.get("address"))
        else:
            backends[name] = LocalPool(itype)
    try:
        for b in backends.values():
            b.connect()
    except UserError as e:
        close_backends(backends)
        raise UserError(e.message, file=e.file or where, line=e.line, field=e.field) from None
    except BaseException:
        close_backends(backends)
        raise
    return backends


def host_notes(backends: Mapping[str, Any]) -> list[str]:
    """What pools of SSH hosts said at connect: hosts left out (unreachable, no Python 3.9)."""
    from skylease.runtime.ssh_pool import SshPool

    return [f"pool {name}: {note}" for name, b in backends.items() if isinstance(b, SshPool)
            for note in b.notes]


def close_backends(backends: Mapping[str, Any]) -> None:
    """Close every backend, whatever happens to each (the run is ending or failed to start)."""
    for b in backends.values():
        with contextlib.suppress(Exception):
            b.close()


def least_charge(it: InstanceType | Mapping[str, Any]) -> float:
    """The least a worker of a pool is charged: its price times its minimum units (at least one)."""
    b = billing_of(it) if isinstance(it, InstanceType) else it
    return float(b["price"]) * max(1, int(b["min_units"]))


def billing_of(it: InstanceType) -> dict[str, float]:
    """A pool's billing as a run's store keeps it (per segment: the options may change on resume)."""
    return {"price": it.price, "billing_unit": it.billing_unit, "min_units": it.min_units}


def volatility_of(opts: RunOptions, specs: Mapping[str, Any], main_pool: str) -> Any:
    """The ``--volatility`` trace, played on ``--volatile-pool`` (default: the main pool), which must
    be a local pool or one of SSH hosts (its workers are processes the run can kill)."""
    from skylease.runtime.volatility import Volatility

    pool = opts.volatile_pool or main_pool
    if "cluster" in specs[pool] or "address" in specs[pool]:
        raise UserError("volatility can only be played on local pools and pools of SSH hosts",
                        field="--volatile-pool")
    return Volatility.from_trace(opts.volatility or "", pool, opts.time_scale, seed=opts.seed,
                                 start=opts.trace_start)
