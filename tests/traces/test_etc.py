"""ETC matrices: the Braun reader/writer on the real instances, solutions, and the generators."""

from __future__ import annotations

import gzip
import re
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from skylease.model.errors import UserError
from skylease.traces.etc import (
    CONSISTENCIES,
    THESIS_SCENARIOS,
    THESIS_SIZES,
    braun_class,
    cvb,
    etc_stats,
    make_consistent,
    range_based,
    read_etc,
    read_solution,
    solution_makespan_from_name,
    thesis_instance,
    write_etc,
)

BRAUN = [f"u_{c}_{h}.0" for c in "cis" for h in ("hihi", "hilo", "lohi", "lolo")]


@pytest.fixture(scope="module")
def braun_dir(shared_data: Path) -> Path:
    path = shared_data / "braun"
    if not path.is_dir():
        pytest.skip(f"{path} is missing")
    return path


def makespan(etc: np.ndarray, sol: np.ndarray) -> float:
    """max over machines of the summed ETC of the tasks mapped to it."""
    loads = np.bincount(sol, weights=etc[np.arange(etc.shape[0]), sol], minlength=etc.shape[1])
    return float(loads.max())


# --------------------------------------------------------------------------------------------------
# The real Braun instances


@pytest.mark.parametrize("name", BRAUN)
def test_read_braun_instance_and_round_trip(braun_dir: Path, tmp_path: Path, name: str) -> None:
    etc = read_etc(braun_dir / name)
    assert etc.shape == (512, 16)
    assert etc.dtype == np.float64
    assert np.all(etc > 0) and np.all(np.isfinite(etc))
    # Task-major: row 1 is values 16..31 of the file (lines 18..33).
    lines = (braun_dir / name).read_text().split("\n")
    assert etc[1, 0] == float(lines[17]) and etc[1, 15] == float(lines[32])
    out = tmp_path / name
    write_etc(out, etc)
    back = read_etc(out)
    assert np.array_equal(back, etc)


@pytest.mark.parametrize("name", BRAUN)
def test_braun_consistency_class_is_recognised(braun_dir: Path, name: str) -> None:
    expected = {"c": "fc", "s": "pc-even", "i": "oc"}[name[2]]
    assert etc_stats(read_etc(braun_dir / name))["consistency"] == expected


def test_every_best_known_solution_has_the_makespan_in_its_name(braun_dir: Path) -> None:
    """Every ``.sol`` file (``_MS_``, ``_CPR_`` and the one unlabelled) evaluates to its name's makespan.

    chgogos/hcsp's README names the two methods: MS = "Mathematical Solver" and CPR = "Column
    Pricing with Restarts". Both numbers are makespans (checked here for all 24 files); CPR is not
    a flowtime or another criterion. ``u_s_hilo.0_95553,3.sol`` has no method tag.
    """
    sols = sorted(braun_dir.glob("*.sol"))
    assert len(sols) == 24
    etcs = {name: read_etc(braun_dir / name) for name in BRAUN}
    for path in sols:
        instance = re.match(r"(u_[cis]_(?:hi|lo){2}\.0)_", path.name)
        assert instance is not None, path.name
        etc = etcs[instance[1]]
        sol = read_solution(path, n_tasks=512, n_machines=16)
        # The name gives the makespan to one decimal, so the tolerance is absolute, one unit of
        # that decimal (0.1), not a relative 1e-6: for u_i_lolo.0_MS_2533,4 the exact makespan is
        # 2533.376, 9.5e-6 away in relative terms. Half a unit (0.05) is not enough either:
        # u_s_hihi.0_MS_4080153,5 evaluates to 4080153.449219, which its solver evidently held as
        # a float32 (spacing 0.25 near 4e6, nearest float32 4080153.5) before printing it.
        assert makespan(etc, sol) == pytest.approx(solution_makespan_from_name(path), abs=0.1)


