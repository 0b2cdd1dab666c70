"""`skylease plan` from the command line."""

import json
import re

import pytest

from skylease.cli import main


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def test_hybrid_deadline_json_matches_the_paper(capsys):
    code, out, err = run(capsys, "plan", "hybrid", "--deadline", "70m", "--json")
    assert code == 0, err
    res = json.loads(out)
    assert {"status", "cost", "makespan_s", "instances", "solve_ms"} <= set(res)
    assert res["status"] == "optimal" and res["cost"] == 2.16 and res["makespan_s"] == 4200


def test_mapreduce_modes(capsys):
    code, out, _ = run(capsys, "plan", "mapreduce", "--deadline", "3h")
    assert code == 0 and "$7.77" in out
    code, out, _ = run(capsys, "plan", "mapreduce", "--budget", 6.5, "--json")
    res = json.loads(out)
    assert code == 0 and res["cost"] <= 6.5
    code, out, _ = run(capsys, "plan", "hybrid", "--weight", 1.0, "--json")
    assert code == 0 and json.loads(out)["cost"] == 0.0  # cost only: the free local cores


def test_infeasible_request_is_one_line_naming_the_fastest(capsys):
    code, _, err = run(capsys, "plan", "mapreduce", "--deadline", "2.5h")
    assert code == 2 and err.count("\n") == 1
    assert "no plan finishes by 2.5 h; the fastest possible is 2.75 h at $8.40" in err


def test_pareto_plot_and_config(capsys, tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('types = ["local", "azure-small"]\n[grid]\nlo = 60\nhi = 120\nstep = 10\n')
    png = tmp_path / "front.png"
    code, out, err = run(capsys, "plan", "pareto", "hybrid", "--config", cfg, "--plot", png, "--json")
    assert code == 0, err
    front = json.loads(out)
    costs = [p["cost"] for p in sorted(front, key=lambda p: p["makespan_s"])]
    assert costs == sorted(costs, reverse=True) and len(costs) >= 4
    assert png.stat().st_size > 5000


def test_bad_config_and_options(capsys, tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text("[job]\nn_taks = 5\n")
    for argv, where in [
        (["plan", "hybrid", "--config", cfg], "n_taks"),
        (["plan", "hybrid", "--config", tmp_path / "none.toml"], "none.toml: file not found"),
        (["plan", "hybrid", "--deadline", "60m", "--budget", 2], "at most one"),
        (["plan", "hybrid", "--weight", 2], "weight"),
    ]:
        code, _, err = run(capsys, *argv)
        assert code == 2 and where in err and err.count("\n") == 1, (argv, err)


def test_multi_model_plan(capsys, tmp_path):
    code, out, err = run(capsys, "plan", "multi", "--deadline", "105m", "--json")
    assert code == 0, err
    res = json.loads(out)
    assert res["status"] == "optimal" and res["makespan_s"] <= 105 * 60 and res["cost"] > 0
    cfg = tmp_path / "m.toml"
    cfg.write_text('scenario = "C"\n')
    code, _, err = run(capsys, "plan", "multi", "--config", cfg)
    assert code == 2 and "scenario" in err and err.count("\n") == 1


def test_json_stdout_is_clean_in_a_fresh_process():
    """The solver's C library must not write to stdout (highspy 1.16 prints a banner on its first
    instance in a process); only a real process shows it, capsys does not see C-level writes."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "skylease", "plan", "hybrid", "--deadline", "70m", "--json"],
                         capture_output=True, text=True, check=True).stdout
    assert json.loads(out)["status"] == "optimal"


def one_line(capsys, *argv) -> str:
    code, _, err = run(capsys, *argv)
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    return re.sub(r"^skylease plan \w+: error: ", "", err).strip()


def test_a_binary_config_is_one_line(capsys, tmp_path):
    cfg = tmp_path / "garbage.bin"
    cfg.write_bytes(b"catalog = 1\n\x89PNG\r\n\x1a\n\x00\xff\xfe" + bytes(range(256)))
    assert one_line(capsys, "plan", "hybrid", "--config", cfg) == f"{cfg}:2: not a text file (invalid UTF-8)"


@pytest.mark.parametrize(("model", "text", "where"), [
    ("hybrid", '[job]\nn_tasks = "many"\n', "2: job.n_tasks: must be a whole number >= 1, got 'many'"),
    ("hybrid", "[job]\nn_tasks = -5\n", "2: job.n_tasks: must be a whole number >= 1, got -5"),
    ("hybrid", "job.task_minutes = 0\n", "1: job.task_minutes: must be a finite number > 0, got 0"),
    ("hybrid", "[job]\nn_taks = 5\n", "2: job.n_taks: unknown key 'n_taks'; did you mean 'n_tasks'?"),
    ("hybrid", "[options]\ninterval_mn = 5\n",
     "2: options.interval_mn: unknown key 'interval_mn'; did you mean 'interval_min'?"),
    ("hybrid", '[options]\ncapacity = "fuild"\n',
     "2: options.capacity: must be one of 'whole', 'fluid', got 'fuild'"),
    ("hybrid", 'scenario = "A"\n', "1: scenario: unknown key 'scenario'; the keys are catalog, types, grid, "
     "job, options"),
    ("hybrid", 'types = ["local", "nope"]\n', "1: types: unknown instance type(s) nope; known: local, "
     "azure-small, azure-medium, azure-large, azure-xlarge"),
    ("hybrid", "[grid]\nlo = 60\nhi = 30\n", "3: grid.hi: must be >= lo (60), got 30"),
    ("hybrid", "[grid]\nstep = 0.001\n", "2: grid.step: the grid would hold 230,001 deadlines; at most "
     "1,000 (a larger step)"),
    ("mapreduce", "[job]\nmap_work = 0\nreduce_work = 0\n", "2: job.map_work: the job has no work"),
    ("mapreduce", '[options]\nlimit_scope = "all"\n',
     "2: options.limit_scope: must be one of 'total', 'per_type', 'none', got 'all'"),
    ("multi", "[[models]]\nname = 'a'\nn_tasks = 'many'\ntask_minutes = 1\ndata_at = ['local']\n",
     "3: models[0].n_tasks: must be a whole number >= 1, got 'many'"),
    ("multi", "[[models]]\nname = 'a'\nn_tasks = 5\ntask_minutes = 1\ndata_at = []\n",
     "5: models[0].data_at: must be a non-empty list of strings, got []"),
    ("multi", "scenario = 'A'\n[[models]]\nname = 'a'\nn_tasks = 5\ntask_minutes = 1\ndata_at = ['x']\n",
     "1: scenario: give either scenario (the paper's) or [[models]], not both"),
])
def test_config_mistakes_name_file_line_and_key(capsys, tmp_path, model, text, where):
    cfg = tmp_path / "c.toml"
    cfg.write_text(text)
    assert one_line(capsys, "plan", model, "--config", cfg) == f"{cfg}:{where}"


def test_config_options_and_models_are_applied(capsys, tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('scenario = "b"\n[options]\nmethod = "ilp"\n')
    code, out, err = run(capsys, "plan", "multi", "--deadline", "105m", "--json", "--config", cfg)
    assert code == 0, err
    assert json.loads(out)["status"] == "optimal"
    cfg.write_text("[[models]]\nname = 'a'\nn_tasks = 30\ntask_minutes = 1\ndata_at = ['local']\n")
    code, out, err = run(capsys, "plan", "multi", "--deadline", "60m", "--json", "--config", cfg)
    assert code == 0, err
    assert json.loads(out)["cost"] == 0.0  # 30 one-minute tasks on the free local cores
