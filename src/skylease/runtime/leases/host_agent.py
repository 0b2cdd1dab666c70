"""The helper that carries out the enactment's commands on a host reached over SSH.

This module's own source is what runs on the host: :data:`SOURCE`, shipped with the command as
``python3 -I -S -c SOURCE SUBCOMMAND ARGS`` over the SSH channel (docs/decisions/ssh-enactment.md).
The server runs one ``watch`` per host and sends it every other command as a JSON line (see
``watch``); each subcommand also runs on its own (by hand, say).
Nothing is installed on the host, no daemon runs there and nothing listens: a host needs sshd and
python3 (3.9 or later; the standard library only, which is why this file imports nothing of
skylease), and bubblewrap to confine the payloads (runtime/leases/host_sandbox.py). Each
subcommand reads at most one JSON document on its standard input and prints JSON lines on its
standard output; a failure prints ``{"error": "..."}`` and exits with 1.

* ``spawn`` (request on stdin: ``argv``, ``env``, ``mark``, ``dir``, ``lease``, ``vnode``,
  ``keeper``, ``limit``, ``since_age``, ``cpus``, ``owner``): creates the lease's folder
  ``DIR/leases/LEASE`` (mode 0700; owned by ``owner``, ``[uid, gid]``, when given) and starts a
  payload as a new session and process group whose leader is a small *waiter* (:data:`WAITER`): it
  carries the ``mark`` environment (by which ``find`` knows it), pins itself to the CPUs ``cpus``
  (when given: the group inherits them), starts ``argv`` (the server's command line, the payload
  in its bubblewrap sandbox: docs/decisions/ssh-enactment.md) with the ``env`` environment in the
  lease's folder, waits for it, writes its exit code to
  ``DIR/exits/PID-TICKS.json`` and kills what is left of its group. Standard output and error go
  through a pipe to the ``keeper`` program (the server's log keeper, in a session of its own) that
  writes ``DIR/payloads/LEASE-VNODE.log``. ``since_age`` (seconds, or null) appends the host's Unix
  time that many seconds ago to ``argv``: a start time measured by the host's clock, not the
  server's. Prints ``{"pid", "ticks", "log"}``; ``ticks`` is the leader's start time in clock
  ticks since boot (field 22 of /proc/PID/stat): with the pid, it names the process.
* ``signal PGID TICKS [ACTION ...] [--counting S]``: acts on the process group ``PGID`` only while
  it is ours: its leader has the start time ``TICKS``, or the leader is gone and members remain (a
  pid number is not reused while a process group still holds it). Actions, in order: ``STOP``,
  ``CONT``, ``KILL`` (the group) and ``TERM`` (the payload's processes: those of the group in a PID
  namespace below ours but that namespace's first, i.e. in its sandbox but the sandbox's init;
  while there are none, the group but its leader, the waiter: a sandbox being set up; the leader
  itself when it has no child yet). ``--counting S`` makes a ``STOP`` wait up to S seconds until
  every payload process (as for ``TERM``) handles SIGCONT (the default payload does once it counts
  its running time). No action: only the answer. Prints ``{"ok", "leader",
  "state"}`` (``leader``: the leader itself is alive; ``state``: ``stopped`` when a process of the
  group is, ``running``, or ``gone``).
* ``notice`` (a command of ``watch`` only: ``dir``, ``lease``, ``pgid``, ``ticks``, ``name``,
  ``text``, ``owner``): a warning before the lease's end (docs/decisions/before-end-warnings.md):
  ``text`` in the file ``DIR/leases/LEASE/NAME``, replaced whole, then SIGUSR1 to the payload's
  processes (as for ``TERM``) that handle it. Prints ``{"ok", "signalled"}``.
* ``watch DIR [--beat S]``: runs until its standard input ends. Each input line
  ``{"watch": [PID, TICKS]}`` adds a payload; when its leader has ended (gone, a zombie, or its pid
  reused) it prints ``{"ended": {"pid", "ticks", "code", "age"}}`` (``code``: the payload's exit
  code from its exit file, negative for a signal, null when unknown, e.g. after a SIGKILL of the
  group; ``age``: how many seconds ago it ended, by the host's clock). Every S seconds (default 1)
  it prints ``{"beat": N}``, so that the server notices a host that stops answering. An input line
  ``{"id": N, "do": COMMAND, ...}`` runs one of the commands below in the watch itself (``spawn``
  with ``request``; ``signal`` with ``pgid``, ``ticks``, ``actions``, ``counting``; ``find`` with
  ``serve_id``; ``tail`` with ``path`` and ``bytes``, answered as ``{"text"}``) and prints
  ``{"id": N, "answer": ...}`` or ``{"id": N, "error": "..."}``: a command then costs one line
  each way on a session already open, not a session, a login shell and a Python start of its own.
  Ends are seen at once through pidfds (Linux 5.3 and later), else within 50 ms.
  (The payloads it spawns are its children: it reaps them.)
* ``find SERVE_ID``: the payloads of this user whose leader carries ``SKYLEASE_SERVE_ID=SERVE_ID``:
  ``{"found": [{"pid", "ticks", "lease", "vnode", "node", "state"}, ...]}``.
* ``tail PATH BYTES``: the last BYTES bytes of ``PATH.1`` followed by ``PATH`` (the log and the
  part the keeper moved aside), raw.
* ``receive DIR IMAGE SIZE NODE...`` (its own session: the image's bytes on stdin): writes the SIZE
  bytes it reads into ``DIR/nodes/NODE/cache/.IMAGE.<random>.part`` of each NODE (each node its own
  file, as on the server's machine; zero blocks left as holes), then reads the trailer
  ``{"commit": SHA256}`` up to the end of stdin; only if that is the SHA-256 of the bytes received
  does it rename each file to ``IMAGE`` and print ``{"bytes", "sha256", "paths"}``. Anything else (a
  short stream, no trailer: the server cancelled or went away, a signal, a mismatch) removes the
  temporary files: a cached image is whole or absent (docs/decisions/ssh-enactment.md). With
  ``--zeros`` (a stand-in: the repository has no such image) no byte comes: the files are SIZE bytes
  of holes, renamed once the trailer ``{"commit": "zeros"}`` comes (at the window's end). With
  ``--group GID`` each file is mode 0640 with that group (the payload user's), else 0600.
* ``cache`` (in a ``watch`` only, with ``dir``, ``node`` and ``evict``: an image name or null): deletes
  ``evict`` from the node's cache if given; answers ``{"images": [whole images, sorted], "evicted"}``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import select
import signal
import sys
import time
from collections.abc import Callable

__all__ = ["SOURCE", "WAITER"]

#: How often ``watch`` looks at the payloads it watches without a pidfd (seconds); with one, an end
#: is seen at once.
POLL_S = 0.05
ENV_SERVE_ID = "SKYLEASE_SERVE_ID"
#: An image's cache file name (local.py's rule: no slash, no leading dot: temporary files have one).
IMAGE_NAME = re.compile(r"^[A-Za-z0-9_+-][A-Za-z0-9._+-]{0,254}$")

# The leader of a payload's group: pins itself (and so the payload it starts) to the CPUs argv[3]
# (comma-separated; empty: as it is), starts the payload (argv[4:], environment argv[2]), waits for it,
# records its exit code in the folder argv[1] (PID-TICKS.json, written whole or not at all) and
# kills what is left of its group, itself included (nobody waits for it: it is an orphan). It
# ignores SIGTERM, SIGINT and SIGHUP once the payload runs (a shutdown's SIGTERM is the payload's
# to handle; the group's SIGKILL after the grace ends both) and does not catch SIGCONT.
WAITER = r"""
import json, os, signal, sys, time
exits, env, cpus, argv = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], sys.argv[4:]
if cpus:
    os.sched_setaffinity(0, [int(c) for c in cpus.split(",")])
