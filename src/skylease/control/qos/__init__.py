"""SpeQuloS, the QoS service for bags of tasks on best-effort infrastructures.

Our readings of the SpeQuloS paper (Delamare et al., Cluster Computing 2013) are written in
docs/decisions/spequlos.md: decisions S1-S29 and D1-D7.

``tail``: tail-effect metrics; ``credits``: the Credit System; ``oracle``: WHEN and HOW MANY;
``prediction``: completion-time prediction and α fitting; ``strategy``: strategies (the paper's 18
by name, a user's own :class:`CloudStrategy` from ``MODULE:CLASS`` or ``FILE.py:CLASS``);
``policy``: the scheduler, a :class:`~skylease.control.env.Policy` on a ``TailEnvironment``.
"""

from skylease.control.qos.credits import CREDITS_PER_CPU_HOUR, CreditError, CreditSystem, top_up
from skylease.control.qos.oracle import Oracle, Snapshot
from skylease.control.qos.policy import CloudWorker, SpeQuloS
from skylease.control.qos.prediction import AlphaModel, Prediction, fit_alpha
from skylease.control.qos.strategy import (
    BATCH_ACCEL,
    STRATEGIES,
    CloudStrategy,
    Plan,
    Strategy,
    load_strategy,
    parse_plan,
    parse_strategy,
)

__all__ = [
    "BATCH_ACCEL",
    "CREDITS_PER_CPU_HOUR",
    "STRATEGIES",
    "AlphaModel",
    "CloudStrategy",
    "CloudWorker",
    "CreditError",
    "CreditSystem",
    "Oracle",
    "Plan",
    "Prediction",
    "Snapshot",
    "SpeQuloS",
    "Strategy",
    "fit_alpha",
    "load_strategy",
    "parse_plan",
    "parse_strategy",
    "top_up",
]
