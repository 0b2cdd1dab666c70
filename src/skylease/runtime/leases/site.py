"""The site the lease manager hands out: its nodes, their capacities, and the image repository.

A site file is TOML (every mistake is one line naming the file, the line and the key)::

    repository = "images"   # the image repository folder, relative to this file (optional)
    bandwidth = 100         # MB/s of the network from the repository to the nodes (optional)
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

A site file may also list **hosts**, other machines reached over SSH, each giving ``nodes``
scheduler nodes (``[[nodes]]`` may then be left out: a site has local nodes, hosts, or both)::

    [ssh]                                   # defaults for every host
    user = "root"                           # (default "root")
    identity_file = "keys/site_ed25519"     # relative to this file (default: ssh's own keys, agent)
    known_hosts = "keys/known_hosts"        # relative to this file; required with [[hosts]]
    port = 22                               # (default 22)
    connect_timeout = 10                    # seconds (default 10)

    [[hosts]]
    address = "127.0.0.11"                  # an IPv4 or IPv6 address, or a host name (RFC 1123)
    name = "host1"                          # (default: the address, as a node-name prefix)
    nodes = 2                               # scheduler nodes on this host (default 1)
    cpu = 1                                 # each node's capacity and cache, as in [[nodes]]
    memory = 1024
    # port, user and identity_file override [ssh] for this host

A host's nodes are named ``<name>-<i>``, ``i`` = 0 .. nodes-1, even when there is one (a node
keeps its name when more are added to its host), and come after the local nodes, in file order.
Host keys are always checked strictly against ``known_hosts`` (there is no other mode: a host
whose key is not in it is refused). Each :class:`SiteNode` says where it is: ``host`` is None for a
node of this machine, else a :class:`SiteHost` (the host, how to reach it, and the node's index
on it). For a host's node, :meth:`Site.cpus` gives CPU numbers **on that host**: a host's nodes
take consecutive CPUs from 0, as many as their ``cpu`` (rounded up), without wrapping (the
number of CPUs a host has is not known here: the host's enactment refuses, when it starts, a node
whose CPUs the host does not have). The local enactment runs no host's node
(:class:`~skylease.runtime.leases.site_nodes.SiteNodes` sends those to the host's enactment).

``bandwidth`` (MB/s), when the file gives it, is the network's from the repository to the nodes:
the lease manager schedules with it (the scheduler configuration's ``bandwidth``: an image transfer
takes size / bandwidth, and its copy is paced to that window); without it, the configuration's.
"""

from __future__ import annotations

import ipaddress
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
from skylease.model.errors import UserError
from skylease.model.files import KeyLines
from skylease.model.schema import FileModel, load_toml

__all__ = ["MAX_NODES", "Site", "SiteHost", "SiteNode", "check_user", "default_site", "free_disk_mb",
           "load_site", "machine_cpus"]

#: The most nodes a site may have (the most a lease request may ask for, too).
MAX_NODES = 100_000
#: A node's network capacity when its file gives none: unbounded (as the simulator's sites).
UNBOUNDED_NET = float(2**62)
#: A node name is a folder name (``<data>/nodes/<name>/cache``): no slash, no leading dot.
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
#: A host's name is the prefix of its nodes' names (``<name>-<i>``): room is left for ``-99999``.
HOST_NAME_MAX = 64 - len(f"-{MAX_NODES - 1}")
#: An SSH user name: no leading '-' (it would read as an option), nothing ssh would expand.
USER_PATTERN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,31}$")
#: An RFC 1123 host name label: letters, digits, '-', neither first nor last.
_LABEL = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")

_MB = Annotated[int, Field(ge=0, le=2**40)]
_CPU = Annotated[float, Field(gt=0, le=1024)]
_NET = Annotated[float, Field(gt=0, le=1e9)]
_PORT = Annotated[int, Field(ge=1, le=65535)]
_PATH = Annotated[str, Field(min_length=1, max_length=4096)]