def test_solution_makespan_from_name() -> None:
    assert solution_makespan_from_name("u_c_hihi.0_MS_7381783,4.sol") == 7381783.4
    assert solution_makespan_from_name(Path("/x/u_c_lolo.0_CPR_5138,0.sol")) == 5138.0
    assert solution_makespan_from_name("u_s_hilo.0_95553,3.sol") == 95553.3
    assert solution_makespan_from_name("a_12.sol") == 12.0
    for bad in ("u_c_hihi.0.sol", "u_c_hihi.0_MS_.sol", "u_c_hihi.0_MS_12,3,4.sol", "12,5.sol"):
        with pytest.raises(UserError, match="no makespan") as err:
            solution_makespan_from_name(bad)
        assert bad in str(err.value)


# --------------------------------------------------------------------------------------------------
# Malformed files: one line naming file and line


def write(tmp_path: Path, text: str | bytes, name: str = "u.0") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def expect_error(path: Path, line: int | None, pattern: str, reader=read_etc, **kwargs) -> str:
    with pytest.raises(UserError, match=pattern) as err:
        reader(path, **kwargs)
    text = str(err.value)
    assert "\n" not in text
    where = f"{path}:{line}: " if line is not None else f"{path}: "
    assert text.startswith(where), text
    assert err.value.file == str(path) and err.value.line == line
    return text


VALUES_2X2 = "1.5\n2\n3e2\n4\n"


@pytest.mark.parametrize(
    ("text", "line", "pattern"),
    [
        ("", 1, "empty file"),
        ("\n\n", 1, "empty file"),
        ("\n2 2 0\n" + VALUES_2X2, 1, "line 1 is blank"),
        ("2 2\n" + VALUES_2X2, 1, r"header must be 'tasks machines 0', found '2 2'"),
        ("2 2 0 7\n" + VALUES_2X2, 1, "header must be"),
        ("2 x 0\n" + VALUES_2X2, 1, "header must be"),
        ("2.0 2 0\n" + VALUES_2X2, 1, "header must be"),
        ("0 2 0\n", 1, "tasks >= 1 and machines >= 1"),
        ("2 -2 0\n", 1, "tasks >= 1 and machines >= 1"),
        ("2 2 1\n" + VALUES_2X2, 1, "third field must be 0, found 1"),
        ("2 2 0\n1\n2\n3\n", 4, "expected 4 values after the header, found 3"),
        ("2 2 0\n", 1, "expected 4 values after the header, found 0"),
        ("2 2 0\n1\n2\n3\n4\n5\n", 6, "expected 4 values after the header, found 5"),
        ("2 2 0\n1 2\n3 4 5 6\n", 3, "expected 4 values after the header, found 6"),
        ("2 2 0\n1\n-2\n3\n4\n", 3, r"value '-2' must be > 0"),
        ("2 2 0\n1\n2\n0\n4\n", 4, r"value '0' must be > 0"),
        ("2 2 0\n1\n2\n0.0e5\n4\n", 4, "must be > 0"),
        ("2 2 0\n1\nnan\n3\n4\n", 3, r"value 'nan' is not a finite number"),
        ("2 2 0\n1\n2\nNaN\n4\n", 4, "not a finite number"),
        ("2 2 0\n1\n2\n3\ninf\n", 5, "not a finite number"),
        ("2 2 0\n1\n2\n3\n1e999\n", 5, "not a finite number"),
        ("2 2 0\n1\nabc\n3\n4\n", 3, r"value 'abc' is not a number"),
        ("2 2 0\n1\n1,5\n3\n4\n", 3, "is not a number"),
        ("2 2 0\n1\n1_000\n3\n4\n", 3, "is not a number"),
        ("2 2 0\n1\n0x10\n3\n4\n", 3, "is not a number"),
        ("2 2 0\n1 2\n3 x\n", 3, r"value 'x' is not a number"),
    ],
)
def test_malformed_etc_files(tmp_path: Path, text: str, line: int, pattern: str) -> None:
    expect_error(write(tmp_path, text), line, pattern)


