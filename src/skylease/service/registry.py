"""Where the user's warm services are, which of them serve this install, and how to stop them.

Shared by the client and the service (:mod:`skylease.service.warm`) and by ``skylease server``, so
the commands that show and stop services do not import the service's own code (nor it theirs).

Two identities tell services apart:

* the *key* names the socket: a digest of the interpreter, ``sys.path`` and the modification times
  of skylease's sources and of ``sys.path``'s folders. A run is only served by a service of its own
  key, so a changed install (an upgrade, an edited source) starts a new service;
* the *install* is the interpreter and the folder skylease is imported from. ``skylease server
  stop`` stops the services of this install (whatever their key: after an edit the old one is
  still this install's), and leaves other installs' services (another virtual environment, another
  checkout) alone unless given ``--all``.

Kept light (standard library only): the thin client of every warm run imports it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import sys
from pathlib import Path
from typing import Any

from skylease.runtime.forkserver import request

OFF_ENV = "SKYLEASE_NO_SERVER"
IDLE_ENV = "SKYLEASE_SERVER_IDLE_S"
DEFAULT_IDLE_S = 600.0
#: Seconds ``server status`` and ``server stop`` wait for a service's answer (one still importing
#: answers once it has finished).
ASK_TIMEOUT_S = 5.0
_PKG = Path(__file__).resolve().parents[1]


def enabled() -> bool:
    """Whether runs may use (and start) a warm service here."""
    return (os.environ.get(OFF_ENV, "") in ("", "0") and sys.platform == "linux"
            and hasattr(socket, "send_fds"))


def idle_seconds() -> float:
    """How long a service waits with nothing to serve before it quits."""
    try:
        idle = float(os.environ.get(IDLE_ENV) or DEFAULT_IDLE_S)
    except ValueError:
        return DEFAULT_IDLE_S
    return idle if idle > 0 else DEFAULT_IDLE_S


def service_dir() -> Path | None:
    """The user's folder of service sockets, or None when it is not ours alone."""
    if os.environ.get("XDG_RUNTIME_DIR"):
        base = os.environ["XDG_RUNTIME_DIR"]
    else:
        import tempfile  # not at the top: the client is on the path of every run

        base = tempfile.gettempdir()
    d = Path(base) / f"skylease-{os.getuid()}"
    try:
        d.mkdir(mode=0o700, exist_ok=True)
        st = d.stat()
    except OSError:
        return None
    if st.st_uid != os.getuid() or st.st_mode & 0o077:
        return None  # someone else could connect and run commands as us
    return d


def code_key() -> str:
    """A digest of what the service would run: interpreter, import path, sources' and folders' times."""
    h = hashlib.sha256()
    h.update(f"{sys.executable}\0{sys.version}\0".encode())
    # settings read once at import by Python or by modules the service preloads
    for k in sorted(k for k in os.environ if k.startswith(("PYTHON", "MPL"))):
        h.update(f"{k}={os.environ[k]}\0".encode())
    for entry in [*sys.path[1:], str(_PKG)]:
        with contextlib.suppress(OSError):
            h.update(f"{entry}\0{os.stat(entry or '.').st_mtime_ns}\0".encode())
    for root, dirs, files in os.walk(_PKG):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for f in sorted(files):
            if f.endswith(".py"):
                with contextlib.suppress(OSError):
                    h.update(f"{f}\0{os.stat(os.path.join(root, f)).st_mtime_ns}\0".encode())
    return h.hexdigest()[:16]


def install_key() -> str:
    """A digest of this install: the interpreter and the folder skylease is imported from."""
    return hashlib.sha256(f"{sys.executable}\0{_PKG}".encode()).hexdigest()[:16]


def socket_path() -> Path | None:
    """The socket of this code's service; None when the service is turned off or cannot be used."""
    d = service_dir() if enabled() else None
    return None if d is None else d / f"{code_key()}.sock"


def ask(path: Path, op: str, timeout: float) -> dict[str, Any] | None:
    """A service's answer to ``ping`` or ``quit``; None when nobody listens at ``path`` (its stale
    socket is then removed)."""
    try:
        return request(str(path), {"op": op}, timeout=timeout)
    except (ConnectionRefusedError, FileNotFoundError):
        with contextlib.suppress(OSError):
            path.unlink()  # a service that died without cleaning up
        return None


def services() -> list[dict[str, Any]]:
    """The user's services, as they describe themselves (pid, key, install, start time, idle limit),
    with ``current`` (serves runs of this code) and ``this_install``. A service that does not answer
    in time (still importing) is listed with its socket and key only."""
    d = service_dir()
    found = []
    key, install = code_key(), install_key()
    for sock in sorted(d.glob("*.sock")) if d is not None else []:
        try:
            info = ask(sock, "ping", ASK_TIMEOUT_S)
        except (OSError, RuntimeError, ValueError):
            info = {"key": sock.stem}  # busy starting; it answers later
        if info is None:
            continue
        found.append({**info, "socket": str(sock), "current": sock.stem == key,
                      "this_install": info.get("install") == install or sock.stem == key})
    return found


def stop_services(all_installs: bool = False) -> tuple[int, int]:
    """Ask this install's services (every install's with ``all_installs``) to quit; runs they serve
    go on to their end. Returns (how many were asked, how many of other installs were left)."""
    asked = left = 0
    for s in services():
        if not (all_installs or s["this_install"]):
            left += 1
            continue
        with contextlib.suppress(OSError, RuntimeError, ValueError):
            # one still importing reads the request once it is done, and quits then
            ask(Path(s["socket"]), "quit", ASK_TIMEOUT_S)
        asked += 1
    return asked, left
