"""Checks every entry point shares: seeds, finite numbers, and how much one request may ask for.

The CLI and the coming HTTP service call the same library functions, so the checks live there and
raise :class:`~skylease.model.errors.UserError` naming the option (``field="--seed"``).

Sizes. One request (a command, an HTTP call) may hold at most :data:`MEMORY_BUDGET` bytes of
working data: 2 GiB, a quarter of an 8 GB laptop, what a machine shared by a few users or requests
can give each of them. Each reader or generator knows roughly how many bytes one item
costs it (an ETC value, a task, an availability interval: measured peaks, written beside each
check) and refuses, before any work, a request whose items would not fit, with the limit in the
message: ``at most 8,388,608 tasks x machines (about 2 GB of memory)``. Items are counted from
the request (a header, an option), never by trying.
"""

from __future__ import annotations

import math
import numbers
from pathlib import Path

from skylease.model.errors import UserError

__all__ = ["MAX_CREDITS", "MAX_RETRIES", "MEMORY_BUDGET", "TIME_BUDGET_S", "check_number", "check_seed",
           "check_size", "count", "max_items"]

#: The most retries of a task a run takes (command line or job file): past this, a task that keeps
#: failing is a bug in the task, not bad luck.
MAX_RETRIES = 100
#: Bytes of working data one request may hold (see the module docstring).
MEMORY_BUDGET = 2 * 2**30
#: Seconds one request may run where its time, not its memory, is what grows without bound (an
#: A2HA study's orderings): longer ones are refused up front with this limit in the message.
TIME_BUDGET_S = 3600.0
#: The most credits one amount or one balance of the QoS ledger may hold (skylease.runtime.qos.ledger);
#: here so that a client refuses a larger amount before it asks, without loading the ledger.
MAX_CREDITS = 1e9


def check_seed(seed: object, field: str = "--seed") -> int:
    """A seed: a whole number >= 0 (numpy's generators take no negative seed)."""
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise UserError(f"must be a whole number >= 0, got {seed!r}", field=field)
    return int(seed)


def check_number(value: object, field: str, *, minimum: float | None = None,
                 above: float | None = None, maximum: float | None = None,
                 below: float | None = None, allow_inf: bool = False, hint: str = "") -> float:
    """A real number (finite unless ``allow_inf``) in the given bounds, or a UserError on ``field``.

    ``minimum``/``maximum`` are inclusive, ``above``/``below`` exclusive. ``hint`` is added to the
    message (e.g. what to give instead).
    """
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and not math.isnan(value)
    if ok and not allow_inf and math.isinf(value):
        ok = False
    if ok:
        v = float(value)  # type: ignore[arg-type]
        ok = ((minimum is None or v >= minimum) and (above is None or v > above)
              and (maximum is None or v <= maximum) and (below is None or v < below))
    if ok:
        return float(value)  # type: ignore[arg-type]
    bounds = [f">= {minimum:g}" if minimum is not None else "", f"> {above:g}" if above is not None else "",
              f"<= {maximum:g}" if maximum is not None else "", f"< {below:g}" if below is not None else ""]
    want = " and ".join(b for b in bounds if b)
    kind = "a number" if allow_inf else "a finite number"
    msg = f"must be {kind}{' ' + want if want else ''}, got {value!r}"
    raise UserError(msg + (f" ({hint})" if hint else ""), field=field)


def count(x: float) -> str:
    """A count for a message: ``1,234,567``, or ``1.23e+20`` when the digits would run on."""
    return f"{x:,.0f}" if x < 1e15 else f"{x:.3g}"


def max_items(bytes_each: float, budget: int = MEMORY_BUDGET) -> int:
    """How many items of ``bytes_each`` bytes fit the memory budget."""
    return int(budget // bytes_each)


def check_size(n: float, what: str, bytes_each: float, *, field: str | None = None,
               file: str | Path | None = None, line: int | None = None, asked: str | None = None,
               budget: int = MEMORY_BUDGET) -> None:
    """Refuse ``n`` items of ``bytes_each`` bytes when they would not fit the memory budget.

    ``what`` names the items (``"tasks x machines"``); ``asked`` describes the request when the
    count alone would not say it (``"1,000,000 x 1,000,000"``). The message reads
    ``too many tasks x machines: 1,000,000 x 1,000,000; at most 8,388,608 tasks x machines (about 2
    GB of memory)``.
    """
    limit = max_items(bytes_each, budget)
    if n <= limit:
        return
    shown = asked if asked is not None else count(n)
    raise UserError(f"too many {what}: {shown}; at most {limit:,} {what} "
                    f"(about {budget / 2**30:.0f} GB of memory)", field=field, file=file, line=line)
