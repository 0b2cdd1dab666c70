"""Local enactment: the lease scheduler's commands carried out as processes on this machine.

Linux only (it uses /proc, process groups, pidfds and CPU affinity). :class:`LocalNodes` holds
the primitives the lease manager's reconciliation calls; it decides nothing itself:

* a VM is one **process group** (its own session, so a ``kill -9`` of the server leaves it
  running): ``sh -c COMMAND``, or by default a loop of short sleeps that lasts ``duration_s`` seconds
  of *running* time (a plain ``sleep`` exits at once when continued after a stop longer than what
  it had left). Its leader is the payload: when the leader exits, what is left of its group is
  killed and the exit is reported by :meth:`LocalNodes.exited`.
* it is pinned to its node's CPUs (:meth:`skylease.runtime.leases.site.Site.cpus`) from its first
  instruction: the spawning thread narrows its own affinity for the fork, which the child inherits;
* suspend = SIGSTOP to the group, resume = SIGCONT, migrate = re-pin every thread of every
  process of the group, shutdown = SIGCONT to the group + SIGTERM to the payload's processes (not
  to the sandbox's own two: the outer one would tear the sandbox down before the payload could end
  cleanly), then SIGKILL to the group after a grace period (a watcher thread keeps the deadlines;
  the caller never waits);
* it is confined (:mod:`skylease.runtime.leases.sandbox`): a bubblewrap sandbox whose working
  folder is the lease's folder ``<data>/leases/<lease>`` (seen as ``/lease``), with a fresh
  environment (``SKYLEASE_LEASE``, ``SKYLEASE_VNODE``, ``SKYLEASE_NODE`` and the caller's ``env``);
  nothing of the server's. The sandbox's outer process is the group's leader; its environment (not
  the payload's) carries ``SKYLEASE_SERVE_ID``, by which a restarted server finds its payloads again
  in /proc (:meth:`LocalNodes.find_own`);
* its standard output and error go through a pipe to a small *log keeper* process (in a session
  of its own, so it outlives the server too, and ends when the payload's group closes the pipe)
  that writes ``<data>/payloads/<lease>-<vnode>.log`` (mode 0600) and, when that reaches 64 KiB, moves it to
  ``.log.1`` and starts a new one: the last 64 KiB at least, 128 KiB at most, are kept
  (:meth:`LocalNodes.output`). A payload never writes to the server, so it never blocks on it.

Exits are noticed at once through pidfds (own children and adopted processes alike), and own
children are reaped by the watcher thread, so no zombie is left behind. A process group is
signalled only while it is certainly ours: its leader has the recorded start time (field 22 of
/proc/PID/stat), or the leader is gone and members remain (the kernel does not reuse a pid number
while a process group still has it).

Image transfers (:meth:`LocalNodes.copy_image`) copy the repository's file into each destination
node's cache folder at the pace that fills the window the schedule reserved, under a temporary
name renamed at the end: a cached image is whole or absent.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from skylease.runtime.health import Vital
from skylease.runtime.leases.copies import ImageCopy, image_size
from skylease.runtime.leases.kills import GraceKills
from skylease.runtime.leases.local_vms import LocalVms
from skylease.runtime.leases.procfs import (
    catches,
    environ_of,
    group_cpu,
    group_members,
    namespace_init,
    pids,
    pinned,
    proc_stat,
)
from skylease.runtime.leases.qemu_accel import AccelChoices
from skylease.runtime.leases.sandbox import IMAGES_DIR, LEASE_DIR, PAYLOAD_PATH, Sandbox
from skylease.runtime.leases.site import Site

__all__ = ["ENV_IMAGE", "ENV_LEASE", "ENV_LEASE_DIR", "ENV_NODE", "ENV_SERVE_ID", "ENV_VNODE",
           "PAYLOAD_LOG_BYTES", "TICK_S", "ImageCopy", "LocalNodes", "Payload"]

log = logging.getLogger(__name__)

ENV_LEASE = "SKYLEASE_LEASE"
ENV_VNODE = "SKYLEASE_VNODE"
ENV_NODE = "SKYLEASE_NODE"
ENV_SERVE_ID = "SKYLEASE_SERVE_ID"
#: The lease's folder and its image, as the payload sees them (in its sandbox).
ENV_LEASE_DIR = "SKYLEASE_LEASE_DIR"
ENV_IMAGE = "SKYLEASE_IMAGE"
#: A payload log is moved aside (``.log.1``) when it reaches this size: at least this much of the
#: latest output is kept, at most twice this.
PAYLOAD_LOG_BYTES = 64 * 1024
#: The default payload's sleep step: a stop makes it miscount its running time by at most half of it.
TICK_S = 0.02
#: The longest a stop waits for a default payload still starting up (Payload.counts_work).
STARTUP_WAIT_S = 5.0
#: An image's cache file name (no slash; a leading dot is kept for the temporary files).
_IMAGE_NAME = re.compile(r"^[A-Za-z0-9_+-][A-Za-z0-9._+-]{0,254}$")
_MB = 2**20

PayloadState = Literal["running", "stopped", "exited"]

# The default payload: `duration` seconds of running time, counted from the Unix time `since` (its
# start, or earlier: the time its run began, when it is spawned late). Each step counts the time it
# really took, except across a stop (noticed by the SIGCONT that ends it), where it counts half a
# step: it ran some part of that step, at most all of it. It exits at once when its work is done
# (no interpreter teardown): the lease manager dates the end of the work by the exit.
# `left` is computed before the SIGCONT handler is set, and a stop waits for the handler
# (LocalNodes.suspend): stopped earlier, in its start-up, it would count the time it stayed
# stopped as work done (`time.time() - since` spans the stop) and end at once when continued.
_DEFAULT_PAYLOAD = f"""
import os, signal, sys, time
left = float(sys.argv[1]) - max(0.0, time.time() - float(sys.argv[2]))
tick, continued = {TICK_S!r}, False
def on_cont(signum, frame):
    global continued
    continued = True