def test_error_line_deep_in_a_braun_sized_file(tmp_path: Path) -> None:
    values = ["1.0"] * 8192
    values[35] = "abc"  # the 36th value sits on line 37
    path = write(tmp_path, "512 16 0\n" + "\n".join(values) + "\n")
    assert expect_error(path, 37, "not a number") == f"{path}:37: value 'abc' is not a number"
    path = write(tmp_path, "512 16 0\n" + "\n".join(["1.0"] * 8193) + "\n")
    expect_error(path, 8194, "expected 8192 values after the header, found 8193")


def test_missing_file_directory_and_binary_file(tmp_path: Path) -> None:
    expect_error(tmp_path / "nope.0", None, "file not found")
    expect_error(tmp_path, None, "directory")
    expect_error(write(tmp_path, b"1 1 0\n\xff\xfe\n"), 2, "not a text file")
    expect_error(write(tmp_path, b"not gzip at all", name="u.0.gz"), None, "cannot read file")


def test_any_layout_crlf_and_bom_accepted(tmp_path: Path) -> None:
    path = write(tmp_path, "2 3 0\r\n1 2 3\r\n  4\t5\r\n\r\n6")
    assert np.array_equal(read_etc(path), [[1, 2, 3], [4, 5, 6]])
    path = write(tmp_path, "\ufeff1 2 0\n+7 .5e1\n", name="bom.0")
    assert np.array_equal(read_etc(path), [[7, 5]])


def test_gzip_round_trip(tmp_path: Path) -> None:
    etc = np.array([[1.25, 2.0], [1e-300, 1.7976931348623157e308]])
    path = tmp_path / "u.0.gz"
    write_etc(path, etc)
    assert gzip.decompress(path.read_bytes()).startswith(b"2 2 0\n")
    assert np.array_equal(read_etc(path), etc)


def test_write_is_atomic_and_refuses_bad_matrices(tmp_path: Path) -> None:
    path = tmp_path / "u.0"
    write_etc(path, np.ones((2, 2)))
    write_etc(path, np.full((1, 3), 0.1))  # overwrite in place
    assert path.read_text() == "1 3 0\n0.1\n0.1\n0.1\n"
    for bad in (np.ones(3), np.ones((0, 2)), np.array([[1.0, 0.0]]), np.array([[1.0, np.nan]])):
        with pytest.raises(ValueError):
            write_etc(tmp_path / "bad.0", bad)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["u.0"]  # no temp files left behind
    with pytest.raises(UserError, match="cannot write file") as err:
        write_etc(tmp_path / "missing" / "u.0", np.ones((1, 1)))
    assert "\n" not in str(err.value) and str(tmp_path / "missing" / "u.0") in str(err.value)


@settings(max_examples=60, deadline=None)
@given(
    hnp.arrays(
        np.float64,
        hnp.array_shapes(min_dims=2, max_dims=2, min_side=1, max_side=7),
        elements=st.floats(min_value=5e-324, max_value=1.7976931348623157e308, allow_subnormal=True),
    )
)
def test_write_read_round_trip_is_exact(etc: np.ndarray) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "x.etc"
        write_etc(path, etc)
        back = read_etc(path)
    assert back.shape == etc.shape
    assert np.array_equal(back, etc)


# --------------------------------------------------------------------------------------------------
# Solutions


