"""EC2 spot price histories and the SpeQuloS bid ladder (decision S18 in
docs/decisions/spequlos.md).

Price files
-----------
:func:`read_spot_prices` reads the JSON written by ``aws ec2 describe-spot-price-history``
(``{"SpotPriceHistory": [{"Timestamp", "SpotPrice", "InstanceType", "AvailabilityZone",
"ProductDescription"}, ...]}``, newest first; a bare list of records is accepted too), gzipped or
not. The price is a step function: price ``prices[k]`` holds from ``times[k]`` (Unix seconds) to
``times[k+1]``.

Filter [R]: a price history only makes sense for one (instance type, zone, product). The
``instance_type``, ``zone`` and ``product`` arguments keep only the matching records; a file that
still mixes several values of any of them after filtering is rejected with a
:class:`UserError` listing them, rather than silently interleaving unrelated markets. The shipped
files hold one type, one zone and ``Linux/UNIX`` each. Two records with the same timestamp keep the
**highest** price (a bid runs only if it is at or above every price reported for that instant).

Bid ladder (decision S18)
-------------------------
With a renting budget of ``S`` dollars per hour, ``n`` persistent bids are placed, bid ``i`` at
``S/i`` (``i = 1..n``). Node ``i`` (1-based; index ``i-1`` in the trace) is available exactly
when the market price ``p(t) <= S/i`` (tested as ``p * i <= S``). So availability is **nested**:
whenever node ``i+1`` is available, node ``i`` is too, and ``N(t) = min(n, floor(S/p(t)))``.
When ``n`` is not given it is the smallest ``n`` with ``S/n`` below the lowest price in the window,
``floor(S / p_min) + 1`` (so node ``n`` is never available, as in the paper).

Which file stands for the paper's data, and its calibration [R, S18]
-------------------------------------------------------------------
The paper used "c1.large" (not an EC2 type; c1.medium and c1.xlarge existed) for January-March
2011, and that history is not obtainable. The shipped histories are us-east-1, 2016-02-25 to
2016-04-25 (60 days). We use ``c1.xlarge-us-east-1a`` (:data:`DEFAULT_SPOT_FILE`): of the two c1
types its price level (median $0.0647/h, min $0.0642, max $0.13) is the closest to the paper's,
and its shape (median 1.008x and maximum 2.03x its minimum) is a real market's.

Its level is not the paper's: on it the ladder has about 1.8 times the paper's node counts (155
nodes for $10/h, 1557 for $100/h, against Table 2's maxima of 87 and 877). Decision S18 asks that a
stand-in be calibrated to Tables 2 and 3, so :func:`calibrated_prices` scales the series by one
factor so that its lowest price is :data:`PAPER_MIN_PRICE`, the price at which a ladder has exactly
Table 2's maxima for both budgets (floor(10/p) = 87 and floor(100/p) = 877 hold together only for
p in ($0.113895, $0.114025]). The mean node count then lands within 5 % of Table 2's (86.3 and
867 against 82.2 and 824). Table 3's durations are the 2016 market's, not matched (see
:func:`skylease.traces.avail.trace_stats` and the SpeQuloS reproduction's trace section): its price
moves every 15 minutes or so and flips the ladder's top bids more often than the paper's did.
``load_trace("spot10")`` and ``"spot100"`` use the calibrated series; the raw file stays loadable
by its path.
"""

from __future__ import annotations

import math
import os
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from skylease.model.availability import Availability, AvailabilityTrace
from skylease.model.errors import UserError
from skylease.traces.textio import read_json

__all__ = ["DEFAULT_SPOT_FILE", "PAPER_MIN_PRICE", "bid_ladder", "calibrated_prices", "read_spot_prices"]

#: The shipped price history used for ``spot10`` and ``spot100`` (see the module docstring).
DEFAULT_SPOT_FILE = "c1.xlarge-us-east-1a.json.gz"
#: The lowest price (dollars/hour) of the calibrated series: a ladder then has exactly Table 2's
#: maxima, 87 nodes for $10/h and 877 for $100/h (module docstring; decision S18).
PAPER_MIN_PRICE = 0.11396


def calibrated_prices(prices: np.ndarray, min_price: float = PAPER_MIN_PRICE) -> tuple[np.ndarray, float]:
    """``prices`` scaled by one factor so that their minimum is ``min_price``; returns the scaled
    prices and the factor (decision S18: a stand-in market calibrated to the paper's level)."""
    p = np.asarray(prices, float)
    if not (len(p) and np.isfinite(p).all() and (p > 0).all()):
        raise ValueError("prices must be a non-empty array of finite positive values")
    factor = float(min_price) / float(p.min())
    return p * factor, factor


def _timestamp(path: Path, k: int, value: Any) -> float:
    if not isinstance(value, str):
        raise UserError(f"record {k}: not a timestamp string: {value!r}", file=path, field="Timestamp")
    try:
        dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise UserError(f"record {k}: bad timestamp {value!r}", file=path, field="Timestamp") from None
    if dt.tzinfo is None:
        raise UserError(f"record {k}: timestamp {value!r} has no time zone", file=path, field="Timestamp")
    return dt.timestamp()


def _price(path: Path, k: int, value: Any) -> float:
    try:
        p = float(value)
    except (TypeError, ValueError):
        raise UserError(f"record {k}: {value!r} is not a number", file=path, field="SpotPrice") from None
    if not (math.isfinite(p) and p > 0):
        raise UserError(f"record {k}: price must be positive, not {value!r}", file=path, field="SpotPrice")
    return p


