"""Dask workers forked from a warm parent: a host boots in milliseconds, not in a second.

A fresh ``dask worker`` process spends about 0.7 s of CPU importing Dask before it can connect; on
a 2-core machine two of them take the cores from the tasks of the first workers up. A fork server
is a small process that imports what a worker needs once and forks a worker on each request: the
child is up as soon as it has connected.

The server is single-threaded (``fork`` is only safe then) and reaps its children automatically
(``SIGCHLD`` ignored), so a worker is a process that exists or not: :class:`ForkedProcess`.

Two servers use this module: the private one a driver starts for its local pool
(``python -m skylease.runtime.forkserver SOCKET``, which ends when the driver's pipe closes), and
the warm service of :mod:`skylease.service.warm`, which also runs whole ``skylease run`` commands.

The wire format: one JSON object per line over a Unix socket; file descriptors (the warm
service's standard streams) travel with the first bytes (``SCM_RIGHTS``).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from typing import Any

#: Modules a worker needs: imported once by the server, never by its workers.
WORKER_PRELOAD = ("distributed", "skylease.runtime.execute", "skylease.runtime.batch",
                  "skylease.runtime.pools")
#: Set in a driver's environment when a warm service runs it: the fork server its local workers
#: come from (the driver then starts no private one).
FORKSERVER_ENV = "SKYLEASE_FORKSERVER"
#: Seconds a worker survives without its scheduler (as ``dask worker --death-timeout``).
DEATH_TIMEOUT_S = 10
_MAX_MSG = 1 << 20

#: A request handler, run in the forked child: (connection, request, received fds) -> exit code.
Handler = Callable[[socket.socket, dict[str, Any], list[int]], int]


# -- the wire ---------------------------------------------------------------------------------------
def send_message(sock: socket.socket, msg: Mapping[str, Any], fds: Sequence[int] = ()) -> None:
    data = (json.dumps(msg) + "\n").encode()
    sent = socket.send_fds(sock, [data], list(fds)) if fds else sock.send(data)
    if sent < len(data):
        sock.sendall(data[sent:])


def recv_message(sock: socket.socket, maxfds: int = 0) -> tuple[dict[str, Any] | None, list[int]]:
    """One message (None at end of stream) and the file descriptors that came with it."""
    buf, fds = b"", []
    while not buf.endswith(b"\n"):
        if maxfds and not fds:
            chunk, got, _flags, _addr = socket.recv_fds(sock, 65536, maxfds)
            fds = list(got)
        else:
            chunk = sock.recv(65536)
        if not chunk:
            for fd in fds:
                os.close(fd)
            return None, []
        buf += chunk
        if len(buf) > _MAX_MSG:
            raise ValueError("message too long")
    return json.loads(buf), fds


def request(path: str, msg: Mapping[str, Any], timeout: float = 30.0) -> dict[str, Any]:
    """Send one request to the server at ``path`` and return its one reply."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(path)
        send_message(s, msg)
        reply, _ = recv_message(s)
    if reply is None:
        raise ConnectionError(f"the fork server at {path} closed the connection")
    if "error" in reply:
        raise RuntimeError(reply["error"])
    return reply


