"""Event kernel vs SimPy on the same two models, in the same run.

Models (identical random numbers, drawn up front, so both engines do exactly the same work and
must produce the same answer, which is checked):

* M/M/1 queue (lambda=0.9, mu=1): arrivals and departures are the model events.
* timer-heavy: N workers send heartbeats at exponential intervals (mean 10 s); each heartbeat
  cancels the worker's pending 30 s timeout and arms a new one; a timeout that fires declares the
  worker dead until its next heartbeat. Model events: heartbeats and fired timeouts.

SimPy runs each model twice: idiomatic (processes, a Resource, Interrupt: SimPy as designed) and
in its fastest callback style (bare Timeout events with callbacks, lazy cancellation: SimPy used as
a plain event heap). The target (ours >= 2x SimPy) is judged against idiomatic SimPy; the ratio to
the callback style is printed too, so nobody has to take the headline on trust. Every row is a
*peer* (issue 25): SimPy in both styles, and salabim in its lean style on M/M/1 (a ``bench`` extra;
its row is skipped, with a note, when it is not installed).

    python benchmarks/bench_kernel.py [--events 1000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import platform
import time
from collections import deque

import numpy as np
import simpy

from skylease.sim.kernel import Kernel

TIMEOUT = 30.0


# ---------------------------------------------------------------- M/M/1 -------------------------
def mm1_draws(n_events: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    n = n_events // 2
    return rng.exponential(1 / 0.9, n).tolist(), rng.exponential(1.0, n).tolist()


def mm1_ours(inter: list, serv: list) -> tuple[int, float]:
    k = Kernel()
    n = len(inter)
    queue: deque[int] = deque()
    state = {"busy": False, "done": 0, "wait": 0.0}
    arrived_at = [0.0] * n

    def arrival(i: int) -> None:
        arrived_at[i] = k.now
        if i + 1 < n:
            k.schedule_in(inter[i + 1], arrival, i + 1)
        if state["busy"]:
            queue.append(i)
        else:
            state["busy"] = True
            k.schedule_in(serv[i], departure, i)

    def departure(i: int) -> None:
        state["done"] += 1
        state["wait"] += k.now - arrived_at[i]
        if queue:
            j = queue.popleft()
            k.schedule_in(serv[j], departure, j)
        else:
            state["busy"] = False

    k.schedule(inter[0], arrival, 0)
    k.run()
    return state["done"], state["wait"]


def mm1_simpy_processes(inter: list, serv: list) -> tuple[int, float]:
    env = simpy.Environment()
    server = simpy.Resource(env, capacity=1)
    state = {"done": 0, "wait": 0.0}

    def customer(i: int):
        t0 = env.now
        with server.request() as req:
            yield req
            yield env.timeout(serv[i])
        state["done"] += 1
        state["wait"] += env.now - t0

    def source():
        for i in range(len(inter)):
            yield env.timeout(inter[i])
            env.process(customer(i))

    env.process(source())
    env.run()
    return state["done"], state["wait"]


def mm1_simpy_callbacks(inter: list, serv: list) -> tuple[int, float]:
    env = simpy.Environment()
    n = len(inter)
    queue: deque[int] = deque()
    state = {"busy": False, "done": 0, "wait": 0.0}
    arrived_at = [0.0] * n

    def later(delay, fn, i):
        ev = env.timeout(delay)
        ev.callbacks.append(lambda _e: fn(i))

    def arrival(i: int) -> None:
        arrived_at[i] = env.now
        if i + 1 < n:
            later(inter[i + 1], arrival, i + 1)
        if state["busy"]:
            queue.append(i)
        else:
            state["busy"] = True
            later(serv[i], departure, i)

    def departure(i: int) -> None:
        state["done"] += 1
        state["wait"] += env.now - arrived_at[i]
        if queue:
            j = queue.popleft()
            later(serv[j], departure, j)
        else:
            state["busy"] = False

    later(inter[0], arrival, 0)
    env.run()
    return state["done"], state["wait"]


def mm1_salabim(inter: list, serv: list) -> tuple[int, float]:
    """salabim in its lean style: generator processes (not greenlets), no Queue or Resource (their
    monitors record every change), a plain deque and passivate/activate."""
    import salabim as sim

    sim.yieldless(False)
    env = sim.Environment(trace=False)
    n = len(inter)
    waiting: deque[tuple[int, float]] = deque()
    state = {"done": 0, "wait": 0.0}

    class Server(sim.Component):
        def process(self):
            while True:
                while not waiting:
                    yield self.passivate()
                i, t0 = waiting.popleft()
                yield self.hold(serv[i])
                state["done"] += 1
                state["wait"] += env.now() - t0

    class Source(sim.Component):
        def process(self):
            for i in range(n):
                yield self.hold(inter[i])
                waiting.append((i, env.now()))
                if server.ispassive():
                    server.activate()

    server = Server(env=env)
    Source(env=env)
    env.run()
    return state["done"], state["wait"]


# ---------------------------------------------------------- heartbeats + timeouts ---------------
def hb_draws(n_events: int, workers: int = 1000, seed: int = 2) -> list[list[float]]:
    rng = np.random.default_rng(seed)
    per = max(1, n_events // workers)
    return rng.exponential(10.0, (workers, per)).tolist()


def hb_ours(gaps: list[list[float]]) -> tuple[int, int]:
    k = Kernel()
    timers: list = [None] * len(gaps)
    count = {"hb": 0, "dead": 0}

    def expire(w: int) -> None:
        count["dead"] += 1
        timers[w] = None

    def heartbeat(w: int, j: int) -> None:
        count["hb"] += 1
        t = timers[w]
        if t is not None:
            t.cancel()
        timers[w] = k.call_later(TIMEOUT, expire, w)
        row = gaps[w]
        if j + 1 < len(row):
            k.schedule_in(row[j + 1], heartbeat, w, j + 1)

    for w, row in enumerate(gaps):
        k.schedule(row[0], heartbeat, w, 0)
    k.run()
    return count["hb"], count["dead"]


def hb_simpy_processes(gaps: list[list[float]]) -> tuple[int, int]:
    env = simpy.Environment()
    count = {"hb": 0, "dead": 0}
    watchdogs: list = [None] * len(gaps)

    def watchdog(w: int):
        try:
            yield env.timeout(TIMEOUT)
            count["dead"] += 1
            watchdogs[w] = None
        except simpy.Interrupt:
            pass

    def worker(w: int):
        for gap in gaps[w]:
            yield env.timeout(gap)
            count["hb"] += 1
            wd = watchdogs[w]
            if wd is not None and wd.is_alive:
                wd.interrupt()
            watchdogs[w] = env.process(watchdog(w))

    for w in range(len(gaps)):
        env.process(worker(w))
    env.run()
    return count["hb"], count["dead"]


def hb_simpy_callbacks(gaps: list[list[float]]) -> tuple[int, int]:
    env = simpy.Environment()
    count = {"hb": 0, "dead": 0}
    version = [0] * len(gaps)

    def arm(w: int) -> None:
        version[w] += 1
        v = version[w]
        ev = env.timeout(TIMEOUT)
        ev.callbacks.append(lambda _e: expire(w, v))

    def expire(w: int, v: int) -> None:
        if version[w] == v:  # lazy cancellation: a newer heartbeat re-armed the timer
            count["dead"] += 1

    def heartbeat(w: int, j: int) -> None:
        count["hb"] += 1
        arm(w)
        row = gaps[w]
        if j + 1 < len(row):
            ev = env.timeout(row[j + 1])
            ev.callbacks.append(lambda _e: heartbeat(w, j + 1))

    for w, row in enumerate(gaps):
        ev = env.timeout(row[0])
        ev.callbacks.append(lambda _e, w=w: heartbeat(w, 0))
    env.run()
    return count["hb"], count["dead"]


# ---------------------------------------------------------------- harness -----------------------
def _salabim_row(inter: list, serv: list, row: dict, repeat: int) -> None:
    """The peer row of lean salabim on M/M/1 (salabim is a `bench` extra: skipped without it)."""
    try:
        import salabim
    except ImportError:
        print("peer salabim: not installed (pip install -e '.[bench]'), its row is skipped")
        return
    t_s, r_s = best_time(mm1_salabim, (inter, serv), repeat)
    if r_s[0] * 2 != row["events"] or not np.isclose(r_s[1], mm1_ours(inter, serv)[1]):
        raise SystemExit(f"M/M/1: salabim disagrees: {r_s}")
    row["salabim"] = row["events"] / t_s
    print(f"peer salabim {salabim.__version__} (lean: generators, no Queue/Resource), M/M/1: "
          f"{row['salabim']:,.0f} ev/s; ours {row['ours'] / row['salabim']:.2f}x")



def best_time(fn, args, repeat: int):
    best, result = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn(*args)
        best = min(best, time.perf_counter() - t0)
    return best, result


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args(argv)

    print(f"machine: {platform.processor() or platform.machine()}, Python {platform.python_version()}, "
          f"SimPy {simpy.__version__}; best of {a.repeat}")
    inter, serv = mm1_draws(a.events)
    gaps = hb_draws(a.events)
    models = {
        "M/M/1": ((inter, serv), mm1_ours, mm1_simpy_processes, mm1_simpy_callbacks,
                  lambda r: 2 * r[0]),
        "timers+cancel": ((gaps,), hb_ours, hb_simpy_processes, hb_simpy_callbacks,
                          lambda r: r[0] + r[1]),
    }
    out = {}
    print("kind: peer (SimPy idiomatic, SimPy callbacks)")
    header = f"{'model':<15}{'events':>10}{'ours ev/s':>13}{'simpy proc ev/s':>17}" \
             f"{'simpy cb ev/s':>15}{'ratio vs proc':>15}{'ratio vs best':>15}"
    print(header)
    for name, (args, ours, sp_proc, sp_cb, n_events) in models.items():
        t_o, r_o = best_time(ours, args, a.repeat)
        t_p, r_p = best_time(sp_proc, args, a.repeat)
        t_c, r_c = best_time(sp_cb, args, a.repeat)
        if not (r_o[0] == r_p[0] == r_c[0] and np.isclose(r_o[1], r_p[1]) and np.isclose(r_o[1], r_c[1])):
            raise SystemExit(f"{name}: engines disagree: ours {r_o}, simpy {r_p} / {r_c}")
        ev = n_events(r_o)
        row = {"events": ev, "ours": ev / t_o, "simpy_proc": ev / t_p, "simpy_cb": ev / t_c}
        row["ratio_proc"] = row["ours"] / row["simpy_proc"]
        row["ratio_best"] = row["ours"] / max(row["simpy_proc"], row["simpy_cb"])
        out[name] = row
        print(f"{name:<15}{ev:>10,}{row['ours']:>13,.0f}{row['simpy_proc']:>17,.0f}"
              f"{row['simpy_cb']:>15,.0f}{row['ratio_proc']:>14.2f}x{row['ratio_best']:>14.2f}x")
    _salabim_row(inter, serv, out["M/M/1"], a.repeat)
    ok = all(r["ratio_proc"] >= 2.0 for r in out.values())
    print(f"target ours >= 2x idiomatic SimPy on both models: {'MET' if ok else 'NOT MET'}")
    beat = all(r["ratio_best"] > 1.0 for r in out.values())
    print(f"ours faster than SimPy's callback style on both models: {'yes' if beat else 'NO'}")
    return out


if __name__ == "__main__":
    main()
