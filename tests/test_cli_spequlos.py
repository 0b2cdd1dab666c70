"""`skylease simulate spequlos` from the command line (the nd-like trace is generated: no data needed)."""

import json

import pytest

from skylease.cli import main
from skylease.experiments.spequlos import JSON_KEYS

BASE = ["simulate", "spequlos", "--middleware", "xwhep", "--trace", "nd", "--bot", "small"]


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def test_json_has_the_issue_keys_and_pairs_the_baseline(capsys):
    code, out, err = run(capsys, *BASE, "--strategy", "9C-C-R", "--seed", "3", "--json")
    assert code == 0, err
    res = json.loads(out)
    for k in JSON_KEYS:
        assert k in res and k in res["baseline"], k
    assert res["strategy"] == "9C-C-R" and res["n_tasks"] == 1000 and res["completed"] == 1000
    assert 0 < res["credits_used"] <= res["credits_ordered"]
    assert res["cws"] > 0 and 0 < res["cloud_work_share"] < 1
    # the same seed without QoS is the paired baseline, and QoS acts only in the tail
    code, out, err = run(capsys, *BASE, "--strategy", "none", "--seed", "3", "--json")
    none = json.loads(out)
    assert none["completion_s"] == res["baseline"]["completion_s"]
    assert none["ideal_s"] == res["ideal_s"]  # 90 % is reached before the cloud workers start
    assert res["completion_s"] < none["completion_s"] and res["tre"] == 1.0
    assert none["credits_used"] == 0 and none["cws"] == 0
    # the prediction at 50 % is made before QoS acts: the same with and without it
    assert none["predicted_s"] == res["predicted_s"] > 0


def test_human_output_compares_with_and_without_qos(capsys):
    code, out, err = run(capsys, *BASE, "--strategy", "9A-G-D", "--seed", "1")
    assert code == 0, err
    assert "without QoS" in out and "9A-G-D" in out and "Tail removal efficiency" in out


def test_credits_option_bounds_spending(capsys):
    code, out, err = run(capsys, *BASE, "--strategy", "9A-G-R", "--credits", "20", "--json")
    assert code == 0, err
    res = json.loads(out)
    assert res["credits_ordered"] == 20 and res["credits_used"] <= 20


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--middleware", "condor", "--trace", "nd", "--bot", "small"], "middleware"),
        (["--middleware", "boinc", "--trace", "nd", "--bot", "huge"], "BoT category"),
        (["--middleware", "boinc", "--trace", "nd", "--bot", "small", "--strategy", "9X-C-R"], "strategy"),
        (["--middleware", "boinc", "--trace", "nowhere", "--bot", "small"], "unknown trace"),
        (["--middleware", "boinc", "--trace", "nd", "--bot", "small", "--credits", "-1"], "credits"),
        (["--middleware", "boinc", "--trace", "nd", "--bot", "small", "--alpha", "0"], "alpha"),
        (["--middleware", "boinc", "--bot", "small"], "--trace"),
        (["--middleware", "boinc", "--trace", "nd", "--bot", "random", "--random-epsilon", "0"],
         "random-epsilon"),
        (["--middleware", "boinc", "--trace", "nd", "--bot", "random", "--random-arrivals", "gaps"],
         "--random-arrivals"),
        # a cap only belongs to the epsilon reading: with another it is refused, not ignored
        (["--middleware", "boinc", "--trace", "nd", "--bot", "random", "--random-arrivals", "iid",
          "--random-epsilon", "60"], "--random-epsilon"),
        (["--middleware", "boinc", "--trace", "nd", "--bot", "small", "--cloud-buffer", "0"], "cloud-buffer"),
        (["--middleware", "boinc", "--trace", "nd", "--bot", "small", "--cloud-buffer", "100000"],
         "--cloud-buffer"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, args, needle):
    code, out, err = run(capsys, "simulate", "spequlos", *args)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and needle in err, err


def test_malformed_trace_file_names_file_and_line(tmp_path, capsys):
    d = tmp_path / "tr"
    d.mkdir()
    (d / "a.tr").write_text("0 100 1\n100 x 0\n")
    code, out, err = run(capsys, "simulate", "spequlos", "--middleware", "boinc", "--trace", d,
                         "--bot", "small")
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "a.tr:2: end:" in err, err


def _random(capsys, *extra):
    code, out, err = run(capsys, "simulate", "spequlos", "--middleware", "boinc", "--trace", "nd",
                         "--bot", "random", "--strategy", "none", "--seed", "2", "--json", *extra)
    assert code == 0, err
    res = json.loads(out)
    del res["wall_s"], res["events"]  # the run's own cost, not its result
    return res


def test_random_arrivals_default_to_quantiles_and_the_reading_is_in_the_json(capsys):
    default = _random(capsys)
    assert default["readings"]["random_arrivals"] == "quantile"
    assert default["readings"]["cloud_buffer"] == 3 and default["readings"]["random_epsilon_s"] is None
    assert _random(capsys, "--random-arrivals", "quantile") == default
    iid = _random(capsys, "--random-arrivals", "iid")
    assert iid["readings"]["random_arrivals"] == "iid" and iid["completion_s"] != default["completion_s"]
    assert iid["n_tasks"] == default["n_tasks"]  # the same draw of sizes: only the arrivals differ
    # the older spelling: --random-epsilon alone is the epsilon reading with that cap
    old = _random(capsys, "--random-epsilon", "60")
    new = _random(capsys, "--random-arrivals", "epsilon")
    assert old == new and new["readings"]["random_epsilon_s"] == 60


def test_cloud_buffer_reaches_the_boinc_cloud_workers(capsys):
    args = ["simulate", "spequlos", "--middleware", "boinc", "--trace", "nd", "--bot", "small",
            "--seed", "1", "--json"]
    code, out, err = run(capsys, *args)
    assert code == 0, err
    three = json.loads(out)
    code, out, err = run(capsys, *args, "--cloud-buffer", "1")
    assert code == 0, err
    one = json.loads(out)
    assert one["readings"]["cloud_buffer"] == 1 and three["readings"]["cloud_buffer"] == 3
    assert one["baseline"] == three["baseline"]  # no cloud worker without QoS
    assert (one["completion_s"], one["credits_used"]) != (three["completion_s"], three["credits_used"])
