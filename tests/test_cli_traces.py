"""`skylease traces stats` from the command line."""

import gzip
import json

from skylease.cli import main


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def test_stats_of_a_generated_trace_beside_the_paper(capsys):
    code, out, err = run(capsys, "traces", "stats", "nd", "--nodes", "50", "--days", "5")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["trace", "days", "nodes"]
    assert lines[2].startswith("nd ") and lines[3].startswith("nd (paper)")
    assert "3840" in lines[3]  # the paper's median availability (Table 3)


def test_stats_json_of_a_tr_directory(tmp_path, capsys):
    d = tmp_path / "tr"
    d.mkdir()
    (d / "a.tr").write_text("0 100 1\n100 300 0\n300 1000 1\n")
    (d / "b.tr").write_text("0 1000 1\n")
    code, out, err = run(capsys, "traces", "stats", d, "--json")
    assert code == 0, err
    (row,) = json.loads(out)
    assert row["n_nodes"] == 2 and row["max"] == 2 and row["min"] == 1
    assert row["unav_q50"] == 200 and row["av_n"] == 3


def test_malformed_trace_files_get_one_line_naming_file_and_line(tmp_path, capsys):
    d = tmp_path / "tr"
    d.mkdir()
    (d / "a.tr").write_text("0 100 1\n100 x 0\n")
    code, out, err = run(capsys, "traces", "stats", d)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "a.tr" in err and ":2" in err
    fta = tmp_path / "bad.tab.gz"
    with gzip.open(fta, "wt") as fh:
        fh.write("not an fta header\n1 2 3\n")
    code, out, err = run(capsys, "traces", "stats", fta)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "bad.tab.gz" in err
    code, _, err = run(capsys, "traces", "stats", tmp_path / "missing.swf")
    assert code == 2 and "missing.swf" in err