child = -1
def on_term(signum, frame):
    if child == -1:  # no payload yet (or the payload's side of the fork, before its exec)
        os._exit(128 + signum)
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(s, on_term)
with open("/proc/self/stat", "rb") as fh:
    data = fh.read()
ticks = int(data[data.rindex(b")") + 2:].split()[19])
pid = os.fork()
if pid == 0:
    try:
        for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(s, signal.SIG_DFL)
        os.execvpe(argv[0], argv, env)
    except OSError as exc:
        os.write(2, ("%s: %s\n" % (argv[0], exc.strerror)).encode())
    os._exit(127)
child = pid
_, status = os.waitpid(pid, 0)
code = os.waitstatus_to_exitcode(status)
path = os.path.join(exits, "%d-%d.json" % (os.getpid(), ticks))
with open(path + ".tmp", "w") as fh:
    json.dump({"code": code, "time": time.time()}, fh)
os.replace(path + ".tmp", path)
os.killpg(0, signal.SIGKILL)
"""


def _fields(pid: int) -> list[bytes] | None:
    """The fields of a process's /proc stat from its state on (field 3), or None. (procfs's reading,
    again: this program runs alone on a host, where skylease is not installed.)"""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    return data[data.rindex(b")") + 2:].split()  # the command name may hold spaces and parens


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, process group, start ticks) of a process, or None."""
    rest = _fields(pid)
    return None if rest is None else (rest[0].decode(), int(rest[2]), int(rest[19]))