signal.signal(signal.SIGCONT, on_cont)
last = time.monotonic()
while left > 0:
    time.sleep(min(tick, left))
    now = time.monotonic()
    dt, last = now - last, now
    if continued:
        continued, dt = False, min(dt, tick) / 2
    left -= dt
os._exit(0)
"""

# The log keeper: stdin to `path`, moved to `path.1` when it would pass `limit` bytes.
_KEEPER = """
import os, sys
path, limit = sys.argv[1], int(sys.argv[2])
flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
fd = os.open(path, flags, 0o600)
size = os.fstat(fd).st_size
while chunk := os.read(0, 65536):
    try:
        if size and size + len(chunk) > limit:
            os.close(fd)
            os.replace(path, path + ".1")
            fd = os.open(path, flags | os.O_TRUNC, 0o600)
            size = 0
        size += os.write(fd, chunk)
    except OSError:  # a full disk loses output; the payload must not lose its pipe
        pass
"""


def write_notice(folder: Path, name: str, text: str, owner: tuple[int, int] | None = None) -> None:
    """``folder/name`` holding ``text``, replaced whole (a temporary file of a name the payload cannot
    guess, created exclusively and never through a link, renamed over it), owned by ``owner``."""
    tmp = folder / f".{name}.{os.getpid()}.{time.monotonic_ns()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        os.write(fd, text.encode())
        if owner is not None:
            os.fchown(fd, *owner)
    finally:
        os.close(fd)
    os.replace(tmp, folder / name)


@dataclass
class Payload:
    """One VM's process group: its leader ``pid`` (also the group id) and that process's start
    time in clock ticks since boot (a reused pid has another). ``exit_code``: the leader's, as
    :class:`subprocess.Popen` gives it (negative: killed by that signal); ``None`` while it runs
    and for an adopted payload (not our child: its status goes to its new parent)."""

    lease: int
    vnode: int
    node: int
    pid: int
    start_ticks: int
    state: PayloadState = "running"
    exit_code: int | None = None
    log: Path | None = None
    ended_at: float | None = None  # time.time() when its end was noticed
    counts_work: bool = False  # the default payload (it counts its running time: see suspend)


@dataclass(eq=False)
class _Proc:
    payload: Payload
    pidfd: int
    popen: subprocess.Popen | None  # None: adopted


def _pid_namespace(pid: int | str) -> str | None:
    """The PID namespace of process ``pid`` (None: gone, or not ours to look at)."""
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def _state(states: Sequence[str]) -> PayloadState:
    """A group is stopped when any of its processes is: the rest may be waiting for it (a shell
    stopped between its vfork and the child's exec waits in state D until the child continues)."""
    return "stopped" if any(s in "Tt" for s in states) else "running"



class LocalNodes:
    """The nodes of ``site`` on this machine: payload processes and image caches under the data
    folder ``data``, each payload confined by ``sandbox`` (:func:`skylease.runtime.leases.sandbox.probe`
    gives this machine's). ``serve_id`` marks our payloads (a server's database id: a restarted server
    with the same id finds them). ``on_exit`` is called (from the watcher thread) when payloads
    have ended, so that the caller can collect them with :meth:`exited`. Only the site's nodes of
    this machine (``[[nodes]]``) are run here: a host's node (``[[hosts]]``, another machine) is
    refused by every primitive (:class:`~skylease.runtime.leases.site_nodes.SiteNodes` sends those
    to the host's enactment)."""

    def __init__(self, site: Site, data: Path, serve_id: str, *, sandbox: Sandbox,
                 on_exit: Callable[[], None] | None = None, accel: AccelChoices | None = None) -> None:
        if not sys.platform.startswith("linux"):
            raise RuntimeError("local enactment needs Linux (/proc, pidfds, CPU affinity)")
        if not serve_id or "\0" in serve_id:
            raise ValueError("serve_id must be a non-empty string")
        self.sandbox = sandbox
        self.site = site
        self.data = Path(data)
        self.serve_id = serve_id
        self.on_exit = on_exit
        self._lock = threading.Lock()
        self._live: dict[int, _Proc] = {}  # leader pid -> payload
        self._keepers: dict[int, subprocess.Popen] = {}  # pidfd -> log keeper (reaped when it ends)
        self._ended: list[Payload] = []
        self._kills = GraceKills()
        self._pending: list[tuple[int, object]] = []  # pidfds for the watcher to register
        self._copies: set[ImageCopy] = set()
        self._closed = False
        self._stopping = False
        self._sel = selectors.DefaultSelector()
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._sel.register(self._wake_r, selectors.EVENT_READ, None)
        self._vital = Vital("the payload watcher")
        self._thread = self._vital.thread(self._watch, name="skylease-local-nodes")
        self._thread.start()
        #: VM payloads (QEMU guests), driven over QMP; ``accel``: their acceleration, probed once
        self.vms = LocalVms(self, accel=accel)

    def failure(self) -> str | None:
        """Why the watcher thread stopped (payload exits and SIGKILL deadlines are no longer seen
        to), or None while it runs."""
        return self._vital.failure()

    # -- payloads -------------------------------------------------------------------------------
    def node_dir(self, node: int) -> Path:
        """``<data>/nodes/<name>``: the node's folder (its image cache is ``cache/`` in it)."""
        return self.data / "nodes" / self.site.nodes[node].name

    def lease_dir(self, lease: int) -> Path:
        """``<data>/leases/<lease>``: the lease's folder, its payloads' only writable place (created
        private to the payload user where missing)."""
        return self.sandbox.lease_dir(self.data / "leases", lease)

    def spawn(self, lease: int, vnode: int, node: int, *, command: str | None = None,
              duration_s: float = 0.0, env: Mapping[str, str] | None = None,
              since: float | None = None, image: str | None = None, program: Sequence[str] | None = None,
              image_path: Path | None = None, devices: Sequence[str] = ()) -> Payload:
        """Start VM ``vnode`` of ``lease`` on ``node``, confined: ``sh -c command``, or
        (``command=None``) a payload that runs ``duration_s`` seconds, not counting the time it is
        stopped, from the Unix time ``since`` (default: now; an earlier time, such as when the VM's
        run began, leaves it that much less to run: its start-up and a late spawn do not make its
        work end later). ``env`` is added to its environment; ``image``, a name in the node's cache,
        is bound read-only at ``$SKYLEASE_IMAGE`` (from ``image_path`` when given: a VM's image not
        staged into the cache). ``program``: an argv run instead of a command (a VM's QEMU:
        :mod:`~skylease.runtime.leases.local_vms`), with the ``devices`` it needs bound."""
        self._check_node(node)
        if image is not None:
            self._check_image(image)
        if self._closed:
            raise RuntimeError("LocalNodes is closed")
        name = self.site.nodes[node].name
        logs = self.data / "payloads"
        logs.mkdir(mode=0o700, parents=True, exist_ok=True)
        logfile = logs / f"{lease}-{vnode}.log"
        inside = {**(env or {}), ENV_LEASE: str(lease), ENV_VNODE: str(vnode), ENV_NODE: name,
                  ENV_LEASE_DIR: LEASE_DIR}
        cached = None
        if image is not None:
            cached = image_path or self.node_dir(node) / "cache" / image
            inside[ENV_IMAGE] = f"{IMAGES_DIR}/{image}"
        if program is not None:
            argv = list(program)
        elif command is None:
            begun = time.time() if since is None else min(float(since), time.time())
            argv = self.sandbox.default_payload(_DEFAULT_PAYLOAD, repr(float(duration_s)), repr(begun))
        else:
            argv = ["/bin/sh", "-c", command]
        argv = self.sandbox.wrap(argv, lease_dir=self.lease_dir(lease), hostname=name, env=inside,
                                 image=cached, devices=devices)
        # the sandbox's outer process (the group's leader) carries the marks find_own looks for
        outer = {"PATH": PAYLOAD_PATH, ENV_LEASE: str(lease), ENV_VNODE: str(vnode), ENV_NODE: name,
                 ENV_SERVE_ID: self.serve_id}
        r, w = os.pipe2(os.O_CLOEXEC)
        try:
            keeper = subprocess.Popen([sys.executable, "-I", "-S", "-c", _KEEPER, str(logfile),
                                       str(PAYLOAD_LOG_BYTES)], stdin=r, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, start_new_session=True, env={}, cwd="/")
            self._watch_fd(os.pidfd_open(keeper.pid), keeper)
            with pinned(self.site.cpus(node)):
                proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=w, stderr=w,
                                        start_new_session=True, env=outer, cwd="/")
        finally:
            os.close(r)
            os.close(w)
        st = proc_stat(proc.pid)
        assert st is not None  # our unreaped child: at worst a zombie
        p = Payload(lease, vnode, node, proc.pid, st.start_ticks, log=logfile,
                    counts_work=command is None and program is None)
        tracked = _Proc(p, os.pidfd_open(proc.pid), proc)
        with self._lock:
            self._live[p.pid] = tracked
        self._watch_fd(tracked.pidfd, tracked)
        return p

    def suspend(self, p: Payload) -> bool:
        """SIGSTOP to the group (delivered within milliseconds). A default payload (``counts_work``)
        still starting up is stopped once it counts its work, within :data:`STARTUP_WAIT_S`:
        stopped before, it would take the time it stays stopped for work done (a stop that soon
        after a spawn is a start followed by a suspension within the interpreter's start-up: on a
        busy machine, tenths of a second). False if it has ended."""
        if p.counts_work:
            self._await_counting(p)
        return self._signal(p, (signal.SIGSTOP,), "stopped")

    def _await_counting(self, p: Payload) -> None:
        """Until the payload's processes in the sandbox (not its init) handle SIGCONT: the default
        payload sets that handler once it has computed the work left (see _DEFAULT_PAYLOAD)."""
        deadline = time.monotonic() + STARTUP_WAIT_S
        while time.monotonic() < deadline:
            with self._lock:
                if not self._ours(p):
                    return
            inside = [pid for pid in group_members(p.pid) if pid != p.pid and not namespace_init(pid)]
            if inside and all(catches(pid, signal.SIGCONT) for pid in inside):
                return
            time.sleep(0.005)
        log.warning("lease %d VM %d: its payload did not start counting within %g s; stopped anyway",
                    p.lease, p.vnode, STARTUP_WAIT_S)

    def resume(self, p: Payload) -> bool:
        """SIGCONT to the group. False if it has ended."""
        return self._signal(p, (signal.SIGCONT,), "running")

    def migrate(self, p: Payload, node: int) -> bool:
        """Pin every thread of every process of the group to ``node``'s CPUs (and record ``node``).
        A process forked during a pass is caught by the next; at most three passes. False if it
        has ended."""
        self._check_node(node)
        cpus = set(self.site.cpus(node))
        with self._lock:
            if not self._ours(p):
                return False
            p.node = self._live[p.pid].payload.node = node
            for _ in range(3):
                changed = False
                for pid in group_members(p.pid):
                    with contextlib.suppress(OSError):
                        for tid in (int(t) for t in os.listdir(f"/proc/{pid}/task")):
                            with contextlib.suppress(OSError):  # the thread ended meanwhile
                                if os.sched_getaffinity(tid) != cpus:
                                    os.sched_setaffinity(tid, cpus)
                                    changed = True
                if not changed:
                    break
            return True

    def shutdown(self, p: Payload, grace_s: float = 5.0, *, term: bool = True) -> bool:
        """SIGCONT to the group and SIGTERM to the payload's processes now, SIGKILL to the group
        after ``grace_s`` seconds if the leader still runs then (without waiting: the watcher thread
        does it). A sandbox still being set up (no payload process yet) gets SIGTERM itself: there
        is no work to end cleanly, and a payload started after the signal would miss it. The exit
        is reported by :meth:`exited`. False if it has ended already. Without ``term`` no SIGTERM:
        the caller has asked the payload to end otherwise (a VM's ACPI power-down)."""
        if not self._signal(p, (signal.SIGCONT,), "running"):
            return False
        with self._lock:
            if term and self._ours(p):
                inside = [pid for pid in group_members(p.pid) if pid != p.pid and not namespace_init(pid)]
                for pid in inside or [p.pid]:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, signal.SIGTERM)
            self._kills.add(p.pid, p.start_ticks, grace_s)
        self._wake()
        return True

    def notice(self, p: Payload, name: str, text: str) -> bool:
        """Tell a payload something it can trap (docs/decisions/before-end-warnings.md): ``text`` in
        the file ``name`` of its lease's folder (replaced whole: never half-written), then SIGUSR1
        to each of its processes that has a handler for it (one that does not would end: the file
        is its notice). False if it has ended."""
        with self._lock:
            if not self._ours(p):
                return False
        write_notice(self.lease_dir(p.lease), name, text,
                     None if self.sandbox.user is None else (self.sandbox.user.uid, self.sandbox.user.gid))
        with self._lock:
            if self._ours(p):
                inside = [pid for pid in group_members(p.pid) if pid != p.pid and not namespace_init(pid)]
                for pid in inside or [p.pid]:  # (no sandbox: the leader is the payload)
                    if catches(pid, signal.SIGUSR1):
                        with contextlib.suppress(ProcessLookupError, PermissionError):
                            os.kill(pid, signal.SIGUSR1)
        return True

    # -- VM payloads (local_vms) -----------------------------------------------------------------
    def spawn_vm(self, lease: int, vnode: int, node: int, *, image: str, memory_mb: int, cpus: int,
                 env: Mapping[str, str] | None = None) -> Payload:
        """VM ``vnode`` of ``lease`` on ``node``, a QEMU guest booted from ``image`` (or resumed from
        its saved state): :meth:`LocalVms.spawn`."""
        self._check_node(node)
        self._check_image(image)
        return self.vms.spawn(lease, vnode, node, image=image, memory_mb=memory_mb, cpus=cpus, env=env)

    def suspend_vm(self, p: Payload) -> float:
        """Save a VM payload to its state file; its process ends (:meth:`LocalVms.suspend`)."""
        return self.vms.suspend(p)

    def shutdown_vm(self, p: Payload, grace_s: float = 5.0) -> bool:
        """ACPI power-down, SIGKILL after ``grace_s`` (:meth:`LocalVms.shutdown`)."""
        return self.vms.shutdown(p, grace_s)

    def exited(self) -> list[Payload]:
        """The payloads whose leader ended since the last call (state ``exited``; ``exit_code`` for
        our own children, ``None`` for adopted ones)."""
        with self._lock:
            out, self._ended = self._ended, []
        return out

    def live(self) -> list[Payload]:
        """The payloads spawned or adopted that have not ended."""
        with self._lock:
            return [t.payload for t in self._live.values()]

    def cpu_seconds(self, payloads: Sequence[Payload]) -> list[float | None]:
        """The CPU seconds each payload's processes have used (its process group's: the idle_reclaim
        rule's measure), None for one with no process left."""
        used = group_cpu({p.pid for p in payloads})
        return [used.get(p.pid) for p in payloads]

    def output(self, p: Payload, limit: int = PAYLOAD_LOG_BYTES) -> str:
        """The last ``limit`` bytes of what the payload's lease and VM wrote (both logs, decoded)."""
        if p.log is None:
            return ""
        data = b""
        for path in (p.log.with_name(p.log.name + ".1"), p.log):
            with contextlib.suppress(FileNotFoundError):
                data += path.read_bytes()
        return data[-limit:].decode(errors="replace")

    def tail(self, lease: int, vnode: int, node: int, limit: int = PAYLOAD_LOG_BYTES, *,
             serial: bool = False) -> str:
        """The last ``limit`` bytes of VM ``vnode``'s log on ``node`` (running or ended, ours or
        from before a restart: the file is all it needs): its payload log, or with ``serial`` its
        guest's serial console (a VM lease's: ``vm-<vnode>/serial.log`` in the lease's folder,
        read where it is, nothing created). "" when there is none (yet)."""
        self._check_node(node)
        if serial:
            path = self.data / "leases" / str(int(lease)) / f"vm-{int(vnode)}" / "serial.log"
        else:
            path = self.data / "payloads" / f"{int(lease)}-{int(vnode)}.log"
        return self.output(Payload(lease, vnode, node, 0, 0, log=path), limit)

    # -- after a restart --------------------------------------------------------------------------
    def find_own(self) -> list[Payload]:
        """Our payloads still alive (after a restart): the process group leaders of this user whose
        environment holds our ``SKYLEASE_SERVE_ID``; ``state`` is ``stopped`` when any process of
        the group is. ``node``: the node the environment names, or
        after a migration the first node whose CPUs match the process's affinity (-1: the site
        has no node of that name now). Nothing is adopted: see :meth:`adopt`."""
        uid, stats = os.getuid(), {}
        for pid in pids():
            try:
                if os.stat(f"/proc/{pid}").st_uid != uid:
                    continue
            except OSError:
                continue
            if (st := proc_stat(pid)) is not None and st.state != "Z":
                stats[pid] = st
        groups: dict[int, list[str]] = {}
        for st in stats.values():
            groups.setdefault(st.pgrp, []).append(st.state)
        found = []
        ours = _pid_namespace("self")
        for pid, st in stats.items():
            # (a host of the site may be a PID namespace of this machine, as the test sites are: its
            # payloads are that host's, found through it)
            if st.pgrp != pid or _pid_namespace(pid) != ours:
                continue
            env = environ_of(pid)
            if env is None or env.get(ENV_SERVE_ID) != self.serve_id:
                continue
            try:
                lease, vnode = int(env[ENV_LEASE]), int(env[ENV_VNODE])
            except (KeyError, ValueError):
                continue
            node = self._node_of(pid, env.get(ENV_NODE, ""))
            if node >= 0 and self.site.nodes[node].host is not None:
                continue
            found.append(Payload(lease, vnode, node, pid, st.start_ticks, _state(groups[pid]),
                                 log=self.data / "payloads" / f"{lease}-{vnode}.log"))
        return found

    def host_states(self) -> dict[str, Any]:
        """No host: this machine's nodes always answer (see SiteNodes.host_states)."""
        return {}

    def adopt(self, p: Payload) -> bool:
        """Whether ``p`` (a recorded or found payload) is still the same live process; if so it is
        watched from now on (its end reported by :meth:`exited`) and ``p.state`` is refreshed.
        Signals are idempotent: after a restart, :meth:`resume` what should run and :meth:`suspend`
        what should not, whatever the state says."""
        with self._lock:
            if p.pid in self._live:
                return self._live[p.pid].payload.start_ticks == p.start_ticks
        st = proc_stat(p.pid)
        if st is None or st.state == "Z" or st.start_ticks != p.start_ticks:
            return False
        try:
            pidfd = os.pidfd_open(p.pid)
        except OSError:
            return False
        st = proc_stat(p.pid)  # the pidfd holds whatever process had the pid then: still ours?
        if st is None or st.state == "Z" or st.start_ticks != p.start_ticks:
            os.close(pidfd)
            return False
        states = [s.state for pid in group_members(p.pid) if (s := proc_stat(pid)) is not None]
        p.state, p.exit_code, p.ended_at = _state(states), None, None
        tracked = _Proc(p, pidfd, None)
        with self._lock:
            self._live[p.pid] = tracked
        self._watch_fd(pidfd, tracked)
        return True

    # -- images -----------------------------------------------------------------------------------
    def copy_image(self, image: str, size_mb: int, nodes: Sequence[int], seconds: float) -> ImageCopy:
        """Copy ``<repository>/<image>`` into the cache of each of ``nodes``
        (``<data>/nodes/<name>/cache/<image>``) in the background, paced to take ``seconds`` (never
        less). When the repository has no such file (or the site none), a stand-in of ``size_mb`` MB
        of zeros (a sparse file) is written instead, so that a site without real images still
        works. Each copy is written under a temporary name and renamed when the window is over."""
        self._check_image(image)
        for k in nodes:
            self._check_node(k)
        if self._closed:
            raise RuntimeError("LocalNodes is closed")
        repo = self.site.repository
        found = repo is not None and ((repo / image).is_file() or (repo / image).is_dir())
        source = repo / image if found else None
        size = image_size(source) if source is not None else max(0, size_mb) * _MB
        dests = [self.node_dir(k) / "cache" / image for k in sorted(set(nodes))]
        user = self.sandbox.user
        copy = ImageCopy(image, source, size, dests, max(0.0, seconds), None if user is None else user.gid)
        with self._lock:
            self._copies = {c for c in self._copies if not c.wait(0)}
            self._copies.add(copy)
        return copy

    def evict(self, node: int, image: str) -> bool:
        """Delete ``image`` from ``node``'s cache; whether it was there."""
        self._check_node(node)
        self._check_image(image)
        path = self.node_dir(node) / "cache" / image
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)  # a folder image (a VM's kernel and initrd)
            else:
                path.unlink()
        except FileNotFoundError:
            return False
        return True

    def cached(self, node: int) -> list[str]:
        """The images in ``node``'s cache (whole ones only), sorted."""
        self._check_node(node)
        try:
            names = os.listdir(self.node_dir(node) / "cache")
        except FileNotFoundError:
            return []
        return sorted(n for n in names if not n.startswith("."))

    # -- the end ----------------------------------------------------------------------------------
    def close(self, kill: bool = False, grace_s: float = 5.0) -> None:
        """Stop the watcher thread and the image copies. With ``kill``, shut every payload down
        first (SIGKILL after ``grace_s``) and wait for them; without, they keep running (a new
        LocalNodes with the same ``serve_id`` can adopt them)."""
        if self._closed:
            return
        if kill:
            for p in self.live():
                self.shutdown(p, grace_s)
            deadline = time.monotonic() + grace_s + 2.0
            while self.live() and time.monotonic() < deadline:
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
        with self._lock:
            self._handle([])  # what was still pending joins the rest
            for fd, keeper in self._keepers.items():
                if kill:  # their payloads are gone: they end at once
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        keeper.wait(1.0)
                os.close(fd)
            for t in self._live.values():
                os.close(t.pidfd)
            self._live.clear()
            self._keepers.clear()
        self._sel.close()
        os.close(self._wake_r)
        os.close(self._wake_w)

    def __enter__(self) -> LocalNodes:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close(kill=True)

    # -- inside -----------------------------------------------------------------------------------
    def _check_node(self, node: int) -> None:
        if not 0 <= node < self.site.n_nodes:
            raise ValueError(f"node {node} is not a node of the site (0..{self.site.n_nodes - 1})")
        if (host := self.site.nodes[node].host) is not None:
            raise ValueError(f"node {node} ({self.site.nodes[node].name}) is on host {host.name}, "
                             "not this machine")

    @staticmethod
    def _check_image(image: str) -> None:
        if not _IMAGE_NAME.match(image):
            raise ValueError(f"{image!r} is not an image name (letters, digits, . _ + -; no leading dot)")

    def _node_of(self, pid: int, name: str) -> int:
        try:
            node = self.site.index(name)
        except KeyError:
            node = -1
        try:
            cpus = tuple(sorted(os.sched_getaffinity(pid)))
        except OSError:
            return node
        if node >= 0 and self.site.cpus(node) == cpus:
            return node
        return next((k for k in range(self.site.n_nodes) if self.site.cpus(k) == cpus), node)

    def _ours(self, p: Payload) -> bool:
        """Whether the group of ``p`` is tracked and can be signalled safely (lock held)."""
        t = self._live.get(p.pid)
        if t is None or t.payload.start_ticks != p.start_ticks:
            return False
        if t.popen is not None:
            return True  # our unreaped child holds the pid (and the group id)
        st = proc_stat(p.pid)
        return st is None or st.start_ticks == p.start_ticks  # gone: only its group holds the number

    def _signal(self, p: Payload, sigs: Sequence[int], state: PayloadState) -> bool:
        with self._lock:
            if not self._ours(p):
                return False
            for sig in sigs:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(p.pid, sig)
            p.state = self._live[p.pid].payload.state = state
            return True

    def _watch_fd(self, fd: int, what: object) -> None:
        with self._lock:
            self._pending.append((fd, what))
        self._wake()

    def _wake(self) -> None:
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(self._wake_w, b"x")

    def _watch(self) -> None:
        while True:
            with self._lock:
                due = self._kills.next_deadline()
                timeout = None if due is None else max(0.0, due - time.monotonic())
            events = self._sel.select(timeout)
            with self._lock:
                if self._stopping:
                    return
                # an error here ends the watcher, and its Vital says so (the lease manager then refuses
                # every call): going on after what it does not understand would miss exits unseen
                ended = self._handle(events)
            if ended and self.on_exit is not None:
                try:
                    self.on_exit()
                except Exception:
                    log.exception("on_exit callback")

    def _handle(self, events: list[tuple[selectors.SelectorKey, int]]) -> bool:
        """One round of the watcher (lock held): new pidfds, ended processes, due SIGKILLs."""
        with contextlib.suppress(BlockingIOError):
            while os.read(self._wake_r, 4096):
                pass
        for fd, what in self._pending:
            self._sel.register(fd, selectors.EVENT_READ, what)
            if isinstance(what, subprocess.Popen):
                self._keepers[fd] = what
        self._pending.clear()
        ended = False
        for key, _ in events:
            what = key.data
            if what is None:
                continue
            self._sel.unregister(key.fd)
            os.close(key.fd)
            if isinstance(what, subprocess.Popen):  # a log keeper
                del self._keepers[key.fd]
                what.wait()
            elif isinstance(what, _Proc) and self._live.get(what.payload.pid) is what:
                self._end(what)
                ended = True
        for pid, ticks in self._kills.due():
            t = self._live.get(pid)
            if t is not None and t.payload.start_ticks == ticks and self._ours(t.payload):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL)
        return ended

    def _end(self, t: _Proc) -> None:
        """The leader of ``t`` has exited: kill what is left of its group, reap it, report it."""
        p = t.payload
        if self._ours(p):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, signal.SIGKILL)
        if t.popen is not None:
            p.exit_code = t.popen.wait()
        p.state, p.ended_at = "exited", time.time()
        del self._live[p.pid]
        self._ended.append(p)
