"""Enactment on a host reached over SSH: the lease scheduler's commands carried out as processes on
another machine (docs/decisions/ssh-enactment.md).

:class:`HostNodes` holds, for the nodes of the site that lie on one host, the primitives of
:class:`~skylease.runtime.leases.local.LocalNodes` with the same meaning; it decides nothing itself.
Every command goes as a JSON line through the helper's ``watch``, one long-lived session on the
host's multiplexed SSH connection (:mod:`~skylease.runtime.leases.host_session`,
:mod:`~skylease.runtime.leases.host_agent`: the host needs sshd, python3 and bubblewrap, and
util-linux's setpriv when the SSH user is root; nothing of skylease is installed there).

At start, the host is probed (:func:`~skylease.runtime.leases.host_sandbox.probe_host`): a host
where payloads cannot be confined, or that lacks a CPU a node of it is pinned to, is refused in one
line naming it (:class:`~skylease.runtime.leases.sandbox.SandboxUnavailable`), as the server's own
machine would be.

* a VM is one **process group** on the host (its own session: neither the end of an SSH session
  nor a ``kill -9`` of the server ends it); its leader, the helper's *waiter*, carries the marks
  (``SKYLEASE_SERVE_ID``, ``SKYLEASE_LEASE``, ``SKYLEASE_VNODE``, ``SKYLEASE_NODE``) by which a
  restarted server finds it (:meth:`HostNodes.find_own`), pins itself to the node's CPUs (the
  host's own numbers: :meth:`~skylease.runtime.leases.site.Site.cpus`), so that the whole group
  runs on them, starts the payload (``sh -c COMMAND``, or the default payload of
  :mod:`~skylease.runtime.leases.local` run by the host's python3) **confined** in a bubblewrap
  sandbox as on this machine (:mod:`~skylease.runtime.leases.host_sandbox`: the lease's folder
  ``<remote_dir>/leases/<lease>`` on the host seen as ``/lease``, nothing else of ``remote_dir`` or
  of the SSH user's home, a fresh environment, its own PID namespace, as the host's payload user
  when the SSH user is root), and records its exit code in a file there (no process of the server
  is its parent, to wait for it);
* suspend = SIGSTOP to the group, resume = SIGCONT, shutdown = SIGCONT to the group and SIGTERM
  to the payload's processes (those in its sandbox but the sandbox's init: a payload ended by a
  signal is reported as its sandbox reports it, 128 + the signal), then SIGKILL to the group after
  the grace (this object's watcher
  thread keeps the deadlines; the caller never waits); a group is signalled only while its leader
  has the recorded start time, or is gone while members remain, as on this machine;
* its output goes to the local enactment's log keeper, started on the host in a session of its
  own: ``<remote_dir>/payloads/<lease>-<vnode>.log`` there (:meth:`HostNodes.output`);
* the ``watch`` reports each ended payload it was told about and prints a heartbeat every
  ``beat_s`` seconds. When no line has come for ``down_after_s`` seconds, or the session ends, the
  host is **not answering** (:meth:`HostNodes.host_state`, ``on_state``): the watcher thread then
  reconnects every ``down_after_s`` seconds and tells the new ``watch`` every payload it tracks;
  the host answers again at the first heartbeat (what ended meanwhile is reported then). While it
  does not answer, a command raises :class:`~skylease.runtime.leases.ssh.SshError` at once;
* each node's image cache is ``<remote_dir>/nodes/<node>/cache`` on the host; an image crosses
  the network once per host, paced to fill its window, whole or absent there
  (:mod:`~skylease.runtime.leases.host_images`); a payload finds its image at ``$SKYLEASE_IMAGE``.

The host's times are sent as ages (seconds ago), never as its clock: ``since`` becomes the host's
own time that long ago, and ``ended_at`` is this machine's time minus the age the host reports.

What is not done yet, and how the lease manager uses it:

* a VM lease's VM is a QEMU guest spawned as the payload (:mod:`~skylease.runtime.leases.host_vms`:
  :meth:`HostNodes.spawn_vm`, :meth:`HostNodes.suspend_vm`, :meth:`HostNodes.shutdown_vm`);
* not yet: migration between the nodes of a host (:meth:`HostNodes.migrate` raises
  NotImplementedError: the group would be re-pinned, as on this machine);
* a node's CPUs must be among the host's (the probe refuses the host otherwise); two nodes of a
  host never share a CPU, so a host has at least as many CPUs as its nodes' ``cpu`` (rounded up);
* the lease manager uses it through :class:`~skylease.runtime.leases.site_nodes.SiteNodes`, and
  decides what becomes of a host's leases while it does not answer
  (:mod:`~skylease.runtime.leases.host_failures`);
* exit files of payloads that ended while no server watched them stay in
  ``<remote_dir>/exits`` on the host (a few bytes each).
"""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from skylease.model.errors import UserError
from skylease.runtime.health import Vital
from skylease.runtime.leases.host_agent import SOURCE
from skylease.runtime.leases.host_images import HostImageCopy, cache_dir, check_image
from skylease.runtime.leases.host_sandbox import HostSandbox, probe_host
from skylease.runtime.leases.host_session import HostState, WatchSession
from skylease.runtime.leases.kills import GraceKills
from skylease.runtime.leases.local import (
    _DEFAULT_PAYLOAD,
    _KEEPER,
    ENV_IMAGE,
    ENV_LEASE,
    ENV_LEASE_DIR,
    ENV_NODE,
    ENV_SERVE_ID,
    ENV_VNODE,
    PAYLOAD_LOG_BYTES,
    STARTUP_WAIT_S,
    Payload,
)
from skylease.runtime.leases.sandbox import AUTO_USER, IMAGES_DIR, LEASE_DIR, PAYLOAD_PATH
from skylease.runtime.leases.site import Site
from skylease.runtime.leases.ssh import SshConnection, SshError

