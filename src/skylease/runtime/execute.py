"""Running one task of a job on a worker: a shell command or a Python call, never raising for it.

:func:`run_task` is what the driver submits to a worker (a local worker process or a Dask worker),
once per attempt. It takes the task
as :meth:`skylease.runtime.jobs.JobTask.to_json` and returns a plain dict (exit code, the tails of
the output, timings, where it ran), so that nothing of the driver has to be unpickled on a worker
and nothing of the worker has to be unpickled on the driver.

It is on the hot path (thousands of trivial commands against ``xargs -P``): everything it needs is
imported once, here, and a shell task costs one fork/exec of ``sh`` plus a poll loop.

Decisions of ours:

* Shell output is read as it comes and only the last :data:`TAIL_BYTES` of each stream are kept,
  so a task that prints gigabytes cannot fill the worker's memory.
* A shell task runs in a session (process group) of its own. On timeout the whole group gets
  SIGTERM, then SIGKILL after :data:`KILL_GRACE_S`: its children die with it and cannot hold the
  output pipes open. The exit code is then 124, as with ``timeout(1)``.
* A command killed by a signal N gets exit code 128 + N (the shell's convention) and a note.
* A task whose spec has ``files`` (``skylease run --transfer/--return``) runs in a working folder of
  its own: the files are written there, the command runs there, the returned files are read back
  into the result, and the folder is removed when asked (:func:`_run_in_folder`; the rules are in
  docs/decisions/bot-files.md). A task without it runs as before, at no extra cost: the code and
  its imports are reached only through that key.
* A Python call cannot be interrupted (it runs in a worker thread): it runs to the end, and if it
  took longer than the timeout its attempt is reported as timed out (124, result kept) so that a
  timeout means the same for both kinds of task. ``sys.exit(n)`` in the call gives exit code n.
  Its prints are not captured (``sys.stdout`` is shared by the worker's threads).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import selectors
import signal
import socket
import subprocess
import time
import traceback
from collections.abc import Callable
from typing import Any

#: Bytes kept of the end of each output stream (and characters of a Python result's repr).
TAIL_BYTES = 2048
#: Seconds between SIGTERM and SIGKILL to a timed-out command's process group.
KILL_GRACE_S = 1.0
#: Exit code of a timed-out task (as ``timeout(1)``).
TIMEOUT_EXIT = 124
#: Exit code of a task whose files could not be staged (a transferred file that cannot be written,
#: a returned one missing or too large) while its command succeeded: skylease's own failure, as
#: ``env(1)`` and ``docker run`` use 125 for theirs.
FILES_EXIT = 125
#: Where the per-task working folders are made, when the worker's environment names a place.
WORKDIR_ENV = "SKYLEASE_WORKDIR"


class Refused(Exception):
    """Raised by a task's starter (see :func:`run_task`) that will not start its command: the task
    was killed before its command began (a worker's kill and its start exclude each other)."""


#: What starts a task's command: :class:`subprocess.Popen`, or a worker's guard around it.
Starter = Callable[..., subprocess.Popen]


_HOST = socket.gethostname()
_READ_CHUNK = 65536
# Imported callables by target: a cache (the same function is called for every task of a job).
_CALLABLES: dict[str, Callable[..., Any]] = {}


def resolve_target(target: str) -> Callable[..., Any]:
    """The object named by ``"package.module:attr[.attr]"``; raises ImportError/AttributeError/TypeError."""
    fn = _CALLABLES.get(target)
    if fn is not None:
        return fn
    module, sep, attrs = target.partition(":")
    if not sep or not module or not attrs:
        raise ImportError(f"expected 'package.module:function', got {target!r}")
    obj: Any = importlib.import_module(module)
    for name in attrs.split("."):
        obj = getattr(obj, name)
    if not callable(obj):
        raise TypeError(f"{target} is a {type(obj).__name__}, not a callable")
    _CALLABLES[target] = obj
    return obj


def _tail(data: bytes | bytearray) -> str:
    """The last TAIL_BYTES bytes as text, not starting in the middle of a UTF-8 character."""
    if len(data) > TAIL_BYTES:
        data = data[-TAIL_BYTES:]
        i = 0
        while i < 3 and i < len(data) and 0x80 <= data[i] <= 0xBF:  # UTF-8 continuation bytes
            i += 1
        data = data[i:]
    return bytes(data).decode("utf-8", errors="replace")


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is gone already
        os.killpg(pid, sig)


def _wait_exit(proc: subprocess.Popen, deadline: float) -> bool:
    """Whether the process exits before the deadline.

    Its pipes were just closed, so it is most often exiting: a pidfd wakes us the moment it has,
    where ``Popen.wait(timeout)`` would sleep in steps of 0.5 ms and more (the hot path).
    """
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # not Linux >= 5.3
        pidfd = -1
    if pidfd >= 0:
        try:
            with selectors.PollSelector() as sel:
                sel.register(pidfd, selectors.EVENT_READ)
                if not sel.select(max(0.0, deadline - time.monotonic())):
                    return False
        finally:
            os.close(pidfd)
    try:
        proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        return False
    return True


def _run_shell(command: str, timeout_s: float | None, cwd: str | None = None,
               start: Starter = subprocess.Popen) -> tuple[int, str, str]:
    """Exit code and output tails of ``sh -c command`` (in ``cwd``, default the worker's folder),
    its process group killed on timeout."""
    try:
        proc = start(command, shell=True, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE, start_new_session=True, cwd=cwd)
    except Refused:
        return 128 + signal.SIGKILL, "", "[skylease] killed before its command started\n"
    assert proc.stdout is not None and proc.stderr is not None
    out_buf, err_buf = bytearray(), bytearray()
    bufs = {proc.stdout.fileno(): out_buf, proc.stderr.fileno(): err_buf}
    deadline = None if timeout_s is None else time.monotonic() + max(0.0, timeout_s)
    stage = 0  # 0 running, 1 SIGTERM sent, 2 SIGKILL sent
    with selectors.PollSelector() as sel:
        for fd in bufs:
            sel.register(fd, selectors.EVENT_READ)
        open_fds = len(bufs)
        while open_fds:
            wait = None if deadline is None else deadline - time.monotonic()
            if wait is not None and wait <= 0:
                if stage == 0:
                    _signal_group(proc.pid, signal.SIGTERM)
                    stage, deadline = 1, time.monotonic() + KILL_GRACE_S
                    continue
                if stage == 1:
                    _signal_group(proc.pid, signal.SIGKILL)
                    # a process that left the group may still hold the pipes: read what is
                    # there for a moment, then stop waiting for it
                    stage, deadline = 2, time.monotonic() + 0.2
                    continue
                break
            for key, _ in sel.select(wait):
                chunk = os.read(key.fd, _READ_CHUNK)
                if not chunk:
                    sel.unregister(key.fd)
                    open_fds -= 1
                    continue
                buf = bufs[key.fd]
                buf += chunk
                if len(buf) > 4 * TAIL_BYTES:  # trim now and then, not at every read
                    del buf[:-TAIL_BYTES]
    proc.stdout.close()
    proc.stderr.close()
    if stage == 0 and deadline is not None and proc.poll() is None and not _wait_exit(proc, deadline):
        stage = 1  # it closed its output itself and still runs
    if stage:
        _signal_group(proc.pid, signal.SIGKILL)
    code = proc.wait()
    out, err = _tail(out_buf), _tail(err_buf)
    if stage:
        note = f"\n[skylease] timed out after {timeout_s:g} s: process group killed\n"
        return TIMEOUT_EXIT, out, _tail((err + note).encode())
    if code < 0:  # killed by a signal
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return 128 - code, out, _tail(f"{err}\n[skylease] killed by {name}\n".encode())
    return code, out, err


def _run_python(task: dict[str, Any]) -> tuple[int, str, str | None]:
    """Exit code, error tail and the result's repr of calling the task's target."""
    try:
        fn = resolve_target(task["target"])
        value = fn(*task.get("args") or (), **task.get("kwargs") or {})
    except SystemExit as exc:
        code = exc.code
        if code is None:
            return 0, "", None
        if isinstance(code, int):
            return code, "", None
        return 1, _tail(f"{code}\n".encode()), None
    except Exception as exc:  # the task failed, not the worker
        # the traceback from the task's own frames on (this function's frame is noise),
        # unless a builtin raised it and there is no other frame
        tb = exc.__traceback__
        if tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        text = "".join(traceback.format_exception(type(exc), exc, tb))
        return 1, _tail(text.encode()), None
    try:
        shown = repr(value)
    except Exception as exc:  # a broken __repr__ must not fail a finished task
        shown = f"<unrepresentable {type(value).__name__}: {exc}>"
    return 0, "", shown[:TAIL_BYTES]


def run_task(task: dict, attempt: int = 1, timeout_s: float | None = None,
             start: Starter = subprocess.Popen) -> dict:
    """Run one attempt of a task (a JobTask's JSON) here; return its outcome as a plain dict.
    ``start`` starts a shell task's command (a worker passes its guard: runtime/worker.py)."""
    started = time.time()
    t0 = time.perf_counter()
    kind = task.get("kind")
    result: str | None = None
    files = task.get("files")
    staged: dict[str, Any] | None = None
    if files is not None and kind == "shell":
        code, out, err, staged = _run_in_folder(task, files, timeout_s, start)
    elif kind == "shell":
        try:
            code, out, err = _run_shell(task["command"], timeout_s, start=start)
        except OSError as exc:  # no sh, no fork, too many open files: this attempt failed
            code, out, err = 127, "", _tail(f"[skylease] cannot start the command: {exc}\n".encode())
    elif kind == "python":
        code, err, result = _run_python(task)
        out = ""
        runtime = time.perf_counter() - t0
        if code == 0 and timeout_s is not None and runtime > timeout_s:
            code = TIMEOUT_EXIT
            err = (f"[skylease] ran {runtime:.3g} s, over the {timeout_s:g} s timeout "
                   "(a Python call cannot be interrupted; its result is kept)\n")
    else:
        code, out, err = 2, "", f"[skylease] unknown task kind {kind!r}\n"
    ended = time.time()
    outcome = {
        "task": task.get("id"),
        "attempt": attempt,
        "exit_code": code,
        "stdout_tail": out,
        "stderr_tail": err,
        "runtime_s": time.perf_counter() - t0,
        "host": _HOST,
        "pid": os.getpid(),
        "started_unix": started,
        "ended_unix": ended,
        "result": result,
    }
    if staged is not None:
        outcome["files"] = staged
    return outcome


# -- a task's own working folder (--transfer, --return, --cleanup) ---------------------------------


def _inside(rel: str) -> bool:
    """Whether ``rel`` is a relative path that stays inside the folder it is relative to."""
    if not rel or rel.startswith("/") or "\0" in rel:
        return False
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    return bool(parts) and ".." not in parts


def _make_folder(task: dict[str, Any]) -> str:
    import tempfile

    base = os.environ.get(WORKDIR_ENV) or tempfile.gettempdir()
    os.makedirs(base, exist_ok=True)
    return tempfile.mkdtemp(prefix=f"skylease-task{task.get('id')}-", dir=base)


def _run_in_folder(task: dict[str, Any], files: dict[str, Any], timeout_s: float | None,
                   start: Starter = subprocess.Popen) -> tuple[int, str, str, dict[str, Any]]:
    """Run a shell task in a fresh working folder of its own: write its transferred files there,
    run, read its returned files back (base64), remove the folder if ``cleanup``.

    ``files`` (built by the driver: skylease.runtime.files): ``transfer`` {path: [mode, base64]},
    ``return`` [pattern] (relative to the folder; ``*?[`` are globs), ``cleanup``, ``max_bytes``
    (the most bytes returned) and ``error`` (the driver could not read an input: nothing runs).
    Never raises: every problem is a failed attempt with its reason on stderr.
    """
    import base64
    import shutil

    notes: list[str] = []
    staged: dict[str, Any] = {"returned": {}, "missing": [], "folder": None}
    if files.get("error"):
        msg = f"[skylease] {files['error']}\n"
        return FILES_EXIT, "", msg, staged
    try:
        folder = _make_folder(task)
    except OSError as exc:
        return FILES_EXIT, "", f"[skylease] cannot make the task's working folder: {exc}\n", staged
    real = os.path.realpath(folder)
    try:
        for rel, (mode, data) in (files.get("transfer") or {}).items():
            if not _inside(rel):
                raise OSError(f"--transfer {rel}: not a relative path inside the working folder")
            dest = os.path.join(folder, rel)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with open(dest, "wb") as f:
                f.write(base64.b64decode(data))
            os.chmod(dest, int(mode) & 0o777)
    except (OSError, ValueError) as exc:
        code, out, err = FILES_EXIT, "", _tail(f"[skylease] cannot write the task's files: {exc}\n".encode())
    else:
        try:
            code, out, err = _run_shell(task["command"], timeout_s, cwd=folder, start=start)
        except OSError as exc:
            code, out, err = 127, "", _tail(f"[skylease] cannot start the command: {exc}\n".encode())
        left = int(files.get("max_bytes") or 0)
        for pattern in files.get("return") or ():
            names = _matches(folder, real, pattern)
            if not names:
                staged["missing"].append(pattern)
                notes.append(f"--return {pattern}: no such file in the task's working folder")
                continue
            for rel in names:
                try:
                    with open(os.path.join(folder, rel), "rb") as f:
                        size = os.fstat(f.fileno()).st_size
                        if size > left:
                            staged["missing"].append(rel)
                            notes.append(f"--return {rel}: {size:,} bytes, over the "
                                         f"{files.get('max_bytes'):,} bytes a task may return")
                            continue
                        staged["returned"][rel] = base64.b64encode(f.read()).decode("ascii")
                except OSError as exc:  # made unreadable by the task
                    staged["missing"].append(rel)
                    notes.append(f"--return {rel}: cannot read it: {exc.strerror or exc}")
                    continue
                left -= size
    if files.get("cleanup"):
        shutil.rmtree(folder, ignore_errors=True)
    else:
        staged["folder"] = folder
    if notes:
        if code == 0:
            code = FILES_EXIT
        head = err if not err or err.endswith("\n") else err + "\n"
        err = _tail((head + "".join(f"[skylease] {n}\n" for n in notes)).encode())
    return code, out, err, staged


def _matches(folder: str, real: str, pattern: str) -> list[str]:
    """The regular files of the working folder a ``--return`` pattern names (sorted, relative),
    none outside it (a symbolic link out of it is not followed)."""
    import glob

    if not _inside(pattern):
        return []
    if any(c in pattern for c in "*?["):
        found = glob.glob(os.path.join(glob.escape(folder), pattern))
        rels = sorted(os.path.relpath(p, folder) for p in found)
    else:
        rels = [pattern]
    out = []
    for rel in rels:
        path = os.path.realpath(os.path.join(folder, rel))
        if path.startswith(real + os.sep) and os.path.isfile(path):
            out.append(rel)
    return out
