"""Tests of the spot price reader and the bid ladder."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from skylease.model.errors import UserError
from skylease.traces.avail import load_trace, trace_stats
from skylease.traces.spot import (
    DEFAULT_SPOT_FILE,
    PAPER_MIN_PRICE,
    bid_ladder,
    calibrated_prices,
    read_spot_prices,
)


def _rec(ts, price, itype="c1.xlarge", zone="us-east-1a"):
    return {"Timestamp": ts, "SpotPrice": str(price), "InstanceType": itype, "AvailabilityZone": zone,
            "ProductDescription": "Linux/UNIX"}


@pytest.fixture
def _write(write_file):
    def write(tmp_path, records, name="p.json.gz"):
        return write_file(name, json.dumps({"SpotPriceHistory": records}, indent=2))
    return write


def test_read_sorted_with_duplicates_keeping_max(tmp_path, _write):
    recs = [_rec("2016-01-01T00:02:00.000Z", 0.3), _rec("2016-01-01T00:01:00.000Z", 0.2),
            _rec("2016-01-01T00:01:00.000Z", 0.25), _rec("2016-01-01T00:00:00.000Z", 0.1)]
    t, p = read_spot_prices(_write(tmp_path, recs))
    assert list(t - t[0]) == [0, 60, 120] and list(p) == [0.1, 0.25, 0.3]


def test_filters_and_mixed_files(tmp_path, _write):
    recs = [_rec("2016-01-01T00:00:00Z", 0.1), _rec("2016-01-01T00:00:00Z", 0.5, itype="m1.small")]
    path = _write(tmp_path, recs, "p.json")
    with pytest.raises(UserError, match="InstanceType: the file mixes 2 values"):
        read_spot_prices(path)
    assert list(read_spot_prices(path, instance_type="m1.small")[1]) == [0.5]
    with pytest.raises(UserError, match="no price record with InstanceType=x"):
        read_spot_prices(path, instance_type="x")


@pytest.mark.parametrize(
    ("records", "where"),
    [([_rec("2016-01-01T00:00:00Z", "abc")], "SpotPrice: record 0: 'abc' is not a number"),
     ([_rec("2016-01-01T00:00:00Z", 0.1), {"SpotPrice": "0.1"}], "Timestamp: record 1 lacks this field"),
     ([_rec("yesterday", 0.1)], "Timestamp: record 0: bad timestamp"),
     ([_rec("2016-01-01T00:00:00Z", -1)], "SpotPrice: record 0: price must be positive")],
)
def test_bad_records(tmp_path, records, where, _write):
    with pytest.raises(UserError) as exc:
        read_spot_prices(_write(tmp_path, records))
    assert "\n" not in str(exc.value) and where in str(exc.value)


def test_bad_json_names_line(tmp_path):
    path = tmp_path / "p.json"
    path.write_text('{"SpotPriceHistory": [\n  {"Timestamp": }\n]}')
    with pytest.raises(UserError, match=r"p.json:2: not valid JSON"):
        read_spot_prices(path)


def test_ladder_by_hand():
    tr = bid_ladder(np.array([0.0, 10, 20, 30]), np.array([1.0, 2.5, 0.9, 1.0]), 2.0)
    # n = floor(2/0.9) + 1 = 3; node 1 up when p <= 2, node 2 when p <= 1, node 3 never.
    assert tr.n_nodes == 3 and (tr.start, tr.end) == (0, 30)
    assert list(tr.nodes[0].starts) == [0, 20] and list(tr.nodes[0].ends) == [10, 30]
    assert list(tr.nodes[1].starts) == [0, 20] and list(tr.nodes[1].ends) == [10, 30]
    tr = bid_ladder(np.array([0.0, 10, 20, 30]), np.array([1.0, 2.5, 0.9, 1.1]), 2.0, end=40)
    assert list(tr.nodes[1].ends) == [10, 30] and list(tr.nodes[0].ends) == [10, 40]
    assert len(tr.nodes[2]) == 0


@settings(max_examples=60, deadline=None)
@given(
    prices=st.lists(st.floats(0.01, 5.0), min_size=1, max_size=40),
    budget=st.floats(0.05, 50.0),
)
@example(prices=[1.1], budget=16.5)  # S/p rounds down to 14.999...: one bid too few before the fix
def test_ladder_nested_and_count(prices, budget):
    p = np.array(prices)
    t = np.arange(len(p), dtype=float) * 7.0
    tr = bid_ladder(t, p, budget, end=t[-1] + 7.0)
    assert budget / tr.n_nodes < p.min()  # n is large enough
    for a in tr.nodes:
        assert (a.ends > a.starts).all() and (a.starts[1:] > a.ends[:-1]).all()  # sorted, disjoint
    probes = t + 3.5
    for k, x in enumerate(probes):
        up = [a.is_available(x) for a in tr.nodes]
        # node i+1 available implies node i available (nested sets) ...
        assert all(up[i] or not up[i + 1] for i in range(len(up) - 1))
        # ... and N(t) = min(n, floor(S / p(t))) with node i up iff p*i <= S.
        assert sum(up) == sum(1 for i in range(1, tr.n_nodes + 1) if p[k] * i <= budget)


def test_real_files(shared_data):
    folder = shared_data / "spot"
    t, p = read_spot_prices(folder / DEFAULT_SPOT_FILE)
    assert len(t) > 5000 and (np.diff(t) > 0).all() and p.min() == pytest.approx(0.0642)
    tr = bid_ladder(t, p, 10.0)
    assert tr.n_nodes == 156 and tr.meta["min_price"] == pytest.approx(0.0642)
    st = trace_stats(tr)
    assert st["max"] == 155 and 59 < st["length_days"] < 61
    for f in folder.glob("*.json.gz"):
        assert len(read_spot_prices(f)[0]) > 100


def test_named_spot_traces_are_calibrated_to_the_papers_price_level(shared_data):
    """Decision S18 in docs/decisions/spequlos.md: spot10/spot100 scale the 2016 series so that the ladders'
    maxima are Table 2's (87 and 877 nodes, which hold together only for a lowest price in ($0.113895,
    $0.114025]); the mean node count then lands within 15 % of Table 2's. The raw file keeps its own level."""
    assert 100 / 878 < PAPER_MIN_PRICE <= 100 / 877 and 10 / 88 < PAPER_MIN_PRICE <= 10 / 87
    for name, most, mean in (("spot10", 87, 82.186), ("spot100", 877, 823.95)):
        tr = load_trace(name, data_dir=shared_data)
        st = trace_stats(tr)
        assert st["max"] == most and tr.n_nodes == most + 1
        assert abs(st["mean"] / mean - 1) <= 0.15
        assert tr.meta["price_factor"] == pytest.approx(PAPER_MIN_PRICE / 0.0642)


def test_calibrated_prices_keep_the_shape():
    p = np.array([0.2, 0.1, 0.4])
    scaled, k = calibrated_prices(p, 0.05)
    assert k == pytest.approx(0.5) and scaled == pytest.approx([0.1, 0.05, 0.2])
    with pytest.raises(ValueError):
        calibrated_prices(np.array([0.1, 0.0]))