class _CapacityFile(FileModel):
    """A node's capacity, as ``[[nodes]]`` and ``[[hosts]]`` tables give it (each node of the table)."""

    cpu: _CPU = 1.0
    memory: _MB = 1024
    disk: _MB = 0
    net: _NET | None = None
    cache_mb: _MB | None = None


class NodeSetFile(_CapacityFile):
    """One ``[[nodes]]`` table: ``count`` nodes of one capacity."""

    name: str | None = None
    count: Annotated[int, Field(ge=1, le=MAX_NODES)] = 1

    @field_validator("name")
    @classmethod
    def _folder_name(cls, name: str | None) -> str | None:
        if name is not None and not NAME_PATTERN.match(name):
            raise ValueError(f"must be 1 to 64 letters, digits, '.', '_' or '-', not starting with '.', "
                             f"'_' or '-' (it names the node's folder), got {name!r}")
        return name


def check_user(user: str | None) -> str | None:
    """``user`` if it is a user name an SSH login may take (None passes), else a ValueError saying so."""
    if user is not None and not USER_PATTERN.match(user):
        raise ValueError(f"must be a user name (1 to 32 letters, digits, '.', '_' or '-', not starting "
                         f"with '.' or '-'), got {user!r}")
    return user


class SshFile(FileModel):
    """The ``[ssh]`` table: how every host is reached, unless its ``[[hosts]]`` table says otherwise."""

    user: str = "root"
    identity_file: _PATH | None = None
    known_hosts: _PATH | None = None
    port: _PORT = 22
    connect_timeout: Annotated[int, Field(ge=1, le=3600)] = 10

    @field_validator("user")
    @classmethod
    def _user(cls, user: str) -> str:
        check_user(user)
        return user


class HostFile(_CapacityFile):
    """One ``[[hosts]]`` table: a machine reached over SSH, holding ``nodes`` nodes of one capacity."""

    address: str
    name: str | None = None
    port: _PORT | None = None
    user: str | None = None
    identity_file: _PATH | None = None
    nodes: Annotated[int, Field(ge=1, le=MAX_NODES)] = 1

    @field_validator("user")
    @classmethod
    def _user(cls, user: str | None) -> str | None:
        return check_user(user)

    @field_validator("address")
    @classmethod
    def _address(cls, address: str) -> str:
        return host_address(address)

    @field_validator("name")
    @classmethod
    def _prefix(cls, name: str | None) -> str | None:
        if name is not None and not (NAME_PATTERN.match(name) and len(name) <= HOST_NAME_MAX):
            raise ValueError(f"must be 1 to {HOST_NAME_MAX} letters, digits, '.', '_' or '-', not starting "
                             f"with '.', '_' or '-' (its nodes are <name>-<i>), got {name!r}")
        return name


class SiteFile(FileModel):
    """A site file (see the module's docstring)."""

    repository: Annotated[str, Field(min_length=1)] | None = None
    bandwidth: Annotated[float, Field(gt=0, le=1e9)] | None = None
    cache_mb: _MB | None = None
    ssh: SshFile | None = None
    nodes: Annotated[list[NodeSetFile], Field(min_length=1)] | None = None
    hosts: Annotated[list[HostFile], Field(min_length=1)] | None = None


def host_address(address: str) -> str:
    """``address`` checked and in one spelling: an IP address literal (IPv6 without brackets) as
    :mod:`ipaddress` writes it, or an RFC 1123 host name in lower case, without a final dot (its
    last label not all digits: ``1.2.3.256`` is no name); else ValueError."""
    try:
        return str(ipaddress.ip_address(address))
    except ValueError:
        pass
    name = address[:-1] if address.endswith(".") else address
    labels = name.split(".")
    if not (0 < len(name) <= 253 and all(_LABEL.match(label) for label in labels)
            and not labels[-1].isdigit()):
        raise ValueError(f"must be an IPv4 or IPv6 address or a host name (RFC 1123: labels of letters, "
                         f"digits and '-'), got {address[:80]!r}")
    return name.lower()


