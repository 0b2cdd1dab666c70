"""SpeQuloS, the QoS service for bags of tasks on best-effort infrastructures (spec 003).

``tail``: tail-effect metrics; ``credits``: the Credit System; ``oracle``: WHEN and HOW MANY;
``prediction``: completion-time prediction and α fitting; ``strategy``: strategy names;
``policy``: the scheduler, a :class:`~skylease.control.env.Policy` on a ``TailEnvironment``.
"""

from skylease.control.qos.credits import CREDITS_PER_CPU_HOUR, CreditError, CreditSystem, top_up
from skylease.control.qos.oracle import Oracle, Snapshot
from skylease.control.qos.policy import CloudWorker, SpeQuloS
from skylease.control.qos.prediction import AlphaModel, Prediction, fit_alpha
from skylease.control.qos.strategy import BATCH_ACCEL, STRATEGIES, Plan, Strategy, parse_plan, parse_strategy

__all__ = [
    "BATCH_ACCEL",
    "CREDITS_PER_CPU_HOUR",
    "STRATEGIES",
    "AlphaModel",
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
    "parse_plan",
    "parse_strategy",
    "top_up",
]
