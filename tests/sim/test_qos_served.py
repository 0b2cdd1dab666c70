"""One policy, two clocks, for SpeQuloS as a service: a simulated bag served by the service's
Scheduler through the relay (its reports in, the instructions out) gets exactly what the SpeQuloS
policy gives it in process: the same cloud workers at the same times, the same bill and refund,
the same prediction and the same completion."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skylease.control.qos import STRATEGIES, CreditSystem, SpeQuloS
from skylease.control.qos.relay import QoSRelay
from skylease.runtime.qos.scheduler import QoSScheduler
from skylease.sim.dg import DesktopGridEnv, DGBot

from .test_dg_env import random_trace

pytestmark = pytest.mark.integration  # 20-40 s of property runs: CI's second level

MW = ("boinc", "xwhep")


def served(mw, tr, bot, seed, strategy, credits, tick, eager):
    bank = CreditSystem()
    bank.deposit("alice", credits)
    sched = QoSScheduler(bank)
    policy = sched.attach(7, "alice", n_tasks=len(bot), strategy=strategy, credits=credits, tick=tick)
    relay = QoSRelay(lambda r: sched.report(7, r), "cloud", period=tick, eager=eager)
    res = DesktopGridEnv(mw, tr, bot, seed=seed).run(relay)
    return res, policy, bank, relay


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    mw=st.sampled_from(MW),
    strategy=st.sampled_from(STRATEGIES),
    credits=st.floats(0, 60),
    tick=st.sampled_from([60.0, 240.0]),
    eager=st.booleans(),
)
def test_a_bag_served_through_the_relay_gets_what_the_policy_gives_in_process(
        seed: int, mw: str, strategy: str, credits: float, tick: float, eager: bool) -> None:
    """Reporting at each completion (``eager``, a simulation) or every period and when the
    service's next tick is due (a real run): the same CWs, bill and completion. Only the
    prediction differs with periodic reports: it is made at the first report past half the bag,
    whose count of tasks submitted so far may be larger."""
    rng = np.random.default_rng(seed)
    tr = random_trace(rng, int(rng.integers(3, 10)), 6e5, up=rng.uniform(500, 5000),
                      down=rng.uniform(200, 3000))
    nt = int(rng.integers(5, 40))
    bot = DGBot("t", rng.uniform(1e5, 3e6, nt), np.sort(rng.uniform(0, 2000, nt)))

    direct = SpeQuloS(strategy, credits, tick=tick)
    want = DesktopGridEnv(mw, tr, bot, seed=seed).run(direct)
    got, policy, bank, relay = served(mw, tr, bot, seed, strategy, credits, tick, eager)

    assert got.completion_s == want.completion_s
    assert np.array_equal(got.completion_times, want.completion_times)
    assert got.cw_tasks == want.cw_tasks
    a, b = policy.summary(), direct.summary()
    for key in ("credits_ordered", "credits_spent", "refund", "cw_started_at", "cws", "cws_stopped_idle",
                "completed_at", *(("t_pred",) if eager else ())):
        assert a[key] == b[key], (key, a[key], b[key])
    assert [(c.started, c.stopped, c.reason) for c in policy.cws.values()] == \
        [(c.started, c.stopped, c.reason) for c in direct.cws.values()]
    if a["completed_at"] is not None:  # the bag is paid for: the account lost what it spent
        assert abs(bank.balance("alice") - (credits - a["credits_spent"])) < 1e-9
        assert relay.last is not None and relay.last.done
    else:  # (the trace ended first) the order still holds its credits
        assert abs(bank.balance("alice") - (credits - a["credits_ordered"])) < 1e-9