def _default_prefix(address: str) -> str:
    """A host's name when its table gives none: its address as a node-name prefix, each character
    a name may not hold made ``-`` (``2001:db8::1`` -> ``2001-db8--1``; ``::1`` -> ``0--1``, as
    ``0::1``), cut to :data:`HOST_NAME_MAX` characters."""
    prefix = re.sub(r"[^A-Za-z0-9._-]", "-", address)
    return (prefix if prefix[:1].isalnum() else f"0{prefix}")[:HOST_NAME_MAX]


@dataclass(frozen=True)
class SiteHost:
    """Where a host's node is: the host (its ``name``, and how OpenSSH reaches it: ``address``,
    ``port``, ``user``, ``identity_file`` (None: ssh's own keys and agent), ``known_hosts``,
    ``connect_timeout`` in seconds) and ``index``, the node's number on that host (0, 1, ...)."""

    name: str
    address: str
    port: int
    user: str
    identity_file: Path | None
    known_hosts: Path
    connect_timeout: int = 10
    index: int = 0


@dataclass(frozen=True)
class SiteNode:
    """One node: its name (also its folder's), capacity, image cache size (``None``: the
    scheduler's image pool size rules alone), and its host (``None``: this machine)."""

    name: str
    capacity: ResourceTuple
    cache_mb: int | None = None
    host: SiteHost | None = None


def machine_cpus() -> tuple[int, ...]:
    """The CPUs this process may run on (its affinity, not every CPU of the machine)."""
    return tuple(sorted(os.sched_getaffinity(0)))


@dataclass(frozen=True)
class Site:
    """The nodes (scheduler node ``i`` is ``nodes[i]``), the image repository (``None``: every
    image is a zero-filled stand-in, see :meth:`skylease.runtime.leases.local.LocalNodes.copy_image`),
    the repository's bandwidth in MB/s (None: the scheduler configuration's), the machine CPUs the
    local nodes are pinned to, and the file the site was read from (None: made in code)."""

    nodes: tuple[SiteNode, ...]
    repository: Path | None = None
    bandwidth: float | None = None
    machine: tuple[int, ...] = field(default_factory=machine_cpus)
    source: Path | None = field(default=None, compare=False)
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
        on_host: dict[str, int] = {}  # host name -> the next CPU on it
        for node in self.nodes:
            k = max(1, math.ceil(node.capacity.cpu))
            if node.host is not None:  # the host's own CPU numbers, consecutive (see the module's docstring)
                first = on_host.get(node.host.name, 0)
                cpus.append(tuple(range(first, first + k)))
                on_host[node.host.name] = first + k
                continue
            k = min(m, k)
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

    @property
    def hosts(self) -> list[SiteHost]:
        """Each host once, in file order (the :class:`SiteHost` of its first node, ``index`` 0)."""
        seen: dict[str, SiteHost] = {}
        for n in self.nodes:
            if n.host is not None and n.host.name not in seen:
                seen[n.host.name] = n.host
        return list(seen.values())

    def index(self, name: str) -> int:
        """The node id of the node called ``name`` (KeyError if there is none)."""
        return self._index[name]

    def cpus(self, node: int) -> tuple[int, ...]:
        """The CPUs the payloads of ``node`` are pinned to: this machine's for a local node, its
        host's own CPU numbers for a host's node."""
        return self._cpus[node]


def load_site(path: Path, *, machine: Sequence[int] | None = None) -> Site:
    """The site described by the TOML file ``path`` (a UserError naming file, line and key for
    any mistake, before anything is created). ``machine``: the CPUs to pin to (default: ours)."""
    doc, keys = load_toml(path, SiteFile)
    if doc.nodes is None and doc.hosts is None:
        raise keys.error("required, but not given: a site has [[nodes]], [[hosts]] or both", "nodes")
    nodes: list[SiteNode] = []
    seen: dict[str, int] = {}
    for s, ns in enumerate(doc.nodes or ()):
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
    nodes += _host_nodes(doc, keys, path, seen, len(nodes))
    repository = None
    if doc.repository is not None:
        repository = (path.parent / doc.repository).resolve()
        if not repository.is_dir():
            raise keys.error(f"folder not found: {repository} (the path is relative to the site file)",
                             "repository")
    return Site(tuple(nodes), repository, doc.bandwidth,
                tuple(sorted(machine)) if machine is not None else machine_cpus(), source=path)