# -- processes that are not our children --------------------------------------------------------------
class ForkedProcess:
    """A process forked by a fork server: alive or gone (the server reaps it), killable by pid."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def poll(self) -> int | None:
        """None while it runs, 0 once it is gone (its exit status belongs to the server)."""
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return 0
        except PermissionError:  # the pid was reused by another user's process
            return 0
        return None


def fork_worker(path: str, scheduler: str, name: str, env: Mapping[str, str], cwd: str) -> ForkedProcess:
    """A Dask worker (one thread) forked by the server at ``path``, connecting to ``scheduler``."""
    reply = request(path, {"op": "worker", "scheduler": scheduler, "name": name, "env": dict(env),
                           "cwd": cwd})
    return ForkedProcess(int(reply["pid"]))


def run_worker(conn: socket.socket, msg: dict[str, Any], fds: list[int]) -> int:
    """In the forked child: become a Dask worker of ``msg['scheduler']`` until it retires us."""
    conn.close()
    for fd in fds:
        os.close(fd)
    os.setsid()  # out of the server's session: a signal to the server's group does not reach us
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    cwd = msg["cwd"]
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(msg["env"])
    set_title(f"skylease worker {os.environ.get('SKYLEASE_POOL', '?')}/{msg['name']}")
    sys.path.insert(0, cwd)  # python callables are found as the driver finds them
    import asyncio
    import logging

    import dask
    from distributed import Worker

    dask.config.refresh()
    if "DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED" not in os.environ:
        # the statistical profiler samples our task thread every 10 ms for a dashboard nobody
        # opens here: about 5 % of the time of tiny tasks
        dask.config.set({"distributed.worker.profile.enabled": False})
    logging.getLogger("distributed").setLevel(logging.ERROR)

    async def main() -> None:
        async with Worker(msg["scheduler"], name=msg["name"], nthreads=1, dashboard=False,
                          death_timeout=DEATH_TIMEOUT_S) as worker:
            await worker.finished()

    asyncio.run(main())
    return 0


# -- the server ---------------------------------------------------------------------------------------
#: Set by a Dask nanny (and ``dask worker``) for its children: Dask's scheduler and workers then
#: retitle their process ("dask worker [...]"). Our runs and workers keep their own title.
DASK_TITLES_ENV = "__DASK_PARENT_PID"


def set_title(title: str) -> None:
    """What ``ps`` shows for this process: the service, a run and a worker each say what they are,
    where they would all read ``python3 -m ...``. Call it once the process has its environment."""
    from setproctitle import setproctitle

    os.environ.pop(DASK_TITLES_ENV, None)  # inherited, e.g. by a run started from a Dask task
    setproctitle(title)


def preload(modules: Sequence[str]) -> None:
    import importlib

    for m in modules:
        importlib.import_module(m)


def serve(listener: socket.socket, handlers: Mapping[str, Handler], *, parent_fd: int | None = None,
          idle_s: float | None = None, hello: Mapping[str, Any] | None = None) -> None:
    """Fork a child per request until the parent's pipe closes, ``quit`` comes, or ``idle_s`` pass
    with no request and no child of ours alive."""
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    children: list[int] = []
    last = time.monotonic()
    while True:
        watch = [listener] + ([parent_fd] if parent_fd is not None else [])
        ready, _, _ = select.select(watch, [], [], 1.0)
        if parent_fd is not None and parent_fd in ready:
            return  # the driver is gone (its end of the pipe closed)
        if listener not in ready:
            if idle_s is not None and time.monotonic() - last > idle_s:
                children = [p for p in children if ForkedProcess(p).poll() is None]
                if not children:
                    return
            continue
        last = time.monotonic()
        try:
            conn, _ = listener.accept()
        except OSError:
            continue
        if _handle(conn, listener, handlers, children, hello or {}) == "quit":
            return


def _handle(conn: socket.socket, listener: socket.socket, handlers: Mapping[str, Handler],
            children: list[int], hello: Mapping[str, Any]) -> str | None:
    try:
        conn.settimeout(10)
        msg, fds = recv_message(conn, maxfds=3)
        if msg is None:
            return None
        op = msg.get("op")
        if op in ("ping", "quit"):
            children[:] = [p for p in children if ForkedProcess(p).poll() is None]
            # a quit is obeyed even if its sender has stopped waiting for the answer
            with contextlib.suppress(OSError):
                send_message(conn, {**hello, "pid": os.getpid(), "children": len(children)})
            return op
        handler = handlers.get(str(op))
        if handler is None:
            send_message(conn, {"error": f"unknown request {op!r}"})
            return None
        conn.settimeout(None)
        pid = os.fork()
        if pid == 0:  # the child: never returns into the server's loop
            code = 1
            try:
                listener.close()
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                signal.signal(signal.SIGINT, signal.default_int_handler)
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                code = handler(conn, msg, fds)
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else 1
            except BaseException:
                with contextlib.suppress(Exception):
                    traceback.print_exc()
            finally:
                with contextlib.suppress(Exception):
                    sys.stdout.flush()
                    sys.stderr.flush()
                os._exit(code)
        children.append(pid)
        if op == "worker":
            with contextlib.suppress(OSError):
                send_message(conn, {"pid": pid})
        for fd in fds:
            os.close(fd)
    except (OSError, ValueError) as e:
        with contextlib.suppress(OSError):
            send_message(conn, {"error": f"bad request: {e}"})
    finally:
        conn.close()
    return None


def listen(path: str) -> socket.socket:
    """A listening Unix socket at ``path`` (only our user may connect: the folder is ours alone)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    s.listen(64)
    return s


class PrivateForkServer:
    """The fork server of one driver: started at once, warm about 0.7 s later, gone with the driver.

    The driver binds the socket and hands it to the server, so requests can be sent at once: they
    wait in the backlog while the server imports.
    """

    def __init__(self) -> None:
        import subprocess
        import tempfile

        self._dir = tempfile.mkdtemp(prefix="skylease-fork-")
        self.path = os.path.join(self._dir, "s")
        self._listener = listen(self.path)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "skylease.runtime.forkserver", str(self._listener.fileno())],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            pass_fds=(self._listener.fileno(),), start_new_session=True)
        self._listener.close()

    def close(self) -> None:
        import shutil

        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()  # the server ends when its pipe closes
        with contextlib.suppress(Exception):
            self.proc.wait(timeout=2)
        if self.proc.poll() is None:
            self.proc.kill()
        shutil.rmtree(self._dir, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m skylease.runtime.forkserver FD``: a driver's private fork server, listening on the
    inherited socket FD; it ends when its standard input (a pipe from the driver) closes."""
    fd = int((list(argv) if argv is not None else sys.argv[1:])[0])
    listener = socket.socket(fileno=fd)
    set_title(f"skylease-forkserver (workers of run {os.getppid()})")
    preload(WORKER_PRELOAD)
    try:
        serve(listener, {"worker": run_worker}, parent_fd=sys.stdin.fileno())
    finally:
        listener.close()
    os._exit(0)  # nothing to flush: skip tearing down Dask's modules (0.2 s)


if __name__ == "__main__":
    main()
