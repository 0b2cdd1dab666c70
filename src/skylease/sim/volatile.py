"""A bag of tasks pulled by volatile hosts: the scenario that ``benchmarks/bench_simgrid.py`` runs
here and in SimGrid (docs/decisions/simgrid-scenario.md says it in full).

N hosts, host ``i`` computing at ``speeds[i]`` flop/s and on during its availability intervals
``[on, off)``; M tasks of ``work[j]`` flops, all queued at t = 0, FIFO. A host that is on and idle
takes the head of the queue at once and runs it for ``work / speed`` seconds; a host that goes off
loses its task, which goes back to the head of the queue at that moment; a host that comes back on
asks for work at once (no boot delay). No network cost. The result: the completion time of the
last task (the makespan), tasks done and tasks interrupted.

Same-instant rules (both simulators keep them): at one instant, (1) tasks that complete are done
(a task that ends exactly when its host goes off is not lost), then (2) hosts go off (their tasks
requeued), then (3) hosts come on and ask for work. Here the kernel orders equal times by when
events were scheduled, so a boundary fires in two hops (the first at t reschedules itself at t,
behind every completion already due at t) and :meth:`SimEnvironment.host_back` with a zero boot
time brings the host up a third hop later, behind the hosts going off. Ties between two hosts'
boundaries at one instant (other than t = 0, where hosts on ask for work in index order) follow the
order the events were scheduled; the generated instances have none (the times are continuous draws).

After the last interval of the file a host stays in the state it was in: an interval that reaches
the end of the trace is written with ``end = inf`` (so every run finishes unless no host is on at
the end of the trace).

The instance file (``write_instance``/``read_instance``, and ``benchmarks/simgrid/masterworkers.cpp``)
is little-endian binary, read in one sequential pass::

    8 bytes   magic b"SKYVOL1\\n"
    3 uint64  N hosts, K intervals, M tasks
    N float64 speeds (flop/s)
    N+1 uint64 bounds: host i's intervals are bounds[i]:bounds[i+1]
    2K float64 (on, off) pairs, host-major, sorted, off may be +inf
    M float64 work (flops), in queue order

The simulation is :class:`~skylease.sim.env.SimEnvironment` itself (its dispatch core, its
``host_down``/``host_back``): one pool with no boot time, each host's own speed set by
``set_speed``, and each host's next boundary scheduled when the previous one fires (one pending
event per host, not the whole trace).
"""

from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from skylease.model.availability import AvailabilityTrace
from skylease.model.instance import InstanceType
from skylease.model.task import Task
from skylease.sim.env import SimEnvironment
from skylease.sim.kernel import CalendarKernel, Kernel

__all__ = ["MAGIC", "VolatileInstance", "VolatileResult", "make_instance", "read_instance", "run_volatile",
           "volatile_env", "write_instance"]

MAGIC = b"SKYVOL1\n"
POOL = "volunteer"


