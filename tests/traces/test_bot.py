"""Bags of tasks: the A2HA paper workloads, the WfCommons and CSV readers, the --workload resolver."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import numpy as np
import pytest

from skylease.model.errors import UserError
from skylease.model.task import Bag
from skylease.traces.bot import (
    A2HA_WORKLOADS,
    a2ha_workload,
    is_fixed,
    load_workload,
    read_runtimes_csv,
    read_wfcommons,
)


def optimum(bag: Bag, usable_unit: float = 3300.0) -> int:
    return math.ceil(bag.total_work / usable_unit - 1e-9)


# --------------------------------------------------------------------------------------------------
# Paper workloads


def test_names_and_kinds() -> None:
    assert set(A2HA_WORKLOADS) == {"image", "synthetic", "outsystems", "long"}
    assert [is_fixed(n) for n in ("image", "synthetic", "outsystems", "long")] == [True, False, True, False]
    with pytest.raises(KeyError):
        is_fixed("nope")
    with pytest.raises(UserError, match="workload: unknown paper workload 'nope'"):
        a2ha_workload("nope")


def test_image_trace() -> None:
    w = a2ha_workload("image").works
    assert len(w) == 256
    assert w.mean() == pytest.approx(220.0, abs=1e-9)
    assert w.std() == pytest.approx(125.0, abs=1e-9)
    assert w.min() >= 5.0
    assert w.max() == pytest.approx(691.1, abs=0.1)  # the reference prototype's (decision PROTO, seed 7)
    assert optimum(a2ha_workload("image")) == 18


def test_outsystems_trace() -> None:
    bag = a2ha_workload("outsystems")
    w = bag.works
    assert len(w) == 1480
    assert w.mean() == pytest.approx(63.5, abs=1e-9)
    assert np.median(w) == pytest.approx(30.8, abs=0.1)  # §7: median 30.8 s
    assert (w > 900).sum() == 3  # §7: 3 tasks over 15 min ("few")
    assert w.max() / 60 == pytest.approx(42.2, abs=0.1)
    assert np.all(w > 0)
    assert optimum(bag) == 29


@pytest.mark.parametrize("name", ["image", "outsystems"])
def test_fixed_traces_ignore_the_seed(name: str) -> None:
    a, b, c = a2ha_workload(name, seed=1), a2ha_workload(name, seed=2), a2ha_workload(name)
    assert np.array_equal(a.works, b.works) and np.array_equal(a.works, c.works)
    assert a.name == name
    assert [t.id for t in a] == list(range(len(a)))


@pytest.mark.parametrize(("name", "mean", "sd"), [("synthetic", 150.0, 30.0), ("long", 5400.0, 1200.0)])
def test_redrawn_workloads(name: str, mean: float, sd: float) -> None:
    a, b = a2ha_workload(name, seed=1), a2ha_workload(name, seed=2)
    assert len(a) == len(b) == 256
    assert not np.array_equal(a.works, b.works)
    assert np.array_equal(a.works, a2ha_workload(name, seed=1).works)
    gen = np.random.default_rng(5)
    a2 = a2ha_workload(name, seed=gen)
    assert not np.array_equal(a2.works, a2ha_workload(name, seed=gen).works)  # a Generator advances
    pooled = np.concatenate([a2ha_workload(name, seed=s).works for s in range(20)])
    assert pooled.mean() == pytest.approx(mean, rel=0.01)
    assert pooled.std() == pytest.approx(sd, rel=0.05)
    assert pooled.min() > 0


def test_synthetic_nominal_optimum() -> None:
    assert math.ceil(256 * 150.0 / 3300.0) == 12
    means = [a2ha_workload("synthetic", seed=s).works.mean() for s in range(20)]
    assert all(optimum(a2ha_workload("synthetic", seed=s)) in (11, 12, 13) for s in range(5))
    assert np.mean(means) == pytest.approx(150.0, abs=1.0)


# --------------------------------------------------------------------------------------------------
# WfCommons


@pytest.fixture(scope="module")
def bot_dir(shared_data: Path) -> Path:
    path = shared_data / "bot"
    if not path.is_dir():
        pytest.skip(f"{path} is missing")
    return path


@pytest.mark.parametrize(
    ("stem", "n", "total"),
    [
        ("blast-chameleon-small-001", 40, 43),
        ("blast-chameleon-medium-001", 300, 303),
        ("blast-chameleon-large-001", 100, 103),
        ("bwa-chameleon-large-001", 1000, 1004),
    ],
)
def test_wfcommons_instances(bot_dir: Path, stem: str, n: int, total: int) -> None:
    path = bot_dir / f"{stem}.json.gz"
    bag = read_wfcommons(path)
    assert bag.name == stem
    assert len(bag) == n  # the README's counts: the parallel stage
    assert [t.id for t in bag] == list(range(n))
    assert np.all(bag.works > 0) and np.all(np.isfinite(bag.works))
    assert len(read_wfcommons(path, category="*")) == total
    assert np.array_equal(load_workload(f"wfcommons:{path}").works, bag.works)
    assert np.array_equal(load_workload(str(path)).works, bag.works)


def test_wfcommons_values(bot_dir: Path) -> None:
    small = read_wfcommons(bot_dir / "blast-chameleon-small-001.json.gz")
    assert small.works.mean() == pytest.approx(9.57, abs=0.01)
    bwa = read_wfcommons(bot_dir / "bwa-chameleon-large-001.json.gz")
    assert bwa.works[0] == pytest.approx(3.12395)  # bwa_ID000003, the first bwa task in the file
    index = read_wfcommons(bot_dir / "bwa-chameleon-large-001.json.gz", category="bwa_index")
    assert index.works.tolist() == [pytest.approx(1130.461781)]


def _write_json(path: Path, doc: object) -> Path:
    path.write_text(json.dumps(doc))
    return path


def test_wfcommons_schema_generations(tmp_path: Path) -> None:
    old = {"workflow": {"jobs": [
        {"name": "split_ID01", "type": "compute", "runtime": 1.0},
        {"name": "work_ID02", "type": "compute", "runtime": 5.0},
        {"name": "work_ID03", "type": "compute", "runtime": 7},
        {"name": "merge_ID04", "type": "compute", "runtime": 2.0},
    ]}}
    assert read_wfcommons(_write_json(tmp_path / "old.json", old)).works.tolist() == [5.0, 7.0]
    new = {"schemaVersion": "1.5", "workflow": {
        "specification": {"tasks": [{"name": f"t_{i:08d}", "id": f"{i:08d}"} for i in range(3)]},
        "execution": {"tasks": [{"id": f"{i:08d}", "runtimeInSeconds": 2.0 + i} for i in range(3)]},
    }}
    bag = read_wfcommons(_write_json(tmp_path / "new.json", new))
    assert bag.works.tolist() == [2.0, 3.0, 4.0] and bag.name == "new"
    gz = tmp_path / "z.json.gz"
    gz.write_bytes(gzip.compress(json.dumps(new).encode()))
    assert read_wfcommons(gz).name == "z"


def test_wfcommons_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"nothere\.json: file not found"):
        read_wfcommons(tmp_path / "nothere.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"workflow":\n  [}')
    with pytest.raises(UserError, match=r"bad.json:2: not valid JSON"):
        read_wfcommons(bad)
    with pytest.raises(UserError, match="no 'workflow' object"):
        read_wfcommons(_write_json(tmp_path / "x.json", {"a": 1}))
    doc = {"workflow": {"tasks": [{"name": "a_ID1", "runtimeInSeconds": 1}, {"name": "a_ID2"}]}}
    with pytest.raises(UserError, match=r"workflow.tasks\[1\].runtime: runtime missing"):
        read_wfcommons(_write_json(tmp_path / "m.json", doc))
    doc = {"workflow": {"tasks": [{"name": "a_ID1", "runtimeInSeconds": -1}]}}
    with pytest.raises(UserError, match="must be a finite number >= 0"):
        read_wfcommons(_write_json(tmp_path / "n.json", doc))
    with pytest.raises(UserError, match="category: no task of category 'zz'"):
        read_wfcommons(_write_json(tmp_path / "c.json", doc), category="zz")


# --------------------------------------------------------------------------------------------------
# CSV


def _csv(tmp_path: Path, text: str, name: str = "runs.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "column", "expected"),
    [
        ("12\n3.5\n0\n", None, [12.0, 3.5, 0.0]),  # one column, no header
        ("seconds\n12\n\n# comment\n3.5\n", None, [12.0, 3.5]),  # header, blank and comment lines
        ("task,host,runtime_s\na,h1,10\nb,h2,20\n", None, [10.0, 20.0]),  # a known name
        ("id,Duration,mem\n1,10,5\n2,20,6\n", None, [10.0, 20.0]),  # case-insensitive known name
        ("name,t\na,4\nb,5\n", None, [4.0, 5.0]),  # the only numeric column
        ("a,b\n1,2\n3,4\n", "b", [2.0, 4.0]),  # a named column
        ("1;2\n3;4\n", 1, [2.0, 4.0]),  # semicolons, a column index
        ("x\ty\n1\t2e1\n", "Y", [20.0]),  # tabs, exponent
    ],
)
def test_csv_happy(tmp_path: Path, text: str, column: str | int | None, expected: list[float]) -> None:
    bag = read_runtimes_csv(_csv(tmp_path, text), column=column)
    assert bag.works.tolist() == expected
    assert bag.name == "runs"


def test_csv_gz_and_dispatch(tmp_path: Path) -> None:
    gz = tmp_path / "r.csv.gz"
    gz.write_bytes(gzip.compress(b"runtime\n1\n2\n"))
    assert read_runtimes_csv(gz).works.tolist() == [1.0, 2.0]
    assert load_workload(str(_csv(tmp_path, "7\n8\n"))).works.tolist() == [7.0, 8.0]


@pytest.mark.parametrize(
    ("text", "column", "pattern"),
    [
        ("", None, r"runs.csv:1: empty file"),
        ("\n\n", None, r"runs.csv:1: empty file"),
        ("runtime\n", None, r"runs.csv:1: no runtimes after the header"),
        ("runtime\n1\nabc\n", None, r"runs.csv:3: runtime: value 'abc' is not a number"),
        ("runtime\n1\n-2\n", None, r"runs.csv:3: runtime: value '-2' is negative"),
        ("1\nnan\n", None, r"runs.csv:2: column 1: value 'nan' is not a finite number"),
        ("1\n2\n-inf\n", None, r"runs.csv:3: column 1: value '-inf' is not a finite number"),
        ("1\n1e999\n", None, r"runs.csv:2: column 1: value '1e999' is not a finite number"),
        ("1\n1_000\n", None, r"runs.csv:2: column 1: value '1_000' is not a number"),
        ("a,runtime\nx,\n", None, r"runs.csv:2: runtime: missing value"),
        ("a,runtime\nx,1\ny\n", None, r"runs.csv:3: runtime: row has 1 field"),
        ("a,b\n1,2\n", "zz", r"runs.csv:1: zz: unknown column 'zz'; columns: 'a', 'b'"),
        ("a,b\n1,2\n", 5, r"runs.csv:1: 5: column index 5 out of range"),
        ("a,b\n1,2\n", None, r"runs.csv:1: several numeric columns"),
        ("a,b\nx,y\n", None, r"runs.csv:1: no numeric column"),
    ],
)
def test_csv_errors(tmp_path: Path, text: str, column: str | int | None, pattern: str) -> None:
    with pytest.raises(UserError, match=pattern) as info:
        read_runtimes_csv(_csv(tmp_path, text), column=column)
    assert "\n" not in str(info.value)


def test_csv_missing_file(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"gone\.csv: file not found"):
        read_runtimes_csv(tmp_path / "gone.csv")
    with pytest.raises(UserError, match=r"gone\.csv: file not found"):
        load_workload(str(tmp_path / "gone.csv"))


# --------------------------------------------------------------------------------------------------
# load_workload


def test_load_paper_workloads() -> None:
    assert load_workload("image") is a2ha_workload("image")
    assert np.array_equal(load_workload("synthetic", seed=3).works, a2ha_workload("synthetic", seed=3).works)
    assert len(load_workload("outsystems")) == 1480
    assert len(load_workload(" long ", seed=1)) == 256


@pytest.mark.parametrize("kind", ["normal", "gamma", "lognormal"])
def test_load_synthetic_specs(kind: str) -> None:
    spec = f"{kind}:2000:100:20"
    a, b = load_workload(spec, seed=1), load_workload(spec, seed=2)
    assert len(a) == 2000 and a.name == spec
    assert not np.array_equal(a.works, b.works)
    assert np.array_equal(a.works, load_workload(spec, seed=1).works)
    assert a.works.mean() == pytest.approx(100.0, rel=0.03)
    assert a.works.std() == pytest.approx(20.0, rel=0.1)


def test_load_constant() -> None:
    assert load_workload("constant:3:60").works.tolist() == [60.0, 60.0, 60.0]


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ("nope", "unknown workload"),
        ("data.txt", "unknown workload"),
        ("normal:10:5", "expected normal:N:MEAN:SD"),
        ("constant:3", "expected constant:N:SECONDS"),
        ("gamma:x:1:1", "N 'x' is not a whole number"),
        ("gamma:0:1:1", "N must be >= 1"),
        ("gamma:3:a:1", "must be numbers"),
        ("lognormal:3:1:nan", "must be finite"),
        ("gamma:3:1:0", "SD > 0"),
        ("normal:3:-1:1", "MEAN must be > 0"),
        ("constant:3:-1", "SECONDS must be >= 0"),
    ],
)
def test_load_bad_specs(spec: str, why: str) -> None:
    with pytest.raises(UserError) as info:
        load_workload(spec)
    err = info.value
    assert err.field == "workload"
    assert why in err.message and repr(spec) in err.message
    assert "normal:N:MEAN:SD" in err.message and "wfcommons:PATH" in err.message


def test_normal_sd_zero_is_constant() -> None:
    assert load_workload("normal:4:10:0", seed=1).works.tolist() == [10.0] * 4
