"""The site the lease manager hands out: its nodes, their capacities, and the image repository.

A site file is TOML (every mistake is one line naming the file, the line and the key)::

    repository = "images"   # the image repository folder, relative to this file (optional)
    bandwidth = 100         # MB/s of the link from the repository (default 100)
    cache_mb = 20000        # each node's image cache, MB (optional; a [[nodes]] table may override)

    [[nodes]]               # one node...
    name = "big"
    cpu = 4                 # CPUs (default 1)
    memory = 8192           # MB (default 1024)
    disk = 100000           # MB (default 0)

    [[nodes]]               # ...or `count` nodes of one capacity, named small0, small1, ...
    name = "small"          # (without a name: node<i>, i the node's index in the site)
    count = 6
    memory = 2048

Without a site file, :func:`default_site` gives one node per core of this machine (the CPUs this
process may run on), 1 CPU each, the machine's memory and the data folder's free disk split evenly
(the free disk at the server's first start, stored with its journal: see
docs/decisions/serve-default-site.md).

The nodes are the scheduler's node ids 0..n-1 in file order; :attr:`Site.capacity` is what the
slot table gets. Each node's payloads are pinned to some of the machine's CPUs (:meth:`Site.cpus`):
nodes take consecutive CPUs, as many as their ``cpu`` (rounded up, at least 1), wrapping around
when the site has more CPUs than the machine (node i -> CPU i mod cores for 1-CPU nodes). The
network component of a capacity is ``net`` (MB/s) when a node gives it, else unbounded: the local
enactment does not share out network bandwidth.
"""

from __future__ import annotations

import math
import os
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

from pydantic import Field, field_validator

from skylease.control.leases.lease import ResourceTuple
from skylease.model.files import FileModel, load_toml

__all__ = ["MAX_NODES", "Site", "SiteNode", "default_site", "free_disk_mb", "load_site", "machine_cpus"]

#: The most nodes a site may have (the most a lease request may ask for, too).
MAX_NODES = 100_000
#: A node's network capacity when its file gives none: unbounded (as the simulator's sites).
UNBOUNDED_NET = float(2**62)
#: A node name is a folder name (``<data>/nodes/<name>/cache``): no slash, no leading dot.
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")

_MB = Annotated[int, Field(ge=0, le=2**40)]


class NodeSetFile(FileModel):
    """One ``[[nodes]]`` table: ``count`` nodes of one capacity."""

    name: str | None = None
    count: Annotated[int, Field(ge=1, le=MAX_NODES)] = 1
    cpu: Annotated[float, Field(gt=0, le=1024)] = 1.0
    memory: _MB = 1024
    disk: _MB = 0
    net: Annotated[float, Field(gt=0, le=1e9)] | None = None
    cache_mb: _MB | None = None

    @field_validator("name")
    @classmethod
    def _folder_name(cls, name: str | None) -> str | None:
        if name is not None and not NAME_PATTERN.match(name):
            raise ValueError(f"must be 1 to 64 letters, digits, '.', '_' or '-', not starting with '.', "
                             f"'_' or '-' (it names the node's folder), got {name!r}")
        return name


class SiteFile(FileModel):
    """A site file (see the module's docstring)."""

    repository: Annotated[str, Field(min_length=1)] | None = None
    bandwidth: Annotated[float, Field(gt=0, le=1e9)] = 100.0
    cache_mb: _MB | None = None
    nodes: Annotated[list[NodeSetFile], Field(min_length=1)]


@dataclass(frozen=True)
class SiteNode:
    """One node: its name (also its folder's), capacity and image cache size (``None``: the
    scheduler's image pool size rules alone)."""

    name: str
    capacity: ResourceTuple
    cache_mb: int | None = None


def machine_cpus() -> tuple[int, ...]:
    """The CPUs this process may run on (its affinity, not every CPU of the machine)."""
    return tuple(sorted(os.sched_getaffinity(0)))


