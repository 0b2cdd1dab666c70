"""`skylease leases simulate` from the command line: JSON, the human summary, the Gantt chart, and
every kind of bad input (a rejected lease with its reason, or one line on stderr and exit 2)."""

from __future__ import annotations

import json
import re

import pytest

from skylease.cli import main

RECORD_KEYS = {"id", "type", "submit", "requested_start", "requested_duration", "nodes", "image", "start",
               "end", "state", "reason", "events"}
SUMMARY_KEYS = {"all_best_effort_s", "mean_wait_s", "mean_bounded_slowdown", "ar_accepted", "ar_rejected",
                "best_effort_leases", "events", "wall_s", "workload", "format", "configuration", "nodes",
                "leases", "states", "transfers", "image_seed", "injected_ars"}

SITE = """<site><nodes><node-set numnodes="{n}"><res type="CPU" amount="100"/>
<res type="Memory" amount="1024"/></node-set></nodes></site>"""


def xml_workload(path, leases: list[str], n_nodes: int = 2):
    """An XML LWF file with a site of ``n_nodes`` nodes (1 CPU, 1024 MB) and these <lease-request>s."""
    path.write_text('<?xml version="1.0"?>\n<lease-workload name="t">\n' + SITE.format(n=n_nodes)
                    + "\n<lease-requests>\n" + "\n".join(leases) + "\n</lease-requests>\n</lease-workload>\n")
    return path


