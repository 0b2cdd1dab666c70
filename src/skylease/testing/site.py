"""A test site on this machine: N SSH hosts, each a real OpenSSH sshd in namespaces of its own.

Host i (host1, host2, ...) is Debian's ``/usr/sbin/sshd`` listening on 127.0.0.(10+i) port 22 only,
started in the foreground (``-D -e``) under ``unshare --uts --pid --mount --fork --mount-proc``
(as root): its own hostname (``hostname host1`` inside its UTS namespace, so ``ssh ... hostname``
prints host1), its own PID namespace (sshd is its PID 1: its sessions see only that host's
processes in their own /proc, and sshd's end ends every process of the host) and its own mount
namespace (the fresh /proc). Each host has a throwaway host key; one client key pair is authorized on
every host and a known_hosts file lists each host's key, so clients use strict host key checking.
The files are described in skylease.testing.site_files.

``start`` returns when every host has accepted a real SSH login and answered its name. What it
started (the PIDs of unshare and of sshd, with their /proc start times) is written to DIR/site.json;
``stop`` ends exactly those processes: SIGTERM, SIGKILL after a grace, each only while /proc says it
is still the process we started (same start time, its command line still naming this site's
sshd_config). Nothing is ever ended by name.

Command line (docs/howto/site.md)::

    python -m skylease.testing.site start N DIR    # N from 1 to 50
    python -m skylease.testing.site status DIR
    python -m skylease.testing.site stop DIR

Bad input is one line and exit 2; a site that cannot run here (sshd missing, a host that does not
come up) one line and exit 1.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from skylease.model.errors import UserError
from skylease.runtime.leases.procfs import proc_stat
from skylease.testing.site_files import (
    BASE,
    SSH_PORT,
    USER,
    HostFiles,
    SiteError,
    check_count,
    check_folder,
    layout,
    tail,
    which,
    write_configs,
)

__all__ = ["SSHD", "SiteError", "SiteHost", "Started", "TestSite", "load_site", "main", "probe", "start_site"]

SSHD = "/usr/sbin/sshd"
#: Seconds from SIGTERM to SIGKILL when a site stops.
GRACE_S = 3.0
#: sshd's privilege separation folder (Debian's build chroots into it; an empty folder, shared by the
#: hosts: each host's own files are in the site's folder).
PRIVSEP_DIR = Path("/run/sshd")


class SiteHost(NamedTuple):
    name: str  # host1, ...: its hostname too
    address: str  # 127.0.0.11, ...
    pid: int  # its sshd's process id on this machine (PID 1 in its own namespace)


@dataclass(frozen=True)
class Started:
    """A process the site started: its id, its start time in /proc (clock ticks after boot: a reused
    id has another) and a piece of text its /proc command line holds while it is ours."""

    pid: int
    start_ticks: int
    mark: str

    def alive(self) -> bool:
        st = proc_stat(self.pid)
        return (st is not None and st.state != "Z" and st.start_ticks == self.start_ticks
                and self.mark in _cmdline(self.pid))

    def signal(self, sig: int) -> None:
        if self.alive():  # checked right before: never a signal to a process that is not ours
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _started(pid: int, mark: str) -> Started | None:
    st = proc_stat(pid)
    return None if st is None else Started(pid, st.start_ticks, mark)


@dataclass
class TestSite:
    """A running test site (from :func:`start_site`, or :func:`load_site` of its folder). A context
    manager: the site stops at the end of the ``with`` block."""

    __test__ = False  # pytest: a class named Test... that is not a test

    folder: Path
    hosts: list[SiteHost]
    key: Path  # the client's private key, authorized on every host
    known_hosts: Path
    site_file: Path  # site.toml
    ssh_config: Path
    processes: list[Started]  # each host's unshare and sshd
    _children: list[subprocess.Popen] = field(default_factory=list, repr=False, compare=False)

    def host(self, name: str) -> SiteHost:
        for h in self.hosts:
            if name in (h.name, h.address):
                return h
        raise KeyError(name)

    def ssh_args(self, host: str, *, key: Path | None = None, known_hosts: Path | None = None) -> list[str]:
        """The ssh command line that logs in to ``host`` (a name or an address) with the site's key
        and strict host key checking against the site's known_hosts (or the ones given), reading no
        ssh configuration file: the command to run on the host goes after it."""
        return ssh_command(self.host(host).address, key or self.key, known_hosts or self.known_hosts)

    def ssh(self, host: str, command: str, *, key: Path | None = None, known_hosts: Path | None = None,
            timeout: float = 15) -> subprocess.CompletedProcess[str]:
        """Run ``command`` on ``host`` over SSH (see :meth:`ssh_args`); its result, whatever its exit."""
        return subprocess.run([*self.ssh_args(host, key=key, known_hosts=known_hosts), command],
                              capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)

    def status(self) -> list[tuple[SiteHost, bool]]:
        """Each host, and whether its sshd is the process we started and accepts connections."""
        by_pid = {p.pid: p for p in self.processes}
        return [(h, h.pid in by_pid and by_pid[h.pid].alive() and _accepts(h.address, 1.0))
                for h in self.hosts]

    def stop(self, grace: float = GRACE_S) -> None:
        """End every process the site started (sshd first: the end of a PID namespace's first
        process ends all of that host's processes), SIGKILL after ``grace`` seconds; then forget
        them (site.json removed). Stopping a stopped site does nothing."""
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
            for p in self.processes:
                p.signal(sig)
            deadline = time.monotonic() + wait
            while any(p.alive() for p in self.processes) and time.monotonic() < deadline:
                self._reap()
                time.sleep(0.02)
            if not any(p.alive() for p in self.processes):
                break
        self._reap(wait=True)
        left = [p.pid for p in self.processes if p.alive()]
        if left:
            raise SiteError(f"the test site in {self.folder}: processes {left} did not end after SIGKILL")
        self.processes = []
        (self.folder / "site.json").unlink(missing_ok=True)

    def kill_host(self, name: str) -> None:
        """A host fails: SIGKILL to its sshd and unshare (the end of its PID namespace's first
        process ends every process of the host), waited for."""
        h = self.host(name)
        mine = [p for p in self.processes if p.mark == str(self.folder / h.name / "sshd_config")]
        for p in mine:
            p.signal(signal.SIGKILL)
        deadline = time.monotonic() + 10
        while any(p.alive() for p in mine) and time.monotonic() < deadline:
            self._reap()
            time.sleep(0.02)
        if any(p.alive() for p in mine):
            raise SiteError(f"{h.name}: its sshd did not end after SIGKILL")
        self.processes = [p for p in self.processes if p not in mine]
        self.save()

    def restart_host(self, name: str, *, timeout: float = 30, sshd: str = SSHD,
                     die_with_caller: bool = False) -> SiteHost:
        """Start a killed host again (same address, name and keys); returns once it accepts a login."""
        old = self.host(name)
        files = layout(len(self.hosts), self.folder, _base_of(self.hosts))
        h = next(f for f in files.hosts if f.name == old.name)
        deadline = time.monotonic() + timeout
        new = _start_host(self, h, sshd, deadline, die_with_caller)
        self.hosts = [new if x.name == name else x for x in self.hosts]
        self.save()
        _wait_ready(self, h, deadline)
        return new

    def _reap(self, wait: bool = False) -> None:
        for child in self._children:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=1.0) if wait else child.poll()

    def save(self) -> None:
        state = {"folder": str(self.folder), "key": str(self.key), "known_hosts": str(self.known_hosts),
                 "site_file": str(self.site_file), "ssh_config": str(self.ssh_config),
                 "hosts": [h._asdict() for h in self.hosts],
                 "processes": [{"pid": p.pid, "start_ticks": p.start_ticks, "mark": p.mark}
                               for p in self.processes]}
        tmp = self.folder / "site.json.tmp"
        tmp.write_text(json.dumps(state, indent=1) + "\n")
        tmp.replace(self.folder / "site.json")

    def __enter__(self) -> TestSite:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _base_of(hosts: list[SiteHost]) -> int:
    """The ``base`` a site's hosts were laid out with (host1 is on 127.0.0.(base+1))."""
    return int(hosts[0].address.rsplit(".", 1)[1]) - 1


def ssh_command(address: str, key: Path, known_hosts: Path) -> list[str]:
    """ssh to ``USER@address`` with ``key`` only and strict host key checking against
    ``known_hosts`` only; no configuration file, no agent, no prompt."""
    return [which("ssh") or "ssh", "-F", "none", "-i", str(key), "-p", str(SSH_PORT),
            "-o", "IdentitiesOnly=yes", "-o", "IdentityAgent=none",
            "-o", f"UserKnownHostsFile={known_hosts}", "-o", "GlobalKnownHostsFile=/dev/null",
            "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5",
            "-o", "LogLevel=ERROR", f"{USER}@{address}"]


def _accepts(address: str, timeout: float) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((address, SSH_PORT), timeout=timeout):
        return True
    return False


def probe(sshd: str = SSHD) -> None:
    """Whether a test site can run here: root, sshd, ssh, ssh-keygen and unshare present, and
    unshare able to make the namespaces; SiteError saying what is missing otherwise."""
    missing = [p for p in ("ssh", "ssh-keygen", "unshare", "hostname") if not which(p)]
    if not os.access(sshd, os.X_OK):
        missing.insert(0, sshd)
    if missing:
        raise SiteError(f"a test site needs OpenSSH's server and client and util-linux's unshare: "
                        f"{', '.join(missing)} missing (apt-get install openssh-server; .ci/run does)")
    if os.geteuid() != 0:
        raise SiteError("a test site needs root (sshd on port 22, hostnames in namespaces of its own)")
    r = subprocess.run([which("unshare") or "unshare", *_UNSHARE, "true"], capture_output=True, text=True,
                       timeout=30, stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        raise SiteError(f"cannot make UTS, PID and mount namespaces here: {tail(r.stderr)}")


# --kill-child: a host (unshare's child, sshd) is SIGKILLed if its unshare dies: none outlives it.
_UNSHARE = ["--uts", "--pid", "--mount", "--fork", "--mount-proc", "--kill-child", "--"]
# The host's shell inside the namespaces: its hostname, then sshd in its place (PID 1).
# The host's login shell does not read this machine's ~/.bashrc ($4, /dev/null bound over it in the
# host's own mount namespace only): a test host is a plain host, and this machine's shell setup is not
# run at each SSH login. (Here root's .bashrc runs `pyenv init`, whose rehash takes a lock file; a host
# killed mid-login by a test left that file behind once, and every later login, on every host, then
# waited 60 s for it.)
_HOST_SH = ('hostname "$1" && { [ ! -f "$4" ] || mount --bind /dev/null "$4" 2>/dev/null || true; } '
            '&& exec "$2" -D -e -f "$3"')


def start_site(n: int, folder: Path, *, timeout: float = 30, sshd: str = SSHD, base: int = BASE,
               die_with_caller: bool = False) -> TestSite:
    """Start an n-host test site with its files in ``folder`` (created; keys and configurations
    replaced); return once every host accepted a login and answered its hostname, within
    ``timeout`` seconds. Host i listens on 127.0.0.(base+i) (host1 on 127.0.0.11). UserError for bad
    input (n, the folder, a site running there already); SiteError when it cannot run here, naming
    the host and the end of its sshd's log. Whatever was started is stopped on failure.

    ``die_with_caller``: the hosts get SIGKILL when the thread that called this ends (``setpriv
    --pdeathsig KILL`` on unshare, whose --kill-child passes it on to sshd), so a test run killed
    half-way leaves no host holding the addresses. The command line's ``start`` leaves it off: its
    hosts outlive it."""
    check_count(n)
    folder = check_folder(Path(folder))
    files = layout(n, folder, base)
    before = None
    if files.state.exists():
        with contextlib.suppress(UserError):  # a broken site.json: nothing of it can be running
            before = load_site(folder)
    if before is not None and any(p.alive() for p in before.processes):
        raise UserError("a test site runs here already: stop it first "
                        f"(python -m skylease.testing.site stop {folder})", file=folder)
    probe(sshd)
    if die_with_caller and not which("setpriv"):
        raise SiteError("die_with_caller needs util-linux's setpriv, which is missing")
    for h in files.hosts:
        if _accepts(h.address, 0.3):
            raise SiteError(f"{h.name}: {h.address}:{SSH_PORT} is taken already (another test site? "
                            "python -m skylease.testing.site stop DIR ends it)")
    write_configs(files, which("ssh-keygen") or "ssh-keygen")
    PRIVSEP_DIR.mkdir(mode=0o755, parents=True, exist_ok=True)
    site = TestSite(folder, [], files.key, files.known_hosts, files.site_file, files.ssh_config, [])
    deadline = time.monotonic() + timeout
    try:
        for h in files.hosts:
            site.hosts.append(_start_host(site, h, sshd, deadline, die_with_caller))
            site.save()  # as soon as there is a process: `stop DIR` ends a start that failed half-way
        # the logins at once (each takes a key exchange and a fork of sshd: a second under load)
        with ThreadPoolExecutor(max_workers=min(n, 8), thread_name_prefix="site-ready") as pool:
            for ready in [pool.submit(_wait_ready, site, h, deadline) for h in files.hosts]:
                ready.result()
    except BaseException:
        with contextlib.suppress(SiteError):  # the first error is the one to tell
            site.stop(grace=1.0)
        raise
    return site


def _start_host(site: TestSite, h: HostFiles, sshd: str, deadline: float, die_with_caller: bool) -> SiteHost:
    """Start host ``h``: unshare, then sshd as its child; both recorded."""
    mark = str(h.config)  # in both command lines (unshare's, sshd's), and only this site's
    tie = [which("setpriv") or "setpriv", "--pdeathsig", "KILL"] if die_with_caller else []
    with open(h.log, "wb") as log:  # this start's log only
        child = subprocess.Popen([*tie, which("unshare") or "unshare", *_UNSHARE, "sh", "-c", _HOST_SH, "sh",
                                  h.name, sshd, str(h.config), str(Path.home() / ".bashrc")],
                                 stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                                 close_fds=True)
    site._children.append(child)
    outer = _started(child.pid, mark)
    if outer is not None:
        site.processes.append(outer)
    exe = os.path.realpath(sshd)
    while True:  # sshd is unshare's child once that child has exec'd it (after `hostname`)
        for pid in _children_of(child.pid):
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{pid}/exe") == exe and (inner := _started(pid, mark)) is not None:
                    site.processes.append(inner)
                    return SiteHost(h.name, h.address, pid)
        if child.poll() is not None or time.monotonic() > deadline:
            why = "exited" if child.returncode is not None else "did not start sshd in time"
            raise SiteError(f"{h.name} ({h.address}): unshare {why}: {tail(h.log.read_bytes())}")
        time.sleep(0.01)


def _children_of(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            return [int(c) for c in fh.read().split()]
    except OSError:
        return []


def _wait_ready(site: TestSite, h: HostFiles, deadline: float) -> None:
    """Until host ``h`` accepts a real login with the site's key and strict host key checking and
    answers ``hostname`` with its name; SiteError naming it and its sshd's last words otherwise."""
    sshd = next(p for p in site.processes if p.pid == site.host(h.name).pid)
    last, tries = "", 0
    while True:
        if not sshd.alive():
            raise SiteError(f"{h.name} ({h.address}): sshd ended: {tail(h.log.read_bytes())}")
        if _accepts(h.address, 1.0):
            try:
                r = site.ssh(h.name, "hostname", timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                r = None
            if r is not None and r.returncode == 0 and r.stdout.strip() == h.name:
                return
            last = "ssh timed out" if r is None else f"ssh said {tail(r.stdout + r.stderr, 1)!r}"
            tries += 1
        # a host that listens and refuses three logins will not take the fourth (a locked account,
        # a key it does not read): say so now rather than at the deadline
        if time.monotonic() > deadline or tries >= 3:
            raise SiteError(f"{h.name} ({h.address}): no SSH login ({last or 'port closed'}); "
                            f"sshd: {tail(h.log.read_bytes())}")
        time.sleep(0.05)


def load_site(folder: Path) -> TestSite:
    """The site started in ``folder`` (its site.json), to stop it or ask its status."""
    path = Path(folder) / "site.json"
    try:
        state = json.loads(path.read_text())
        return TestSite(Path(state["folder"]), [SiteHost(**h) for h in state["hosts"]], Path(state["key"]),
                        Path(state["known_hosts"]), Path(state["site_file"]), Path(state["ssh_config"]),
                        [Started(**p) for p in state["processes"]])
    except FileNotFoundError:
        raise UserError("no test site here (no site.json): start one with "
                        "python -m skylease.testing.site start N DIR", file=folder) from None
    except (OSError, ValueError, TypeError, KeyError) as e:
        raise UserError(f"not a site.json of skylease.testing.site: {e}", file=path) from None


USAGE = """\
usage: python -m skylease.testing.site start N DIR    start N SSH hosts (1 to 50), files in DIR
       python -m skylease.testing.site status DIR     each host: address, up or down, sshd's pid
       python -m skylease.testing.site stop DIR       end every process the site started"""
PROG = "skylease.testing.site"


def main(argv: list[str] | None = None) -> int:
    """The command line: 0 done, 1 the site cannot run (or a host is down, for status), 2 bad input."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] in (["-h"], ["--help"]):
        print(USAGE)
        return 0
    cmd = args[0] if args else ""
    try:
        if cmd == "start" and len(args) == 3:
            try:
                n = int(args[1])
            except ValueError:
                raise UserError(f"must be a whole number of hosts, got {args[1]!r}", field="N") from None
            site = start_site(n, Path(args[2]))
            for h in site.hosts:
                print(f"{h.name} {h.address} up (sshd pid {h.pid})")
            print(f"site file {site.site_file}; try: ssh -F {site.ssh_config} host1 hostname")
            return 0
        if cmd in ("stop", "status") and len(args) == 2:
            site = load_site(Path(args[1]))
            if cmd == "stop":
                site.stop()
                print(f"stopped {len(site.hosts)} hosts")
                return 0
            up = site.status()
            for h, ok in up:
                print(f"{h.name} {h.address} {'up' if ok else 'down'} (sshd pid {h.pid})")
            return 0 if all(ok for _, ok in up) else 1
        got = " ".join(args) or "nothing"
        raise UserError(f"expected `start N DIR`, `status DIR` or `stop DIR`, got {got!r} (see --help)")
    except (UserError, SiteError) as e:
        prefix = f"{PROG} {cmd}" if cmd in ("start", "stop", "status") else PROG
        print(f"{prefix}: error: {e}", file=sys.stderr)
        return 2 if isinstance(e, UserError) else 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