__all__ = ["HostNodes", "HostState"]

log = logging.getLogger(__name__)

_NO_BEAT_YET = "no heartbeat yet"


class HostNodes:
    """The nodes ``nodes`` (default: all) of ``site`` on the host of ``connection`` (opened here
    when it is not open yet: :class:`SshError` if the host cannot be reached; it is this object's
    from then on, closed by :meth:`close`). ``serve_id`` marks our payloads, as for
    :class:`~skylease.runtime.leases.local.LocalNodes`; ``data`` is the server's data folder (the
    connection's control socket lies in it). ``remote_dir``: the folder of payload logs, lease
    folders and exit files on the host (default ``.skylease/<serve_id>/<address>`` in the SSH user's
    home: hosts that share a home folder keep theirs apart). ``on_exit`` is called (from the watcher
    thread) when payloads have ended, ``on_state`` when the host stops or starts answering (its first
    heartbeat, which the constructor waits for, included). ``payload_user``: who payloads run as on
    the host when the SSH user is root (as ``payload_user`` of ``skylease serve``); how the host
    confines them is :attr:`confinement`, probed here
    (:class:`~skylease.runtime.leases.sandbox.SandboxUnavailable` when it cannot:
    nothing is started then)."""

    def __init__(self, site: Site, data: Path, serve_id: str, *, connection: SshConnection,
                 nodes: Sequence[int] | None = None, remote_dir: str | None = None,
                 python: str = "python3", payload_user: str = AUTO_USER,
                 on_exit: Callable[[], None] | None = None,
                 on_state: Callable[[], None] | None = None, beat_s: float = 1.0,
                 down_after_s: float = 5.0, timeout_s: float = 30.0) -> None:
        if not serve_id or "\0" in serve_id or "/" in serve_id:
            raise ValueError("serve_id must be a non-empty string without '/'")
        self.site = site
        self.data = Path(data)
        self.serve_id = serve_id
        self.conn = connection
        self.nodes = frozenset(range(site.n_nodes) if nodes is None else nodes)
        for k in self.nodes:
            if not 0 <= k < site.n_nodes:
                raise ValueError(f"node {k} is not a node of the site (0..{site.n_nodes - 1})")
        self.remote_dir = remote_dir or f".skylease/{serve_id}/{connection.target.address}"
        self.python = python
        self.on_exit = on_exit
        self.on_state = on_state
        self.beat_s = beat_s
        self.down_after_s = down_after_s
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._live: dict[int, Payload] = {}  # leader pid -> payload
        self._killed: set[tuple[int, int]] = set()  # (pid, ticks) sent the group's SIGKILL
        self._ended: list[Payload] = []
        self._kills = GraceKills()
        self._copies: set[HostImageCopy] = set()
        self._closed = False
        self._stopping = False
        self._state = HostState(False, None, _NO_BEAT_YET)
        self._session: WatchSession | None = None
        self._retry_at = 0.0
        self._sel = selectors.DefaultSelector()
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._sel.register(self._wake_r, selectors.EVENT_READ, None)
        if not connection.check():
            connection.open()
        try:
            self.confinement: HostSandbox = probe_host(
                connection, site, self.nodes, remote_dir=self.remote_dir, python=python,
                payload_user=payload_user, timeout_s=timeout_s)
        except UserError:
            connection.close()
            raise
        from skylease.runtime.leases.host_vms import HostVms  # (it subclasses local_vms's: no cycle)

        self.vms = HostVms(self)
        self._start_watch()
        self._vital = Vital(f"the payload watcher of {connection.target.label}")
        self._thread = self._vital.thread(self._watch, name=f"skylease-host-{connection.target.address}")
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while (self._state.reason == _NO_BEAT_YET and self._vital.failure() is None
               and time.monotonic() < deadline):  # (until its first heartbeat, or its first failure)
            time.sleep(0.005)
        if not self._state.up:
            reason = self._vital.failure() or self._state.reason or f"no heartbeat within {timeout_s:g} s"
            self.close()
            raise SshError(f"the helper's watch did not start: {reason}", field=connection.target.label)

    def failure(self) -> str | None:
        """Why the watcher thread stopped, or None while it runs."""
        return self._vital.failure()

    def host_state(self) -> HostState:
        """Whether the host answers now, and when it last did."""
        return self._state

    # -- payloads -------------------------------------------------------------------------------
    def spawn(self, lease: int, vnode: int, node: int, *, command: str | None = None,
              duration_s: float = 0.0, env: Mapping[str, str] | None = None,
              since: float | None = None, image: str | None = None, devices: Sequence[str] = ()) -> Payload:
        """Start VM ``vnode`` of ``lease`` on ``node`` (as
        :meth:`~skylease.runtime.leases.local.LocalNodes.spawn`, confined and pinned on the host:
        see the module's docstring): ``sh -c command``, or (``command=None``) the default payload,
        ``duration_s`` seconds of running time from ``since``, run by the host's python3. ``env`` is
        added to its environment; ``image``, a name in the node's cache, is bound read-only at
        ``$SKYLEASE_IMAGE`` (as on this machine, an image not in the cache is no error: the payload
        does not find it there); ``devices``: the host's device files bound in its sandbox (a guest
        under KVM: /dev/kvm; no other payload gets any)."""
        self._check_node(node)
        if image is not None:
            check_image(image)
        if self._closed:
            raise RuntimeError("HostNodes is closed")
        name = self.site.nodes[node].name
        box = self.confinement
        inside = {**(env or {}), ENV_LEASE: str(lease), ENV_VNODE: str(vnode), ENV_NODE: name,
                  ENV_LEASE_DIR: LEASE_DIR}
        since_age = None
        if command is None:  # (its start time is appended on the host: the host's clock)
            argv = box.sandbox.default_payload(_DEFAULT_PAYLOAD, repr(float(duration_s)))
            since_age = 0.0 if since is None else max(0.0, time.time() - float(since))
        else:
            argv = ["/bin/sh", "-c", command]
        cached = None
        if image is not None:  # (as on this machine: bound read-only at /images/<name> when it is there)
            inside[ENV_IMAGE] = f"{IMAGES_DIR}/{image}"
            cached = f"nodes/{name}/cache/{image}"
        argv = box.wrap(argv, lease=lease, env=inside, image=cached, devices=devices)
        mark = {"PATH": PAYLOAD_PATH, ENV_LEASE: str(lease), ENV_VNODE: str(vnode), ENV_NODE: name,
                ENV_SERVE_ID: self.serve_id}
        req = {"argv": argv, "env": {"PATH": PAYLOAD_PATH}, "mark": mark, "dir": self.remote_dir,
               "lease": lease, "vnode": vnode, "keeper": _KEEPER, "limit": PAYLOAD_LOG_BYTES,
               "since_age": since_age, "cpus": list(self.site.cpus(node)), "owner": box.owner()}
        out = self._agent("spawn", request=req)
        p = Payload(lease, vnode, node, int(out["pid"]), int(out["ticks"]), counts_work=command is None)
        with self._lock:
            self._live[p.pid] = p
            self._tell(p)
        return p

    def suspend(self, p: Payload) -> bool:
        """SIGSTOP to the group; a default payload still starting up is stopped once it counts its
        work, within :data:`~skylease.runtime.leases.local.STARTUP_WAIT_S` (as on this machine).
        False if it has ended."""
        return self._signal(p, {"actions": ["STOP"], "counting": STARTUP_WAIT_S if p.counts_work else 0.0},
                            "stopped")

    def resume(self, p: Payload) -> bool:
        """SIGCONT to the group. False if it has ended."""
        return self._signal(p, {"actions": ["CONT"]}, "running")

    def migrate(self, p: Payload, node: int) -> bool:
        raise NotImplementedError("moving a payload between nodes of a host reached over SSH is not "
                                  "supported yet")

    def shutdown(self, p: Payload, grace_s: float = 5.0, *, term: bool = True) -> bool:
        """SIGCONT to the group and SIGTERM to the payload's processes now (without ``term``: no
        SIGTERM, a VM asked to power off), SIGKILL to the group after ``grace_s`` seconds if it still
        runs then (the watcher thread does it; the caller does not wait). The exit is reported by
        :meth:`exited`. False if it has ended already."""
        if not self._signal(p, {"actions": ["CONT", "TERM"] if term else ["CONT"]}, "running"):
            return False
        with self._lock:
            self._kills.add(p.pid, p.start_ticks, grace_s)
        self._wake()
        return True

    def notice(self, p: Payload, name: str, text: str) -> bool:
        """A file in the lease's folder on the host and SIGUSR1 to the payload's processes that trap
        it (the helper's ``notice``). False if it has ended."""
        with self._lock:
            t = self._live.get(p.pid)
            if t is None or t.start_ticks != p.start_ticks:
                return False
        out = self._agent("notice", dir=self.remote_dir, lease=p.lease, pgid=p.pid, ticks=p.start_ticks,
                          name=name, text=text, owner=self.confinement.owner())
        return bool(out["ok"])

    # -- VM payloads (host_vms) ------------------------------------------------------------------
    def spawn_vm(self, lease: int, vnode: int, node: int, *, image: str, memory_mb: int, cpus: int,
                 env: Mapping[str, str] | None = None) -> Payload:
        """VM ``vnode`` of ``lease`` on ``node``, a QEMU guest booted from ``image`` (or resumed from
        its state file on this host): :class:`~skylease.runtime.leases.host_vms.HostVms`."""
        self._check_node(node)
        check_image(image)
        return self.vms.spawn(lease, vnode, node, image=image, memory_mb=memory_mb, cpus=cpus, env=env)

    def suspend_vm(self, p: Payload) -> float:
        """Save a VM payload to its state file on the host; its QEMU ends."""
        return self.vms.suspend(p)

    def shutdown_vm(self, p: Payload, grace_s: float = 5.0) -> bool:
        """ACPI power-down, SIGKILL after ``grace_s``."""
        return self.vms.shutdown(p, grace_s)

    def watched(self, pid: int, ticks: int) -> bool:
        """Whether the payload led by ``pid`` (started at ``ticks``) runs, as far as the watch has told."""
        with self._lock:
            p = self._live.get(pid)
            return p is not None and p.start_ticks == ticks

    def exited(self) -> list[Payload]:
        """The payloads whose leader ended since the last call (state ``exited``; ``exit_code`` the
        payload's as the host recorded it, negative for a signal, -9 after the group's SIGKILL;
        ``ended_at`` by this machine's clock)."""
        with self._lock:
            out, self._ended = self._ended, []
        return out

    def live(self) -> list[Payload]:
        """The payloads spawned or adopted whose end has not been reported."""
        with self._lock:
            return list(self._live.values())

    def cpu_seconds(self, payloads: Sequence[Payload]) -> list[float | None]:
        """The CPU seconds each payload's processes have used on the host (the helper's ``cpu``),
        None for one with no process left; SshError when the host does not answer."""
        if not payloads:
            return []
        used = self._agent("cpu", pgids=[p.pid for p in payloads])["cpu"]
        return [None if (u := used.get(str(p.pid))) is None else float(u) for p in payloads]

    def log_path(self, p: Payload) -> str:
        """The payload's log on the host."""
        return f"{self.remote_dir}/payloads/{p.lease}-{p.vnode}.log"

    def output(self, p: Payload, limit: int = PAYLOAD_LOG_BYTES) -> str:
        """The last ``limit`` bytes of what the payload's lease and VM wrote (read on the host)."""
        return self._agent("tail", path=self.log_path(p), bytes=int(limit))["text"]

    def tail(self, lease: int, vnode: int, node: int, limit: int = PAYLOAD_LOG_BYTES, *,
             serial: bool = False) -> str:
        """As :meth:`LocalNodes.tail <skylease.runtime.leases.local.LocalNodes.tail>`, read on the
        host (:class:`SshError` when it does not answer)."""
        p = Payload(lease, vnode, node, 0, 0)
        path = f"{self.vms.folder(lease, vnode)}/serial.log" if serial else self.log_path(p)
        return self._agent("tail", path=path, bytes=int(limit))["text"]

    # -- after a restart --------------------------------------------------------------------------
    def find_own(self) -> list[Payload]:
        """Our payloads alive on the host (after a restart): the process group leaders of the SSH
        user carrying our ``SKYLEASE_SERVE_ID``; ``node`` is the node their environment names (-1:
        the site has no such node on this host now). Nothing is adopted: see :meth:`adopt`."""
        found = []
        for f in self._agent("find", serve_id=self.serve_id)["found"]:
            try:
                node = self.site.index(f["node"])
            except KeyError:
                node = -1
            found.append(Payload(int(f["lease"]), int(f["vnode"]), node if node in self.nodes else -1,
                                 int(f["pid"]), int(f["ticks"]), f["state"]))
        return found

    def adopt(self, p: Payload) -> bool:
        """Whether ``p`` (a recorded or found payload) is still the same live process on the host; if
        so it is watched from now on (its end reported by :meth:`exited`) and ``p.state`` is
        refreshed. Signals are idempotent: after a restart, resume what should run and suspend what
        should not."""
        with self._lock:
            if p.pid in self._live:
                return self._live[p.pid].start_ticks == p.start_ticks
        out = self._agent("signal", pgid=p.pid, ticks=p.start_ticks)
        if not out["ok"] or not out["leader"]:
            return False
        p.state, p.exit_code, p.ended_at = out["state"], None, None
        with self._lock:
            self._live[p.pid] = p
            self._tell(p)
        return True

    # -- images -----------------------------------------------------------------------------------
    def cache_dir(self, node: int) -> str:
        """``<remote_dir>/nodes/<name>/cache``: the node's image cache on the host."""
        return cache_dir(self.remote_dir, self.site.nodes[node].name)

    def copy_image(self, image: str, size_mb: int, nodes: Sequence[int], seconds: float) -> HostImageCopy:
        """Copy ``<repository>/<image>`` (or a stand-in of ``size_mb`` MB of zeros) from this machine
        into the cache of each of ``nodes`` on the host, in the background, paced to take ``seconds``
        (never less): :meth:`HostImageCopy.start`. A host not answering fails it at once."""
        check_image(image)
        for k in nodes:
            self._check_node(k)
        if self._closed:
            raise RuntimeError("HostNodes is closed")
        state = self._state
        copy = HostImageCopy.start(self.conn, self._argv, self.site, self.remote_dir, image, size_mb,
                                   sorted(set(nodes)), seconds, timeout_s=self.timeout_s,
                                   refused=None if state.up else f"not answering: {state.reason}",
                                   group=None if (owner := self.confinement.owner()) is None else owner[1])
        with self._lock:
            self._copies = {c for c in self._copies if not c.wait(0)}
            self._copies.add(copy)
        return copy

    def evict(self, node: int, image: str) -> bool:
        """Delete ``image`` from ``node``'s cache on the host; whether it was there."""
        self._check_node(node)
        check_image(image)
        return bool(self._agent("cache", dir=self.remote_dir, node=self.site.nodes[node].name,
                                evict=image)["evicted"])

    def cached(self, node: int) -> list[str]:
        """The images in ``node``'s cache on the host (whole ones only), sorted."""
        self._check_node(node)
        return list(self._agent("cache", dir=self.remote_dir, node=self.site.nodes[node].name,
                                evict=None)["images"])

    # -- the end ----------------------------------------------------------------------------------
    def close(self, kill: bool = False, grace_s: float = 5.0) -> None:
        """Stop the image copies and the watcher and close the connection. With ``kill``, shut every
        payload down first (SIGKILL after ``grace_s``) and wait for their ends to be reported;
        without, they keep running (a new HostNodes with the same ``serve_id`` can adopt them)."""
        if self._closed:
            return
        if kill:
            for p in self.live():
                with contextlib.suppress(SshError):
                    self.shutdown(p, grace_s)
            deadline = time.monotonic() + grace_s + 2.0
            while self.live() and time.monotonic() < deadline and self._state.up:
                time.sleep(0.01)
        self._closed = True
        self.vms.close()
        with self._lock:
            copies = list(self._copies)
        for c in copies:
            c.cancel()
        with self._lock:
            self._stopping = True
        self._wake()
        self._thread.join()
        self._end_stream()
        self._sel.close()
        os.close(self._wake_r)
        os.close(self._wake_w)
        self.conn.close()

    def __enter__(self) -> HostNodes:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close(kill=True)

    # -- inside -----------------------------------------------------------------------------------
    def _check_node(self, node: int) -> None:
        if node not in self.nodes:
            raise ValueError(f"node {node} is not a node of {self.conn.target.address}")

    def _argv(self, *args: str) -> list[str]:
        return [self.python, "-I", "-S", "-c", SOURCE, *args]

    def _agent(self, op: str, **fields: Any) -> dict[str, Any]:
        """Run the helper's command ``op`` on the host (through the watch session); its answer."""
        self._answering()
        session = self._session
        if session is None:
            raise SshError(f"not answering: {self._state.reason}", field=self.conn.target.label)
        return session.call(op, self.timeout_s, **fields)

    def _answering(self) -> None:
        """:class:`SshError` at once while the host does not answer (a command would wait for ssh's
        timeouts: a host that accepts TCP connections but hangs takes tens of seconds to fail)."""
        state = self._state
        if not state.up:
            raise SshError(f"not answering: {state.reason}", field=self.conn.target.label)

    def _signal(self, p: Payload, args: dict[str, Any], state: str) -> bool:
        with self._lock:
            t = self._live.get(p.pid)
            if t is None or t.start_ticks != p.start_ticks:
                return False
        out = self._agent("signal", pgid=p.pid, ticks=p.start_ticks, **args)
        if not out["ok"]:
            return False
        with self._lock:
            if (t := self._live.get(p.pid)) is not None and t.start_ticks == p.start_ticks:
                p.state = t.state = state  # type: ignore[assignment]
        return True

    def _tell(self, p: Payload) -> None:
        """Ask the host's watch to report ``p``'s end (a watch that is gone is told again when it is
        restarted)."""
        session = self._session
        if session is not None:
            session.watch(p.pid, p.start_ticks)

    def _wake(self) -> None:
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(self._wake_w, b"x")

    def _start_watch(self) -> None:
        """Start the host's watch session and tell it every payload tracked."""
        session = WatchSession(self.conn, self._argv("watch", self.remote_dir, "--beat", repr(self.beat_s)))
        with self._lock:
            self._session = session
            for p in self._live.values():
                session.watch(p.pid, p.start_ticks)
        self._sel.register(session.fileno(), selectors.EVENT_READ, session)

    def _end_stream(self, kill: bool = False) -> str:
        """Stop the watch session; ssh's last word."""
        with self._lock:
            session, self._session = self._session, None
        if session is None:
            return ""
        with contextlib.suppress(KeyError, ValueError):
            self._sel.unregister(session.fileno())
        return session.close(kill=kill)

    def _set_state(self, up: bool, reason: str | None) -> None:
        before, callback = self._state, self.on_state  # (read first: the constructor waits for the state)
        self._state = HostState(up, time.time() if up else before.last_contact, reason)
        if before.up != up:
            log.log(logging.INFO if up else logging.WARNING, "%s %s", self.conn.target.label,
                    "answers again" if up else f"is not answering: {reason}")
            _call(callback, "on_state")

    def _watch(self) -> None:
        while True:
            now = time.monotonic()
            with self._lock:
                kill_at = self._kills.next_deadline()
                due = [] if kill_at is None else [kill_at]
            session = self._session
            due.append(session.heard + self.down_after_s if session is not None else self._retry_at)
            events = self._sel.select(max(0.0, min(due) - now))
            with self._lock:
                if self._stopping:
                    return
            ended = False
            for key, _ in events:
                if key.data is None:
                    with contextlib.suppress(BlockingIOError):
                        while os.read(self._wake_r, 4096):
                            pass
                elif key.data is self._session:
                    ended |= self._read(key.data)
            self._due_kills()
            now = time.monotonic()
            session = self._session
            if session is not None and now - session.heard > self.down_after_s:
                self._lost(f"no heartbeat for {self.down_after_s:g} s")
            elif session is None and now >= self._retry_at:
                self._reconnect()
            if ended:
                _call(self.on_exit, "on_exit")

    def _read(self, session: WatchSession) -> bool:
        """Read what the watch printed; whether a payload's end was among it."""
        msgs = session.read()
        if msgs is None:
            self._lost(self._end_stream())
            return False
        ended = False
        for msg in msgs:
            if "beat" in msg:
                self._set_state(True, None)
            elif "ended" in msg:
                ended |= self._end(msg["ended"])
            else:
                log.warning("%s: the watch said %s", self.conn.target.label, msg.get("error", msg))
        return ended

    def _end(self, e: dict[str, Any]) -> bool:
        pid, ticks = int(e["pid"]), int(e["ticks"])
        with self._lock:
            p = self._live.get(pid)
            if p is None or p.start_ticks != ticks:
                return False
            del self._live[pid]
            code = e.get("code")
            if code is None and (pid, ticks) in self._killed:
                code = -signal.SIGKILL
            self._killed.discard((pid, ticks))
            p.state, p.exit_code = "exited", code
            p.ended_at = time.time() - max(0.0, float(e.get("age") or 0.0))
            self._ended.append(p)
        return True

    def _due_kills(self) -> None:
        due = []
        with self._lock:
            for pid, ticks in self._kills.due():
                p = self._live.get(pid)
                if p is not None and p.start_ticks == ticks:
                    due.append(p)
        for p in due:  # (sent, not waited for: this thread is the one that reads the answers)
            try:
                session = self._session
                if session is None:
                    raise SshError(f"not answering: {self._state.reason}", field=self.conn.target.label)
                session.send("signal", {"pgid": p.pid, "ticks": p.start_ticks, "actions": ["KILL"]})
                with self._lock:
                    self._killed.add((p.pid, p.start_ticks))
            except SshError as exc:
                log.warning("lease %d VM %d: SIGKILL not sent: %s", p.lease, p.vnode, exc)

    def _lost(self, reason: str) -> None:
        """The host stopped answering: end the session and its master by their process ids (a master
        whose host hangs may not answer ``ssh -O``, and would keep the next attempt waiting), try
        again in ``down_after_s`` seconds."""
        self._set_state(False, reason)
        self._end_stream(kill=True)
        self.conn.close(force=True)
        self._retry_at = time.monotonic() + self.down_after_s

    def _reconnect(self) -> None:
        try:
            self.conn.open()
            self._start_watch()
        except SshError as exc:
            self._retry_at = time.monotonic() + self.down_after_s
            self._state = HostState(False, self._state.last_contact, exc.message)


def _call(callback: Callable[[], None] | None, what: str) -> None:
    """Call the owner's ``callback`` (from the watcher thread): its error is logged, not ours."""
    if callback is not None:
        try:
            callback()
        except Exception:
            log.exception("%s callback", what)
