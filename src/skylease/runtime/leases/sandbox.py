"""Payload confinement: what a lease's payload can reach (issue 33).

A lease's payload is a stranger's program running on the server's machine. It must reach its own
lease's folder and nothing of the server: not the database, not the data folder, not another
lease's folder or processes, not the server's environment. Every payload runs inside a bubblewrap
(``bwrap``) sandbox (Debian's ``bubblewrap``): new PID, IPC, UTS and mount namespaces, in which the
file system is only

* the system's programs and libraries, read-only: ``/usr``, ``/etc``, ``/opt`` and the ``/bin``,
  ``/sbin``, ``/lib*`` links or folders (and the prefix of the Python that runs the default
  payload, read-only, where it lies elsewhere);
* ``/lease``: the lease's own folder (``<data>/leases/<id>``, shared by the lease's VMs), read-write,
  its working folder and ``$HOME``;
* ``/images/<name>``: the lease's disk image from its node's cache, read-only, when it has one;
* a private ``/tmp``, a minimal ``/dev`` and a ``/proc`` that shows only the sandbox's processes.

The data folder, the database file's folder and the server's secret files are never bound; where
one lies under a system tree it is covered (an empty tmpfs, or ``/dev/null`` for a file). The
environment is rebuilt from nothing: ``PATH``, ``HOME``, ``TMPDIR``, ``LANG`` and the lease's
``SKYLEASE_*`` variables; nothing of the server's. The network is the machine's (a lease is a VM with
the site's network), so what a payload may reach over it is the site's firewall's business; the
server's own database over TCP needs a password the payload never sees.

Who the payload is:

* **server as root**: bwrap runs privileged (no user namespace), and the payload drops to an
  unprivileged UNIX user (:class:`PayloadUser`, from ``payload_user``: by default the system user
  ``skylease-payload``, created with ``useradd`` when missing, else ``nobody``) with ``setpriv``:
  no supplementary groups, no capabilities (bounding set emptied), ``no_new_privs`` (a set-uid
  program gains nothing). Its lease folder is owned by that user, mode 0700; the data folder is root's,
  mode 0700.
* **server as another user**: bwrap creates a user namespace too; the payload keeps the server's
  UID outside, so it is the mount namespace that hides the data folder, and the user namespace that
  keeps it from the server's processes (a process in a child user namespace has no rights over those
  of its parent's, even of the same UID).

Two payloads never see each other: each has its own PID namespace and ``/proc``, and only its own
lease folder is bound.

Where neither works (no bwrap, user namespaces disabled, no usable payload user), :func:`probe`
raises :class:`SandboxUnavailable`: one line saying why and how to fix it, and the server does not
start. The reasoning is in docs/decisions/payload-confinement.md.

The same sandbox confines the payloads of hosts reached over SSH
(:mod:`~skylease.runtime.leases.host_sandbox`): :meth:`Sandbox.wrap` then sees the host's file
system as its probe found it (:class:`FileFacts`), not this machine's.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Protocol

from skylease.model.errors import UserError

__all__ = ["AUTO_USER", "DEFAULT_PAYLOAD_USER", "FIX_BWRAP", "IMAGES_DIR", "LEASE_DIR", "LOCAL_FILES",
           "PAYLOAD_PATH", "FileFacts", "Files", "PayloadUser", "Sandbox", "SandboxUnavailable", "hint",
           "probe", "python_trees", "resolve_payload_user", "wrap_paths"]

#: Where the lease's folder is inside the sandbox (its working folder and $HOME).
LEASE_DIR = "/lease"
#: Where the lease's disk image is inside the sandbox (``/images/<name>``, read-only).
IMAGES_DIR = "/images"
#: ``payload_user``'s default: a dedicated system user when the server is root.
AUTO_USER = "auto"
#: The dedicated system user of ``payload_user = "auto"`` (created when missing).
DEFAULT_PAYLOAD_USER = "skylease-payload"
#: The payload's ``PATH``.
PAYLOAD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: The system trees a payload sees, read-only.
SYSTEM_TREES = ("/usr", "/etc", "/opt")
#: The top-level links (merged /usr) or folders a program's loader needs.
SYSTEM_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: How long the start-up probe may take (seconds).
PROBE_S = 20.0
FIX_BWRAP = "install bubblewrap (Debian, Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap)"


class SandboxUnavailable(UserError):
    """Payloads cannot be confined on this machine: the server must not start them."""


class Files(Protocol):
    """What :meth:`Sandbox.wrap` asks of the file system where the payload runs (``os.path``'s
    meaning: ``isdir`` follows links)."""

    def isdir(self, path: str) -> bool: ...
    def islink(self, path: str) -> bool: ...
    def lexists(self, path: str) -> bool: ...
    def readlink(self, path: str) -> str: ...


class _LocalFiles:
    """This machine's file system."""

    isdir = staticmethod(os.path.isdir)
    islink = staticmethod(os.path.islink)
    lexists = staticmethod(os.path.lexists)
    readlink = staticmethod(os.readlink)


