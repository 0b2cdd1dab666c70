"""Volatile workers for real: kill and restart a pool's worker processes following an availability
trace, time-compressed, so the tail effect (and its cure) shows on a real run on one machine.

Host k of the pool (in the order the policy rented them) plays node ``nodes[k]`` of the trace.
Real time r after the start is trace time ``offset + r * time_scale``. The nodes are the trace's
nodes available at ``offset``, in a random order drawn from the seed, so every host starts up.
A host is killed (``kill -9`` of its worker and the worker's children) when its node leaves and
started again when it comes back; its task is requeued, as when a desktop-grid node leaves.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from skylease.model.host import HostState

#: Seconds between looks for newly rented hosts of the pool.
WATCH_S = 0.25


class Volatility:
    """Plays an availability trace on the hosts of one pool of a :class:`WorkerEnvironment`."""

    def __init__(self, trace: Any, pool: str, time_scale: float, seed: int = 0,
                 start: float | None = None) -> None:
        if not time_scale > 0:
            raise ValueError(f"time_scale must be > 0, got {time_scale!r}")
        self.trace, self.pool, self.scale = trace, pool, float(time_scale)
        rng = np.random.default_rng(seed)
        span = trace.end - trace.start
        # start somewhere in the first half, so the run has trace left to play
        if start is not None:
            self.offset = float(trace.start + start)
        else:
            self.offset = float(trace.start + rng.uniform(0, span / 2)) if span > 0 else float(trace.start)
        up = [i for i, node in enumerate(trace.nodes) if node.is_available(self.offset)]
        self.nodes = [up[i] for i in rng.permutation(len(up))]
        self.env: Any = None
        self._tracked: dict[int, int] = {}  # host id -> node index
        self.kills = 0

    @classmethod
    def from_trace(cls, spec: str, pool: str, time_scale: float, seed: int = 0,
                   start: float | None = None) -> Volatility:
        from skylease.traces.avail import load_trace

        return cls(load_trace(spec, seed=seed), pool, time_scale, seed, start)

    def attach(self, env: Any) -> None:
        self.env = env
        env.call_background(0.0, self._watch)

    def _trace_time(self, real: float) -> float:
        return self.offset + real * self.scale

    def _real_time(self, t: float) -> float:
        return (t - self.offset) / self.scale

    def _watch(self) -> None:
        env = self.env
        for h in env.hosts(self.pool):
            if h.id not in self._tracked and len(self._tracked) < len(self.nodes):
                node = self.nodes[len(self._tracked)]
                self._tracked[h.id] = node
                self._schedule(h.id)
        if env.pending() > 0:
            env.call_background(env.now + WATCH_S, self._watch)

    def _schedule(self, hid: int) -> None:
        node = self.trace.nodes[self._tracked[hid]]
        t = self._trace_time(self.env.now)
        nxt = node.next_change(t)
        if math.isfinite(nxt) and nxt < self.trace.end:
            self.env.call_background(self._real_time(nxt), self._change, hid)

    def _change(self, hid: int) -> None:
        env = self.env
        h = env.host(hid)
        if h.state is HostState.RELEASED or env.pending() == 0:
            return
        node = self.trace.nodes[self._tracked[hid]]
        if node.is_available(self._trace_time(env.now) + 1e-6):
            env.host_back(hid)
        else:
            self.kills += 1
            env.host_down(hid)
        self._schedule(hid)
