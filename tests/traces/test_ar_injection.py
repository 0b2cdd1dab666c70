"""The AR injection generator (decision H16 in docs/decisions/haizea.md) against the counts of the authors'
original files."""

from __future__ import annotations

import math

import numpy as np
import pytest

from skylease.traces.ar_injection import (
    SIZES,
    generate_ars,
    injection_name,
    nominal_interval,
    write_plain_lwf,
)
from skylease.traces.lwf import read_plain_lwf

# (rho %, delta h, size): (AR count, nominal interval) counted on the authors' original files (decision H16)
APPENDIX_B = {
    (5, 1, "small"): (422, 6250), (10, 3, "medium"): (94, 27375), (20, 3, "medium"): (192, 13687),
    (30, 3, "medium"): (291, 9125), (30, 1, "small"): (2499, 1041), (15, 3, "large"): (85, 30249),
    (25, 2, "large"): (216, 12100), (20, 4, "small"): (414, 6250),
}
GAP_SD = 7201 / math.sqrt(12)  # the interval is uniform on i ± 3600


@pytest.mark.parametrize(("cell", "expected"), list(APPENDIX_B.items()))
def test_counts_match_appendix_b_within_sampling_noise_and_rho_within_1_percent(cell, expected):
    rho, delta, size = cell
    count, interval = expected
    assert abs(nominal_interval(rho / 100, delta, size) - interval) <= (1 if cell == (15, 3, "large") else 0)
    lo, hi = SIZES[size]
    for seed in range(3):
        df = generate_ars(rho / 100, delta, size, seed)
        # the count's spread: the walk's end point moves by sqrt(N) gap deviations
        assert abs(len(df) - count) <= max(3, 4 * math.sqrt(count) * GAP_SD / interval)
        share = float((df["duration"] * df["nodes"]).sum()) / (144 * 2_592_000)
        assert abs(share / (rho / 100) - 1) < 0.011  # guaranteeAvg, on numreqs' nominal share
        d = df["duration"].to_numpy()
        assert d.min() >= delta * 3600 - 1800 and d.max() <= delta * 3600 + 1800
        assert df["nodes"].between(lo, hi).all()
        assert (df["real_duration"] == df["duration"]).all() and (np.diff(df["submit"]) >= 0).all()
        late = df[df["submit"] > 0]  # only first-day requests have less than 24 h notice
        assert (late["start"] - late["submit"] == 86_400).all()


def test_same_seed_same_file_and_the_reader_reads_it_back(tmp_path):
    a = generate_ars(0.2, 3, "medium", 7)
    assert a.equals(generate_ars(0.2, 3, "medium", 7)) and not a.equals(generate_ars(0.2, 3, "medium", 8))
    p = tmp_path / injection_name(20, 3, "medium")
    write_plain_lwf(a, p)
    assert p.name == "work_20-dur_3h-size_2medium.lwf"
    back = read_plain_lwf(p)
    assert back.equals(a)


def test_the_generated_files_look_like_the_original(shared_data):
    orig = read_plain_lwf(shared_data / "lwf" / "injected" / "30days" / injection_name(20, 3, "medium"))
    ours = generate_ars(0.2, 3, "medium", 0)
    for col in ("duration", "nodes"):
        assert abs(ours[col].mean() / orig[col].mean() - 1) < 0.05
    assert abs(np.median(np.diff(ours["start"])) / np.median(np.diff(orig["start"])) - 1) < 0.15


def test_bad_parameters_are_refused():
    with pytest.raises(ValueError, match="fraction"):
        generate_ars(20, 3, "medium", 0)
    with pytest.raises(ValueError, match="size"):
        injection_name(20, 3, "huge")
