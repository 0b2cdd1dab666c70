"""A pools file (``[pools.NAME]`` tables) read into the pools of a run (see
:mod:`skylease.experiments.run_pools`). Apart because its schema is pydantic's, which a run on the
default local pool does not import."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from skylease.experiments.run_hosts import HostList, SshFile, check_host_keys
from skylease.model.files import KeyLines
from skylease.model.schema import FileModel, load_toml

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


def read_pools_file(path: Path) -> dict[str, dict[str, Any]]:
    """Pool name -> its description, from the pools file at ``path`` (a host with a price of its
    own a pool of its own)."""
    spec, keys = load_toml(path, PoolsFile)
    pools: dict[str, dict[str, Any]] = {}
    for name, pool in spec.pools.items():
        hosts = check_host_keys(pool, keys, name, path.parent)
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
