"""What /proc tells about processes, for the local enactment (Linux): a process's state, process
group and start time, the members of a process group, the CPU a process group used, whether a
process is a PID namespace's first, a process's environment; and CPU affinity for a fork."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Collection, Iterator, Sequence
from typing import NamedTuple

__all__ = ["ProcStat", "environ_of", "group_cpu", "group_members", "namespace_init", "pids", "pinned",
           "proc_stat"]


class ProcStat(NamedTuple):
    state: str  # R, S, D, T (stopped), t, Z (zombie), ...
    pgrp: int
    start_ticks: int


def proc_stat(pid: int) -> ProcStat | None:
    """Fields 3, 5 and 22 of /proc/PID/stat, or None if there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    rest = data[data.rindex(b")") + 2:].split()  # the command name may hold spaces and parens
    return ProcStat(rest[0].decode(), int(rest[2]), int(rest[19]))


def group_cpu(pgids: Collection[int]) -> dict[int, float]:
    """The CPU seconds (user and system, with those of the children it waited for) the processes
    of each process group of ``pgids`` have used, from one pass over /proc (a group with no process
    left is absent). A zombie still counts its own: its parent adds them when it waits for it."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[int, float] = {}
    for pid in pids():
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        rest = data[data.rindex(b")") + 2:].split()
        pgrp = int(rest[2])
        if pgrp in pgids:  # utime, stime, cutime, cstime: fields 14 to 17
            out[pgrp] = out.get(pgrp, 0.0) + sum(int(x) for x in rest[11:15]) / tick
    return out


def pids() -> Iterator[int]:
    """Every process id in /proc."""
    for name in os.listdir("/proc"):
        if name.isdigit():
            yield int(name)


def group_members(pgid: int) -> list[int]:
    """The live processes of process group ``pgid``."""
    return [pid for pid in pids()
            if (st := proc_stat(pid)) is not None and st.pgrp == pgid and st.state != "Z"]


def catches(pid: int, sig: int) -> bool:
    """Whether process ``pid`` has a handler of its own for signal ``sig`` (its ``SigCgt`` mask)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"SigCgt:"):
                    return bool(int(line.split()[1], 16) >> (sig - 1) & 1)
    except (OSError, ValueError, IndexError):
        pass
    return False


def namespace_init(pid: int) -> bool:
    """Whether ``pid`` is the first process of a PID namespace below ours (a sandbox's init: a
    signal it has no handler for is dropped, and its end ends every process of its namespace)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"NSpid:"):
                    return line.split()[-1] == b"1" and len(line.split()) > 2
    except OSError:
        pass
    return False


def environ_of(pid: int) -> dict[str, str] | None:
    """A process's environment, or None (gone, or another user's)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    pairs = (item.partition(b"=") for item in raw.split(b"\0") if item)
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, _, v in pairs}


@contextlib.contextmanager
def pinned(cpus: Sequence[int]) -> Iterator[None]:
    """This thread runs on ``cpus`` meanwhile (Linux: affinity is per thread, and a forked child
    inherits its parent thread's)."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)