@dataclass(frozen=True)
class Site:
    """The nodes (scheduler node ``i`` is ``nodes[i]``), the image repository (``None``: every
    image is a zero-filled stand-in, see :meth:`skylease.runtime.leases.local.LocalNodes.copy_image`),
    the repository's bandwidth in MB/s, and the machine CPUs the nodes are pinned to."""

    nodes: tuple[SiteNode, ...]
    repository: Path | None = None
    bandwidth: float = 100.0
    machine: tuple[int, ...] = field(default_factory=machine_cpus)
    _cpus: tuple[tuple[int, ...], ...] = field(init=False, repr=False, compare=False)
    _index: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.nodes:
            raise ValueError("a site needs at least one node")
        if not self.machine:
            raise ValueError("no machine CPU to pin nodes to")
        index = {n.name: i for i, n in enumerate(self.nodes)}
        if len(index) != len(self.nodes):
            raise ValueError("node names must be unique")
        m, offset, cpus = len(self.machine), 0, []
        for node in self.nodes:
            k = min(m, max(1, math.ceil(node.capacity.cpu)))
            cpus.append(tuple(sorted(self.machine[(offset + j) % m] for j in range(k))))
            offset += k
        object.__setattr__(self, "_cpus", tuple(cpus))
        object.__setattr__(self, "_index", index)

    @property
    def n_nodes(self) -> int:
        return len(self.nodes)

    @property
    def capacity(self) -> list[ResourceTuple]:
        """Each node's capacity, in node order (the slot table's ``capacity``)."""
        return [n.capacity for n in self.nodes]

    @property
    def names(self) -> list[str]:
        return [n.name for n in self.nodes]

    def index(self, name: str) -> int:
        """The node id of the node called ``name`` (KeyError if there is none)."""
        return self._index[name]

    def cpus(self, node: int) -> tuple[int, ...]:
        """The machine CPUs the payloads of ``node`` are pinned to."""
        return self._cpus[node]


def load_site(path: Path, *, machine: Sequence[int] | None = None) -> Site:
    """The site described by the TOML file ``path`` (a UserError naming file, line and key for
    any mistake, before anything is created). ``machine``: the CPUs to pin to (default: ours)."""
    doc, keys = load_toml(path, SiteFile)
    nodes: list[SiteNode] = []
    seen: dict[str, int] = {}
    for s, ns in enumerate(doc.nodes):
        if len(nodes) + ns.count > MAX_NODES:
            raise keys.error(f"the site would have more than {MAX_NODES:,} nodes", "nodes", s, "count")
        net = UNBOUNDED_NET if ns.net is None else ns.net
        cap = ResourceTuple(ns.cpu, ns.memory, ns.disk, net)
        cache = doc.cache_mb if ns.cache_mb is None else ns.cache_mb
        for j in range(ns.count):
            # (unnamed: node<i>; one named node: its name; a named set: name0, name1, ...)
            named = ns.name if ns.count == 1 else f"{ns.name}{j}"
            name = f"node{len(nodes)}" if ns.name is None else named
            if name in seen:
                where = "name" if ns.name is not None else "count"
                raise keys.error(f"node name {name!r} is already the name of node {seen[name]}",
                                 "nodes", s, where)
            seen[name] = len(nodes)
            nodes.append(SiteNode(name, cap, cache))
    repository = None
    if doc.repository is not None:
        repository = (path.parent / doc.repository).resolve()
        if not repository.is_dir():
            raise keys.error(f"folder not found: {repository} (the path is relative to the site file)",
                             "repository")
    return Site(tuple(nodes), repository, doc.bandwidth,
                tuple(sorted(machine)) if machine is not None else machine_cpus())


def default_site(data: Path, *, machine: Sequence[int] | None = None, disk_mb: int | None = None) -> Site:
    """One node per CPU of ``machine`` (default: the CPUs this process may run on), 1 CPU each,
    the machine's memory (``MemTotal`` of /proc/meminfo) and ``disk_mb`` of disk each (default: the
    free space of the data folder ``data`` now, split evenly: a server fixes it at its first start,
    docs/decisions/serve-default-site.md); the repository is ``<data>/images`` (absent: stand-in
    images)."""
    cpus = tuple(sorted(machine)) if machine is not None else machine_cpus()
    n = len(cpus)
    memory = _mem_total_mb() // n
    disk = free_disk_mb(data) // n if disk_mb is None else disk_mb
    cap = ResourceTuple(1.0, memory, disk, UNBOUNDED_NET)
    return Site(tuple(SiteNode(f"node{i}", cap) for i in range(n)), data / "images", 100.0, cpus)


def free_disk_mb(data: Path) -> int:
    """The free space of the data folder ``data`` (or of its nearest existing parent), MB."""
    return shutil.disk_usage(_existing(data)).free // 2**20


def _mem_total_mb() -> int:
    with open("/proc/meminfo", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024  # kB
    raise RuntimeError("/proc/meminfo has no MemTotal")


def _existing(path: Path) -> Path:
    """``path`` or its nearest existing parent (the data folder may not be made yet)."""
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path
