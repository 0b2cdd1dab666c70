"""A warm ``skylease run``: a per-user service with Python, Dask, pandas and matplotlib imported.

Run cold, ``skylease run`` spends about 2.5 s of CPU before its first task and after its last one:
Python importing skylease, Dask, pandas and matplotlib, and the same imports again in every worker.
For a job of 2,000 one-millisecond commands that is more than the job itself. The warm service
pays those imports once (like Gradle's daemon or sccache's server):

* the first ``skylease run`` starts it (a detached process; its socket is in a folder only the
  user can open) and it stays while it serves, then quits after ``SKYLEASE_SERVER_IDLE_S`` seconds
  idle (default 600);
* each ``skylease run`` is then a thin client: it hands its arguments, working folder, environment
  and its own standard streams (the terminal itself, by file descriptor) to the service, which
  forks a child that runs the command exactly as the CLI would, with the workers of its local pool
  forked from the same warm parent. The client forwards Ctrl-C and other signals to that child and
  exits with its status; if the client is killed, the child dies with it (a killed driver);
* a service never serves another version of the code: its socket is named by a digest of the
  interpreter, ``sys.path`` and the modification times of skylease's sources and of ``sys.path``'s
  folders, so a changed install starts a new service (the old one idles out);
* ``SKYLEASE_NO_SERVER=1`` turns it off (every run in its own process, as before), and any failure
  to reach the service falls back to that. ``skylease server status|stop`` shows and stops it.

Only ``skylease run`` goes through the service, and only on Linux (it relies on ``fork`` and on
passing file descriptors over Unix sockets).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from skylease.runtime.forkserver import (
    FORKSERVER_ENV,
    WORKER_PRELOAD,
    listen,
    preload,
    recv_message,
    request,
    run_worker,
    send_message,
    serve,
)

OFF_ENV = "SKYLEASE_NO_SERVER"
IDLE_ENV = "SKYLEASE_SERVER_IDLE_S"
DEFAULT_IDLE_S = 600.0
#: Seconds a client waits for a service it has just started (the imports take about 2 s).
START_TIMEOUT_S = 60.0
PRELOAD = (*WORKER_PRELOAD, "skylease.cli", "skylease.experiments.run", "skylease.experiments.run_report",
           "skylease.runtime.env", "skylease.runtime.jobs", "skylease.runtime.store",
           "skylease.control.a2ha", "skylease.control.fixed", "skylease.control.dask_rule",
           "skylease.control.qos", "skylease.runtime.volatility", "distributed.deploy.local", "rich.live",
           "pandas", "matplotlib.pyplot")
if TYPE_CHECKING:
    from typing import Any


# -- where ------------------------------------------------------------------------------------------
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
    pkg = Path(__file__).resolve().parents[1]
    for entry in [*sys.path[1:], str(pkg)]:
        with contextlib.suppress(OSError):
            h.update(f"{entry}\0{os.stat(entry or '.').st_mtime_ns}\0".encode())
    for root, dirs, files in os.walk(pkg):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for f in sorted(files):
            if f.endswith(".py"):
                with contextlib.suppress(OSError):
                    h.update(f"{f}\0{os.stat(os.path.join(root, f)).st_mtime_ns}\0".encode())
    return h.hexdigest()[:16]


def socket_path() -> Path | None:
    d = service_dir()
    return None if d is None else d / f"{code_key()}.sock"


# -- the client -------------------------------------------------------------------------------------
def _connect(path: Path) -> socket.socket | None:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(str(path))
    except OSError:
        s.close()
        return None
    return s


def _start_service(path: Path) -> socket.socket | None:
    import subprocess

    proc = subprocess.Popen([sys.executable, "-m", "skylease.service.warm", str(path)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True, cwd="/")
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        s = _connect(path)
        if s is not None:
            return s
        if proc.poll() is not None and not path.exists():
            return None  # it could not start (and no other service took the place)
        time.sleep(0.01)
    return None


def warm_run(argv: Sequence[str]) -> int | None:
    """Run ``skylease ARGV`` in the warm service; its exit status, or None to run it here instead."""
    if os.environ.get(OFF_ENV, "") not in ("", "0") or sys.platform != "linux" \
            or not hasattr(socket, "send_fds"):
        return None
    path = socket_path()
    if path is None:
        return None
    conn = _connect(path) or _start_service(path)
    if conn is None:
        return None
    with conn:
        try:
            send_message(conn, {"op": "run", "argv": list(argv), "cwd": os.getcwd(), "env": dict(os.environ),
                                "path0": sys.path[0] if sys.path else "",
                                "encoding": getattr(sys.stdout, "encoding", None) or "utf-8"},
                         fds=[0, 1, 2])
            first, _ = recv_message(conn)
        except OSError:
            return None
        if first is None or "pid" not in first:
            return None  # nothing ran yet: run it here
        child = int(first["pid"])

        def forward(signum: int, _frame: Any) -> None:
            with contextlib.suppress(OSError):
                os.kill(child, signum)

        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
            signal.signal(sig, forward)
        try:
            msg, _ = recv_message(conn)  # a forwarded signal does not interrupt it (PEP 475)
        except OSError:
            msg = None
    if msg is None or "exit" not in msg:
        sys.stderr.write("skylease: the run's process ended without an exit status (killed?); "
                         "finish it with --resume\n")
        return 1
    return int(msg["exit"])


# -- the service ------------------------------------------------------------------------------------
def _stream(fd: int, mode: str, encoding: str) -> io.TextIOWrapper:
    raw = io.FileIO(fd, mode, closefd=False)
    buffered = io.BufferedReader(raw) if mode == "r" else io.BufferedWriter(raw)
    return io.TextIOWrapper(buffered, encoding=encoding, errors="replace" if mode == "r" else
                            "backslashreplace", line_buffering=mode == "w" and os.isatty(fd))


def run_command(conn: socket.socket, msg: dict[str, Any], fds: list[int], server: str) -> int:
    """In the forked child: become ``skylease ARGV`` on the client's streams, folder and environment."""
    for target, fd in zip((0, 1, 2), fds, strict=False):
        os.dup2(fd, target)
        os.close(fd)
    enc = str(msg.get("encoding") or "utf-8")
    sys.stdin, sys.stdout, sys.stderr = _stream(0, "r", enc), _stream(1, "w", enc), _stream(2, "w", enc)
    os.chdir(msg["cwd"])
    os.environ.clear()
    os.environ.update(msg["env"])
    os.environ[FORKSERVER_ENV] = server  # the local pool's workers come from here too
    sys.argv = ["skylease", *msg["argv"]]
    if sys.path:
        sys.path[0] = msg.get("path0", "")
    os.setsid()  # out of the service's session: the client forwards the signals meant for us
    import dask

    dask.config.refresh()
    from rich.console import Console

    import skylease.cli as cli

    cli.out, cli.err = Console(), Console(stderr=True)  # made for this terminal and environment
    send_message(conn, {"pid": os.getpid()})

    def watch_client() -> None:
        with contextlib.suppress(OSError):
            while conn.recv(1):
                pass
        os.kill(os.getpid(), signal.SIGKILL)  # the client died: so does its run, as a killed driver

    threading.Thread(target=watch_client, daemon=True).start()
    code = cli.main(list(msg["argv"]))
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    send_message(conn, {"exit": code})
    return code


