"""`skylease map`, `skylease etc` and `skylease reproduce thesis-mapping` from the command line."""

import json

import pandas as pd

from skylease.cli import main


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def test_map_json_on_a_braun_instance(capsys, shared_data):
    code, out, err = run(capsys, "map", shared_data / "braun" / "u_i_hihi.0", "--heuristic",
                         "min-min", "--json")
    assert code == 0, err
    res = json.loads(out)
    assert set(res) >= {"heuristic", "makespan", "flowtime", "energy", "assignment"}
    assert res["makespan"] == 3513919.28125  # the published Min-min value (test_braun_minmin.py)
    assert len(res["assignment"]) == 512 and res["energy"] is None


def test_generate_then_map_with_lambda_and_voltages(capsys, tmp_path):
    f = tmp_path / "i.etc"
    code, _, err = run(capsys, "etc", "generate", f, "--tasks", 64, "--machines", 8, "--seed", 3)
    assert code == 0, err
    code, out, _ = run(capsys, "map", f, "--heuristic", "low3", "--lambda", 0.8, "--voltages", 1,
                       "--json")
    res = json.loads(out)
    assert code == 0 and res["lambda"] == 0.8 and res["energy"] > 0
    code, out, _ = run(capsys, "etc", "stats", f, "--json")
    assert code == 0 and json.loads(out)["n_tasks"] == 64
    code, out, _ = run(capsys, "map", f, "--heuristic", "best")
    assert code == 0 and "makespan" in out


def test_mapping_user_mistakes_exit_2_one_line(capsys, tmp_path):
    bad = tmp_path / "bad.etc"
    bad.write_text("2 2 0\n1 2\n3 -4\n")
    cases = [
        (["map", bad], f"{bad}:3"),
        (["map", tmp_path / "missing.etc"], "missing.etc"),
        (["map", bad, "--heuristic", "nope"], "unknown heuristic"),
        (["map", bad, "--heuristic", "min-min", "--lambda", "0.5"], "--lambda applies"),
        (["etc", "generate", tmp_path / "x.etc", "--consistency", "zz"], "consistency"),
        (["reproduce", "thesis-mapping", "--out", tmp_path / "r", "--sizes", "9x9"], "sizes"),
    ]
    for argv, where in cases:
        code, _, err = run(capsys, *argv)
        assert code == 2, argv
        assert where in err and err.count("\n") == 1, (argv, err)
    assert not (tmp_path / "x.etc").exists()  # nothing half-written


def test_reproduction_pipeline_end_to_end_small(tmp_path):
    """The quick version of `skylease reproduce thesis-mapping`, cut down to run in seconds."""
    from skylease.experiments.thesis.mapping_report import reproduce_thesis_mapping

    rep = reproduce_thesis_mapping(tmp_path, instances=2, energy_instances=1, sizes=("512x16",),
                                   scenarios=["0.6x0.1", "1.1x0.6"], mode="inline",
                                   progress=False)
    ex = rep.example.set_index("heuristic")
    assert (ex["makespan"] == ex["thesis_makespan"]).all()  # section 3.4: exact
    assert rep.example.attrs["optimum"] == 2130
    assert (ex["deviation_pct"].round() == ex["thesis_deviation_pct"]).all()
    assert len(rep.gains) == 2 * 3 and rep.gains["instances"].eq(2).all()
    assert rep.failed == 0
    report = (tmp_path / "report.md").read_text()
    assert "Table 3.8" in report and "instances" in report
    for png in ("profiles.png", "table_3_8_gains.png", "energy_o-hihi.png"):
        assert (tmp_path / png).stat().st_size > 10_000
    energy = pd.read_csv(tmp_path / "energy_curves.csv")
    assert energy["n_energy"].max() == 1.0 and (energy["n_energy"] > 0).all()
