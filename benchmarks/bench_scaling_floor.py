"""The floor under ``bench_scaling.py``'s BOINC rows: how the CPU cost of one event grows with the
number of clients busy at once, in a model that does nothing but what any event-per-client model
on :class:`skylease.sim.kernel.Kernel` must do.

The BOINC run on ``seti`` keeps about 2,500 clients busy at 2,500 tasks and all 24,000 available
ones from 40,000 tasks on, one pending completion each; its event mix does not change from 2,500
to 10,000 tasks. Here ``A`` clients (ids spread over 30,300, as on ``seti``) each hold one pending
event; an event is a kernel pop and, per row:

* ``heap Kernel`` / ``CalendarKernel``: schedule the client's next completion (a pop and a push
  among ``A`` pending events) on :class:`~skylease.sim.kernel.Kernel` (one heap) or on
  :class:`~skylease.sim.kernel.CalendarKernel` (what the desktop-grid models use);
* ``+ client state`` (on the calendar): also read the client's power (an ``array``), its buffer
  (a list per client, refilled every third event) and write its start time, as
  ``BOINCEnv._done_dg`` does.

No trace, no WUs, no garbage beyond the kernel's own entries. Least of ``--repeat`` runs of
300,000 events, CPU time of this process. Kind: self-measurement (no peer, no ablation).

    python benchmarks/bench_scaling_floor.py [--repeat N]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import time
from array import array

from skylease.sim.kernel import CalendarKernel, Kernel

NODES = 30_300
BUSY = (2_500, 10_000, 24_000)
EVENTS = 300_000


def run(busy: int, client_state: bool, kernel_type: type[Kernel] = CalendarKernel) -> float:
    """CPU microseconds per event with ``busy`` clients holding one pending event each."""
    rnd = random.Random(1)
    kernel = kernel_type()
    power = array("d", [rnd.uniform(500.0, 1500.0) for _ in range(NODES)])
    start = array("d", bytes(8 * NODES))
    buf: list[list[int] | None] = [None] * NODES
    left = [EVENTS]

    def done(i: int) -> None:
        left[0] -= 1
        if not left[0]:
            kernel.stop()
        now = kernel.now
        if client_state:
            b = buf[i]
            if b:
                b.pop()
            if not b:
                buf[i] = [i, i + 1, i + 2]
            start[i] = now
        kernel.schedule(now + 60_000.0 / power[i], done, i)

    for i in rnd.sample(range(NODES), busy):
        buf[i] = [i, i + 1, i + 2]
        kernel.schedule(rnd.uniform(0.0, 100.0), done, i)
    t = time.process_time()
    kernel.run()
    return (time.process_time() - t) / EVENTS * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(f"Python {platform.python_version()}, {platform.machine()}, load {os.getloadavg()[0]:.1f}; "
          f"CPU us per event, least of {args.repeat}")
    print(f"{'':>18}" + "".join(f"{f'{a:,} busy':>14}" for a in BUSY) + f"{'growth':>10}")
    for label, state, kind in (("heap Kernel", False, Kernel), ("CalendarKernel", False, CalendarKernel),
                               ("+ client state", True, CalendarKernel)):
        costs = [min(run(a, state, kind) for _ in range(max(1, args.repeat))) for a in BUSY]
        print(f"{label:>18}" + "".join(f"{c:14.2f}" for c in costs) + f"{costs[-1] / costs[0] - 1:+10.0%}")


if __name__ == "__main__":
    main()