def test_read_solution_layouts_and_errors(tmp_path: Path) -> None:
    assert read_solution(write(tmp_path, "0 1 2 1", "a.sol")).tolist() == [0, 1, 2, 1]
    assert read_solution(write(tmp_path, "3\n0\n\n1\n", "b.sol"), 3, 4).dtype == np.int64
    expect_error(write(tmp_path, "0\n1\nx\n", "c.sol"), 3, "'x' is not a whole number", read_solution)
    expect_error(write(tmp_path, "0\n1.0\n", "d.sol"), 2, "is not a whole number", read_solution)
    expect_error(write(tmp_path, "0\n-1\n", "e.sol"), 2, r"machine index -1 is out of range", read_solution)
    path = write(tmp_path, "0 1\n2 16\n", "f.sol")
    expect_error(path, 2, r"machine index 16 is out of range \(0..15\)", read_solution, n_machines=16)
    expect_error(
        write(tmp_path, "0\n1\n", "g.sol"), 2, "expected 3 machine indices, found 2", read_solution, n_tasks=3
    )
    path = write(tmp_path, "0\n1\n0\n1\n", "h.sol")
    expect_error(path, 3, "expected 2 machine indices, found 4", read_solution, n_tasks=2)
    expect_error(write(tmp_path, "\n", "i.sol"), 1, "empty solution", read_solution)
    expect_error(tmp_path / "missing.sol", None, "file not found", read_solution)


# --------------------------------------------------------------------------------------------------
# CVB


@pytest.mark.parametrize(("v_task", "v_mach"), [(0.1, 0.1), (0.6, 0.1), (0.6, 0.3), (0.6, 0.6), (1.1, 0.6)])
def test_cvb_task_variant_matches_its_parameters(v_task: float, v_mach: float) -> None:
    etc = cvb(2048, 64, v_task, v_mach, mu_task=1000.0, seed=7, variant="task")
    s = etc_stats(etc)
    assert etc.shape == (2048, 64) and s["min"] > 0
    assert s["mean"] == pytest.approx(1000.0, rel=0.05)
    assert s["row_cv_mean"] == pytest.approx(v_mach, rel=0.10)
    assert s["task_cv"] == pytest.approx(v_task, rel=0.10)
    expected_col = np.sqrt((1 + v_task**2) * (1 + v_mach**2) - 1)
    assert s["col_cv_mean"] == pytest.approx(expected_col, rel=0.10)
    assert s["consistency"] == "oc"


@pytest.mark.parametrize(("v_task", "v_mach"), [(0.1, 0.6), (0.1, 0.1), (0.3, 0.6)])
def test_cvb_machine_variant_is_the_mirror_image(v_task: float, v_mach: float) -> None:
    etc = cvb(64, 2048, v_task, v_mach, mu_task=100.0, seed=7, variant="machine")
    s = etc_stats(etc)
    assert s["mean"] == pytest.approx(100.0, rel=0.05)
    assert s["col_cv_mean"] == pytest.approx(v_task, rel=0.10)
    assert s["mach_cv"] == pytest.approx(v_mach, rel=0.10)
    expected_row = np.sqrt((1 + v_task**2) * (1 + v_mach**2) - 1)
    assert s["row_cv_mean"] == pytest.approx(expected_row, rel=0.10)


def test_cvb_seeds_are_reproducible() -> None:
    a = cvb(64, 8, 0.6, 0.3, seed=1)
    assert np.array_equal(a, cvb(64, 8, 0.6, 0.3, seed=1))
    assert not np.array_equal(a, cvb(64, 8, 0.6, 0.3, seed=2))
    rng = np.random.default_rng(1)
    first, second = cvb(64, 8, 0.6, 0.3, seed=rng), cvb(64, 8, 0.6, 0.3, seed=rng)
    assert np.array_equal(first, a)  # a Generator is used directly, and advanced
    assert not np.array_equal(first, second)


def test_cvb_auto_variant() -> None:
    assert np.array_equal(cvb(32, 8, 0.1, 0.6, seed=3), cvb(32, 8, 0.1, 0.6, seed=3, variant="machine"))
    assert np.array_equal(cvb(32, 8, 0.6, 0.6, seed=3), cvb(32, 8, 0.6, 0.6, seed=3, variant="task"))


