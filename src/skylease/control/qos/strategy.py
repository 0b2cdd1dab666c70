"""SpeQuloS strategy names ``<WHEN>-<HOWMANY>-<HOW>`` (spec 003 §2.4), e.g. ``9C-C-R``, and run plans
that add BOINC's own batch acceleration (``batch-accel``, ``batch-accel+9C-C-R``)."""

from __future__ import annotations

from itertools import product
from typing import NamedTuple

from skylease.control.qos.oracle import HOW_MANY, WHEN
from skylease.model.errors import UserError

#: HOW letters and the cloud usage each one asks of the environment (``TailEnvironment.serve_cloud``).
HOW = {"F": "flat", "R": "reschedule", "D": "duplicate"}
#: The paper's 18 combinations (V_rc, the [RC] variant of V, is accepted as well).
STRATEGIES: tuple[str, ...] = tuple(
    f"{w}-{m}-{h}" for w, m, h in product(("9C", "9A", "V"), HOW_MANY, HOW)
)
#: The name meaning "no QoS".
NONE = "none"
#: BOINC's server-side batch acceleration (a middleware feature: no cloud, no credits).
BATCH_ACCEL = "batch-accel"


class Strategy(NamedTuple):
    """A parsed strategy: WHEN rule, HOW MANY rule, HOW letter."""

    when: str
    how_many: str
    how: str

    @property
    def name(self) -> str:
        return f"{self.when}-{self.how_many}-{self.how}"

    @property
    def usage(self) -> str:
        """The cloud usage for :meth:`TailEnvironment.serve_cloud`."""
        return HOW[self.how]


_WHEN = {w.upper(): w for w in WHEN}


def parse_strategy(name: str) -> Strategy | None:
    """``"9C-C-R"`` → Strategy; ``"none"`` → None; anything else is a one-line UserError."""
    text = name.strip()
    if text.lower() == NONE:
        return None
    parts = text.upper().split("-")
    if len(parts) == 3 and parts[0] in _WHEN and parts[1] in HOW_MANY and parts[2] in HOW:
        return Strategy(_WHEN[parts[0]], parts[1], parts[2])
    raise UserError(
        f"unknown QoS strategy {name!r}: use none or WHEN-HOWMANY-HOW with WHEN in {', '.join(WHEN)}, "
        f"HOWMANY in {', '.join(HOW_MANY)}, HOW in {', '.join(HOW)} (e.g. 9C-C-R), optionally after "
        f"{BATCH_ACCEL}+ on BOINC",
        field="strategy",
    )


class Plan(NamedTuple):
    """What a run uses against the tail: BOINC's batch acceleration, a SpeQuloS strategy, both or
    neither."""

    accel: bool
    qos: Strategy | None

    @property
    def name(self) -> str:
        parts = ([BATCH_ACCEL] if self.accel else []) + ([self.qos.name] if self.qos else [])
        return "+".join(parts) or NONE


def parse_plan(name: str) -> Plan:
    """``"batch-accel+9C-C-R"`` → Plan(True, 9C-C-R); ``"batch-accel"``, ``"9C-C-R"``, ``"none"``
    likewise; anything else is a one-line UserError."""
    parts = [p.strip() for p in name.split("+")]
    accel = [p for p in parts if p.lower() == BATCH_ACCEL]
    rest = [p for p in parts if p.lower() != BATCH_ACCEL]
    if len(accel) > 1 or len(rest) > 1 or (accel and rest and rest[0].lower() == NONE):
        raise UserError(f"unknown QoS strategy {name!r}: use a strategy, {BATCH_ACCEL}, or "
                        f"{BATCH_ACCEL}+STRATEGY (e.g. {BATCH_ACCEL}+9C-C-R)", field="strategy")
    return Plan(bool(accel), parse_strategy(rest[0]) if rest else None)
