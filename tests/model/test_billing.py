import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from skylease.model import Billing, Budget

durations = st.floats(min_value=0, max_value=1e7, allow_nan=False)
units = st.floats(min_value=1e-3, max_value=1e5, allow_nan=False)


def test_hourly_billing_rounds_up_to_started_units():
    b = Billing(unit=3600, price=0.5)
    assert b.units(0) == 1  # a host rented at all pays its first unit
    assert b.units(3600) == 1
    assert b.units(3600.5) == 2
    assert b.cost(7200) == 1.0
    assert b.cost(7201) == 1.5


def test_float_noise_does_not_buy_a_unit():
    # 60 tasks of 60.1 s summed in floating point land a hair past 3606, not past a whole unit
    assert Billing(unit=60.1).units(sum([60.1] * 60)) == 60
    assert Billing(unit=3600).units(3600 + 1e-10) == 1


def test_per_second_billing_with_minimum():
    b = Billing(unit=1, price=0.01, min_units=60)
    assert b.units(10) == 60
    assert b.units(61.2) == 62


def test_charged_until_and_affordable_units():
    b = Billing(unit=3600, price=2.0)
    assert b.charged_until(100, 100) == 3700
    assert b.charged_until(100, 3800) == 7300
    assert b.affordable_units(7.99) == 3


@pytest.mark.parametrize("bad", [dict(unit=0), dict(unit=-1), dict(price=-1), dict(min_units=-1)])
def test_invalid_billing_rejected(bad):
    with pytest.raises(ValueError):
        Billing(**bad)


@given(unit=units, a=durations, b=durations)
def test_cost_is_monotone_in_duration(unit, a, b):
    bill = Billing(unit=unit, price=1.25)
    lo, hi = sorted((a, b))
    assert bill.cost(lo) <= bill.cost(hi)


@given(unit=units, d=durations)
def test_units_cover_duration_and_are_minimal(unit, d):
    n = Billing(unit=unit).units(d)
    assert n >= 1
    assert n * unit >= d - 1e-9  # the paid units cover the lifetime
    assert n == 1 or (n - 1) * unit < d  # and one fewer would not


@given(unit=units, ds=st.lists(durations, min_size=1, max_size=50))
def test_vectorised_units_match_scalar(unit, ds):
    b = Billing(unit=unit)
    assert b.units_many(np.array(ds)).tolist() == [b.units(d) for d in ds]


def test_budget():
    bud = Budget(10.0)
    assert bud.allows(9.0, 1.0)
    assert not bud.allows(9.0, 1.01)
    assert math.isclose(bud.remaining(2.5), 7.5)
    with pytest.raises(ValueError):
        Budget(-1)