def cpu(pgids: list) -> dict:
    """The CPU seconds (user and system, with the children waited for: fields 14 to 17) each
    process group of ``pgids`` has used; a group with no process left is absent."""
    want, tick, used = {int(g) for g in pgids}, os.sysconf("SC_CLK_TCK"), {}
    for pid in _pids():
        rest = _fields(pid)
        if rest is not None and int(rest[2]) in want:
            used[str(int(rest[2]))] = used.get(str(int(rest[2])), 0.0) + sum(map(int, rest[11:15])) / tick
    return {"cpu": used}


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _members(pgid: int) -> list[int]:
    """The live (not zombie) processes of process group ``pgid``."""
    out = []
    for pid in _pids():
        st = _stat(pid)
        if st is not None and st[1] == pgid and st[0] != "Z":
            out.append(pid)
    return out


def _nspid(pid: int) -> list[bytes]:
    """A process's pid in each PID namespace it is in, from ours down (its ``NSpid``), or []."""
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"NSpid:"):
                    return line.split()[1:]
    except OSError:
        pass
    return []


def _sandboxed(pgid: int) -> list[int]:
    """The payload's processes in group ``pgid``: those in a PID namespace below ours (the sandbox's)
    but that namespace's first (the sandbox's init, which drops a signal it has no handler for)."""
    depth = len(_nspid(os.getpid()))
    out = []
    for pid in _members(pgid):
        ns = _nspid(pid)
        if len(ns) > depth and ns[-1] != b"1":
            out.append(pid)
    return out


def _catches_cont(pid: int) -> bool:
    return _catches(pid, signal.SIGCONT)