def read_spot_prices(
    path: str | os.PathLike[str],
    *,
    instance_type: str | None = None,
    zone: str | None = None,
    product: str | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``(times, prices)``: Unix seconds ascending, and the price from each time on (dollars/hour).

    See the module docstring for the filter and the duplicate rule. Errors name the file and,
    for a bad record, its 0-based index in the list and the field.
    """
    path = Path(path)
    doc = read_json(path)
    records = doc.get("SpotPriceHistory") if isinstance(doc, dict) else doc
    if not isinstance(records, list):
        raise UserError("expected a 'SpotPriceHistory' list of price records", file=path)
    wanted = {"InstanceType": instance_type, "AvailabilityZone": zone, "ProductDescription": product}
    rows: list[tuple[float, float]] = []
    seen: dict[str, set[str]] = {k: set() for k in wanted}
    for k, rec in enumerate(records):
        if not isinstance(rec, dict):
            raise UserError(f"record {k} is not an object", file=path)
        if any(v is not None and rec.get(f) != v for f, v in wanted.items()):
            continue
        for f in wanted:
            if f in rec:
                seen[f].add(str(rec[f]))
        for f in ("Timestamp", "SpotPrice"):
            if f not in rec:
                raise UserError(f"record {k} lacks this field", file=path, field=f)
        rows.append((_timestamp(path, k, rec["Timestamp"]), _price(path, k, rec["SpotPrice"])))
    for f, values in seen.items():
        if len(values) > 1:
            raise UserError(
                f"the file mixes {len(values)} values ({', '.join(sorted(values))}); choose one", file=path,
                field=f,
            )
    if not rows:
        what = ", ".join(f"{f}={v}" for f, v in wanted.items() if v is not None)
        raise UserError(f"no price record{' with ' + what if what else ''}", file=path)
    arr = np.array(rows, float)
    order = np.lexsort((-arr[:, 1], arr[:, 0]))  # by time, highest price first within a time
    arr = arr[order]
    first = np.concatenate([[True], arr[1:, 0] != arr[:-1, 0]])
    return arr[first, 0].copy(), arr[first, 1].copy()


def bid_ladder(
    times: np.ndarray,
    prices: np.ndarray,
    budget_per_hour: float,
    n_nodes: int | None = None,
    *,
    start: float | None = None,
    end: float | None = None,
    name: str | None = None,
) -> AvailabilityTrace:
    """The spot availability trace of a ladder of persistent bids ``S/i`` (module docstring).

    ``times``/``prices`` are a step function as :func:`read_spot_prices` returns. The window is
    ``[start, end)`` in the same clock (default: first to last price change); the result's time 0
    is ``start`` and its ``origin`` is ``start``.
    """
    t = np.asarray(times, float)
    p = np.asarray(prices, float)
    if t.ndim != 1 or t.shape != p.shape or not len(t):
        raise ValueError("times and prices must be non-empty 1-D arrays of the same length")
    if (np.diff(t) <= 0).any():
        raise ValueError("times must be strictly increasing")
    if not (np.isfinite(p).all() and (p > 0).all()):
        raise ValueError("prices must be finite and positive")
    s_budget = float(budget_per_hour)
    if not (math.isfinite(s_budget) and s_budget > 0):
        raise ValueError(f"budget_per_hour must be positive, not {budget_per_hour}")
    t0 = float(t[0]) if start is None else float(start)
    t1 = float(t[-1]) if end is None else float(end)
    if not t1 > t0:
        raise ValueError(f"empty window [{t0}, {t1})")
    if t0 < t[0]:
        raise ValueError(f"start {t0} is before the first price ({t[0]}): the price is unknown there")
    # Price segments [seg_s, seg_e) inside the window.
    i0 = int(np.searchsorted(t, t0, side="right")) - 1
    i1 = int(np.searchsorted(t, t1, side="left"))
    seg_s = np.concatenate([[t0], t[i0 + 1 : i1]])
    seg_p = p[i0:i1]
    seg_e = np.concatenate([seg_s[1:], [t1]])
    if n_nodes is None:  # one bid more than the cheapest price can ever reach: S/n < min price
        n_nodes = math.floor(s_budget / float(seg_p.min())) + 1
        while s_budget / n_nodes >= float(seg_p.min()):  # (S/p rounded down: 16.5/1.1 = 14.999...)
            n_nodes += 1
    if n_nodes < 1:
        raise ValueError("n_nodes must be at least 1")
    # Node i (1-based) is up on a segment iff p*i <= S; that is i <= cap = floor(S/p) (exactly).
    cap = np.floor(s_budget / seg_p).astype(np.int64)
    cap += (seg_p * (cap + 1) <= s_budget).astype(np.int64)  # guard against rounding down
    cap -= (seg_p * cap > s_budget).astype(np.int64)  # ... and up
    nodes: list[Availability] = []
    rel_s, rel_e = seg_s - t0, seg_e - t0
    for i in range(1, n_nodes + 1):
        up = cap >= i
        if not up.any():
            nodes.append(Availability(np.empty(0), np.empty(0)))
            continue
        edges = np.diff(np.concatenate([[0], up.astype(np.int8), [0]]))
        run_start = np.flatnonzero(edges == 1)
        run_end = np.flatnonzero(edges == -1) - 1
        nodes.append(Availability(rel_s[run_start], rel_e[run_end]))
    meta = {"format": "spot-bid-ladder", "budget_per_hour": s_budget, "n_bids": n_nodes,
            "min_price": float(seg_p.min()), "max_price": float(seg_p.max())}
    return AvailabilityTrace(name or f"spot{s_budget:g}", tuple(nodes), 0.0, t1 - t0, t0, meta)
