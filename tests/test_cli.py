import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from skylease import __version__
from skylease.cli import main

ROOT = Path(__file__).resolve().parents[1]


def run(capsys, *argv):
    code = main(list(argv))
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def test_version_and_help(capsys):
    code, out, _ = run(capsys, "--version")
    assert code == 0 and out.strip() == f"skylease {__version__}"
    code, out, _ = run(capsys, "--help")
    assert code == 0 and "demo" in out and "data" in out


@pytest.mark.parametrize(
    "argv, where",
    [
        (["nope"], "skylease: error: nope: no such command"),
        (["demo", "--seeds", "0"], "--seeds"),
        (["demo", "--bogus"], "--bogus"),
        (["data", "fetch"], "skylease data fetch: error: NAME: missing"),
        (["data", "path", "no-such-set"], "unknown data set 'no-such-set'"),
    ],
)
def test_user_mistakes_are_one_line_exit_2(capsys, argv, where):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert where in err
    assert err.count("\n") == 1 and err.startswith("skylease")
    assert "Traceback" not in err + out


@pytest.mark.integration  # the whole inline demo
def test_demo_inline_prints_table_and_keeps_results(capsys, tmp_path):
    code, out, err = run(capsys, "demo", "--inline", "--seeds", "2", "--out", str(tmp_path))
    assert code == 0, err
    assert "FixedPool(n)" in out and "utilisation" in out
    assert "VM placement" in out and "sorting" in out
    table = pd.read_csv(tmp_path / "results.csv")
    assert len(table) == 10 and (table["unfinished"] == 0).all()
    # bigger pools are never slower on the same bags
    means = table.groupby("pool_size")["makespan_s"].mean()
    assert means.is_monotonic_decreasing
    code, out, _ = run(capsys, "demo", "--inline", "--seeds", "2", "--out", str(tmp_path))
    assert code == 0 and "10 reused" in out


def test_console_script_runs_as_a_process():
    r = subprocess.run([sys.executable, "-m", "skylease.cli", "demo", "--bogus"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.count("\n") == 1


@pytest.mark.parametrize("command", [
    ["demo"], ["run", "examples/sleep-jobs.txt"], ["reproduce", "ilp"],
    ["reproduce", "thesis-mapping", "--quick"], ["reproduce", "a2ha", "--quick"],
    ["reproduce", "haizea", "--quick"], ["reproduce", "spequlos", "--quick"],
    ["reproduce", "thesis-placement", "--quick"],
])
def test_an_out_folder_that_is_a_file_is_one_line_and_exit_2(command, tmp_path, capsys, monkeypatch,
                                                             shared_data):
    monkeypatch.setenv("SKYLEASE_DATA", str(shared_data))
    monkeypatch.chdir(ROOT)
    taken = tmp_path / "a-file"
    taken.write_text("not a folder\n")
    assert main([*command, "--out", str(taken)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot create the output folder" in err and str(taken) in err
    assert taken.read_text() == "not a folder\n"