#: This machine's file system, as :meth:`Sandbox.wrap` sees it.
LOCAL_FILES: Files = _LocalFiles()


@dataclass(frozen=True)
class FileFacts:
    """Another machine's file system as :meth:`Sandbox.wrap` sees it, looked at beforehand: for each
    path (:func:`wrap_paths`), whether it is a link, a folder (following links), whether it exists,
    and a link's target. A path not listed does not exist."""

    facts: tuple[tuple[str, bool, bool, bool, str], ...]

    def _get(self, path: str) -> tuple[str, bool, bool, bool, str]:
        return next((f for f in self.facts if f[0] == path), (path, False, False, False, ""))

    def islink(self, path: str) -> bool:
        return self._get(path)[1]

    def isdir(self, path: str) -> bool:
        return self._get(path)[2]

    def lexists(self, path: str) -> bool:
        return self._get(path)[3]

    def readlink(self, path: str) -> str:
        return self._get(path)[4]


def wrap_paths(hidden: Iterable[str] = ()) -> list[str]:
    """The paths :meth:`Sandbox.wrap` looks at for a sandbox that covers ``hidden``."""
    return [*SYSTEM_TREES, *SYSTEM_LINKS, *hidden]


@dataclass(frozen=True)
class PayloadUser:
    """The UNIX user payloads run as when the server is root."""

    name: str
    uid: int
    gid: int


@dataclass(frozen=True)
class Sandbox:
    """How a payload is confined (see the module's docstring). ``user``: the payload user (the server
    is root) or None (a user namespace); ``readable``: extra trees bound read-only (the default
    payload's Python); ``hidden``: paths covered wherever they lie under a bound tree; ``files``: the
    file system where the payload runs, as :meth:`wrap` sees it (this machine's by default; a host's,
    as its probe found it: :class:`FileFacts`)."""

    bwrap: str
    user: PayloadUser | None = None
    setpriv: str | None = None
    readable: tuple[str, ...] = ()
    hidden: tuple[str, ...] = ()
    interpreter: str = field(default_factory=lambda: os.path.realpath(sys.executable))
    files: Files = field(default_factory=lambda: LOCAL_FILES)

    def lease_dir(self, root: Path, lease: int) -> Path:
        """``root/<lease>``, created where missing: mode 0700, owned by the payload user."""
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = root / str(int(lease))
        with contextlib.suppress(FileExistsError):
            path.mkdir(mode=0o700)
        if self.user is not None:
            st = path.stat()
            if (st.st_uid, st.st_gid) != (self.user.uid, self.user.gid):
                os.chown(path, self.user.uid, self.user.gid)
        os.chmod(path, 0o700)
        return path

    def wrap(self, argv: Sequence[str], *, lease_dir: Path | str, hostname: str, env: Mapping[str, str],
             image: Path | str | None = None, devices: Sequence[str] = ()) -> list[str]:
        """The command line that runs ``argv`` confined: its working folder and ``$HOME`` the lease's
        folder (``/lease``), ``env`` added to the payload's fresh environment, ``image`` (a cached
        image file, or an image folder) at ``/images/<name>`` when it exists, ``hostname`` its host
        name; ``devices``: device files of the machine bound beside the minimal ``/dev`` (a VM payload
        under KVM needs ``/dev/kvm``; no other payload gets any). The paths are those of the machine
        the payload runs on (:attr:`files`)."""
        fs = self.files
        out = [self.bwrap, "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
               "--hostname", hostname]
        if self.user is None:
            out.append("--unshare-user")
        bound = [t for t in SYSTEM_TREES if fs.isdir(t)]
        for tree in bound:
            out += ["--ro-bind", tree, tree]
        for link in SYSTEM_LINKS:
            if fs.islink(link):
                out += ["--symlink", fs.readlink(link), link]
            elif fs.isdir(link):
                out += ["--ro-bind", link, link]
                bound.append(link)
        for tree in self.readable:
            if not _under(tree, bound):
                out += _parents(tree, bound)
                out += ["--ro-bind", tree, tree]
                bound.append(tree)
        for path in self.hidden:  # after the binds: a cover lies on top of them
            if _under(path, bound) and fs.lexists(path):
                out += ["--tmpfs", path] if fs.isdir(path) else ["--ro-bind", "/dev/null", path]
        out += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--bind", str(lease_dir), LEASE_DIR]
        for dev in devices:
            out += ["--dev-bind", dev, dev]
        if image is not None:
            # (the folder made searchable whatever the umask of whoever starts bwrap: an SSH session's
            # may be 077, and the payload user could not reach its image)
            out += ["--perms", "0755", "--dir", IMAGES_DIR,
                    "--ro-bind-try", str(image), f"{IMAGES_DIR}/{PurePosixPath(image).name}"]
        out += ["--chdir", LEASE_DIR, "--clearenv"]
        fresh = {"PATH": PAYLOAD_PATH, "HOME": LEASE_DIR, "TMPDIR": "/tmp", "LANG": "C.UTF-8", **env}
        for key, value in fresh.items():
            out += ["--setenv", key, value]
        if self.user is not None:
            # bwrap keeps only what it needs to enter the payload user's folder and setpriv needs to
            # drop to that user and empty the bounding set; the uid change clears them all
            out += ["--cap-drop", "ALL", "--cap-add", "CAP_DAC_READ_SEARCH", "--cap-add", "CAP_SETUID",
                    "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP", "--", self.setpriv or "setpriv",
                    "--reuid", str(self.user.uid), "--regid", str(self.user.gid), "--clear-groups",
                    "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs"]
        return [*out, "--", *argv]

    def default_payload(self, code: str, *args: str) -> list[str]:
        """The argv of a Python payload ``code`` run by the server's own interpreter (bound
        read-only in the sandbox), isolated from the user's site and environment."""
        return [self.interpreter, "-I", "-S", "-c", code, *args]


