import json

import pytest

from skylease.cli import main

KEYS = ("hosts", "wall_s", "speedup", "charged_hours", "cost", "interrupted_tasks", "wasted_s",
        "continued_hosts")


def run(capsys, *argv):
    code = main(list(argv))
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def test_simulate_a2ha_json_has_every_key_as_mean_and_std(capsys):
    code, out, _ = run(capsys, "simulate", "a2ha", "--workload", "synthetic", "--orderings", "20", "--json")
    assert code == 0
    res = json.loads(out)
    for k in KEYS:
        assert set(res[k]) == {"mean", "std"}
    assert res["optimal_hosts"] == 12 and res["orderings"] == 20
    assert 11 <= res["hosts"]["mean"] <= 15


def test_simulate_a2ha_budget_is_a_hard_cap(capsys):
    code, out, _ = run(capsys, "simulate", "a2ha", "--workload", "normal:100:150:30", "--preset",
                       "aggressive", "--budget", "5", "--price", "0.5", "--orderings", "10", "--json")
    assert code == 0
    res = json.loads(out)
    assert res["cost"]["mean"] + res["cost"]["std"] <= 5 + 1e-9


def test_simulate_a2ha_table_compares_baselines(capsys, tmp_path):
    csv = tmp_path / "runs.csv"
    csv.write_text("runtime\n" + "\n".join(str(60 + i % 7 * 30) for i in range(120)) + "\n")
    code, out, _ = run(capsys, "simulate", "a2ha", "--workload", str(csv), "--orderings", "5", "--compare")
    assert code == 0
    assert "A2HA" in out and "fixed:" in out and "dask" in out and "charged (h)" in out


@pytest.mark.parametrize("argv, where", [
    (["--workload", "nope"], "workload"),
    (["--workload", "synthetic", "--preset", "aggressive", "--creation-ratio", "0.2"], "preset"),
    (["--workload", "synthetic", "--preset", "wild"], "preset"),
    (["--workload", "synthetic", "--creation-ratio", "1.5"], "creation-ratio"),
    (["--workload", "synthetic", "--orderings", "0"], "orderings"),
    (["--workload", "synthetic", "--boot-time", "4000"], "boot"),
    (["--workload", "synthetic", "--budget", "-1"], "budget"),
    (["--workload", "missing.csv"], "missing.csv"),
])
def test_simulate_a2ha_mistakes_are_one_line_exit_2(capsys, argv, where):
    code, out, err = run(capsys, "simulate", "a2ha", *argv)
    assert code == 2
    assert where in err and err.count("\n") == 1 and "Traceback" not in err + out
