"""What a host reached over SSH offers for confining payloads: run there once when the server starts.

This module's own source is what runs on the host (:data:`SOURCE`, shipped as ``python3 -I -S -c
SOURCE COMMAND`` over the SSH channel, as :mod:`~skylease.runtime.leases.host_agent` is), so it
imports nothing of skylease: the standard library only (Python 3.9 or later). It only looks and
reports; what to make of it is :mod:`~skylease.runtime.leases.host_sandbox`'s business, which
builds the sandbox with :mod:`~skylease.runtime.leases.sandbox`'s own rules. It reads JSON lines
``{"do": COMMAND, ...}`` on its standard input until it ends and answers each with one JSON line
(``{"error": "..."}`` when it fails): one session carries the whole probe.

* ``facts`` (``dir``, ``payload_user``, ``paths``): the host's facts: ``euid``; ``home`` (the SSH
  user's) and ``dir`` (the remote folder, absolute; created, mode 0700); ``hostname``; ``cpus``
  (the CPUs a process may run on there: its affinity); ``bwrap`` and ``setpriv`` (their paths, or
  null); ``python`` and ``prefix`` (this interpreter's real path and installation prefix);
  ``user`` (as root only: the payload user ``{"name", "uid", "gid"}``, or ``{"error"}``): for
  ``payload_user = "auto"`` the system user ``skylease-payload``, created with ``useradd`` when
  missing, else ``nobody``, as :func:`skylease.runtime.leases.sandbox.resolve_payload_user` does on
  the server's machine; and ``files``: for each of ``paths`` and ``home`` and ``dir``,
  ``[path, is a link, is a folder, exists, link target]``.
* ``trial`` (``argv``, ``lease_dir``, ``owner``, ``timeout``): creates ``lease_dir`` (mode 0700,
  owned by ``owner`` ``[uid, gid]`` when given), runs ``argv`` (a confined payload that creates
  the file ``ok`` in its lease folder) and removes the folder: ``{"code", "stderr", "ok"}``.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import time

__all__ = ["SOURCE"]

AUTO_USER = "auto"
DEFAULT_PAYLOAD_USER = "skylease-payload"


def _passwd(name: str) -> dict | None:
    try:
        e = pwd.getpwuid(int(name)) if name.isdigit() else pwd.getpwnam(name)
    except (KeyError, OverflowError):
        return None
    return {"name": e.pw_name, "uid": e.pw_uid, "gid": e.pw_gid}


def payload_user(name: str) -> dict:
    """The payload user of ``payload_user = name`` (this user is root), or ``{"error"}``."""
    if name == AUTO_USER:
        found = _passwd(DEFAULT_PAYLOAD_USER)
        for attempt in range(3 if shutil.which("useradd") else 0):
            if found is not None:
                break
            if attempt:  # (another probe holds the passwd lock: hosts sharing one /etc, as test hosts do)
                time.sleep(0.2)
            subprocess.run(["useradd", "--system", "--user-group", "--no-create-home", "--home-dir",
                            "/nonexistent", "--shell", "/usr/sbin/nologin", "--comment",
                            "skylease lease payloads", DEFAULT_PAYLOAD_USER],
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           check=False, timeout=30)
            found = _passwd(DEFAULT_PAYLOAD_USER)
        found = found or _passwd("nobody")
        if found is None:
            return {"error": f"no user {DEFAULT_PAYLOAD_USER!r} (and useradd could not create it) and no "
                             "'nobody': create an unprivileged user"}
    else:
        found = _passwd(name)
        if found is None:
            return {"error": f"no user {name!r}: create it (useradd --system {name})"}
    if found["uid"] == 0 or found["gid"] == 0:
        return {"error": f"{name!r} is root (uid or gid 0): payloads must run as an unprivileged user"}
    return found


def _file(path: str) -> list:
    link = os.path.islink(path)
    return [path, link, os.path.isdir(path), os.path.lexists(path), os.readlink(path) if link else ""]


def facts(req: dict) -> dict:
    base = os.path.abspath(os.path.expanduser(str(req["dir"])))
    os.makedirs(base, mode=0o700, exist_ok=True)
    home = os.path.abspath(os.path.expanduser("~"))
    root = os.geteuid() == 0
    out = {"euid": os.geteuid(), "home": home, "dir": base, "hostname": os.uname().nodename,
           "cpus": sorted(os.sched_getaffinity(0)), "bwrap": shutil.which("bwrap"),
           "setpriv": shutil.which("setpriv"), "python": os.path.realpath(sys.executable),
           "prefix": os.path.realpath(sys.base_prefix),
           "user": payload_user(str(req["payload_user"])) if root else None}
    if out["bwrap"]:
        out["bwrap"] = os.path.realpath(out["bwrap"])
    paths = [str(p) for p in req["paths"]] + [home, base]
    out["files"] = [_file(p) for p in dict.fromkeys(paths)]
    return out


def trial(req: dict) -> dict:
    lease_dir = str(req["lease_dir"])
    os.makedirs(lease_dir, mode=0o700)
    try:
        if req.get("owner"):
            os.chown(lease_dir, int(req["owner"][0]), int(req["owner"][1]))
        try:
            done = subprocess.run([str(a) for a in req["argv"]], stdin=subprocess.DEVNULL,
                                  capture_output=True, timeout=float(req["timeout"]),
                                  env={"PATH": os.environ.get("PATH", "")}, check=False)
        except subprocess.TimeoutExpired:
            return {"code": None, "stderr": f"did not end within {req['timeout']} s", "ok": False}
        except OSError as exc:
            why = f"cannot run {req['argv'][0]}: {exc.strerror or exc}"
            return {"code": None, "stderr": why, "ok": False}
        ok = os.path.exists(os.path.join(lease_dir, "ok"))
        return {"code": done.returncode, "stderr": done.stderr.decode(errors="replace")[-2000:], "ok": ok}
    finally:
        shutil.rmtree(os.path.dirname(lease_dir), ignore_errors=True)


def main() -> int:
    for line in sys.stdin:
        try:
            req = json.loads(line)
            if req["do"] == "facts":
                out = facts(req)
            elif req["do"] == "trial":
                out = trial(req)
            else:
                raise ValueError(f"commands are facts and trial, got {req['do']!r}")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            out = {"error": f"{type(exc).__name__}: {exc}"}
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
else:
    with open(__file__, encoding="utf-8") as _fh:
        #: This module's source: what runs on the host.
        SOURCE = _fh.read()