def _under(path: str, trees: Iterable[str]) -> bool:
    p = os.path.normpath(path)
    return any(p == t or p.startswith(t.rstrip("/") + "/") for t in trees)


def _parents(path: str, bound: Sequence[str]) -> list[str]:
    """``--dir`` options making the folders above ``path`` traversable (bwrap would otherwise copy a
    private folder's mode, such as /root's 0700, onto the sandbox's empty folder)."""
    out: list[str] = []
    parts = Path(path).parts
    for i in range(2, len(parts)):
        parent = str(Path(*parts[:i]))
        if not _under(parent, bound):
            out += ["--perms", "0755", "--dir", parent]
    return out


def resolve_payload_user(name: str, *, create: bool = True) -> PayloadUser:
    """The payload user of ``payload_user = name`` (the server is root): ``auto`` is
    :data:`DEFAULT_PAYLOAD_USER`, created as a system user without a home or a shell where missing
    (``useradd``), else ``nobody``; any other name or number must exist and not be root."""
    if name == AUTO_USER:
        found = _passwd(DEFAULT_PAYLOAD_USER)
        if found is None and create and shutil.which("useradd"):
            subprocess.run(["useradd", "--system", "--user-group", "--no-create-home", "--home-dir",
                            "/nonexistent", "--shell", "/usr/sbin/nologin", "--comment",
                            "skylease lease payloads", DEFAULT_PAYLOAD_USER],
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           check=False, timeout=30)
            found = _passwd(DEFAULT_PAYLOAD_USER)
        found = found or _passwd("nobody")
        if found is None:
            raise SandboxUnavailable(f"no user {DEFAULT_PAYLOAD_USER!r} (and useradd could not create it) "
                                     "and no 'nobody': name an unprivileged user", field="payload_user")
    else:
        found = _passwd(name)
        if found is None:
            raise SandboxUnavailable(f"no user {name!r} on this machine: create it (useradd --system "
                                     f"{name}) or name another", field="payload_user")
    if found.uid == 0 or found.gid == 0:
        raise SandboxUnavailable(f"{name!r} is root (uid or gid 0): payloads must run as an unprivileged "
                                 "user", field="payload_user")
    return found


