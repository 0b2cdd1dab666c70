"""Hosts as a pool: each rented host of a run is one task slot on a machine reached over SSH.

A slot's worker is the local worker (:mod:`skylease.runtime.worker`, with
:mod:`~skylease.runtime.execute` and :mod:`~skylease.runtime.batch`), the same code, started on the
host as ``python3 -I -S -c SOURCE`` through that host's multiplexed
:class:`~skylease.runtime.leases.ssh.SshConnection` and fed over the SSH channel's standard input
and output with the local worker's wire (JSON lines): :func:`worker_source` is those three modules'
source with their skylease imports taken out, so a host needs sshd, ``python3`` (3.9 or later, the
standard library only) and a key, and nothing installed (docs/decisions/ssh-pool.md).

* :meth:`SshPool.connect` opens one master connection per host (all at once) and asks each host
  its Python version and, unless its slots are given, its cores. A host that cannot be reached (or
  has no Python 3.9) is left out with a note (:attr:`SshPool.notes`, said once the run starts); no
  host at all is one line and exit 2.
* :meth:`SshPool.start` places the slot on the host with the most free slots (ties: file order),
  skipping hosts set aside (:meth:`SshPool.set_aside`) and hosts down: a worker that ended without
  being asked to (the SSH channel dropped, its host died, a connection refused) marks its host down
  for :data:`DOWN_S` seconds; the environment then starts the slot again and it goes to another
  host (or waits, booting, until a host has a free slot).
* A dropped channel ends the worker's pipe: its calls fail with
  :class:`~skylease.runtime.pools.WorkerGone` (lost work, requeued without spending a retry).
* The worker's working folder is ``~/.skylease/run-<token>/`` on the host (the run's token, made at
  first use), given to the tasks as ``SKYLEASE_WORKDIR``; they also see ``SKYLEASE_WORKER``,
  ``SKYLEASE_POOL``, ``SKYLEASE_SPEED`` and ``SKYLEASE_HOST`` (the host's label).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skylease.model.errors import UserError
from skylease.model.instance import InstanceType
from skylease.runtime.backend import WorkerCall
from skylease.runtime.batch import run_batch
from skylease.runtime.leases.ssh import SshConnection, SshError, SshTarget
from skylease.runtime.pools import Call, LocalWorker

__all__ = ["DOWN_S", "OwnSshTarget", "PoolHost", "SshPool", "worker_source"]

#: Seconds a host whose worker ended on its own is skipped before a slot is tried on it again.
DOWN_S = 5.0
#: The oldest Python a host may run the worker with.
MIN_PYTHON = (3, 9)
#: What a host is asked when the pool connects: its Python's version and the CPUs it may use.
_PROBE = ("import os, sys; print(sys.version_info[0], sys.version_info[1], "
          "len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count() or 1)")


@dataclass(frozen=True)
class OwnSshTarget(SshTarget):
    """A host reached with the user's own ssh configuration (``~/.ssh/config``, agent, known
    hosts: ``--hosts``): only ``BatchMode=yes`` (never a prompt), the connect timeout and the alive
    checks are added; ``user`` empty and ``port`` 0 leave them to that configuration."""

    user: str = ""
    port: int = 0

    @property
    def label(self) -> str:
        return f"{self.user + '@' if self.user else ''}{self.address}{f':{self.port}' if self.port else ''}"

    def options(self) -> list[str]:
        opts = ["-o", "BatchMode=yes", "-o", f"ConnectTimeout={max(1, round(self.connect_timeout))}",
                "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3"]
        return opts + (["-p", str(self.port)] if self.port else []) + (["-l", self.user] if self.user else [])


@dataclass(frozen=True)
class PoolHost:
    """A host of the pool: how it is reached, and its slots (None: its cores, asked at connect)."""

    target: SshTarget
    slots: int | None = None

    @property
    def label(self) -> str:
        """How the host is named to tasks (``SKYLEASE_HOST``), in notes and to :meth:`SshPool.set_aside`:
        its address, with ``:PORT`` when not 22 (and ``user@`` for the user's own configuration)."""
        t = self.target
        if isinstance(t, OwnSshTarget):
            return t.label
        return t.address if t.port == 22 else f"{t.address}:{t.port}"


def worker_source() -> str:
    """The local worker's program as one standard-library-only source: execute.py, batch.py and
    worker.py (in that order, so each finds what it uses defined), their skylease imports taken
    out (each imports from the one before) and one ``from __future__`` line at the top."""
    from skylease.runtime import batch, execute, worker

    parts = ["from __future__ import annotations"]
    for mod in (execute, batch, worker):
        text = Path(str(mod.__file__)).read_text(encoding="utf-8")
        parts += [line for line in text.splitlines()
                  if not line.startswith("from skylease.") and line != "from __future__ import annotations"]
    source = "\n".join(parts) + "\n"
    if "import skylease" in source or "from skylease" in source:  # a new import form: say so at once
        raise RuntimeError("the worker's modules import skylease in a form worker_source does not remove")
    return source


@dataclass
class _Slot:
    host: int  # index in SshPool.hosts
    worker: LocalWorker
    stopping: bool = False  # we asked it to end (released or killed): its end is not its host's fault


@dataclass
class SshPool:
    """Task slots on SSH hosts (see the module's docstring). ``token`` names the run's working
    folder on the hosts; ``python`` the host's interpreter; ``control_dir`` where the masters'
    sockets go (default: a private temporary folder, removed at :meth:`close`); ``ssh`` the client;
    ``where`` the key (or option) its errors name."""

    itype: InstanceType
    hosts: Sequence[PoolHost]
    token: str
    python: str = "python3"
    control_dir: Path | None = None
    ssh: str = "ssh"
    where: str = ""
    claimed: bool = False
    #: hosts left out at connect, one line each (said once the run starts)
    notes: list[str] = field(default_factory=list)
    #: seconds from a worker's start to its ready line, per worker started (the SSH start cost)
    start_costs: list[float] = field(default_factory=list)
    _conns: list[SshConnection | None] = field(default_factory=list)
    _slots: list[int] = field(default_factory=list)  # each host's slots (0: left out)
    _down: dict[int, float] = field(default_factory=dict)  # host -> when it was found down
    _aside: set[int] = field(default_factory=set)
    _placed: dict[str, _Slot] = field(default_factory=dict)
    _waiting: dict[str, None] = field(default_factory=dict)  # slots started, no host free yet (in order)
    _retiring: list[LocalWorker] = field(default_factory=list)
    _own_dir: str | None = None
    _source: str = ""

    def connect(self) -> None:
        """Open a master connection to every host and ask each its Python and cores."""
        if not self.hosts:
            raise UserError("a pool of hosts needs at least one host", field=self.where or None)
        self._source = worker_source()
        if self.control_dir is None:
            self._own_dir = tempfile.mkdtemp(prefix="skylease-ssh-")
        folder = Path(self.control_dir or str(self._own_dir))
        with ThreadPoolExecutor(max_workers=min(16, len(self.hosts)), thread_name_prefix="ssh-pool") as ex:
            answers = list(ex.map(lambda h: self._open(h, folder), self.hosts))
        self._conns = [conn for conn, _ in answers]
        self._slots = [slots if conn is not None else 0 for conn, slots in answers]
        failed = [f"{h.label}: {why}" for h, (conn, why) in zip(self.hosts, answers, strict=True)
                  if conn is None]
        if not any(self._slots):
            self.close()
            raise UserError(f"no host could be reached: {'; '.join(str(f) for f in failed)}",
                            field=self.where or None)
        self.notes += [f"{f}; its slots are left out of this run" for f in failed]
        most = sum(self._slots)
        if self.itype.max_count is None or self.itype.max_count > most:
            self.itype = dataclasses.replace(self.itype, max_count=most)

    def _open(self, host: PoolHost, folder: Path) -> tuple[SshConnection | None, Any]:
        """(its open connection, its slots), or (None, why not) for a host left out."""
        conn = SshConnection(host.target, folder, ssh=self.ssh)
        try:
            conn.open()
            code, out, err = conn.run([self.python, "-I", "-S", "-c", _PROBE], timeout=30)
        except SshError as e:
            with contextlib.suppress(SshError):
                conn.close(force=True)
            return None, e.message
        try:
            major, minor, cores = (int(x) for x in out.split())
        except ValueError:
            major = minor = cores = 0
        if code != 0 or (major, minor) < MIN_PYTHON:
            conn.close()
            said = " ".join(err.decode(errors="replace").split())[:200]
            got = f"it has {major}.{minor}" if code == 0 else f"{self.python} said: {said or f'exit {code}'}"
            return None, f"a worker needs {self.python} {MIN_PYTHON[0]}.{MIN_PYTHON[1]} or later ({got})"
        return conn, host.slots if host.slots is not None else max(1, cores)

    # -- slots ---------------------------------------------------------------------------------
    def start(self, name: str) -> None:
        old = self._placed.pop(name, None)
        if old is not None:
            self._ended(old)
        self._waiting.pop(name, None)
        self._waiting[name] = None
        self._place()

    def _ended(self, slot: _Slot) -> None:
        """A slot's former worker: its host marked down if it ended on its own; ended if it runs."""
        w = slot.worker
        if (w.gone or w.proc.poll() is not None) and not slot.stopping:
            self._down[slot.host] = time.monotonic()
        if w.proc.poll() is None:
            w.proc.kill()  # (ours: the local ssh; the host's worker ends with its channel)
            self._retiring.append(w)

    def _place(self) -> None:
        """Waiting slots onto hosts with a free slot, as long as there are some."""
        if not self._waiting:
            return
        now = time.monotonic()
        used = [0] * len(self.hosts)
        for s in self._placed.values():
            used[s.host] += 1
        for name in list(self._waiting):
            free = [(self._slots[i] - used[i], -i) for i in range(len(self._slots))
                    if i not in self._aside and now - self._down.get(i, -DOWN_S) >= DOWN_S]
            best = max(free, default=(0, 0))
            if best[0] <= 0:
                return
            i = -best[1]
            del self._waiting[name]
            used[i] += 1
            self._placed[name] = _Slot(i, self._spawn(name, i))

    def _spawn(self, name: str, i: int) -> LocalWorker:
        host, conn = self.hosts[i], self._conns[i]
        assert conn is not None
        env = {"SKYLEASE_WORKER": name, "SKYLEASE_POOL": self.itype.name,
               "SKYLEASE_SPEED": repr(self.itype.speed), "SKYLEASE_HOST": host.label}
        assigns = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        # the host's shell: the run's folder (made at first use), then the worker in the shell's place
        command = (f'd="$HOME/.skylease/run-{self.token}" && mkdir -p "$d" && cd "$d" && '
                   f'exec env SKYLEASE_WORKDIR="$d" {assigns} {shlex.quote(self.python)} -I -S -c '
                   f"{shlex.quote(self._source)}")
        return LocalWorker(os.environ, os.getcwd(), conn.argv(command))

    def workers(self) -> dict[str, str]:
        """Workers up and alive: name -> address (the name itself); waiting slots are placed first."""
        self._place()
        up = {}
        for name, s in self._placed.items():
            w = s.worker
            if w.ready and not w.gone and w.proc.poll() is None:
                up[name] = name
                if w.ready_at is not None:
                    self.start_costs.append(w.ready_at - w.started_at)
                    w.ready_at = None  # counted once
        return up

    def bind(self, name: str, address: str) -> None:
        """Slots are named by skylease: nothing to remember."""

    def alive(self, name: str) -> bool:
        """The slot's worker still runs (a slot waiting for a host counts as alive)."""
        s = self._placed.get(name)
        if s is None:
            return name in self._waiting
        return not s.worker.gone and s.worker.proc.poll() is None

    def gone(self, name: str) -> bool:
        """The slot's worker was started and has ended (a refused connection, a host down)."""
        return name in self._placed and not self.alive(name)

    def submit(self, address: str, fn: Callable[..., Any], *args: Any) -> Call:
        return self._placed[address].worker.submit("batch" if fn is run_batch else "task", args)

    def stop_task(self, address: str, call: WorkerCall) -> None:
        """Kill the processes of ``call``, the task the worker runs (on its host); the worker lives
        on."""
        s = self._placed.get(address)
        if s is not None:
            s.worker.kill_call(call)

    def stop(self, name: str, address: str | None) -> None:
        """Released: the worker's input is closed, it ends on its host (its task killed)."""
        self._waiting.pop(name, None)
        s = self._placed.pop(name, None)
        if s is not None:
            s.stopping = True
            s.worker.close()
            self._retiring.append(s.worker)

    def kill(self, name: str) -> None:
        """End the worker at once (a volatile host leaves): its channel is cut, and on the host
        the worker reads the end of its input and kills its task's processes."""
        self._waiting.pop(name, None)
        s = self._placed.pop(name, None)
        if s is not None and s.worker.proc.poll() is None:
            s.worker.proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                s.worker.proc.wait(timeout=1)

    # -- hosts ---------------------------------------------------------------------------------
    def set_aside(self, host: str) -> bool:
        """No new slot goes to ``host`` (a label, as :meth:`machine` gives it) from now on, for
        the rest of the run; its workers that run go on (end them with :meth:`kill` or
        :meth:`stop`). False, and nothing set aside, when it is the pool's last host not set aside
        (the run keeps it: docs/decisions/failure-classes.md). KeyError for a label that is no host
        of the pool."""
        for i, h in enumerate(self.hosts):
            if h.label == host:
                if not any(j != i and j not in self._aside for j in range(len(self.hosts))):
                    return False
                self._aside.add(i)
                return True
        raise KeyError(host)

    def machine(self, name: str) -> str | None:
        """The label of the host the slot ``name``'s worker runs on now (None: it waits for one)."""
        s = self._placed.get(name)
        return None if s is None else self.hosts[s.host].label

    def unreachable_for(self) -> float:
        return 0.0  # no scheduler: a host that cannot be reached loses its slots, not the pool

    def started_at(self, name: str) -> float | None:
        """Billed by skylease's own meter, not by a job's clock."""
        return None

    def ended_at(self, name: str) -> float | None:
        return None

    def close(self) -> None:
        """End every worker (their channels cut) and every master connection."""
        for name in list(self._placed):
            self.kill(name)
        self._waiting.clear()
        deadline = time.monotonic() + 2.0
        for w in self._retiring:
            try:
                w.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                w.proc.kill()
                w.proc.wait()
        self._retiring.clear()
        conns = [c for c in self._conns if c is not None]
        if conns:
            with ThreadPoolExecutor(max_workers=min(16, len(conns))) as ex:
                list(ex.map(_close_quietly, conns))
        self._conns = []
        if self._own_dir is not None:
            shutil.rmtree(self._own_dir, ignore_errors=True)
            self._own_dir = None


def _close_quietly(conn: SshConnection) -> None:
    with contextlib.suppress(SshError, OSError):
        conn.close()
