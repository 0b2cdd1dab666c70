"""A warm ``skylease run``: a per-user service with Python, Dask, pandas and matplotlib imported.

Run cold, ``skylease run`` spends about 2.5 s of CPU before its first task and after its last one:
Python importing skylease, Dask, pandas and matplotlib, and the same imports again in every worker.
For a job of 2,000 one-millisecond commands that is more than the job itself. The warm service
pays those imports once (like Gradle's daemon or sccache's server):

* a run that executed tasks in its own process (no service was up) starts it when it ends, and
  says so in one line on stderr; nothing else starts it: not ``--help``, not a usage error, not a
  job that was refused, not a run interrupted with Ctrl-C. It is a detached process (its socket is
  in a folder only the user can open) that stays while it serves, then quits after
  ``SKYLEASE_SERVER_IDLE_S`` seconds idle (default 600);
* each later ``skylease run`` is then a thin client: it hands its arguments, working folder,
  environment and its own standard streams (the terminal itself, by file descriptor) to the
  service, which forks a child that runs the command exactly as the CLI would, with the workers of
  its local pool forked from the same warm parent. The client forwards Ctrl-C and other signals to
  that child and exits with its status; if the client is killed, the child dies with it (a killed
  driver);
* a service never serves another version of the code (:func:`~skylease.service.registry.code_key`);
* ``SKYLEASE_NO_SERVER=1`` turns it off (every run in its own process, as before), and any failure
  to reach the service falls back to that. ``skylease server status|stop`` shows and stops it.
* ``ps`` tells them apart: the service is ``skylease-server (quits after 600 s idle) SOCKET``, a
  run ``skylease run ARGS``, a worker ``skylease worker POOL/HOST``.

The service reaches the CLI only through the callables its entry point (:mod:`skylease.launch`)
passes in: this module imports nothing above it. Only ``skylease run`` goes through the service,
and only on Linux (it relies on ``fork`` and on passing file descriptors over Unix sockets).
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from skylease.runtime.forkserver import (
    FORKSERVER_ENV,
    WORKER_PRELOAD,
    listen,
    preload,
    recv_message,
    run_worker,
    send_message,
    serve,
    set_title,
)
from skylease.service.registry import OFF_ENV, ask, idle_seconds, install_key, socket_path

#: Seconds a client waits for a service that is still importing (about 2 s when the machine is idle).
START_TIMEOUT_S = 60.0
#: What a run needs besides what its workers need (the entry point adds the CLI).
PRELOAD = (*WORKER_PRELOAD, "skylease.experiments.run", "skylease.experiments.run_report",
           "skylease.runtime.env", "skylease.runtime.jobs", "skylease.runtime.store",
           "skylease.control.a2ha", "skylease.control.fixed", "skylease.control.dask_rule",
           "skylease.control.qos", "skylease.runtime.volatility", "distributed.deploy.local", "rich.live",
           "pandas", "matplotlib.pyplot")
STARTED = ("skylease: started a warm service (pid {pid}) that serves the next runs with everything "
           "imported; `skylease server stop` stops it, " + OFF_ENV + "=1 turns it off\n")

#: The command itself, in a process of the service: ``skylease ARGV`` -> its exit status.
Entry = Callable[[list[str]], int]
if TYPE_CHECKING:
    from typing import Any


def run_title(argv: Sequence[str]) -> str:
    """The process title of a run: the command as typed."""
    return " ".join(["skylease", *argv])


# -- the client -------------------------------------------------------------------------------------
def _connect(path: Path) -> socket.socket | None:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(str(path))
    except OSError:
        s.close()
        return None
    return s


def warm_run(argv: Sequence[str]) -> int | None:
    """Run ``skylease ARGV`` in the warm service; its exit status, or None to run it here instead
    (no service of this code is up, or it is turned off)."""
    path = socket_path()
    if path is None:
        return None
    try:
        # answered once the service has imported everything: a request is only sent to one that
        # serves, so giving up on a slow one never leaves a run behind in its queue
        if ask(path, "ping", START_TIMEOUT_S) is None:
            return None
    except (OSError, RuntimeError, ValueError):
        return None
    conn = _connect(path)
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


def ran_tasks(argv: Sequence[str], code: int) -> bool:
    """Whether ``skylease ARGV``, just ended here with ``code``, got as far as running its tasks:
    ``run`` ends 0 (all done) or 1 (tasks failed or left) only then; a refused job or option ends 2,
    Ctrl-C 130, and ``--help`` 0 without running anything."""
    return list(argv[:1]) == ["run"] and code in (0, 1) and "--help" not in argv


def start_service(command: Sequence[str]) -> int | None:
    """Start this code's service in the background: ``command`` + ``[FD, SOCKET]`` is its process
    (see :func:`serve_forever`). Returns its pid, or None when the service is turned off, one is up
    (or starting) already, or it cannot be started.

    The socket is bound here, before the service has imported anything, so a run started the next
    moment finds it and waits for it instead of starting another."""
    path = socket_path()
    if path is None:
        return None
    try:
        listener = listen(str(path))
    except OSError:
        other = _connect(path)
        if other is not None:
            other.close()
            return None  # another service (perhaps one still importing) holds it
        with contextlib.suppress(OSError):
            path.unlink()  # the stale socket of a service that died
        try:
            listener = listen(str(path))
        except OSError:
            return None
    import subprocess

    try:
        proc = subprocess.Popen([*command, str(listener.fileno()), str(path)], pass_fds=(listener.fileno(),),
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True, cwd="/")
    except OSError:
        with contextlib.suppress(OSError):
            path.unlink()
        return None
    finally:
        listener.close()
    return proc.pid


def start_after_run(argv: Sequence[str], code: int, command: Sequence[str]) -> None:
    """After a run in this process: start the service if the run executed tasks, and say so."""
    if ran_tasks(argv, code):
        pid = start_service(command)
        if pid is not None:
            sys.stderr.write(STARTED.format(pid=pid))


# -- the service ------------------------------------------------------------------------------------
def _stream(fd: int, mode: str, encoding: str) -> io.TextIOWrapper:
    raw = io.FileIO(fd, mode, closefd=False)
    buffered = io.BufferedReader(raw) if mode == "r" else io.BufferedWriter(raw)
    return io.TextIOWrapper(buffered, encoding=encoding, errors="replace" if mode == "r" else
                            "backslashreplace", line_buffering=mode == "w" and os.isatty(fd))


def run_command(conn: socket.socket, msg: dict[str, Any], fds: list[int], server: str, entry: Entry) -> int:
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
    argv = [str(a) for a in msg["argv"]]
    sys.argv = ["skylease", *argv]
    set_title(run_title(argv))
    if sys.path:
        sys.path[0] = msg.get("path0", "")
    os.setsid()  # out of the service's session: the client forwards the signals meant for us
    import dask

    dask.config.refresh()
    send_message(conn, {"pid": os.getpid()})

    def watch_client() -> None:
        with contextlib.suppress(OSError):
            while conn.recv(1):
                pass
        os.kill(os.getpid(), signal.SIGKILL)  # the client died: so does its run, as a killed driver

    threading.Thread(target=watch_client, daemon=True).start()
    code = entry(argv)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    send_message(conn, {"exit": code})
    return code


def serve_forever(listener: socket.socket, path: Path, prepare: Callable[[], None], entry: Entry) -> None:
    """The service's main, on ``listener`` (bound at ``path`` by :func:`start_service`): import what
    runs need (``prepare`` adds the entry point's own), then serve until idle or told to quit."""
    idle_s = idle_seconds()
    set_title(f"skylease-server (quits after {idle_s:g} s idle) {path}")
    try:
        ours = path.stat().st_ino
    except OSError:
        ours = None
    try:
        import matplotlib

        matplotlib.use("Agg")
        preload(PRELOAD)
        prepare()
        hello = {"key": path.stem, "install": install_key(), "python": sys.executable,
                 "started_unix": time.time(), "idle_s": idle_s}
        serve(listener, {"worker": run_worker,
                         "run": lambda c, m, f: run_command(c, m, f, str(path), entry)},
              idle_s=idle_s, hello=hello)
    finally:
        listener.close()
        # our socket only: after a stale-socket race another service may have bound the path since
        with contextlib.suppress(OSError):
            if ours is not None and path.stat().st_ino == ours:
                path.unlink()