def request(lid: int, arrival: str, nodes: int = 1, memory: int = 1024, start: str | None = None,
            duration: str = "00:10:00", extra: str = "") -> str:
    """A <lease-request>: best-effort without ``start``, else an advance reservation; ``extra``:
    more attributes of the request (``user="..."``)."""
    when = "<start/>" if start is None else f'<start><exact time="{start}"/></start>'
    pre = "true" if start is None else "false"
    return (f'<lease-request arrival="{arrival}"{extra}><lease id="{lid}" preemptible="{pre}">'
            f'<nodes><node-set numnodes="{nodes}"><res amount="100" type="CPU"/>'
            f'<res amount="{memory}" type="Memory"/></node-set></nodes>{when}'
            f'<duration time="{duration}"/></lease></lease-request>')


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def simulate_json(capsys, *argv) -> dict:
    code, out, err = run(capsys, "leases", "simulate", *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def one_line_error(capsys, *argv) -> str:
    code, out, err = run(capsys, "leases", "simulate", *argv)
    assert code == 2, (out, err)
    assert err.count("\n") == 1 and err.startswith("skylease") and "Traceback" not in err + out
    assert out == ""
    return err


@pytest.fixture
def preemption(shared_data):
    return shared_data / "lwf" / "scenarios" / "preemption.lwf"


def test_preemption_under_novm_sr_suspends_before_the_ar_and_resumes_after_it(capsys, preemption):
    doc = simulate_json(capsys, "--workload", preemption, "--config", "novm-sr")
    assert set(doc) == {"leases", "summary"}
    be, ar = doc["leases"]
    assert set(be) == RECORD_KEYS and set(doc["summary"]) >= SUMMARY_KEYS
    assert (be["id"], be["type"], be["nodes"], be["requested_duration"]) == (1, "best-effort", 1, 3600)
    assert (ar["type"], ar["submit"], ar["requested_start"], ar["start"], ar["end"]) == (
        "advance-reservation", 900, 1800, 1800, 3600)
    ev = {e["event"]: e for e in be["events"]}  # (each event once here, but "start")
    assert ev["preempt"]["time"] == 900  # when the AR was admitted
    # suspended before 00:30 (21 s to save 1,024 MB at 50 MB/s), resumed once the AR is over at 01:00
    assert ev["suspend"] == {"time": 1779, "event": "suspend", "nodes": [0], "until": 1800}
    assert ev["resume"]["time"] >= 3600 and ev["resume"]["nodes"] == [0]
    starts = [e for e in be["events"] if e["event"] == "start"]
    assert [(e["time"], e["until"]) for e in starts] == [(0, 1779), (3621, 5442)]
    assert be["state"] == "done" and be["end"] == 5442 and be["reason"] is None
    times = [e["time"] for e in be["events"]]
    assert times == sorted(times)
    s = doc["summary"]
    assert (s["configuration"], s["format"], s["nodes"], s["leases"]) == ("NOVM-SR", "xml", 4, 2)
    assert (s["all_best_effort_s"], s["ar_accepted"], s["ar_rejected"]) == (5442, 1, 0)
    assert s["states"] == {"done": 2}


def test_preemption_under_novm_nosr_cancels_and_restarts(capsys, preemption):
    doc = simulate_json(capsys, "--workload", preemption)  # NOVM-NOSR is the default
    be = doc["leases"][0]
    assert [e["event"] for e in be["events"]] == ["schedule", "start", "preempt", "reserve", "start", "end"]
    assert be["end"] == 7200 and doc["summary"]["configuration"] == "NOVM-NOSR"


def test_human_output_has_the_summary_the_states_and_each_lease(capsys, preemption, tmp_path):
    png = tmp_path / "gantt.png"
    code, out, err = run(capsys, "leases", "simulate", "--workload", preemption, "--config", "NOVM-SR",
                         "--gantt", png)
    assert code == 0, err
    assert "all best-effort done" in out and "5,442 s (01:30:42)" in out
    assert "Leases by state: done 2" in out
    assert "suspends 00:29:39, resumes 01:00:00" in out
    assert f"Gantt chart: {png}" in out


def test_the_gantt_chart_is_a_png_and_nothing_else_is_left(capsys, preemption, tmp_path):
    png = tmp_path / "g.png"
    simulate_json(capsys, "--workload", preemption, "--config", "NOVM-SR", "--gantt", png)
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    import matplotlib.image

    img = matplotlib.image.imread(png)
    assert img.shape[0] > 200 and img.shape[1] > 800
    assert [p.name for p in tmp_path.iterdir()] == ["g.png"]  # no temporary file left


def test_rejected_leases_carry_their_reason(capsys, tmp_path):
    f = xml_workload(tmp_path / "bad.lwf", [
        request(1, "00:00:00", nodes=3),  # more nodes than the site has
        request(2, "00:00:00", memory=4096),  # more memory than a node has
        request(3, "00:30:00", start="00:20:00"),  # an AR in the past
        request(4, "00:00:00", nodes=2),  # fine
    ])
    doc = simulate_json(capsys, "--workload", f)
    by_id = {r["id"]: r for r in doc["leases"]}
    assert by_id[1]["state"] == "rejected" and "3 nodes; the cluster has 2" in by_id[1]["reason"]
    assert by_id[2]["state"] == "rejected" and by_id[2]["reason"] == (
        "asks for cpu 1, memory 4096 MB per node; the largest node has cpu 1, memory 1024 MB "
        "(too little memory)")
    assert by_id[3]["state"] == "rejected" and "in the past" in by_id[3]["reason"]
    assert [e["event"] for e in by_id[3]["events"]] == ["reject"] and by_id[3]["events"][0]["time"] == 1800
    assert by_id[4]["state"] == "done" and by_id[4]["reason"] is None
    assert doc["summary"]["states"] == {"done": 1, "rejected": 3} and doc["summary"]["ar_rejected"] == 1


def test_many_rejections_are_listed_ten_then_counted(capsys, tmp_path):
    f = tmp_path / "past.lwf"  # 15 ARs starting before they are requested
    f.write_text("".join(f"{100 + i} {i} 60 60 1 1 1024 0 x.img 10\n" for i in range(15)))
    code, out, err = run(capsys, "leases", "simulate", "--workload", f)
    assert code == 0, err
    assert "Rejected (15):" in out and "and 5 more" in out
    assert len(re.findall(r"lease \d+: its start time is before its submission", out)) == 10


def test_duplicate_ids_in_an_xml_workload_are_an_error_naming_the_line(capsys, tmp_path):
    f = xml_workload(tmp_path / "dup.lwf", [request(1, "00:00:00"), request(1, "00:01:00")])
    err = one_line_error(capsys, "--workload", f)
    assert re.search(r"dup\.lwf:\d+: id: lease id 1 is already used on line \d+", err)


@pytest.mark.parametrize(("start", "kind"), [("00:30:00", "advance-reservation"), ("now", "immediate")])
def test_a_preemptible_reservation_is_refused_as_the_server_refuses_it(capsys, tmp_path, start, kind):
    """`leases simulate` and `skylease serve` read a <lease> with one check (issue 36, item 8)."""
    from skylease.service.bodies import BadBody, lease_request_from_xml

    when = "<now/>" if start == "now" else f'<exact time="{start}"/>'
    lease = (f'<lease id="1" preemptible="true"><nodes><node-set numnodes="1"><res amount="100" type="CPU"/>'
             f'<res amount="1024" type="Memory"/></node-set></nodes><start>{when}</start>'
             '<duration time="00:10:00"/></lease>')
    why = f"an {kind} lease cannot be preemptible (only best-effort leases are)"
    f = xml_workload(tmp_path / "pre.lwf", [f'<lease-request arrival="00:00:00">{lease}</lease-request>'])
    err = one_line_error(capsys, "--workload", f)
    assert re.search(r"pre\.lwf:\d+: preemptible: " + re.escape(why), err), err
    with pytest.raises(BadBody) as exc:
        lease_request_from_xml(lease)
    assert exc.value.field == "preemptible" and exc.value.message == why


@pytest.mark.parametrize(
    ("name", "text", "needle"),
    [
        ("bad.lwf", "0 100 50 50 1 1 1024 0 x.img 10\n0 1OO 50 50 1 1 1024 0 x.img 10\n",
         "bad.lwf:2: start: '1OO' is not a whole number"),
        ("short.lwf", "0 100 50 50 1 1 1024 0 x.img\n", "short.lwf:1: expected 10 fields"),
        ("bad.swf", "1 0 0 10 8 -1 -1 1 60 -1 1 1 1 1 1 1 -1 -1\n"
                    "2 5 0 10 8 -1 -1 x 60 -1 1 1 1 1 1 1 -1 -1\n",
         "bad.swf:2: requested_processors: 'x' is not a number"),
        ("bad.xml", '<lease-workload name="x"><lease-requests>\n<lease-request arrival="soon">'
         "</lease-request></lease-requests></lease-workload>\n", "bad.xml:2: arrival: 'soon' is not a time"),
    ],
)
def test_malformed_workload_lines_name_the_file_and_line(capsys, tmp_path, name, text, needle):
    f = tmp_path / name
    f.write_text(text)
    assert needle in one_line_error(capsys, "--workload", f)


def test_malformed_injected_line_names_the_file_and_line(capsys, tmp_path, preemption):
    f = tmp_path / "inj.lwf"
    f.write_text("0 100 50 50 1 1 1024 0 x.img 10\n0 100 50 60 1 1 1024 0 x.img 10\n")
    assert "inj.lwf:2: real_duration: must be in 1..duration" in one_line_error(
        capsys, "--workload", preemption, "--inject", f)


@pytest.mark.parametrize(
    ("config", "needle"),
    [
        ("VM-FOO", "unknown configuration 'VM-FOO'"),
        ("missing.toml", "missing.toml: file not found"),
        ("unknown_key.toml", "unknown_key.toml:2: suspend_rat: unknown key"),
        ("bad_value.toml", "bad_value.toml:1: suspension: must be true or false, got 'yes'"),
        ("negative.toml", "negative.toml:1: boot_s: must be a whole number >= 0, got -5"),
        ("bad_images.toml",
         "bad_images.toml:1: images: must be one of 'uniform', 'skewed', 'single', 'none', got 'zipf'"),
        ("broken.toml", "broken.toml:1: not valid TOML"),
        ("zero_rate.toml", "zero_rate.toml:1: suspend_rate: must be a finite number > 0, got 0"),
    ],
)
def test_bad_configurations_are_one_line_errors(capsys, tmp_path, monkeypatch, preemption, config, needle):
    monkeypatch.chdir(tmp_path)
    files = {"unknown_key.toml": "suspension = true\nsuspend_rat = 5\n",
             "bad_value.toml": 'suspension = "yes"\n',
             "negative.toml": "boot_s = -5\n", "bad_images.toml": 'images = "zipf"\n',
             "broken.toml": "suspension = \n", "zero_rate.toml": "suspend_rate = 0\n"}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    assert needle in one_line_error(capsys, "--workload", preemption, "--config", config)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--workload", "nowhere.lwf"], "nowhere.lwf: file not found"),
        (["--bogus"], "skylease leases simulate: error: --bogus: no such option"),
        (["--image-seed", "-1"], "--image-seed"),
        (["--gantt", "no/such/folder/g.png"], "no such folder"),
        (["--gantt", "g.jpg"], "must be a .png, .pdf or .svg file"),
        (["--inject", "PREEMPTION"], "--inject takes a plain LWF file"),
    ],
)
def test_bad_options_are_one_line_errors(capsys, tmp_path, monkeypatch, preemption, args, needle):
    monkeypatch.chdir(tmp_path)
    args = [str(preemption) if a == "PREEMPTION" else a for a in args]
    if "--workload" not in args:
        args = ["--workload", preemption, *args]
    assert needle in one_line_error(capsys, *args)
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_missing_workload_option_is_a_usage_error(capsys):
    assert "skylease leases simulate: error: --workload: missing" in one_line_error(capsys)