@dataclass(frozen=True, eq=False)
class VolatileInstance:
    """Speeds (flop/s), availability intervals (host-major flat arrays) and task sizes (flops)."""

    speeds: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    bounds: np.ndarray
    work: np.ndarray
    hosts: int = field(init=False)  # (one speed each)
    tasks: int = field(init=False)  # (one size each)

    def __post_init__(self) -> None:
        sp, s, e = (np.ascontiguousarray(a, dtype="<f8") for a in (self.speeds, self.starts, self.ends))
        b = np.ascontiguousarray(self.bounds, dtype="<u8")
        w = np.ascontiguousarray(self.work, dtype="<f8")
        for k, v in (("speeds", sp), ("starts", s), ("ends", e), ("bounds", b), ("work", w),
                     ("hosts", len(sp)), ("tasks", len(w))):
            object.__setattr__(self, k, v)
        if sp.ndim != 1 or len(b) != len(sp) + 1 or b[0] != 0 or b[-1] != len(s) \
                or (np.diff(b.astype(np.int64)) < 0).any():
            raise ValueError("bounds must rise from 0 to the number of intervals, one more than the hosts")
        if not (np.isfinite(sp).all() and (sp > 0).all()):
            raise ValueError("speeds must be finite and > 0")
        if not (np.isfinite(w).all() and (w > 0).all()):
            raise ValueError("task sizes must be finite and > 0")
        if s.shape != e.shape or not (np.isfinite(s).all() and (s >= 0).all() and (s < e).all()):
            raise ValueError("intervals must be [on, off) with 0 <= on < off")
        same = np.ones(max(len(s) - 1, 0), bool)
        firsts = b[1:-1][(b[1:-1] > 0) & (b[1:-1] < len(s))].astype(np.int64)
        same[firsts - 1] = False  # a host's first interval follows another host's last
        if (s[1:] <= e[:-1])[same].any():
            raise ValueError("a host's intervals must be sorted and apart (touching ones merged)")


    @classmethod
    def from_trace(cls, trace: AvailabilityTrace, speeds: np.ndarray, work: np.ndarray) -> VolatileInstance:
        """The trace's intervals clipped to its window, touching ones merged, and those that reach the
        end of the window made endless (a host keeps its last state after the trace)."""
        s, e, b = trace.flat_intervals()
        node = np.repeat(np.arange(len(b) - 1), np.diff(b))
        s = np.maximum(s - trace.start, 0.0)
        e = np.minimum(e, trace.end) - trace.start
        keep = e > s
        s, e, node = s[keep], e[keep], node[keep]
        e = np.where(e >= trace.end - trace.start, np.inf, e)
        touch = (s[1:] == e[:-1]) & (node[1:] == node[:-1])
        s = s[np.concatenate(([True], ~touch))]
        e = e[np.concatenate((~touch, [True]))]
        node = node[np.concatenate(([True], ~touch))]
        bounds = np.searchsorted(node, np.arange(trace.n_nodes + 1))
        return cls(speeds, s, e, bounds, work)


def make_instance(hosts: int, tasks: int, *, trace: str = "seti", seed: int = 0,
                  duration_s: float = 4 * 86400.0, work_flops: float = 3.6e6,
                  spread: float = 0.5) -> VolatileInstance:
    """``hosts`` speeds from :func:`~skylease.sim.dg.workload.node_powers` (Table 4: mean 1000
    flop/s), their availability from :func:`~skylease.traces.dg.seti_like` or ``nd_like`` over
    ``duration_s``, and ``tasks`` sizes drawn uniformly in ``work_flops * [1 - spread, 1 + spread]``
    (one hour on a mean host by default), each from its own stream of ``seed``."""
    from skylease.sim.dg.workload import node_powers  # (sim.dg's package imports its simulators)
    from skylease.traces.dg import nd_like, seti_like

    if trace not in ("seti", "nd"):
        raise ValueError(f"trace must be 'seti' or 'nd', got {trace!r}")
    if not 0 <= spread < 1:
        raise ValueError(f"spread must be in [0, 1), got {spread!r}")
    g_speed, g_avail, g_work = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(3))
    speeds = node_powers(trace, hosts, g_speed)
    avail = (seti_like if trace == "seti" else nd_like)(hosts, duration_s, g_avail)
    work = work_flops * g_work.uniform(1.0 - spread, 1.0 + spread, tasks)
    return VolatileInstance.from_trace(avail, speeds, work)


def write_instance(path: str | Path, inst: VolatileInstance) -> None:
    """The instance as the binary file of the module docstring."""
    with open(path, "wb") as f:
        f.write(MAGIC)
        f.write(np.array([inst.hosts, len(inst.starts), inst.tasks], "<u8").tobytes())
        f.write(inst.speeds.tobytes())
        f.write(inst.bounds.tobytes())
        pairs = np.empty(2 * len(inst.starts), "<f8")
        pairs[0::2], pairs[1::2] = inst.starts, inst.ends
        f.write(pairs.tobytes())
        f.write(inst.work.tobytes())


def read_instance(path: str | Path) -> VolatileInstance:
    """An instance file written by :func:`write_instance` (ValueError if it is not one)."""
    with open(path, "rb") as f:
        if f.read(8) != MAGIC:
            raise ValueError(f"{path}: not a volatile-hosts instance (bad magic)")
        n, k, m = (int(x) for x in np.fromfile(f, "<u8", 3))
        speeds = np.fromfile(f, "<f8", n)
        bounds = np.fromfile(f, "<u8", n + 1)
        pairs = np.fromfile(f, "<f8", 2 * k)
        work = np.fromfile(f, "<f8", m)
        if len(work) != m or f.read(1):
            raise ValueError(f"{path}: truncated or too long for {n} hosts, {k} intervals, {m} tasks")
    return VolatileInstance(speeds, pairs[0::2], pairs[1::2], bounds, work)