def test_cvb_keeps_entries_positive_even_for_extreme_heterogeneity() -> None:
    assert cvb(200, 50, 8.0, 8.0, seed=0).min() > 0


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"n": 0}, "n"),
        ({"m": 2.5}, "m"),
        ({"v_task": 0.0}, "v_task"),
        ({"v_mach": float("nan")}, "v_mach"),
        ({"mu_task": -1.0}, "mu_task"),
        ({"variant": "rows"}, "variant"),
    ],
)
def test_cvb_rejects_bad_parameters(kwargs: dict, field: str) -> None:
    args = {"n": 4, "m": 4, "v_task": 0.5, "v_mach": 0.5, "mu_task": 10.0, "seed": 0} | kwargs
    with pytest.raises(UserError) as err:
        cvb(**args)
    assert err.value.field == field


# --------------------------------------------------------------------------------------------------
# Consistency


def rows_sorted(a: np.ndarray) -> bool:
    return bool(np.all(np.diff(a, axis=1) >= 0))


def test_consistency_transforms() -> None:
    etc = cvb(40, 9, 0.6, 0.6, seed=11)
    before = etc.copy()
    fc = make_consistent(etc, "fc")
    assert rows_sorted(fc) and np.array_equal(np.sort(etc, axis=1), fc)
    oc = make_consistent(etc, "oc")
    assert np.array_equal(oc, etc) and oc is not etc
    even = make_consistent(etc, "pc-even")
    assert rows_sorted(even[:, 0::2]) and np.array_equal(even[:, 1::2], etc[:, 1::2])
    assert not rows_sorted(even)
    half = make_consistent(etc, "pc-half")
    assert rows_sorted(half[:20]) and np.array_equal(half[20:], etc[20:])
    quarter = make_consistent(etc, "pc-quarter")
    assert rows_sorted(quarter[0::2, 0::2])
    assert np.array_equal(quarter[1::2], etc[1::2]) and np.array_equal(quarter[:, 1::2], etc[:, 1::2])
    for out in (fc, even, half, quarter):  # each row keeps its values
        assert np.array_equal(np.sort(out, axis=1), np.sort(etc, axis=1))
    assert np.array_equal(etc, before)  # input not mutated
    with pytest.raises(UserError) as err:
        make_consistent(etc, "pc")
    assert err.value.field == "consistency"


@pytest.mark.parametrize("kind", CONSISTENCIES)
def test_etc_stats_guesses_the_consistency(kind: str) -> None:
    assert etc_stats(make_consistent(cvb(512, 16, 0.6, 0.3, seed=5), kind))["consistency"] == kind


# --------------------------------------------------------------------------------------------------
# Range-based and Braun classes


def test_range_based_value_ranges() -> None:
    etc = range_based(300, 12, 3000, 10, seed=4)
    assert etc.shape == (300, 12)
    assert etc.min() >= 1 and etc.max() < 3000 * 10
    # etc[i, :] = tau_i * U(1, R_mach) with tau_i >= 1: a row spans less than a factor R_mach.
    assert np.all(etc.max(axis=1) / etc.min(axis=1) < 10)
    assert np.array_equal(etc, range_based(300, 12, 3000, 10, seed=4))
    with pytest.raises(UserError):
        range_based(3, 3, 0.5, 10)


@pytest.mark.parametrize("name", [n.removesuffix(".0") for n in BRAUN])
def test_braun_classes(name: str) -> None:
    etc = braun_class(name, seed=9)
    assert etc.shape == (512, 16)
    r_task = 3000 if name[4:6] == "hi" else 100
    r_mach = 1000 if name[6:8] == "hi" else 10
    assert etc.min() >= 1 and etc.max() < r_task * r_mach
    assert np.all(etc.max(axis=1) / etc.min(axis=1) < r_mach)
    assert etc_stats(etc)["consistency"] == {"c": "fc", "s": "pc-even", "i": "oc"}[name[2]]


