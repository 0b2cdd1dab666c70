"""Payload confinement and CPU pinning on a host reached over SSH (docs/decisions/ssh-enactment.md).

A payload on a host is confined as on the server's machine (:mod:`~skylease.runtime.leases.sandbox`,
docs/decisions/payload-confinement.md): the same bubblewrap sandbox, built by the same
:meth:`~skylease.runtime.leases.sandbox.Sandbox.wrap`, from facts about the host's file system that
:func:`probe_host` gathered there once (:mod:`~skylease.runtime.leases.host_probe`), not from this
machine's. On the host:

* ``/lease`` is the lease's folder ``<remote_dir>/leases/<lease>`` (owned by the payload user, mode
  0700); nothing else of ``remote_dir`` (other leases' folders, exit files, payload logs) and
  nothing of the SSH user's home is bound, and either is covered where it lies under a bound
  system tree;
* the SSH user root: the payload drops to the host's payload user (``payload_user``, default
  ``auto``: ``skylease-payload``, created with ``useradd`` where missing, else ``nobody``) through
  ``setpriv``; another SSH user: a user namespace, as a non-root server's payload;
* the sandbox's host name is the host's own (a payload's output names the machine it ran on);
* the default payload runs on the host's ``python3``, bound read-only.

The payload's whole process group (the helper's waiter, the sandbox and the payload) is pinned to
its node's CPUs, the host's own numbers (:meth:`~skylease.runtime.leases.site.Site.cpus`).

:func:`probe_host` checks all of it before a payload is started: bubblewrap present, ``setpriv``
present when the SSH user is root, a payload user, every node's CPUs among those of the host, and
a trial payload really confined; else :class:`~skylease.runtime.leases.sandbox.SandboxUnavailable`,
one line naming the host and what to install or change (the server does not start).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import select
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from skylease.runtime.leases.host_probe import SOURCE as PROBE_SOURCE
from skylease.runtime.leases.sandbox import (
    AUTO_USER,
    FIX_BWRAP,
    PROBE_S,
    FileFacts,
    PayloadUser,
    Sandbox,
    SandboxUnavailable,
    hint,
    python_trees,
    wrap_paths,
)
from skylease.runtime.leases.site import Site
from skylease.runtime.leases.ssh import SshConnection, SshError

__all__ = ["HostSandbox", "from_facts", "probe_host"]

@dataclass(frozen=True)
class HostSandbox:
    """How payloads are confined on one host: the ``sandbox`` (its paths the host's), the host's
    ``hostname``, the SSH user's ``home``, the remote folder ``remote_dir`` (absolute) and the CPUs
    a process may run on there (``cpus``)."""

    sandbox: Sandbox
    hostname: str
    home: str
    remote_dir: str
    cpus: tuple[int, ...]

    def lease_dir(self, lease: int) -> str:
        """The lease's folder on the host (bound at ``/lease`` in the sandbox)."""
        return f"{self.remote_dir}/leases/{int(lease)}"

    def owner(self) -> list[int] | None:
        """``[uid, gid]`` a lease folder is given (the payload user's), or None (the SSH user's)."""
        user = self.sandbox.user
        return None if user is None else [user.uid, user.gid]

    def wrap(self, argv: Sequence[str], *, lease: int, env: Mapping[str, str],
             image: str | None = None, devices: Sequence[str] = ()) -> list[str]:
        """The host's command line that runs ``argv`` confined in ``lease``'s folder, with the image
        file ``image`` of a node's cache (relative to the remote folder) read-only at
        ``/images/<name>`` when it is there, and the host's ``devices`` (a guest under KVM: /dev/kvm)."""
        path = None if image is None else f"{self.remote_dir}/{image}"
        return self.sandbox.wrap(argv, lease_dir=self.lease_dir(lease), hostname=self.hostname, env=env,
                                 image=path, devices=devices)


def probe_host(conn: SshConnection, site: Site, nodes: Iterable[int], *, remote_dir: str,
               python: str = "python3", payload_user: str = AUTO_USER,
               timeout_s: float = PROBE_S) -> HostSandbox:
    """The sandbox of ``conn``'s host, checked by a trial payload run there (see the module's
    docstring): :class:`SandboxUnavailable` naming the host when payloads cannot be confined there
    or a node of ``nodes`` has CPUs the host does not have; :class:`SshError` when the host does not
    answer."""
    label = conn.target.label
    with _ProbeSession(conn, python, timeout_s) as session:
        f = session.ask({"do": "facts", "dir": remote_dir, "payload_user": payload_user,
                         "paths": wrap_paths()})
        host = from_facts(label, f, site, nodes, payload_user=payload_user)
        _trial(session, host, label, f["euid"] == 0, timeout_s)
    return host


def from_facts(label: str, f: Mapping[str, Any], site: Site, nodes: Iterable[int], *,
               payload_user: str = AUTO_USER) -> HostSandbox:
    """The sandbox of the host ``label`` from its probe's facts ``f`` (host_probe's ``facts``), not
    tried yet: :class:`SandboxUnavailable` naming the host when something it needs is missing."""
    root = f["euid"] == 0
    if not root and payload_user not in (AUTO_USER, str(f["euid"])):
        raise _unavailable(label, f"payloads can run as {payload_user!r} only when the SSH user is root; "
                                  "leave payload_user unset (payloads then run in a user namespace)")
    if not f["bwrap"]:
        raise _unavailable(label, f"bwrap (bubblewrap) is not installed there; {FIX_BWRAP}")
    if root and not f["setpriv"]:
        raise _unavailable(label, "setpriv is missing there (Debian: apt-get install util-linux)")
    user = None
    if root:
        if "error" in f["user"]:
            raise _unavailable(label, f"no payload user: {f['user']['error']}")
        user = PayloadUser(str(f["user"]["name"]), int(f["user"]["uid"]), int(f["user"]["gid"]))
    cpus = tuple(int(c) for c in f["cpus"])
    for k in sorted(nodes):
        missing = sorted(set(site.cpus(k)) - set(cpus))
        if missing:
            raise _unavailable(label, f"node {site.nodes[k].name} is pinned to CPUs "
                                      f"{_cpu_list(site.cpus(k))}, but the host has {_cpu_list(cpus)} "
                                      f"(missing {_cpu_list(missing)}): give its nodes fewer CPUs",
                               what="cannot pin lease payloads")
    files = FileFacts(tuple((str(p), bool(link), bool(isdir), bool(there), str(target))
                            for p, link, isdir, there, target in f["files"]))
    box = Sandbox(str(f["bwrap"]), user, f["setpriv"] if root else None,
                  python_trees(str(f["python"]), str(f["prefix"])),
                  tuple(sorted({str(f["dir"]), str(f["home"])})), str(f["python"]), files)
    return HostSandbox(box, str(f["hostname"]), str(f["home"]), str(f["dir"]), cpus)


def _trial(session: _ProbeSession, host: HostSandbox, label: str, root: bool, timeout_s: float) -> None:
    """A confined payload that creates a file in its lease folder, run on the host."""
    lease_dir = f"{host.remote_dir}/.probe-{secrets.token_hex(6)}/0"
    argv = host.sandbox.wrap(host.sandbox.default_payload("open('ok', 'w').close()"), lease_dir=lease_dir,
                             hostname="probe", env={})
    t = session.ask({"do": "trial", "argv": argv, "lease_dir": lease_dir, "owner": host.owner(),
                     "timeout": timeout_s}, timeout_s + 10.0)
    if not t["ok"]:
        said = " ".join(str(t["stderr"]).split())[:300] or f"exit {t['code']}"
        fix = hint(said, root, "log in to the host as root")
        raise _unavailable(label, f"bwrap failed there ({said}); {fix}")


class _ProbeSession:
    """The probe (:mod:`~skylease.runtime.leases.host_probe`) running on ``conn``'s host: one session
    of its own for all its questions (a session costs the SSH user's login shell and a Python start:
    docs/performance.md)."""

    def __init__(self, conn: SshConnection, python: str, timeout_s: float) -> None:
        self.conn = conn
        self.timeout_s = timeout_s
        self.proc = conn.stream([python, "-I", "-S", "-c", PROBE_SOURCE])
        self._buf = b""

    def ask(self, req: dict[str, Any], timeout_s: float | None = None) -> dict[str, Any]:
        """The probe's answer to ``req``; :class:`SshError` when it fails or does not answer in time."""
        label = self.conn.target.label
        try:
            self.proc.stdin.write(json.dumps(req).encode() + b"\n")  # type: ignore[union-attr]
        except (OSError, ValueError):
            raise self._ended() from None
        fd = self.proc.stdout.fileno()  # type: ignore[union-attr]
        limit = timeout_s or self.timeout_s
        deadline = time.monotonic() + limit
        while True:
            while b"\n" not in self._buf:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise SshError(f"the probe of payload confinement did not answer within {limit:g} s",
                                   field=label)
                if select.select([fd], [], [], left)[0]:
                    chunk = os.read(fd, 65536)
                    if not chunk:
                        raise self._ended()
                    self._buf += chunk
            line, self._buf = self._buf.split(b"\n", 1)
            with contextlib.suppress(ValueError):
                answer = json.loads(line)
                if isinstance(answer, dict):
                    break
            # (anything else is a login script's noise)
        if "error" in answer:
            raise SshError(f"the probe of payload confinement failed: {answer['error']}", field=label)
        return answer

    def _ended(self) -> SshError:
        self.close()
        err = b""
        with contextlib.suppress(OSError, ValueError):
            err = self.proc.stderr.read() or b""  # type: ignore[union-attr]
        return self.conn.error(err, "the probe of payload confinement ended")

    def close(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.proc.stdin.close()  # type: ignore[union-attr]
        try:
            self.proc.wait(2.0)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> _ProbeSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
        for fh in (self.proc.stdout, self.proc.stderr, self.proc.stdin):
            with contextlib.suppress(OSError, ValueError):
                fh.close()  # type: ignore[union-attr]


def _unavailable(label: str, why: str, what: str = "cannot confine lease payloads") -> SandboxUnavailable:
    """One line: the host, then what cannot be done and why."""
    return SandboxUnavailable(f"{what}: {why}", field=label)


def _cpu_list(cpus: Iterable[int]) -> str:
    """``0-3,6``: CPU numbers as ranges (the kernel's list format), ``none`` for none."""
    out: list[str] = []
    for c in sorted(set(cpus)):
        if out and out[-1].split("-")[-1] == str(c - 1):
            out[-1] = f"{out[-1].split('-')[0]}-{c}"
        else:
            out.append(str(c))
    return ",".join(out) or "none"
