"""SpeQuloS strategies: when to start cloud workers, how many, and how the middleware uses them.

A strategy is a :class:`CloudStrategy` (the three decisions of the paper's strategies: when,
how many, how). The paper's 18 are instances of one built-in class, :class:`Strategy`, named
``<WHEN>-<HOWMANY>-<HOW>`` (e.g. ``9C-C-R``); a strategy of one's own is a subclass loaded from
``MODULE:CLASS`` or ``FILE.py:CLASS`` with keyword parameters (:func:`load_strategy`, through the
one plug-in loader :mod:`skylease.control.plugins`). Run plans add BOINC's own batch acceleration
(``batch-accel``, ``batch-accel+9C-C-R``, ``batch-accel+my.py:Mine``). Decisions:
``docs/decisions/qos-strategies.md``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import product
from typing import Any, ClassVar, NamedTuple

from skylease.control.qos.oracle import HOW_MANY, WHEN, Oracle, Snapshot
from skylease.model.errors import UserError

#: HOW letters and the cloud usage each one asks of the environment (``TailEnvironment.serve_cloud``).
HOW = {"F": "flat", "R": "reschedule", "D": "duplicate"}
#: The cloud usages a strategy may ask for.
USAGES = tuple(HOW.values())
#: The paper's 18 combinations (V_rc, the [RC] variant of V, is accepted as well).
STRATEGIES: tuple[str, ...] = tuple(
    f"{w}-{m}-{h}" for w, m, h in product(("9C", "9A", "V"), HOW_MANY, HOW)
)
#: The name meaning "no QoS".
NONE = "none"
#: BOINC's server-side batch acceleration (a middleware feature: no cloud, no credits).
BATCH_ACCEL = "batch-accel"


class CloudStrategy(ABC):
    """What a SpeQuloS strategy decides; the scheduler (:class:`~skylease.control.qos.SpeQuloS`)
    does the rest (credits, billing per tick, stopping cloud workers).

    At every tick until cloud workers are started (once per bag), the scheduler asks
    :meth:`should_use_cloud` (WHEN) and, if yes, :meth:`cloud_workers_to_start` (HOW MANY, capped
    by what the remaining credits pay for one tick; below 1, it asks again at the next tick). The
    middleware then uses them as :attr:`usage` says (HOW): ``flat`` (they join as ordinary
    workers), ``reschedule`` (they get the tasks still running elsewhere) or ``duplicate`` (they
    run copies of those tasks).
    """

    #: HOW: ``flat``, ``reschedule`` or ``duplicate``.
    usage: ClassVar[str] = "reschedule"
    #: Whether :meth:`should_use_cloud` reads the snapshot's completion and assignment times
    #: (``ctimes``, ``atimes``; copying them every tick costs time, so they are None otherwise).
    needs_times: ClassVar[bool] = False

    @abstractmethod
    def should_use_cloud(self, s: Snapshot) -> bool:
        """WHEN: start cloud workers now? ``s`` is the bag's progress (elapsed seconds since
        submission, tasks submitted, assigned, completed)."""

    @abstractmethod
    def cloud_workers_to_start(self, s: Snapshot, credits: float) -> int:
        """HOW MANY cloud workers to start, with ``credits`` left on the order (15 pay one cloud
        worker for one hour)."""

    @property
    def greedy(self) -> bool:
        """Whether it spends its credits at once (the ``greedy`` idle-stop reading stops only such
        strategies' idle cloud workers)."""
        return False

    @property
    def name(self) -> str:
        """How runs and tables name it: ``Class(param=value, ...)``."""
        from skylease.control.plugins import class_path, describe

        return type(self).__qualname__ + describe(self)[len(class_path(type(self))):]

    def describe(self) -> str:
        """The class path (a file plug-in's file) and its parameters: the spec that loads it again."""
        from skylease.control.plugins import describe

        return describe(self)


def strategy_failed(strategy: CloudStrategy, e: Exception) -> UserError:
    """A user's strategy that raised (or answered what is not a count) during a run, as one line:
    its class, the exception and the file and line that raised."""
    from skylease.control.plugins import class_path, failure

    where = failure(e, "")
    text = str(e).strip().splitlines()[0] if str(e).strip() else "(no message)"
    return UserError(f"the strategy {class_path(type(strategy))} failed: {type(e).__name__}: {text}",
                     file=where.file, line=where.line, field="strategy")


_WHEN = {w.upper(): w for w in WHEN}


@dataclass(frozen=True)
class Strategy(CloudStrategy):
    """The paper's strategies: a WHEN rule, a HOW MANY rule and a HOW letter, with the WHEN rules'
    parameters (S5: 0.9 and factor 2), decided by an :class:`~skylease.control.qos.oracle.Oracle`."""

    when: str
    how_many: str
    how: str
    threshold: float = 0.9
    variance_factor: float = 2.0
    oracle: Oracle = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.how not in HOW:
            raise ValueError(f"how must be one of {tuple(HOW)}, got {self.how!r}")
        object.__setattr__(self, "oracle", Oracle(self.when, self.how_many, self.threshold,
                                                  self.variance_factor))

    @property
    def name(self) -> str:
        return f"{self.when}-{self.how_many}-{self.how}"

    @property
    def usage(self) -> str:  # type: ignore[override]
        """The cloud usage for :meth:`TailEnvironment.serve_cloud`."""
        return HOW[self.how]

    @property
    def needs_times(self) -> bool:  # type: ignore[override]
        return self.oracle.needs_times

    @property
    def greedy(self) -> bool:
        return self.how_many == "G"

    def should_use_cloud(self, s: Snapshot) -> bool:
        return self.oracle.should_use_cloud(s)

    def cloud_workers_to_start(self, s: Snapshot, credits: float) -> int:
        return self.oracle.cloud_workers_to_start(s, credits)

    def describe(self) -> str:
        return self.name


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


def load_strategy(spec: str, params: Mapping[str, Any] | None = None,
                  field_names: tuple[str, str] = ("strategy", "--strategy-arg")) -> CloudStrategy | None:
    """A built-in name (:func:`parse_strategy`, which takes no parameters) or a
    :class:`CloudStrategy` subclass named ``MODULE:CLASS`` or ``FILE.py:CLASS``, built with
    ``params`` (``KEY=VALUE`` text from :func:`skylease.control.plugins.parse_args`, or typed).
    Every mistake is one UserError; its field is ``field_names[1]`` when a given parameter is at
    fault, ``field_names[0]`` otherwise."""
    from skylease.control import plugins

    option, arg_option = field_names
    params = dict(params or {})
    if not plugins.is_spec(spec):
        try:
            built = parse_strategy(spec)
        except UserError as e:
            raise UserError(f"{e.message}; or a strategy of one's own: MODULE:CLASS or FILE.py:CLASS",
                            field=option) from None
        if params:
            raise UserError(f"{spec.strip()} takes no parameters (its thresholds are the paper's)",
                            field=arg_option)
        return built
    try:
        obj = plugins.load(spec, params, base=CloudStrategy, what="SpeQuloS strategy")
    except plugins.PluginError as e:
        field_name = arg_option if e.param is not None and e.param in params else option
        raise UserError(e.message, file=e.file, line=e.line, field=field_name) from None
    if obj.usage not in USAGES:
        raise UserError(f"{plugins.class_path(type(obj))}.usage must be one of {', '.join(USAGES)}, "
                        f"got {obj.usage!r}", field=option)
    return obj


class Plan(NamedTuple):
    """What a run uses against the tail: BOINC's batch acceleration, a SpeQuloS strategy, both or
    neither."""

    accel: bool
    qos: CloudStrategy | None

    @property
    def name(self) -> str:
        parts = ([BATCH_ACCEL] if self.accel else []) + ([self.qos.name] if self.qos else [])
        return "+".join(parts) or NONE


def parse_plan(name: str, params: Mapping[str, Any] | None = None) -> Plan:
    """``"batch-accel+9C-C-R"`` → Plan(True, 9C-C-R); ``"batch-accel"``, ``"9C-C-R"``, ``"none"``,
    ``"my_strategy.py:Mine"`` likewise (``params``: a strategy of one's own's parameters,
    :func:`load_strategy`); anything else is a one-line UserError."""
    parts = [p.strip() for p in name.split("+")]
    accel = [p for p in parts if p.lower() == BATCH_ACCEL]
    rest = [p for p in parts if p.lower() != BATCH_ACCEL]
    if len(accel) > 1 or len(rest) > 1 or (accel and rest and rest[0].lower() == NONE):
        raise UserError(f"unknown QoS strategy {name!r}: use a strategy, {BATCH_ACCEL}, or "
                        f"{BATCH_ACCEL}+STRATEGY (e.g. {BATCH_ACCEL}+9C-C-R)", field="strategy")
    if params and not rest:
        raise UserError(f"{name.strip()} takes no parameters", field="--strategy-arg")
    return Plan(bool(accel), load_strategy(rest[0], params) if rest else None)