def _host_nodes(doc: SiteFile, keys: KeyLines, path: Path, seen: dict[str, int],
                first: int) -> list[SiteNode]:
    """The nodes of the ``[[hosts]]`` tables (node ids from ``first``; ``seen``: the names taken)."""
    ssh = doc.ssh if doc.ssh is not None else SshFile()
    identity = _file(path, keys, ssh.identity_file, "ssh", "identity_file", key=True)
    known = _file(path, keys, ssh.known_hosts, "ssh", "known_hosts")
    if not doc.hosts:
        return []
    if known is None:  # (strict host key checking is the only mode: docs/decisions/ssh-enactment.md)
        line = keys.line("ssh") or keys.line("hosts", 0)
        raise UserError("required with [[hosts]]: the file of the hosts' keys (host keys are always "
                        "checked)", file=path, line=line, field="ssh.known_hosts")
    out: list[SiteNode] = []
    names: dict[str, int] = {}  # host name -> its [[hosts]] table
    places: dict[tuple[str, int], int] = {}  # (address, port) -> its [[hosts]] table
    for h, hf in enumerate(doc.hosts):
        name = hf.name if hf.name is not None else _default_prefix(hf.address)
        where = "name" if hf.name is not None else "address"
        if name in names:
            raise keys.error(f"host name {name!r} is already the name of hosts[{names[name]}]",
                             "hosts", h, where)
        names[name] = h
        port = ssh.port if hf.port is None else hf.port
        if (hf.address, port) in places:
            raise keys.error(f"{hf.address} port {port} is already hosts[{places[hf.address, port]}]",
                             "hosts", h, "address")
        places[hf.address, port] = h
        if first + len(out) + hf.nodes > MAX_NODES:
            raise keys.error(f"the site would have more than {MAX_NODES:,} nodes", "hosts", h, "nodes")
        own = _file(path, keys, hf.identity_file, "hosts", h, "identity_file", key=True)
        net = UNBOUNDED_NET if hf.net is None else hf.net
        cap = ResourceTuple(hf.cpu, hf.memory, hf.disk, net)
        cache = doc.cache_mb if hf.cache_mb is None else hf.cache_mb
        for i in range(hf.nodes):
            node = f"{name}-{i}"
            if node in seen:
                raise keys.error(f"node name {node!r} is already the name of node {seen[node]}",
                                 "hosts", h, where)
            seen[node] = first + len(out)
            host = SiteHost(name, hf.address, port, ssh.user if hf.user is None else hf.user,
                            own if own is not None else identity, known, ssh.connect_timeout, i)
            out.append(SiteNode(node, cap, cache, host))
    return out


def _file(site: Path, keys: KeyLines, given: str | None, *loc: str | int, key: bool = False) -> Path | None:
    """The file ``given`` names (relative to the site file; ``~`` is the home folder), checked to be
    a file; a private ``key`` must not be open to others (ssh would ignore it, and say only
    "Permission denied")."""
    if given is None:
        return None
    try:
        file = (site.parent / Path(given).expanduser()).resolve()
        if not file.exists():
            raise keys.error(f"file not found: {file} (the path is relative to the site file)", *loc)
        if not file.is_file():
            raise keys.error(f"not a file: {file}", *loc)
        st = file.stat()
    except (OSError, RuntimeError, ValueError) as exc:  # (no such home folder, a symlink loop, a NUL)
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise keys.error(f"cannot use {given[:80]!r}: {' '.join(reason.split())}", *loc) from None
    if key and st.st_uid == os.getuid() and st.st_mode & 0o077:
        raise keys.error(f"{file} may be read by other users (mode {st.st_mode & 0o777:o}); ssh ignores "
                         "such a key: chmod 600 it", *loc)
    return file


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
    return Site(tuple(SiteNode(f"node{i}", cap) for i in range(n)), data / "images", None, cpus)


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
