"""The enactment of a whole site: each node's primitives carried out where the node is.

A site file lists nodes of this machine (``[[nodes]]``) and nodes of hosts reached over SSH
(``[[hosts]]``). :class:`SiteNodes` gives the lease manager one object with the primitives of
:class:`~skylease.runtime.leases.local.LocalNodes` (spawn, suspend, resume, shutdown, exits, find
and adopt after a restart, image copies and caches) and sends each call to the part that holds the
node: one :class:`~skylease.runtime.leases.local.LocalNodes` for this machine's nodes, one
:class:`~skylease.runtime.leases.host_nodes.HostNodes` per host. It decides nothing itself.

A host that stops answering is the manager's business (:meth:`SiteNodes.host_states`, ``on_state``):
its nodes' commands raise :class:`~skylease.runtime.leases.ssh.SshError` at once meanwhile.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

from skylease.runtime.leases.host_moves import StateCarry
from skylease.runtime.leases.host_nodes import HostNodes, HostState
from skylease.runtime.leases.local import PAYLOAD_LOG_BYTES, LocalNodes, Payload
from skylease.runtime.leases.qemu_spec import GuestError, GuestFiles
from skylease.runtime.leases.sandbox import AUTO_USER, Sandbox
from skylease.runtime.leases.site import Site, SiteHost
from skylease.runtime.leases.ssh import SshConnection, SshError, SshTarget

__all__ = ["HostFactory", "SiteNodes", "host_connection"]

log = logging.getLogger(__name__)

#: Seconds a restarted server waits for a host that does not answer before it gives up starting.
FIND_WAIT_S = 30.0
#: Hosts connected at once when the enactment starts.
MAX_CONNECTING = 16
#: Makes the enactment of one host: ``(site, data, serve_id, host, nodes, on_exit, on_state)``.
HostFactory = Callable[..., Any]


def host_connection(host: SiteHost, data: Path) -> SshConnection:
    """The multiplexed OpenSSH connection to ``host`` as the site file describes it (its control
    socket in ``<data>/ssh``)."""
    target = SshTarget(host.address, host.port, host.user, host.identity_file, host.known_hosts,
                       float(host.connect_timeout))
    return SshConnection(target, data / "ssh")


def _default_host(site: Site, data: Path, serve_id: str, host: SiteHost, nodes: Sequence[int], *,
                  on_exit: Callable[[], None] | None, on_state: Callable[[], None] | None,
                  payload_user: str = AUTO_USER) -> HostNodes:
    return HostNodes(site, data, serve_id, connection=host_connection(host, data), nodes=nodes,
                     on_exit=on_exit, on_state=on_state, payload_user=payload_user)


def _connect_all(hosts: Sequence[SiteHost], make: Callable[[SiteHost], Any]) -> list[Any]:
    """``make(host)`` for every host at once (each connects, probes and starts its watch: most of a
    start's time, and a restart's: one at a time, 50 hosts would take half a minute), in host
    order. If one fails, the others made are closed and the first failure, in host order, is raised."""
    if not hosts:
        return []
    with ThreadPoolExecutor(max_workers=min(MAX_CONNECTING, len(hosts)),
                            thread_name_prefix="skylease-connect") as pool:
        futures = [pool.submit(make, host) for host in hosts]
        wait(futures)
    failed = [f.exception() for f in futures if f.exception() is not None]
    if failed:
        for f in futures:
            if f.exception() is None:
                with contextlib.suppress(Exception):
                    f.result().close()
        raise failed[0]
    return [f.result() for f in futures]


class SiteNodes:
    """The nodes of ``site``: those of this machine enacted by ``LocalNodes`` (confined by
    ``sandbox``), those of each host by ``host_factory`` (default: :class:`HostNodes` over the
    site file's SSH settings; payloads there run as ``payload_user`` when the SSH user is root).
    Every host is connected at construction (an :class:`SshError` naming the host if one cannot
    be: nothing is left connected then). ``on_exit`` as for ``LocalNodes``; ``on_state`` is called
    when a host stops or starts answering."""

    def __init__(self, site: Site, data: Path, serve_id: str, *, sandbox: Sandbox | None,
                 on_exit: Callable[[], None] | None = None, on_state: Callable[[], None] | None = None,
                 host_factory: HostFactory | None = None, local_factory: Callable[..., Any] | None = None,
                 payload_user: str = AUTO_USER) -> None:
        self.site = site
        self.data = Path(data)
        self.serve_id = serve_id
        self._parts: list[Any] = []
        self._of_node: list[Any] = [None] * site.n_nodes
        self._host_of: dict[int, str] = {}  # id(part) -> host name
        self.hosts: dict[str, Any] = {}  # host name -> its enactment
        by_host: dict[str, list[int]] = {}
        local = []
        for k, node in enumerate(site.nodes):
            if node.host is None:
                local.append(k)
            else:
                by_host.setdefault(node.host.name, []).append(k)
        try:
            if local:
                if sandbox is None:
                    raise ValueError("a site with nodes on this machine needs a sandbox")
                part = (local_factory or LocalNodes)(site, self.data, serve_id, sandbox=sandbox,
                                                      on_exit=on_exit)
                self._add(part, local, None)
            make = host_factory or _default_host
            parts = _connect_all(site.hosts, lambda host: make(
                site, self.data, serve_id, host, by_host[host.name], on_exit=on_exit, on_state=on_state,
                payload_user=payload_user))
            for host, part in zip(site.hosts, parts, strict=True):
                self._add(part, by_host[host.name], host.name)
        except BaseException:
            self.close()
            raise

    def _add(self, part: Any, nodes: Sequence[int], host: str | None) -> None:
        self._parts.append(part)
        for k in nodes:
            self._of_node[k] = part
        if host is not None:
            self._host_of[id(part)] = host
            self.hosts[host] = part

    # -- where things are -------------------------------------------------------------------------
    def part(self, node: int) -> Any:
        """The enactment that holds ``node``."""
        if not 0 <= node < self.site.n_nodes:
            raise ValueError(f"node {node} is not a node of the site (0..{self.site.n_nodes - 1})")
        return self._of_node[node]

    def host_states(self) -> dict[str, HostState]:
        """Each host's state now (whether it answers, its last contact), by host name."""
        return {name: part.host_state() for name, part in self.hosts.items()}

    def vm_acceleration(self, node: int) -> str | None:
        """How VM guests run on ``node``'s machine ("TCG: why", "KVM: why"), once one has started
        there; None before."""
        vms = getattr(self.part(node), "vms", None)
        return None if vms is None else vms.acceleration

    def failure(self) -> str | None:
        for part in self._parts:
            if (why := part.failure()) is not None:
                return why
        return None

    # -- payloads -------------------------------------------------------------------------------
    def spawn(self, lease: int, vnode: int, node: int, **kwargs: Any) -> Payload:
        return self.part(node).spawn(lease, vnode, node, **kwargs)

    def suspend(self, p: Payload) -> bool:
        return self.part(p.node).suspend(p)

    def resume(self, p: Payload) -> bool:
        return self.part(p.node).resume(p)

    def notice(self, p: Payload, name: str, text: str) -> bool:
        """A file and SIGUSR1 for a payload (warnings before a lease's end: runtime/leases/notices.py)."""
        return self.part(p.node).notice(p, name, text)

    # (VM payloads: local_vms.py on this machine's nodes, host_vms.py on a host's)
    def spawn_vm(self, lease: int, vnode: int, node: int, **kwargs: Any) -> Payload:
        return self.part(node).spawn_vm(lease, vnode, node, **kwargs)

    def suspend_vm(self, p: Payload) -> float:
        return self.part(p.node).suspend_vm(p)

    def shutdown_vm(self, p: Payload, grace_s: float = 5.0) -> bool:
        return self.part(p.node).shutdown_vm(p, grace_s)

    def carry_state(self, lease: int, vnode: int, src: int, dst: int, seconds: float) -> Any:
        """A saved VM's state file (and its disk overlay) carried from ``src``'s machine to ``dst``'s,
        paced to take ``seconds``: its :class:`~skylease.runtime.leases.host_moves.StateCarry`, or
        None when both nodes are on one machine (the lease's folder is there already). Between two
        SSH hosts only (GuestError otherwise)."""
        a, b = self.part(src), self.part(dst)
        if a is b:
            return None
        if not (isinstance(a, HostNodes) and isinstance(b, HostNodes)):
            raise GuestError(f"a VM's state moves between SSH hosts only, not from "
                             f"{self.site.nodes[src].name} to {self.site.nodes[dst].name}")
        here, there = GuestFiles(a.vms.folder(lease, vnode)), GuestFiles(b.vms.folder(lease, vnode))
        # (a disk guest's overlay goes with it, when it has one: both arrive or neither)
        return StateCarry(a.conn, str(here.state), b.conn, str(there.state), seconds,
                          owner=b.confinement.owner(), also=[(str(here.overlay), str(there.overlay))])

    def migrate(self, p: Payload, node: int) -> bool:
        """Move ``p`` to ``node``: only between nodes of one machine (a process does not move
        between hosts; a VM does: :class:`NotImplementedError` until leases run in VMs)."""
        if self.part(p.node) is not self.part(node):
            raise NotImplementedError(f"lease {p.lease} VM {p.vnode}: a payload process cannot move from "
                                      f"{self.site.nodes[p.node].name} to {self.site.nodes[node].name} "
                                      "(another machine)")
        return self.part(node).migrate(p, node)

    def shutdown(self, p: Payload, grace_s: float = 5.0) -> bool:
        return self.part(p.node).shutdown(p, grace_s)

    def exited(self) -> list[Payload]:
        return [p for part in self._parts for p in part.exited()]

    def live(self) -> list[Payload]:
        return [p for part in self._parts for p in part.live()]

    def cpu_seconds(self, payloads: Sequence[Payload]) -> list[float | None]:
        """The CPU seconds each payload's processes have used, asked of each machine once; None
        where it cannot be told (no process left, or its host does not answer)."""
        out: list[float | None] = [None] * len(payloads)
        by_part: dict[int, list[int]] = {}
        for i, p in enumerate(payloads):
            by_part.setdefault(id(self.part(p.node)), []).append(i)
        for idx in by_part.values():
            part = self.part(payloads[idx[0]].node)
            try:
                for i, used in zip(idx, part.cpu_seconds([payloads[i] for i in idx]), strict=True):
                    out[i] = used
            except SshError as exc:
                log.info("%s: no CPU figures (%s)", exc.field, exc.message)
        return out

    def output(self, p: Payload, limit: int = PAYLOAD_LOG_BYTES) -> str:
        return self.part(p.node).output(p, limit)

    def tail(self, lease: int, vnode: int, node: int, limit: int = PAYLOAD_LOG_BYTES, *,
             serial: bool = False) -> str:
        """VM ``vnode``'s log where ``node`` is (SshError: its host does not answer)."""
        return self.part(node).tail(lease, vnode, node, limit, serial=serial)

    # -- after a restart --------------------------------------------------------------------------
    def find_own(self, wait_s: float = FIND_WAIT_S) -> list[Payload]:
        """Our payloads alive on every part (after a restart). A host that does not answer is asked
        again until it does, for at most ``wait_s`` seconds (its enactment reconnects meanwhile);
        then :class:`SshError`: a payload not looked for would be taken for lost, and its lease's
        work started again elsewhere while it still runs."""
        found = []
        for part in self._parts:
            deadline = time.monotonic() + wait_s
            while True:
                try:
                    found += [p for p in part.find_own() if p.node >= 0 and self._of_node[p.node] is part]
                    break
                except SshError as exc:
                    if time.monotonic() > deadline:
                        raise SshError(f"its payloads cannot be looked for: {exc.message}",
                                       field=exc.field) from None
                    log.warning("%s: its payloads cannot be looked for yet (%s): asked again", exc.field,
                                exc.message)
                    time.sleep(0.5)
        return found

    def find_own_on(self, host: str) -> list[Payload]:
        """Our payloads alive on ``host`` (SshError if it does not answer)."""
        part = self.hosts[host]
        return [p for p in part.find_own() if p.node >= 0 and self._of_node[p.node] is part]

    def adopt(self, p: Payload) -> bool:
        return p.node >= 0 and self.part(p.node).adopt(p)

    # -- images -----------------------------------------------------------------------------------
    def copy_image(self, image: str, size_mb: int, nodes: Sequence[int], seconds: float) -> Any:
        """One copy per machine holding some of ``nodes``; the copies' handle (done when all are)."""
        groups: dict[int, tuple[Any, list[int]]] = {}
        for k in nodes:
            part = self.part(k)
            groups.setdefault(id(part), (part, []))[1].append(k)
        copies = [part.copy_image(image, size_mb, ks, seconds) for part, ks in groups.values()]
        return copies[0] if len(copies) == 1 else _Copies(image, copies)

    def evict(self, node: int, image: str) -> bool:
        return self.part(node).evict(node, image)

    def cached(self, node: int) -> list[str]:
        """The images in ``node``'s cache (a host that does not answer: none known)."""
        try:
            return self.part(node).cached(node)
        except SshError:
            return []

    # -- the end ----------------------------------------------------------------------------------
    def close(self, kill: bool = False, grace_s: float = 5.0) -> None:
        for part in self._parts:
            with contextlib.suppress(SshError):
                part.close(kill=kill, grace_s=grace_s)

    def __enter__(self) -> SiteNodes:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close(kill=True)


class _Copies:
    """Copies of one image to several machines, seen as one."""

    def __init__(self, image: str, copies: Sequence[Any]) -> None:
        self.image = image
        self.copies = list(copies)

    @property
    def done(self) -> bool:
        return all(c.done for c in self.copies)

    @property
    def error(self) -> str | None:
        return next((c.error for c in self.copies if c.error is not None), None)

    @property
    def ended_at(self) -> float | None:
        ends = [c.ended_at for c in self.copies]
        return None if None in ends else max(ends)

    def wait(self, timeout: float | None = None) -> bool:
        return all(c.wait(timeout) for c in self.copies)

    def cancel(self) -> None:
        for c in self.copies:
            c.cancel()

