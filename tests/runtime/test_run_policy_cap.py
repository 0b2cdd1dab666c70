"""``--policy fixed:N`` over the pool's most workers is said, not silently capped (issue 36, item 2)."""

from __future__ import annotations

import json
import os

import pytest

from skylease.cli import main

pytestmark = pytest.mark.timeout(120)


def test_fixed_over_the_core_count_warns_once_and_records_it(tmp_path, capsys):
    (tmp_path / "jobs.txt").write_text("true\ntrue\n")
    n = (os.cpu_count() or 2) + 1
    argv = ["run", str(tmp_path / "jobs.txt"), "--out", str(tmp_path / "o"), "--policy", f"fixed:{n}"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    cores = os.cpu_count() or 2
    line = (f"skylease run: warning: --policy fixed:{n} asks for {n} workers, but pool 'local' has at most "
            f"{cores} (this machine's cores; --max-workers {n} raises it): the run uses {cores}")
    assert [ln for ln in err.splitlines() if "warning" in ln] == [line]
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert s["warnings"] == [line.removeprefix("skylease run: warning: ")]
    assert s["peak_hosts"] <= cores


def test_fixed_within_the_pool_says_nothing(tmp_path, capsys):
    (tmp_path / "jobs.txt").write_text("true\n")
    assert main(["run", str(tmp_path / "jobs.txt"), "--out", str(tmp_path / "o"), "--policy", "fixed:3",
                 "--max-workers", "3"]) == 0
    assert "warning" not in capsys.readouterr().err
    assert "warnings" not in json.loads((tmp_path / "o" / "summary.json").read_text())