def test_a_toml_configuration_changes_the_scheduler(capsys, tmp_path, preemption):
    cfg = tmp_path / "fast_disk.toml"
    cfg.write_text('base = "NOVM-SR"\nsuspend_rate = 100.0  # MB/s: 11 s to save 1,024 MB\n')
    doc = simulate_json(capsys, "--workload", preemption, "--config", cfg)
    be = doc["leases"][0]
    assert {"time": 1789, "event": "suspend", "nodes": [0], "until": 1800} in be["events"]
    assert doc["summary"]["configuration"] == "fast_disk.toml"


def test_injected_ars_get_ids_after_the_workload_and_run(capsys, tmp_path, preemption):
    inj = tmp_path / "inj.lwf"
    inj.write_text("# submit start duration real nodes cpu mem disk image size\n"
                   "100 7200 600 600 4 1 1024 0 'x.img' 600\n")
    doc = simulate_json(capsys, "--workload", preemption, "--config", "NOVM-SR", "--inject", inj)
    new = doc["leases"][-1]
    assert (new["id"], new["type"], new["start"], new["end"]) == (3, "advance-reservation", 7200, 7800)
    assert doc["summary"]["injected_ars"] == 1 and doc["summary"]["workload"] == "preemption + inj.lwf"


def test_a_blue_horizon_swf_runs_as_best_effort_leases(capsys, shared_data):
    doc = simulate_json(capsys, "--workload", shared_data / "swf" / "blue_150requests.swf")
    s = doc["summary"]
    assert (s["format"], s["nodes"], s["leases"], s["best_effort_leases"]) == ("swf", 144, 150, 150)
    assert s["states"] == {"done": 150} and s["ar_accepted"] == s["ar_rejected"] == 0
    assert all(r["type"] == "best-effort" and r["start"] >= r["submit"] for r in doc["leases"])
    assert s["all_best_effort_s"] == max(r["end"] for r in doc["leases"])
    assert s["mean_wait_s"] is not None and s["mean_bounded_slowdown"] >= 1


