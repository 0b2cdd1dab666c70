"""Beyond the thesis: the placement heuristics online, and how much of their batch advantage survives.

Scenario (our decisions; the thesis has no time-driven study): the thesis's lab (shuffled per
instance), requests from the same stand-in trace arriving as a Poisson process of 20 a day for two
weeks (about 90 VMs running at once in steady state: the middle of the batch grid's 40-130), users
coming and going during opening hours 08:00-20:00 with sessions of U[60, 240] minutes, busy for a
share 0 or 0.5 of the open hours. Every heuristic runs on the same arrivals and the same users,
placing immediately (``period`` 0) or in hourly rounds (``period`` 60), no migration; energy is
integrated over time until the last VM ends (see :mod:`skylease.sim.desktops`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from skylease.experiments.thesis.paper_placement import RELATED, STUDY_ALGORITHMS
from skylease.experiments.thesis.placement_study import STUDY_SEED, _trace, savings_table
from skylease.sim.desktops import simulate_online
from skylease.traces.lab import thesis_lab, user_sessions
from skylease.traces.vms import VM_MINUTES, vm_arrivals

ONLINE_USERS = (0.0, 0.5)
ONLINE_PERIODS = (0.0, 60.0)
ONLINE_DAYS = 14.0
ONLINE_PER_DAY = 20.0
ONLINE_INSTANCES = 10


def online_cell(users: float, period: float, rep: int, seed: int = 0, days: float = ONLINE_DAYS,
                per_day: float = ONLINE_PER_DAY,
                policies: tuple[str, ...] = STUDY_ALGORITHMS) -> list[dict[str, Any]]:
    """Instance ``rep``: every policy on the same arrivals and users (``seed`` unused, as in the study)."""
    g = np.random.default_rng([STUDY_SEED, 7, rep])
    lab = thesis_lab(g)
    vms, arrivals = vm_arrivals(_trace(), days, per_day, g, int(lab.cores.max()))
    # users until the last VM can have ended: arrivals end at `days`, a VM runs at most 1.1 x 30 days
    horizon = days + 1.1 * VM_MINUTES[1] / 1440.0 + 1.0
    sessions = user_sessions(len(lab), horizon, users,
                             np.random.default_rng([STUDY_SEED, 8, round(100 * users), rep]))
    rows = []
    for policy in policies:
        s = simulate_online(vms, arrivals, lab, sessions, policy, period=period).summary()
        s["algorithm"] = s.pop("policy")
        s.pop("period_min")
        rows.append(s)
    return rows


def online_summary(runs: pd.DataFrame) -> pd.DataFrame:
    """Means over instances per users share, period and policy."""
    metrics = ["energy_wh", "desktops_used", "mean_wait_min", "share_with_user", "vms", "unplaced"]
    g = runs.groupby(["users", "period", "algorithm"], sort=True)
    s = g[metrics].mean()
    s["instances"] = g.size()
    return s.reset_index()


def survival_table(online: pd.DataFrame, batch: pd.DataFrame) -> pd.DataFrame:
    """Sorting's energy saving against FF, FFD and BF: batch (Model C and B) beside online.

    ``survives`` = online saving / batch Model C saving at the largest batch size, per users share:
    the share of the thesis-style advantage left once VMs and users come and go.
    """
    rows = []
    big = int(batch["n_vms"].max())
    batch_c = savings_table(batch, "energy_wh")
    batch_b = savings_table(batch, "energy_wh_b") if "energy_wh_b" in batch.columns else None
    for users in sorted(online["users"].unique()):
        for period in sorted(online["period"].unique()):
            sub = online[(online["users"] == users) & (online["period"] == period)]
            sv = savings_table(sub.assign(n_vms=0), "energy_wh")
            bc = batch_c[np.isclose(batch_c["users"], users) & (batch_c["n_vms"] == big)]
            bb = (batch_b[np.isclose(batch_b["users"], users) & (batch_b["n_vms"] == big)]
                  if batch_b is not None else None)
            for a in RELATED:
                if a not in sv.columns or bc.empty:
                    continue
                on = float(sv[a].iloc[0])
                bat = float(bc[a].iloc[0])
                rows.append({"users": users, "period": period, "against": a, "batch_c": bat,
                             "batch_b": float(bb[a].iloc[0]) if bb is not None and len(bb) else float("nan"),
                             "online": on, "survives": on / bat if bat else float("nan")})
    return pd.DataFrame(rows)