def test_braun_class_names() -> None:
    assert rows_sorted(braun_class("u_c_hihi", n=20, m=5, seed=0))
    assert np.array_equal(
        braun_class("u_c_hihi.0", n=8, m=4, seed=1), braun_class("u_c_hihi", n=8, m=4, seed=1)
    )
    for bad in ("c_hihi", "u_x_hihi", "u_c_hih", "u_c_hihi_0"):
        with pytest.raises(UserError, match="not a Braun class name"):
            braun_class(bad)


# --------------------------------------------------------------------------------------------------
# Thesis instances


def test_thesis_grid() -> None:
    assert len(THESIS_SCENARIOS) == 16 and len(set(THESIS_SCENARIOS)) == 16
    assert THESIS_SCENARIOS[0] == (0.1, 0.1) and THESIS_SCENARIOS[-1] == (0.6, 0.5)
    assert all(vt >= vm for vt, vm in THESIS_SCENARIOS)
    assert THESIS_SIZES == ((512, 16), (1024, 32), (2048, 64))


def test_thesis_instance_seeding_is_the_documented_one() -> None:
    # 1024x32 -> size_id 1; (0.6, 0.6) -> scen_id 6; "oc" -> 2; rep 5.
    expected = cvb(1024, 32, 0.6, 0.6, 1000.0, np.random.default_rng([1, 6, 2, 5]))
    assert np.array_equal(thesis_instance(1024, 32, 0.6, 0.6, "oc", 5), expected)
    # (0.6, 0.2) -> scen_id 12; "pc" -> 1 with pc-half by default.
    base = cvb(512, 16, 0.6, 0.2, 1000.0, np.random.default_rng([0, 12, 1, 0]))
    assert np.array_equal(thesis_instance(512, 16, 0.6, 0.2, "pc", 0), make_consistent(base, "pc-half"))
    even = thesis_instance(512, 16, 0.6, 0.2, "pc", 0, pc="pc-even")
    assert np.array_equal(even, make_consistent(base, "pc-even"))
    assert np.array_equal(thesis_instance(512, 16, 0.6, 0.2, "pc-even", 0), even)


def test_thesis_instances_are_reproducible_and_distinct() -> None:
    a = thesis_instance(512, 16, 0.3, 0.1, "fc", 0)
    assert np.array_equal(a, thesis_instance(512, 16, 0.3, 0.1, "fc", 0))
    assert rows_sorted(a)
    others = [
        thesis_instance(512, 16, 0.3, 0.1, "fc", 1),
        thesis_instance(512, 16, 0.4, 0.1, "fc", 0),
        thesis_instance(512, 16, 0.3, 0.1, "oc", 0),
        thesis_instance(512, 16, 0.35, 0.1, "fc", 0),  # outside Table 3.5: its own stable id
        thesis_instance(512, 16, 0.3, 0.1, "fc", 0, mu_task=100.0) * 10,  # same draws, scaled
    ]
    for other in others[:-1]:
        assert not np.array_equal(np.sort(a, axis=None), np.sort(other, axis=None))
    assert np.allclose(others[-1], a)
    # A size outside the list, and the machine-based variant of the energy study's "lohi" classes.
    lohi = thesis_instance(100, 10, 0.1, 0.6, "oc", 0, mu_task=100.0)
    assert np.array_equal(lohi, thesis_instance(100, 10, 0.1, 0.6, "oc", 0, mu_task=100.0))


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ((512, 16, 0.1, 0.1, "ic", 0), "consistency"),
        ((512, 16, 0.1, 0.1, "pc", 0, 1000.0, "pc-all"), "pc"),
        ((512, 16, 0.1, 0.1, "fc", -1), "rep"),
        ((512, 0, 0.1, 0.1, "fc", 0), "m"),
    ],
)
def test_thesis_instance_rejects_bad_arguments(args: tuple, field: str) -> None:
    with pytest.raises(UserError) as err:
        thesis_instance(*args)
    assert err.value.field == field
