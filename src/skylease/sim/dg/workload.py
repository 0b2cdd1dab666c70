"""SpeQuloS workloads: the BoT categories of Table 6, node powers (Table 4) and credits (decisions S8,
S9, S28 in docs/decisions/spequlos.md).

* :func:`make_bot` -- ``SMALL`` (1000 x 3.6e6 nops, all at t=0), ``BIG`` (10000 x 60000 nops,
  t=0), a bag of one's own ``N:SECONDS`` (N x SECONDS x 1000 nops, t=0: :func:`custom_bot`) or
  drawn, ``normal|gamma|lognormal:N:MEAN:SD`` (seconds on a 1000 nops/s node, t=0), and
  ``RANDOM`` ([R], decision S9): ``size = max(1, round(N(1000, s1)))``,
  ``nops = max(1, round(N(60000, s2)))`` and arrival offsets from weib(91.98 s, 0.57), task ``i``
  arriving ``i``-th. ``sigma="literal"`` (default) reads Table 6's ``sigma^2`` literally
  (``s1 = sqrt(200)``, ``s2 = 100``); ``sigma="std"`` takes the printed values as standard
  deviations (``s1 = 200``, ``s2 = 10000``). Three readings of the arrivals (:data:`ARRIVALS`):

  - ``quantile`` (default, decision D1): the paper gives the *repartition function* (the CDF) of
    arrival times, so task ``i`` of ``n`` arrives at ``F^-1((i - 1/2) / n)`` of the Weibull; no
    draw. The only reading that fits both of the paper's RANDOM anchors (BOINC/seti 9C-C-R
    3,195 s; 76-100 % prediction success).
  - ``iid``: offsets drawn i.i.d. from the Weibull and sorted (decision S9b, the first reading).
  - ``epsilon``: the ``iid`` offsets with every gap between consecutive arrivals shortened to at
    most ``epsilon`` s (default :data:`PAPER_EPSILON_S`), the paper's "maximal time between two
    tasks arrivals" (Section 4.1, "a typical value is 60 seconds"). [R] The sorted offsets keep
    their order; only the sparse late tail is pulled in.

  Size and nops are drawn first, so the three readings of one seed share them.
* :func:`node_powers` -- one power per node (nops/s): Normal(mean, std) of Table 4 for the trace
  type, clamped to ``[mean/3, 3 mean]`` and ``>= 1`` ([R], S8); grids (``g5k*``) are
  homogeneous 3000.
* :func:`credits_for` -- credits provisioned to a BoT: 10 % of ``size x wall-clock bound`` in
  CPU.hours, times 15 credits per CPU.hour (S28).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from skylease.traces.synthetic import is_synthetic, synthetic_runtimes

__all__ = [
    "ARRIVALS",
    "BOT_CATEGORIES",
    "BOT_FORMS",
    "CREDITS_PER_CPU_HOUR",
    "NODE_POWER",
    "REFERENCE_POWER",
    "TASK_BYTES",
    "WALL_CLOCK_BOUND",
    "DGBot",
    "cap_arrival_gaps",
    "credits_for",
    "custom_bot",
    "make_bot",
    "node_powers",
    "quantile_arrivals",
    "resolve_arrivals",
]

BOT_CATEGORIES = ("SMALL", "BIG", "RANDOM")
#: Wall-clock bound per task (s), only used to size the credits (Table 6 + S9c).
WALL_CLOCK_BOUND = {"SMALL": 11000.0, "BIG": 180.0, "RANDOM": 2200.0}
CREDITS_PER_CPU_HOUR = 15.0
CREDIT_FRACTION = 0.10
#: Table 4: (mean, std) of node power in nops/s per trace.
NODE_POWER: dict[str, tuple[float, float]] = {
    "seti": (1000.0, 250.0),
    "nd": (1000.0, 250.0),
    "g5klyo": (3000.0, 0.0),
    "g5kgre": (3000.0, 0.0),
    "spot10": (3000.0, 300.0),
    "spot100": (3000.0, 300.0),
}
WEIBULL_SCALE = 91.98
WEIBULL_SHAPE = 0.57
#: RANDOM's readings of its arrival times (the first is the default, decision D1).
ARRIVALS = ("quantile", "iid", "epsilon")
#: The paper's "typical" maximal gap between two arrivals (Section 4.1), the ``epsilon`` reading's cap.
PAPER_EPSILON_S = 60.0


#: The power (nops/s) a bag's "seconds" are counted on: Table 4's SETI@home mean, on which SMALL's
#: 3.6e6 nops are one hour and BIG's 60,000 one minute.
REFERENCE_POWER = 1000.0
#: A bag of one's own's wall-clock bound per task, in multiples of its task's seconds (what SMALL's
#: and BIG's bounds are of theirs: 11,000 s for 1 h, 180 s for 1 min); only sizes its credits.
CUSTOM_BOUND_FACTOR = 3.0
#: What ``--bot`` takes (the one-line error lists them).
BOT_FORMS = ("small", "big", "random", "N:SECONDS (N tasks of SECONDS each on a 1,000 nops/s node)",
             "constant:N:SECONDS", "normal:N:MEAN:SD", "gamma:N:MEAN:SD", "lognormal:N:MEAN:SD")
#: Bytes a task of a bag costs the desktop-grid simulators at their peak, for the memory budget's
#: check of a bag of one's own: BOINC's, the larger (peak RSS of 1,000,000 against 100,000 tasks of
#: 60 s on 10,000 seti nodes, no QoS: 429 bytes a task; XWHEP's 263).
TASK_BYTES = 450
_CUSTOM = re.compile(r"\s*(\d[\d_,]*)\s*:\s*(\d+(?:\.\d*)?|\.\d+)\s*")


@dataclass(frozen=True, eq=False)
class DGBot:
    """A bag of tasks for the DG simulators: ``nops[i]`` instructions, arrival ``arrival[i]`` (s
    after submission, non-decreasing); ``bound_s``: its tasks' wall-clock bound when it is not its
    category's (a bag of one's own)."""

    category: str
    nops: np.ndarray
    arrival: np.ndarray
    bound_s: float | None = None

    def __post_init__(self) -> None:
        nops = np.ascontiguousarray(self.nops, dtype=float)
        arr = np.ascontiguousarray(self.arrival, dtype=float)
        if nops.ndim != 1 or nops.shape != arr.shape:
            raise ValueError("nops and arrival must be 1-D arrays of the same length")
        if (nops <= 0).any() or (arr < 0).any() or (np.diff(arr) < 0).any():
            raise ValueError("nops must be > 0 and arrivals >= 0 and sorted")
        object.__setattr__(self, "nops", nops)
        object.__setattr__(self, "arrival", arr)

    def __len__(self) -> int:
        return len(self.nops)

    @property
    def wall_clock_bound(self) -> float:
        return self.bound_s if self.bound_s is not None else WALL_CLOCK_BOUND.get(self.category, float("nan"))

    @property
    def credits(self) -> float:
        return CREDIT_FRACTION * len(self) * self.wall_clock_bound / 3600.0 * CREDITS_PER_CPU_HOUR

    @classmethod
    def homogeneous(cls, n: int, nops: float, category: str = "custom",
                    bound_s: float | None = None) -> DGBot:
        return cls(category, np.full(n, float(nops)), np.zeros(n), bound_s)


def custom_bot(spec: str) -> tuple[int, float] | None:
    """A bag of one's own, ``N:SECONDS`` (N tasks of SECONDS on a node of :data:`REFERENCE_POWER`,
    all at the submission): (N, SECONDS); None when ``spec`` is not of that form. ValueError when
    N < 1 or SECONDS is 0."""
    m = _CUSTOM.fullmatch(spec)
    if m is None:
        return None
    n, seconds = int(m.group(1).replace(",", "").replace("_", "")), float(m.group(2))
    if n < 1 or seconds <= 0:
        raise ValueError(f"N:SECONDS needs N >= 1 and SECONDS > 0, got {spec.strip()!r}")
    return n, seconds


def _rng(seed: int | np.random.Generator | None) -> np.random.Generator:
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def make_bot(
    category: str,
    seed: int | np.random.Generator | None = None,
    *,
    sigma: str = "literal",
    arrivals: str | None = None,
    epsilon: float | None = None,
) -> DGBot:
    """One BoT of ``category`` (``SMALL``/``BIG``/``RANDOM``, or ``N:SECONDS``: :func:`custom_bot`);
    ``seed`` only matters for RANDOM.

    ``arrivals``/``epsilon``: RANDOM's reading of its arrivals (:func:`resolve_arrivals`).
    """
    reading, eps = resolve_arrivals(arrivals, epsilon)
    if (own := custom_bot(category)) is not None:
        n, seconds = own
        return DGBot.homogeneous(n, seconds * REFERENCE_POWER, f"{n}:{seconds:g}",
                                 bound_s=CUSTOM_BOUND_FACTOR * seconds)
    if is_synthetic(category):  # N tasks drawn from a distribution (in seconds on the reference node)
        runtimes = synthetic_runtimes(category, _rng(seed), field="--bot", forms=BOT_FORMS,
                                      task_bytes=TASK_BYTES)
        runtimes = np.maximum(runtimes, 1.0 / REFERENCE_POWER)  # (a task is at least one instruction)
        return DGBot(category.strip(), runtimes * REFERENCE_POWER, np.zeros(len(runtimes)),
                     CUSTOM_BOUND_FACTOR * float(runtimes.mean()))
    cat = category.upper()
    if cat == "LARGE":
        cat = "BIG"
    if cat == "SMALL":
        return DGBot.homogeneous(1000, 3_600_000.0, "SMALL")
    if cat == "BIG":
        return DGBot.homogeneous(10000, 60_000.0, "BIG")
    if cat != "RANDOM":
        raise ValueError(f"unknown BoT category {category!r}; one of {BOT_CATEGORIES}")
    if sigma == "literal":
        s_size, s_nops = math.sqrt(200.0), math.sqrt(10000.0)
    elif sigma == "std":
        s_size, s_nops = 200.0, 10000.0
    else:
        raise ValueError(f"sigma must be 'literal' or 'std', got {sigma!r}")
    rng = _rng(seed)
    size = max(1, round(rng.normal(1000.0, s_size)))
    nops = np.maximum(1.0, np.round(rng.normal(60000.0, s_nops, size)))
    if reading == "quantile":
        arrival = quantile_arrivals(size)
    else:
        arrival = np.sort(WEIBULL_SCALE * rng.weibull(WEIBULL_SHAPE, size))
        if eps is not None:
            arrival = cap_arrival_gaps(arrival, eps)
    return DGBot("RANDOM", nops, arrival)


def resolve_arrivals(arrivals: str | None, epsilon: float | None) -> tuple[str, float | None]:
    """The reading ``(arrivals, epsilon)`` a RANDOM BoT uses: ``arrivals`` None means ``epsilon``
    when an ``epsilon`` is given (the cap's older spelling) and ``quantile`` otherwise; the
    ``epsilon`` reading caps at ``epsilon`` (default :data:`PAPER_EPSILON_S`). A cap with another
    reading is a ValueError, as are an unknown reading and a cap that is not > 0."""
    if arrivals is None:
        arrivals = "epsilon" if epsilon is not None else ARRIVALS[0]
    key = arrivals.strip().lower()
    if key not in ARRIVALS:
        raise ValueError(f"RANDOM arrivals must be one of {', '.join(ARRIVALS)}, got {arrivals!r}")
    if key != "epsilon":
        if epsilon is not None:
            raise ValueError(f"an epsilon cap only applies to the 'epsilon' reading of RANDOM's arrivals, "
                             f"not {key!r}")
        return key, None
    eps = PAPER_EPSILON_S if epsilon is None else float(epsilon)
    if not eps > 0:
        raise ValueError(f"epsilon must be > 0, got {epsilon!r}")
    return key, eps


def quantile_arrivals(n: int) -> np.ndarray:
    """Task ``i`` of ``n`` (1-based) at ``F^-1((i - 1/2) / n)`` of weib(91.98 s, 0.57): the arrival
    times whose empirical CDF is the paper's repartition function (decision D1)."""
    p = (np.arange(1, n + 1) - 0.5) / n
    return WEIBULL_SCALE * (-np.log1p(-p)) ** (1.0 / WEIBULL_SHAPE)


def cap_arrival_gaps(arrival: np.ndarray, epsilon: float) -> np.ndarray:
    """Sorted arrivals with every gap between consecutive ones shortened to at most ``epsilon``."""
    if not epsilon > 0:
        raise ValueError(f"epsilon must be > 0, got {epsilon!r}")
    a = np.asarray(arrival, dtype=float)
    if len(a) < 2:
        return a.copy()
    gaps = np.minimum(np.diff(a), float(epsilon))
    return np.concatenate(([a[0]], a[0] + np.cumsum(gaps)))


def _power_params(trace_name: str) -> tuple[float, float]:
    key = trace_name.lower()
    for name, params in NODE_POWER.items():
        if key.startswith(name):
            return params
    if key.startswith("g5k"):
        return NODE_POWER["g5klyo"]
    if key.startswith("spot"):
        return NODE_POWER["spot10"]
    return NODE_POWER["seti"]  # [R] unknown traces are treated as desktop grids


def node_powers(trace_name: str, n: int, seed: int | np.random.Generator | None = None) -> np.ndarray:
    """Power (nops/s) of ``n`` nodes of a trace named ``trace_name`` (Table 4 + clamp)."""
    mean, std = _power_params(trace_name)
    if std == 0:
        return np.full(n, mean)
    p = _rng(seed).normal(mean, std, n)
    return np.maximum(np.clip(p, mean / 3.0, 3.0 * mean), 1.0)


def credits_for(category: str, n_tasks: int) -> float:
    """Credits provisioned: 10 % of ``n_tasks x wall-clock bound`` CPU.hours x 15."""
    wall = WALL_CLOCK_BOUND[category.upper() if category.upper() != "LARGE" else "BIG"]
    return CREDIT_FRACTION * n_tasks * wall / 3600.0 * CREDITS_PER_CPU_HOUR