@dataclass(frozen=True)
class VolatileResult:
    """What one run gave: the makespan (last completion), tasks done and interrupted, events."""

    hosts: int
    tasks: int
    makespan: float
    done: int
    interrupted: int
    events: int

    def as_dict(self) -> dict[str, Any]:
        return {"hosts": self.hosts, "tasks": self.tasks, "makespan": self.makespan, "done": self.done,
                "interrupted": self.interrupted, "events": self.events}


class _Boundaries:
    """Each host's next on/off boundary, scheduled when the previous one fires. Boundary ``b`` of the
    flat arrays is interval ``b // 2``'s on (even) or off (odd)."""

    def __init__(self, env: SimEnvironment, inst: VolatileInstance) -> None:
        self.env, self.kernel = env, env.kernel
        times = np.empty(2 * len(inst.starts))
        times[0::2], times[1::2] = inst.starts, inst.ends
        self.times: list[float] = times.tolist()
        self.last = (2 * inst.bounds[1:].astype(np.int64)).tolist()  # one past each host's last boundary

    def start(self, inst: VolatileInstance) -> None:
        """At t = 0 (before the kernel runs): hosts off at 0 go down, every host's first boundary."""
        env = self.env
        first = (2 * inst.bounds[:-1].astype(np.int64)).tolist()
        for i, b in enumerate(first):
            if b == self.last[i] or self.times[b] > 0.0:  # no interval, or the first starts later
                env.host_down(i)  # (its coming up, due at 0, is then stale)
                self._schedule(i, b)
            else:
                self._schedule(i, b + 1)  # on at 0: its first boundary is that interval's off

    def _schedule(self, host: int, b: int) -> None:
        if b < self.last[host]:
            t = self.times[b]
            if t != math.inf:
                self.kernel.schedule(t, self._hop, host, b)

    def _hop(self, host: int, b: int) -> None:
        # second hop at the same instant: behind every completion already due now (rule 1)
        if self.env.pending():
            self.kernel.schedule(self.kernel.now, self._toggle, host, b)

    def _toggle(self, host: int, b: int) -> None:
        if not self.env.pending():
            return  # the bag is done: nothing more to schedule
        if b % 2:
            self.env.host_down(host)
        else:
            self.env.host_back(host)  # boot time 0: up a hop later, behind the hosts going off (rule 2, 3)
        self._schedule(host, b + 1)


def volatile_env(inst: VolatileInstance, kernel: Kernel | None = None) -> SimEnvironment:
    """The scenario of the module docstring on :class:`SimEnvironment`, set up to run (a calendar
    kernel by default: one boundary and up to one completion pending per host)."""
    env = SimEnvironment([InstanceType(POOL, boot_time=0.0)], kernel=kernel or CalendarKernel())
    env.acquire(POOL, inst.hosts)  # ids 0..N-1, up at t = 0 in that order
    for i, s in enumerate(inst.speeds.tolist()):
        env.set_speed(i, s)
    env.submit(Task(j, w) for j, w in enumerate(inst.work.tolist()))
    _Boundaries(env, inst).start(inst)
    return env


def run_volatile(inst: VolatileInstance, kernel: Kernel | None = None) -> VolatileResult:
    """Run the scenario of the module docstring (see :func:`volatile_env`)."""
    env = volatile_env(inst, kernel)
    if env.pending():
        env.kernel.run()
    env.finish()  # (done already when the bag is; else no host comes back: the rest is unfinished)
    res = env.result()
    return VolatileResult(inst.hosts, inst.tasks, res.makespan, res.done, res.interrupted, res.events)


def main(argv: list[str] | None = None) -> int:
    """``python -m skylease.sim.volatile INSTANCE``: one JSON line (the result, load and run seconds)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m skylease.sim.volatile INSTANCE", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    inst = read_instance(args[0])
    t1 = time.perf_counter()
    res = run_volatile(inst)
    t2 = time.perf_counter()
    print(json.dumps({**res.as_dict(), "load_s": t1 - t0, "run_s": t2 - t1}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