def test_the_30_day_baseline_is_the_papers(capsys, shared_data):
    swf = shared_data / "swf" / "blue_30days.swf"
    doc = simulate_json(capsys, "--workload", swf, "--config", "NOVM-NOSR")
    assert doc["summary"]["all_best_effort_s"] == 2_674_265
    assert doc["summary"]["leases"] == 5108 and doc["summary"]["states"] == {"done": 5108}


def test_nan_metrics_are_null_in_json(capsys, tmp_path):
    f = tmp_path / "ars.lwf"  # advance reservations only: no best-effort wait to average
    f.write_text("0 100 60 60 1 1 1024 0 x.img 10\n")
    code, out, err = run(capsys, "leases", "simulate", "--workload", f, "--json")
    assert code == 0, err
    assert "NaN" not in out
    s = json.loads(out)["summary"]
    assert s["mean_wait_s"] is None and s["mean_bounded_slowdown"] is None and s["ar_accepted"] == 1


def test_the_demo_part_tells_the_preemption_story(capsys):
    from skylease.cli.demo import _demo_leases

    _demo_leases()
    out = capsys.readouterr().out
    assert "lease 1 (best-effort, 1 node): runs 00:00:00-00:29:39 on node 0, preempted 00:15:00" in out
    assert "done at 1.51 h" in out and "(NOVM-NOSR), at 2.00 h" in out
    # the same story under Haizea 1.0's own configuration: shorter suspensions, shutdowns
    assert ("lease 1 (best-effort, 1 node): runs 00:00:00-00:29:58 on node 0, preempted 00:15:00, "
            "suspends 00:29:58, resumes 01:00:00, runs 01:00:34-01:30:36 on node 0, "
            "shuts down 01:30:36") in out
    assert "the work is done at 1.51 h" in out
