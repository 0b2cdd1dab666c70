"""Naive reference simulators for the DG models: every keep-alive, back-off retry, OFF and ON is an
event. Slow (events grow with simulated time) but obviously faithful to decision S11 in
docs/decisions/spequlos.md; the fast simulators in :mod:`skylease.sim.dg.env` must produce the same histories.

Ties: work requests (and ON events, which request at once) due at the same instant run after the
other events of that instant, in node order -- the fast simulators' rule (integer ON offsets and
back-off steps make such ties common for nodes that are up at the submission time)."""

from __future__ import annotations

import itertools
import math
from heapq import heappop, heappush

INF = math.inf


class _Loop:
    def __init__(self, t0: float) -> None:
        self.heap: list = []
        self.seq = itertools.count()
        self.now = t0
        self.events = 0

    def at(self, t: float, fn, *args, node: int = -1) -> None:
        """``node >= 0`` marks a work request (or ON) of that node: see the module docstring."""
        heappush(self.heap, (t, node >= 0, node, next(self.seq), fn, args))

    def run(self, stop) -> None:
        while self.heap and not stop():
            t, _, _, _, fn, args = heappop(self.heap)
            self.now = t
            self.events += 1
            fn(*args)


def _intervals(env, i: int):
    flat = env.flat
    lo, hi = int(flat.lo[i]), int(flat.hi[i])
    j0 = flat.first_after_scalar(i, env.t0)
    return [(j, env._on1(j), float(flat.ends[j])) for j in range(max(j0, lo), hi)]


def _start(loop: _Loop, env, arrive, on, off) -> None:
    """Schedule the task arrivals and every node's ON (a request: see the docstring) and OFF."""
    for j in range(env.n_tasks):
        loop.at(env.t0 + env._arrival[j], arrive, j)
    for i in range(env.n_nodes):
        for _, t_on, t_off in _intervals(env, i):
            loop.at(t_on, on, i, node=i)
            loop.at(t_off, off, i)


def ref_xwhep(env, log: list | None = None) -> tuple[list[float], list[float]]:
    """XWHEP with explicit keep-alives (60 s), timeouts (900 s), back-off requests, OFF/ON."""
    p = env.p
    loop = _Loop(env.t0)
    n, nt = env.n_nodes, env.n_tasks
    nops, pw = env._nops, env._pw
    state = [0] * nt  # 0 future, 1 waiting, 2 running, 3 done
    assignee = [-1] * nt
    waiting: list[int] = []
    gen = [0] * n
    period = [p.req_min] * n
    last_ka = [-INF] * n
    ctimes: list[float] = []
    atimes: list[float] = []
    assigned = [False] * nt

    def requeue_of(i):
        for j in range(nt):
            if state[j] == 2 and assignee[j] == i:
                state[j] = 1
                assignee[j] = -1
                heappush(waiting, j)

    def on(i):
        gen[i] += 1
        requeue_of(i)
        keepalive(i, gen[i])
        period[i] = p.req_min
        request(i, gen[i])

    def off(i):
        gen[i] += 1

    def keepalive(i, g):
        if g != gen[i]:
            return
        last_ka[i] = loop.now
        loop.at(loop.now + p.worker_timeout, timeout, i, loop.now)
        loop.at(loop.now + p.keep_alive, keepalive, i, g)

    def timeout(i, t):
        if last_ka[i] == t:
            requeue_of(i)

    def request(i, g):
        if g != gen[i]:
            return
        while waiting and state[waiting[0]] != 1:
            heappop(waiting)
        if waiting:
            j = heappop(waiting)
            state[j] = 2
            assignee[j] = i
            if not assigned[j]:
                assigned[j] = True
                atimes.append(loop.now - env.t0)
            loop.at(loop.now + nops[j] / pw[i], complete, i, g, j)
            if log is not None:
                log.append((i, j, loop.now))
        else:
            loop.at(loop.now + period[i], request, i, g, node=i)
            period[i] = min(2 * period[i], p.req_max)

    def complete(i, g, j):
        if g != gen[i]:
            return
        if state[j] != 3:
            state[j] = 3
            ctimes.append(loop.now - env.t0)
        period[i] = p.req_min
        request(i, g)

    def arrive(j):
        state[j] = 1
        heappush(waiting, j)

    _start(loop, env, arrive, on, off)
    loop.run(lambda: len(ctimes) == nt)
    env.ref_events = loop.events  # for benchmarks/bench_spequlos.py
    return ctimes, atimes


def ref_boinc(env) -> tuple[list[float], list[float]]:
    """BOINC with explicit suspend/resume, back-off requests and deadline events."""
    p = env.p
    loop = _Loop(env.t0)
    n, nt = env.n_nodes, env.n_tasks
    nops, pw = env._nops, env._pw
    R, Q = p.target_nresult, p.min_quorum
    slot = [[0] * R for _ in range(nt)]
    sver = [[0] * R for _ in range(nt)]
    holders = [set() for _ in range(nt)]
    ndone = [0] * nt
    valid = [False] * nt
    arrived = [False] * nt
    gen = [0] * n
    up = [False] * n
    period = [p.req_min] * n
    buf = [[] for _ in range(n)]
    rem = [0.0] * n
    since = [0.0] * n
    ctimes: list[float] = []
    atimes: list[float] = []
    assigned = [False] * nt

    def start(i):
        since[i] = loop.now
        loop.at(loop.now + rem[i], complete, i, gen[i])

    def on(i):
        gen[i] += 1
        up[i] = True
        if buf[i]:
            start(i)
        else:
            period[i] = p.req_min
            request(i, gen[i])

    def off(i):
        gen[i] += 1
        up[i] = False
        if buf[i]:
            rem[i] -= loop.now - since[i]

    def request(i, g):
        if g != gen[i]:
            return
        got = []
        for w in range(nt):
            if not arrived[w] or valid[w] or i in holders[w] or 0 not in slot[w]:
                continue
            r = slot[w].index(0)
            slot[w][r] = 1
            sver[w][r] += 1
            holders[w].add(i)
            loop.at(loop.now + p.delay_bound, deadline, w, r, sver[w][r])
            if not assigned[w]:
                assigned[w] = True
                atimes.append(loop.now - env.t0)
            got.append((w, r))
            if len(got) == p.buffer:
                break
        if got:
            buf[i] = got
            rem[i] = nops[got[0][0]] / pw[i]
            start(i)
        else:
            loop.at(loop.now + period[i], request, i, g, node=i)
            period[i] = min(2 * period[i], p.req_max)

    def complete(i, g):
        if g != gen[i]:
            return
        w, r = buf[i].pop(0)
        if not valid[w] and slot[w][r] != 2:
            slot[w][r] = 2
            ndone[w] += 1
            if ndone[w] >= Q:
                valid[w] = True
                ctimes.append(loop.now - env.t0)
        if buf[i]:
            rem[i] = nops[buf[i][0][0]] / pw[i]
            start(i)
        else:
            period[i] = p.req_min
            request(i, g)

    def deadline(w, r, v):
        if not valid[w] and slot[w][r] == 1 and sver[w][r] == v:
            slot[w][r] = 0

    def arrive(w):
        arrived[w] = True

    _start(loop, env, arrive, on, off)
    loop.run(lambda: len(ctimes) == nt)
    env.ref_events = loop.events  # for benchmarks/bench_spequlos.py
    return ctimes, atimes
