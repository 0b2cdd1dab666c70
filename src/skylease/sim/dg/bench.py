"""Timing of the DG simulators: ``python -m skylease.sim.dg.bench [--seeds K] [--traces seti,nd]``.

For each trace x middleware x BoT category it runs K submission times without QoS and with a
minimal 9C-C-R-like policy (:class:`TickPolicy`: a 240 s tick, Conservative count once 90 % of the
tasks are complete, Reschedule, idle CWs stopped at the next tick), and prints the mean wall time,
events and completion time. The policy only stands in for :mod:`skylease.control.qos` to time the
cloud-worker paths; it is not the SpeQuloS implementation.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from skylease.control.env import Policy
from skylease.sim.dg.env import DesktopGridEnv
from skylease.sim.dg.flat import flatten
from skylease.sim.dg.workload import make_bot
from skylease.traces.avail import load_trace


class TickPolicy(Policy):
    """9C-C-<how> with a 240 s tick (see the module docstring)."""

    def __init__(self, credits: float, how: str = "reschedule", tick: float = 240.0) -> None:
        self.credits = credits
        self.how = how
        self.tick = tick
        self.started = False
        self.idle: set[int] = set()

    def on_start(self, env) -> None:
        self.env = env
        env.serve_cloud(self.how)
        env.call_later(self.tick, self.step)

    def on_host_idle(self, host) -> None:
        self.idle.add(host.id)

    def on_host_up(self, host) -> None:
        self.idle.discard(host.id)

    def step(self) -> None:
        env = self.env
        for hid in list(self.idle):
            if env.host(hid).state.value == "idle":
                env.release(hid)
        self.idle.clear()
        left = self.credits - env.spent()
        if left <= 0:
            for h in env.hosts("cloud"):
                env.release(h.id)
            return
        pr = env.progress()
        if not self.started and pr.submitted and pr.completed >= 0.9 * pr.submitted:
            self.started = True
            x = pr.completed / pr.submitted
            t_r = env.now / x - env.now
            n = int(left / 15.0 / max(t_r / 3600.0, 1.0))
            if n > 0:
                env.acquire("cloud", n)
        env.call_later(self.tick, self.step)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--traces", default="seti,nd")
    ap.add_argument("--days", type=float, default=None, help="trace length (default: paper's)")
    args = ap.parse_args(argv)
    print(f"{'trace':6} {'mw':6} {'bot':6} {'qos':5} {'wall_s':>7} {'events':>8} {'T_s':>9} {'cw':>4}")
    for name in args.traces.split(","):
        t = time.perf_counter()
        kw = {} if args.days is None else {"duration_s": args.days * 86400}
        tr = load_trace(name, seed=1, **kw)
        gen = time.perf_counter() - t
        t = time.perf_counter()
        flatten(tr)
        print(
            f"# {name}: {tr.n_nodes} nodes, generated in {gen:.2f} s, flattened in "
            f"{time.perf_counter() - t:.2f} s"
        )
        rng = np.random.default_rng(0)
        subs = rng.uniform(0, max(tr.length - 20 * 86400, 1.0), args.seeds)
        for mw in ("xwhep", "boinc"):
            for cat in ("SMALL", "BIG", "RANDOM"):
                for qos in (False, True):
                    walls, events, comp, cws = [], [], [], []
                    for k, sub in enumerate(subs):
                        bot = make_bot(cat, seed=k)
                        t = time.perf_counter()
                        env = DesktopGridEnv(mw, tr, bot, submit_at=float(sub), seed=k)
                        res = env.run(TickPolicy(bot.credits) if qos else None)
                        walls.append(time.perf_counter() - t)
                        events.append(res.events)
                        comp.append(res.completion_s)
                        cws.append(res.cw_count)
                    mean_t = float(np.mean(comp)) if all(map(math.isfinite, comp)) else math.inf
                    print(
                        f"{name:6} {mw:6} {cat:6} {'yes' if qos else 'no':5} {np.mean(walls):7.3f} "
                        f"{np.mean(events):8.0f} {mean_t:9.0f} {np.mean(cws):4.0f}",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
