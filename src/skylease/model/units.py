"""Times and money as skylease reads and prints them: durations with their unit, amounts with their
currency, lease-clock times (docs/cli.md). Pure functions, at the bottom of the layers, so that the
CLI, the reports and the client's tables print one number the same way."""

from __future__ import annotations

import math
import re
from typing import Any

#: The currency of every price, budget and cost the CLI prints (prices are given in it).
CURRENCY = "$"

_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*([smhd])")
DURATION_FORMS = "seconds, or 90s, 15m, 2h, 1h30m, 1d, or [D:]HH:MM:SS"


# -- reading ------------------------------------------------------------------------------------
def parse_duration(text: str | float) -> float:
    """A duration as the CLI takes it: a bare number of seconds (``90``, ``1.5``), a number with its
    unit (``90s``, ``15m``, ``2h``, ``1d``, and sums such as ``1h30m``) or ``[D:]HH:MM:SS``. Raises
    ValueError with the reason (NaN, infinity and negative durations are refused)."""
    if isinstance(text, int | float):
        seconds = float(text)
    else:
        s = text.strip().lower()
        if not s:
            raise ValueError("empty (give " + DURATION_FORMS + ")")
        if ":" in s:
            seconds = _clock_seconds(s, text)
        elif _DURATION.fullmatch(s) or re.fullmatch(rf"(?:{_DURATION.pattern}\s*)+", s):
            seconds = sum(float(n) * _UNIT_S[u] for n, u in _DURATION.findall(s))
        else:
            try:
                seconds = float(s)
            except ValueError:
                raise ValueError(f"{text!r} is not a duration (give {DURATION_FORMS})") from None
    if not math.isfinite(seconds):
        raise ValueError(f"{text!r} is not a finite duration")
    if seconds < 0:
        raise ValueError(f"a duration is >= 0, got {text!r}")
    return seconds


def _clock_seconds(s: str, text: str) -> float:
    parts = s.split(":")
    try:
        nums = [float(p) for p in parts]
    except ValueError:
        nums = []
    if len(parts) not in (3, 4) or len(nums) != len(parts) or not all(0 <= n < 1e12 for n in nums):
        raise ValueError(f"{text!r} is not a duration [D:]HH:MM:SS")
    if nums[-1] >= 60 or nums[-2] >= 60:  # "1:99:99" is a typo, not 9,639 s
        raise ValueError(f"{text!r} is not a duration [D:]HH:MM:SS: minutes and seconds must be below 60")
    return nums[-1] + 60 * nums[-2] + 3600 * nums[-3] + (86400 * nums[0] if len(nums) == 4 else 0)


# -- printing ----------------------------------------------------------------------------------
def money(value: float | None, *, none: str = "-") -> str:
    """An amount of money: its currency sign, two decimals, thousands separated ($1,234.50); ``none``
    when there is none (a run without a budget: "no budget")."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return none
    sign = "-" if value < 0 else ""
    return f"{sign}{CURRENCY}{abs(value):,.2f}"


def duration(seconds: float | None) -> str:
    """A duration as a person reads it: 12.3 ms, 2.50 s, 42 s, 3m 05s, 2h 07m, 3d 04h; "-" when
    unknown."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    if seconds < 0:
        return "-" + duration(-seconds)
    if seconds == 0:
        return "0 s"
    if seconds < 1:
        return f"{seconds * 1000:.3g} ms"
    if seconds < 10:
        return f"{seconds:.2f} s"
    if seconds < 60:
        return f"{seconds:.0f} s"
    m, s = divmod(round(seconds), 60)
    if m < 60:
        return f"{m}m {s:02d}s"
    h, m = divmod(m, 60)
    if h < 24:
        return f"{h}h {m:02d}m"
    d, h = divmod(h, 24)
    return f"{d}d {h:02d}h"


def clock(t: float | None) -> str:
    """A time on a lease clock (seconds since its epoch) as ``HH:MM:SS``, ``Nd HH:MM:SS`` from one
    day on: how `leases simulate`, `leases list` and `leases show` print lease times."""
    if t is None or not isinstance(t, int | float) or not math.isfinite(t):
        return "-"
    d, rest = divmod(int(t), 86400)
    hms = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{d}d {hms}" if d else hms


def number(value: Any, spec: str = ",.6g") -> str:
    """A count or a measure without a unit of time or money; "-" when missing."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if isinstance(value, float):
        return format(value, spec)
    return str(value)