def serve_forever(path: Path, idle_s: float) -> None:
    """The service's main: bind ``path`` (or leave if another service holds it), preload, serve."""
    try:
        listener = listen(str(path))
    except OSError:
        other = _connect(path)
        if other is not None:  # another service got there first
            other.close()
            return
        with contextlib.suppress(OSError):
            path.unlink()  # a stale socket of a service that died
        listener = listen(str(path))
    try:
        import matplotlib

        matplotlib.use("Agg")
        preload(PRELOAD)
        import skylease.cli

        skylease.cli.click_command()
        hello = {"key": path.stem, "python": sys.executable, "started_unix": time.time(), "idle_s": idle_s}
        serve(listener, {"worker": run_worker,
                         "run": lambda c, m, f: run_command(c, m, f, str(path))},
              idle_s=idle_s, hello=hello)
    finally:
        listener.close()
        with contextlib.suppress(OSError):
            path.unlink()


def services() -> list[dict[str, Any]]:
    """The user's running services (one per installed code version), as they describe themselves."""
    d = service_dir()
    found = []
    for sock in sorted(d.glob("*.sock")) if d is not None else []:
        try:
            info = request(str(sock), {"op": "ping"}, timeout=5)
        except (OSError, RuntimeError, ValueError):
            with contextlib.suppress(OSError):
                sock.unlink()  # nobody listens there any more
            continue
        found.append({**info, "socket": str(sock), "current": sock.stem == code_key()})
    return found


def stop_services() -> int:
    """Ask every service of the user to quit (runs in progress go on); how many were asked."""
    n = 0
    for s in services():
        with contextlib.suppress(OSError, RuntimeError, ValueError):
            request(s["socket"], {"op": "quit"}, timeout=5)
            n += 1
    return n


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m skylease.service.warm SOCKET``: the service (started by the first warm run)."""
    args = list(argv) if argv is not None else sys.argv[1:]
    try:
        idle = float(os.environ.get(IDLE_ENV) or DEFAULT_IDLE_S)
    except ValueError:
        idle = DEFAULT_IDLE_S
    serve_forever(Path(args[0]), idle)


if __name__ == "__main__":
    main()
