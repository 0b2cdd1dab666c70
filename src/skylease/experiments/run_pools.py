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
from typing import Annotated, Any

from pydantic import Field

from skylease.experiments.run_hosts import HOSTS_POOL, HostList, SshFile, check_host_keys, hosts_option
from skylease.experiments.run_options import DEFAULT_POOL, RunOptions
from skylease.model.catalog import InstanceType
from skylease.model.errors import UserError
from skylease.model.files import FileModel, KeyLines, load_toml

#: The boot time the default local pool is estimated at (a worker process starting).
DEFAULT_BOOT_S = 2.0

_NonNeg = Annotated[float, Field(ge=0)]


class PoolSpec(FileModel):
    """One ``[pools.NAME]`` table. Defaults: free (``price = 0``) unless a price is given, an hour's
    billing unit, no boot time, no limit on workers, the reference speed; local worker processes
    unless ``cluster`` (a Dask cluster class, with ``kwargs``), ``address`` (a scheduler) or
    ``hosts`` (SSH hosts, with ``ssh`` and ``slots``: :mod:`~skylease.experiments.run_hosts`)."""

    price: _NonNeg = 0.0
    billing_unit: Annotated[float, Field(gt=0)] = 3600.0
    min_units: Annotated[int, Field(ge=0)] = 1
    boot_time: _NonNeg = 0.0
    max_count: Annotated[int, Field(ge=0)] | None = None
    speed: Annotated[float, Field(gt=0)] = 1.0
    cluster: Annotated[str, Field(min_length=1)] | None = None
    kwargs: dict[str, Any] | None = None
    address: Annotated[str, Field(min_length=1)] | None = None
    hosts: HostList | None = None
    ssh: SshFile | None = None
    slots: Annotated[int, Field(ge=1, le=1024)] | None = None


class PoolsFile(FileModel):
    pools: Annotated[dict[str, PoolSpec], Field(min_length=1)]


def pool_types(opts: RunOptions) -> dict[str, dict[str, Any]]:
    """Pool name -> its description (instance type fields plus ``cluster``/``kwargs``/``address``)."""
    if opts.hosts is not None:  # the --hosts shorthand (check_options: no pools file with it)
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
    spec, keys = load_toml(Path(opts.pools_file), PoolsFile)
    pools: dict[str, dict[str, Any]] = {}
    for name, pool in spec.pools.items():
        hosts = check_host_keys(pool, keys, name, Path(opts.pools_file).parent)
        _check_cluster_keys(pool, keys, name)
        for pname, p in (hosts or {name: pool.model_dump(exclude_none=True)}).items():
            if pname in pools or (pname in spec.pools and pname != name):
                raise keys.error(f"pool {pname!r} twice (a host with its own price is a pool of its own)",
                                 "pools", name)
            pools[pname] = p
    return pools


def _check_cluster_keys(spec: PoolSpec, keys: KeyLines, name: str) -> None:
    """``cluster`` (an importable class path, with a ``kwargs`` table) or ``address``, not both."""
    from skylease.runtime.pools import cluster_class

    if spec.cluster is not None and spec.address is not None:
        raise keys.error("give exactly one of 'cluster' (a class path) and 'address'", "pools", name)
    if spec.kwargs is not None and spec.cluster is None:
        raise keys.error("kwargs go with 'cluster' (a class path)", "pools", name, "kwargs")
    if spec.cluster is not None:
        cluster_class(spec.cluster, f"pools.{name}.cluster", keys.file, keys.line("pools", name, "cluster"))
        from skylease.runtime.slurm import check_pool, is_slurm_cluster

        if is_slurm_cluster(spec.cluster):
            wrong = check_pool(spec.kwargs or {}, spec.billing_unit)
            if wrong is not None:
                raise keys.error(wrong[1], "pools", name, *wrong[0].split("."))


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
    from skylease.experiments.run_hosts import make_ssh_pool
    from skylease.runtime.pools import ClusterPool, LocalPool
    from skylease.runtime.slurm import SlurmPool, is_slurm_cluster, run_token

    # (--hosts: its errors name the option alone)
    where = str(opts.pools_file) if opts.pools_file else None if opts.hosts else "--price/--billing-unit"
    backends: dict[str, Any] = {}
    for name, spec in specs.items():
        itype = pool_itype(name, spec, where or "--hosts")
        if "hosts" in spec:
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