def _passwd(name: str) -> PayloadUser | None:
    try:
        entry = pwd.getpwuid(int(name)) if name.isdigit() else pwd.getpwnam(name)
    except (KeyError, OverflowError):
        return None
    return PayloadUser(entry.pw_name, entry.pw_uid, entry.pw_gid)


def probe(data_dir: Path, *, payload_user: str = AUTO_USER, hidden: Iterable[str | Path] = (),
          bwrap: str | None = None) -> Sandbox:
    """The sandbox of this machine, checked by running one confined ``true`` from a lease folder
    under ``data_dir``; or :class:`SandboxUnavailable` saying why and how to fix it. ``hidden``:
    the server's files a payload must not see (the data folder is always hidden)."""
    root = os.geteuid() == 0
    me = _passwd(str(os.geteuid()))
    if not root and payload_user not in (AUTO_USER, str(os.geteuid()), me and me.name):
        raise SandboxUnavailable(f"payloads can run as {payload_user!r} only when the server runs as root; "
                                 "leave payload_user unset (payloads then run in a user namespace)",
                                 field="payload_user")
    found = bwrap or shutil.which("bwrap")
    if found is None:
        raise SandboxUnavailable("cannot confine lease payloads: bwrap (bubblewrap) is not installed; "
                                 f"{FIX_BWRAP}", field="payload confinement")
    setpriv = shutil.which("setpriv") if root else None
    if setpriv is not None:  # (run inside the sandbox: a PATH entry of links outside it would not be there)
        setpriv = os.path.realpath(setpriv)
    if root and setpriv is None:
        raise SandboxUnavailable("cannot drop payloads to an unprivileged user: setpriv is missing (Debian: "
                                 "apt-get install util-linux)", field="payload confinement")
    user = resolve_payload_user(payload_user) if root else None
    interpreter = os.path.realpath(sys.executable)
    readable = python_trees(interpreter, os.path.realpath(sys.base_prefix))
    covered = {os.path.realpath(data_dir), *(os.path.realpath(p) for p in hidden)}
    box = Sandbox(os.path.realpath(found), user, setpriv, readable, tuple(sorted(covered)), interpreter)
    Path(data_dir).mkdir(mode=0o700, parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".probe-", dir=data_dir) as tmp:
        lease = box.lease_dir(Path(tmp), 0)
        argv = box.wrap(box.default_payload("import os; open('ok', 'w').close()"), lease_dir=lease,
                        hostname="probe", env={})
        try:
            done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=PROBE_S,
                                  env={"PATH": PAYLOAD_PATH}, check=False)
        except subprocess.TimeoutExpired:
            raise SandboxUnavailable(f"cannot confine lease payloads: a confined `true` did not end within "
                                     f"{PROBE_S:g} s", field="payload confinement") from None
        except OSError as exc:
            raise SandboxUnavailable(f"cannot confine lease payloads: cannot run {box.bwrap}: "
                                     f"{exc.strerror or exc}; {FIX_BWRAP}",
                                     field="payload confinement") from None
        if done.returncode != 0 or not (lease / "ok").exists():
            said = " ".join(done.stderr.decode(errors="replace").split())[:300] or f"exit {done.returncode}"
            raise SandboxUnavailable(f"cannot confine lease payloads: bwrap failed ({said}); "
                                     f"{hint(said, root)}", field="payload confinement")
    return box


def python_trees(interpreter: str, prefix: str) -> tuple[str, ...]:
    """The trees a sandbox binds read-only for the default payload's Python (real paths): its
    installation prefix, and the interpreter's folder where it lies elsewhere."""
    readable = [prefix]
    if not _under(interpreter, readable):
        readable.append(os.path.dirname(interpreter))
    return tuple(readable)


def hint(said: str, root: bool, as_root: str = "run the server as root") -> str:
    """How to fix what bwrap said (``as_root``: how to have bwrap run as root instead)."""
    if not root and ("namespace" in said or "Operation not permitted" in said or "uid map" in said):
        return ("allow unprivileged user namespaces (sysctl user.max_user_namespaces=15000; on Ubuntu "
                "also kernel.apparmor_restrict_unprivileged_userns=0 or an AppArmor profile for bwrap), or "
                f"{as_root}")
    return "check that bwrap works here: bwrap --ro-bind / / true"