def _catches(pid: int, sig: int) -> bool:
    """Whether ``pid`` has a handler of its own for ``sig`` (its ``SigCgt`` mask)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"SigCgt:"):
                    return bool(int(line.split()[1], 16) >> (sig - 1) & 1)
    except (OSError, ValueError, IndexError):
        pass
    return False


def _emit(obj: object) -> None:
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def _group_state(pgid: int) -> str:
    states = [st[0] for pid in _members(pgid) if (st := _stat(pid)) is not None]
    if not states:
        return "gone"
    return "stopped" if any(s in "Tt" for s in states) else "running"


# -- subcommands ------------------------------------------------------------------------------------
def spawn(req: dict) -> dict:
    base = os.path.abspath(os.path.expanduser(req["dir"]))
    lease, vnode = int(req["lease"]), int(req["vnode"])
    for sub in ("payloads", "exits", "leases"):
        os.makedirs(os.path.join(base, sub), mode=0o700, exist_ok=True)
    lease_dir = os.path.join(base, "leases", str(lease))
    os.makedirs(lease_dir, mode=0o700, exist_ok=True)
    log = os.path.join(base, "payloads", f"{lease}-{vnode}.log")
    argv = [str(a) for a in req["argv"]]
    if req.get("since_age") is not None:
        argv.append(repr(time.time() - max(0.0, float(req["since_age"]))))
    if req.get("owner"):  # (the payload user's: the payload's only writable folder)
        os.chown(lease_dir, int(req["owner"][0]), int(req["owner"][1]))
    env = {str(k): str(v) for k, v in req["env"].items()}
    cpus = ",".join(str(int(c)) for c in req.get("cpus") or ())
    mark = {str(k): str(v) for k, v in req["mark"].items()}
    import subprocess  # (here: the other subcommands start faster without it)

    r, w = os.pipe()
    try:
        subprocess.Popen([sys.executable, "-I", "-S", "-c", req["keeper"], log, str(int(req["limit"]))],
                         stdin=r, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True, env={}, cwd="/")
        proc = subprocess.Popen([sys.executable, "-I", "-S", "-c", WAITER, os.path.join(base, "exits"),
                                 json.dumps(env), cpus, *argv], stdin=subprocess.DEVNULL, stdout=w, stderr=w,
                                start_new_session=True, env=mark, cwd=lease_dir)
    finally:
        os.close(r)
        os.close(w)
    st = _stat(proc.pid)  # our unreaped child: at worst a zombie
    return {"pid": proc.pid, "ticks": st[2] if st else -1, "log": log}


#: Seconds a STOP or CONT is waited for to show in the group's states.
SETTLE_S = 2.0


def signal_group(pgid: int, ticks: int, actions: list[str], counting: float,
                 pulse: Callable[[], None] = lambda: None) -> dict:
    st = _stat(pgid)
    leader = st is not None and st[0] != "Z" and st[2] == ticks
    if st is not None and st[2] != ticks:
        return {"ok": False, "leader": False, "state": "gone"}  # the number is another process's now
    if not leader and not _members(pgid):
        return {"ok": False, "leader": False, "state": "gone"}
    for action in actions:
        if action == "STOP" and counting > 0:
            deadline = time.monotonic() + counting
            while time.monotonic() < deadline:
                inside = _sandboxed(pgid)
                if (inside and all(_catches_cont(pid) for pid in inside)) or not _members(pgid):
                    break
                pulse()  # (in a watch: its heartbeat goes on meanwhile)
                time.sleep(0.005)
        if action == "TERM":
            inside = _sandboxed(pgid) or [pid for pid in _members(pgid) if pid != pgid]
            for pid in inside or [pgid]:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGTERM)
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, getattr(signal, "SIG" + action))
    state = _group_state(pgid)
    if actions and actions[-1] in ("STOP", "CONT"):  # (a signal takes effect when its process is next
        # scheduled: on a busy host, after kill() returned; the state said is the one it leads to)
        wanted, deadline = ("stopped" if actions[-1] == "STOP" else "running"), time.monotonic() + SETTLE_S
        while state not in (wanted, "gone") and time.monotonic() < deadline:
            pulse()
            time.sleep(0.005)
            state = _group_state(pgid)
    return {"ok": True, "leader": leader, "state": state}


def notice(base: str, lease: int, pgid: int, ticks: int, name: str, text: str, owner: list | None) -> dict:
    """A warning for a payload (docs/decisions/before-end-warnings.md): ``text`` in the file ``name``
    of its lease's folder (replaced whole, never through a link; owned by ``owner`` when given),
    then SIGUSR1 to its processes that handle it. Only while the group is ours."""
    st = _stat(pgid)
    if (st is not None and st[2] != ticks) or (st is None and not _members(pgid)):
        return {"ok": False}
    if not name or "/" in name or name.startswith("."):
        raise ValueError(f"not a notice file name: {name!r}")
    folder = os.path.join(os.path.abspath(os.path.expanduser(base)), "leases", str(int(lease)))
    tmp = os.path.join(folder, f".{name}.{os.getpid()}.{time.monotonic_ns()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        os.write(fd, text.encode())
        if owner:
            os.fchown(fd, int(owner[0]), int(owner[1]))
    finally:
        os.close(fd)
    os.replace(tmp, os.path.join(folder, name))
    told = 0
    for pid in _sandboxed(pgid) or [pid for pid in _members(pgid) if pid != pgid]:
        if _catches(pid, signal.SIGUSR1):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGUSR1)
                told += 1
    return {"ok": True, "signalled": told}


def _request(req: dict, pulse: Callable[[], None]) -> dict:
    """The answer to a command sent to ``watch``: ``{"id", "answer"}`` or ``{"id", "error"}``."""
    try:
        op = req["do"]
        if op == "spawn":
            answer = spawn(req["request"])
        elif op == "signal":
            actions = [str(a) for a in req.get("actions", [])]
            if not set(actions) <= {"STOP", "CONT", "TERM", "KILL"}:
                raise ValueError(f"actions are STOP, CONT, TERM and KILL, got {actions}")
            answer = signal_group(int(req["pgid"]), int(req["ticks"]), actions,
                                  float(req.get("counting", 0.0)), pulse)
        elif op == "notice":
            answer = notice(str(req["dir"]), int(req["lease"]), int(req["pgid"]), int(req["ticks"]),
                            str(req["name"]), str(req["text"]), req.get("owner"))
        elif op == "cpu":
            answer = cpu(list(req["pgids"]))
        elif op == "find":
            answer = find(str(req["serve_id"]))
        elif op == "tail":
            answer = {"text": tail(str(req["path"]), int(req["bytes"])).decode(errors="replace")}
        elif op == "cache":
            answer = cache(str(req["dir"]), str(req["node"]), req.get("evict"))
        else:
            raise ValueError(f"no command {op!r}")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return {"id": req.get("id"), "error": f"{type(exc).__name__}: {exc}"}
    return {"id": req.get("id"), "answer": answer}


def watch(base: str, beat: float) -> None:
    exits = os.path.join(os.path.abspath(os.path.expanduser(base)), "exits")
    watched: dict[int, int] = {}
    pidfds: dict[int, int] = {}  # watched pid -> its pidfd (readable once it ends), where there are pidfds
    buf, next_beat, n = b"", 0.0, 0

    def pulse() -> None:
        nonlocal next_beat, n
        now = time.monotonic()
        if now >= next_beat:
            n += 1
            _emit({"beat": n})
            next_beat = now + beat

    while True:
        pulse()
        now = time.monotonic()
        polled = len(pidfds) < len(watched)
        timeout = min(next_beat - now, POLL_S) if polled else next_beat - now
        ready, _, _ = select.select([0, *pidfds.values()], [], [], max(0.0, timeout))
        if 0 in ready:
            chunk = os.read(0, 65536)
            if not chunk:
                return  # the server closed the channel (or died)
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                try:
                    req = json.loads(line)
                    if "do" in req:
                        _emit(_request(req, pulse))
                    else:
                        pid, ticks = int(req["watch"][0]), int(req["watch"][1])
                        watched[pid] = ticks
                        if pid not in pidfds:
                            with contextlib.suppress(AttributeError, OSError):  # (Linux 5.3+)
                                pidfds[pid] = os.pidfd_open(pid)
                except (ValueError, KeyError, TypeError, AttributeError):
                    _emit({"error": f"not a request: {line[:200]!r}"})
        with contextlib.suppress(ChildProcessError):  # payloads spawned by this watch: its children
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        for pid, ticks in list(watched.items()):
            st = _stat(pid)
            if st is not None and st[0] != "Z" and st[2] == ticks:
                continue
            del watched[pid]
            if pid in pidfds:
                os.close(pidfds.pop(pid))
            code, age = None, 0.0
            path = os.path.join(exits, f"{pid}-{ticks}.json")
            try:
                with open(path) as fh:
                    rec = json.load(fh)
                code, age = rec["code"], max(0.0, time.time() - float(rec["time"]))
                os.unlink(path)
            except (OSError, ValueError, KeyError, TypeError):
                pass
            _emit({"ended": {"pid": pid, "ticks": ticks, "code": code, "age": age}})


def find(serve_id: str) -> dict:
    uid, stats = os.getuid(), {}
    for pid in _pids():
        try:
            if os.stat(f"/proc/{pid}").st_uid != uid:
                continue
        except OSError:
            continue
        st = _stat(pid)
        if st is not None and st[0] != "Z":
            stats[pid] = st
    groups: dict[int, list[str]] = {}
    for st in stats.values():
        groups.setdefault(st[1], []).append(st[0])
    found = []
    for pid, st in stats.items():
        if st[1] != pid:
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                raw = fh.read()
        except OSError:
            continue
        env = dict(item.decode(errors="replace").partition("=")[::2] for item in raw.split(b"\0") if item)
        if env.get(ENV_SERVE_ID) != serve_id:
            continue
        try:
            lease, vnode = int(env["SKYLEASE_LEASE"]), int(env["SKYLEASE_VNODE"])
        except (KeyError, ValueError):
            continue
        state = "stopped" if any(s in "Tt" for s in groups[pid]) else "running"
        found.append({"pid": pid, "ticks": st[2], "lease": lease, "vnode": vnode,
                      "node": env.get("SKYLEASE_NODE", ""), "state": state})
    return {"found": found}


def tail(path: str, limit: int) -> bytes:
    data = b""
    for p in (path + ".1", path):
        try:
            with open(os.path.expanduser(p), "rb") as fh:
                data += fh.read()
        except FileNotFoundError:
            pass
    return data[-limit:] if limit > 0 else b""


# -- images -----------------------------------------------------------------------------------------
def _cache_dir(base: str, node: str) -> str:
    if not node or "/" in node or node in (".", ".."):
        raise ValueError(f"{node!r} is not a node name")
    return os.path.join(os.path.abspath(os.path.expanduser(base)), "nodes", node, "cache")


def _check_image(image: str) -> None:
    if not IMAGE_NAME.match(image):
        raise ValueError(f"{image!r} is not an image name")


def cache(base: str, node: str, evict: str | None) -> dict:
    folder, evicted = _cache_dir(base, node), False
    if evict is not None:
        _check_image(str(evict))
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(folder, str(evict)))
            evicted = True
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        names = []
    return {"images": sorted(n for n in names if not n.startswith(".")), "evicted": evicted}


def _interrupted(signum: int, frame: object) -> None:
    raise InterruptedError(f"ended by signal {signum}")


def receive(base: str, image: str, size: int, nodes: list[str], zeros: bool = False,
            group: int | None = None) -> dict:
    import hashlib
    import secrets

    _check_image(image)
    if size < 0 or not nodes:
        raise ValueError("a size >= 0 and at least one node are needed")
    finals = [os.path.join(_cache_dir(base, n), image) for n in nodes]
    tmps = [os.path.join(os.path.dirname(f), f".{image}.{secrets.token_hex(4)}.part") for f in finals]
    for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(s, _interrupted)  # (the temporary files are removed on the way out)
    fds: list[int] = []
    digest, left = hashlib.sha256(), 0 if zeros else size
    with contextlib.suppress(ImportError, AttributeError, OSError):  # fewer, larger reads (Linux)
        import fcntl

        fcntl.fcntl(0, fcntl.F_SETPIPE_SZ, 1 << 20)
    try:
        for t in tmps:
            os.makedirs(os.path.dirname(t), mode=0o700, exist_ok=True)
            fds.append(os.open(t, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            if group is not None:  # (the payload user's group: a confined payload reads it)
                os.fchown(fds[-1], -1, group)
                os.fchmod(fds[-1], 0o640)
        while left > 0:
            chunk = os.read(0, min(left, 1 << 20))
            if not chunk:
                raise ValueError(f"incomplete: {size - left} of {size} bytes came")
            left -= len(chunk)
            digest.update(chunk)
            for i in range(0, len(chunk), 65536):  # 64 KiB of zeros: a hole (whatever the read's size)
                j = min(len(chunk), i + 65536)
                hole = chunk[i] == 0 and chunk[j - 1] == 0 and chunk.count(0, i, j) == j - i
                for fd in fds:
                    if hole:
                        os.lseek(fd, j - i, os.SEEK_CUR)
                        continue
                    view = memoryview(chunk)[i:j]
                    while view:
                        view = view[os.write(fd, view):]
        trailer = b""
        while (part := os.read(0, 4096)) and len(trailer) < 4096:
            trailer += part
        try:
            commit = json.loads(trailer).get("commit")
        except (ValueError, AttributeError):
            commit = None
        if commit != ("zeros" if zeros else digest.hexdigest()):
            raise ValueError("not committed" if commit is None else "the SHA-256 differs from the sender's")
        for fd in fds:
            os.ftruncate(fd, size)  # (a hole at the end)
        for i, t in enumerate(tmps):  # (no zip(strict=): python 3.9 on a host)
            os.replace(t, finals[i])
        return {"bytes": size, "sha256": None if zeros else digest.hexdigest(), "paths": finals}
    finally:
        for fd in fds:
            os.close(fd)
        for t in tmps:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(t)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="skylease-host-agent")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("spawn")
    sig = sub.add_parser("signal")
    sig.add_argument("pgid", type=int)
    sig.add_argument("ticks", type=int)
    sig.add_argument("actions", nargs="*", metavar="{STOP,CONT,TERM,KILL}")  # (choices= refuses none)
    sig.add_argument("--counting", type=float, default=0.0)
    w = sub.add_parser("watch")
    w.add_argument("dir")
    w.add_argument("--beat", type=float, default=1.0)
    f = sub.add_parser("find")
    f.add_argument("serve_id")
    t = sub.add_parser("tail")
    t.add_argument("path")
    t.add_argument("bytes", type=int)
    r = sub.add_parser("receive")
    r.add_argument("dir")
    r.add_argument("image")
    r.add_argument("size", type=int)
    r.add_argument("nodes", nargs="+")
    r.add_argument("--zeros", action="store_true")
    r.add_argument("--group", type=int)
    args = parser.parse_args(argv)
    if args.command == "signal" and not set(args.actions) <= {"STOP", "CONT", "TERM", "KILL"}:
        parser.error(f"signal: actions are STOP, CONT, TERM and KILL, got {' '.join(args.actions)}")
    try:
        if args.command == "spawn":
            _emit(spawn(json.loads(sys.stdin.read())))
        elif args.command == "signal":
            _emit(signal_group(args.pgid, args.ticks, args.actions, args.counting))
        elif args.command == "watch":
            watch(args.dir, args.beat)
        elif args.command == "find":
            _emit(find(args.serve_id))
        elif args.command == "receive":
            _emit(receive(args.dir, args.image, args.size, args.nodes, args.zeros, args.group))
        else:
            sys.stdout.buffer.write(tail(args.path, args.bytes))
            sys.stdout.flush()
    except (BrokenPipeError, KeyboardInterrupt):
        return 0  # the server went away
    except (OSError, ValueError, KeyError, TypeError) as exc:
        _emit({"error": f"{type(exc).__name__}: {exc}"})
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
else:
    with open(__file__, encoding="utf-8") as _fh:
        #: This module's source: what runs on the host.
        SOURCE = _fh.read()
