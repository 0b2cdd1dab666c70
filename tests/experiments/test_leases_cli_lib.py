"""The library behind `skylease leases simulate`: configurations, formats, events, images, the Gantt chart."""

from __future__ import annotations

import json
import math
import time

import pytest

from skylease.control.leases import Lease, LeaseKind, SchedulerConfig
from skylease.experiments.gantt import _blocks, gantt_chart
from skylease.experiments.leases import (
    LeaseConfig,
    Workload,
    clock,
    detect_format,
    load_config,
    simulate_workload,
)
from skylease.model.errors import UserError
from skylease.sim.leases import simulate_leases


# -- configurations --------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["novm-sr", "NOVM_SR", " Novm-Sr "])
def test_configuration_names_are_case_insensitive(name):
    cfg = load_config(name)
    assert cfg.name == "NOVM-SR" and cfg.scheduler == SchedulerConfig.novm_sr() and cfg.images is None


def test_paper_configurations_keep_their_image_draw():
    assert load_config("vm-reuse-skewed").images == "skewed" and load_config(None).name == "NOVM-NOSR"


def test_a_toml_file_starts_from_its_base_and_overrides_fields(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text('base = "vm-mult"\nmax_reservations = inf\nboot_s = 30\nmigrate = "mem"\n'
                 'images = "skewed"\nseed = 7\nthreshold_factor = 2\n')
    cfg = load_config(f)
    want = SchedulerConfig.vm_mult().with_(max_reservations=math.inf, boot_s=30, migrate="mem",
                                           threshold_factor=2)
    assert cfg == LeaseConfig("c.toml", want, "skewed", 7)
    f.write_text('images = "none"\n')
    assert load_config(f) == LeaseConfig("c.toml", SchedulerConfig(), None, None)


@pytest.mark.parametrize(
    ("text", "line", "key", "needle"),
    [
        ("backfilling = true\nsuspend_rat = 5\n", 2, "suspend_rat", "unknown key"),
        ("boot_s = 2.5\n", 1, "boot_s", "whole number"),
        ("boot_s = true\n", 1, "boot_s", "whole number"),
        ('bandwidth = "fast"\n', 1, "bandwidth", "must be a finite number > 0, got 'fast'"),
        ("bandwidth = inf\n", 1, "bandwidth", "finite"),
        ('migrate = "disk"\n', 1, "migrate", "'mem', 'mem+vm'"),
        ("reuse = 1\n", 1, "reuse", "true or false"),
        ('base = "VM-XL"\n', 1, "base", "must be one of"),
        ("seed = -1\n", 1, "seed", "whole number >= 0"),
        ("\n\n[scheduler]\nsuspension = true\n", 3, "scheduler", "unknown key"),
    ],
)
def test_toml_errors_name_file_line_and_key(tmp_path, text, line, key, needle):
    f = tmp_path / "c.toml"
    f.write_text(text)
    with pytest.raises(UserError) as e:
        load_config(f)
    assert (e.value.file, e.value.line, e.value.field) == (str(f), line, key) and needle in e.value.message
    assert "\n" not in str(e.value)


def test_the_file_schema_has_every_scheduler_field():
    from dataclasses import fields

    from skylease.control.leases.config import POLICY_KEYS
    from skylease.experiments.leases import EXTRA_KEYS, LeaseConfigFile, PoliciesSection

    # the policies are the tables of [policies] (a class name and its parameters), not plain keys
    scheduler = {f.name for f in fields(SchedulerConfig)}
    assert set(LeaseConfigFile.model_fields) == scheduler - set(POLICY_KEYS) | set(EXTRA_KEYS)
    assert set(PoliciesSection.model_fields) == set(POLICY_KEYS)


def test_a_misspelt_key_names_the_nearest(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text("suspension = true\nsuspend_rat = 5\n")
    with pytest.raises(UserError) as e:
        load_config(f)
    assert str(e.value) == f"{f}:2: suspend_rat: unknown key 'suspend_rat'; did you mean 'suspend_rate'?"


def test_an_unknown_name_that_is_no_file_is_an_error():
    with pytest.raises(UserError, match="unknown configuration 'fast'"):
        load_config("fast")


# -- formats ---------------------------------------------------------------------------------------
def test_formats_are_told_apart_by_name_and_content(tmp_path):
    swf = tmp_path / "log.txt"
    swf.write_text("; header\n" + " ".join(["1"] * 18) + "\n")
    lwf = tmp_path / "ars.txt"
    lwf.write_text("# comment\n0 100 50 50 1 1 1024 0 x.img 10\n")
    xml = tmp_path / "w.lwf"
    xml.write_text("\n  <lease-workload/>")
    named = tmp_path / "empty.swf"
    named.write_text("")
    assert [detect_format(p) for p in (swf, lwf, xml, named)] == ["swf", "lwf", "xml", "swf"]


# -- events ------------------------------------------------------------------------------------------
def test_a_migration_and_image_transfers_appear_in_the_events(shared_data):
    sim = simulate_workload(shared_data / "lwf" / "scenarios" / "migrate.lwf", config="VM-MULT")
    recs = {r["id"]: r for r in sim.records()}
    be = recs[3]
    mig = [e for e in be["events"] if e["event"] == "migrate"]
    assert mig == [{"time": mig[0]["time"], "event": "migrate", "from": [2, 3], "to": [0, 1]}]
    resume = next(e for e in be["events"] if e["event"] == "resume")
    assert resume["time"] == mig[0]["time"] and resume["nodes"] == [0, 1]
    transfer = next(e for e in be["events"] if e["event"] == "transfer")
    first_run = next(e for e in be["events"] if e["event"] == "start")
    assert transfer["image"] == "foobar3.img" and transfer["channel"] == "be"
    assert transfer["until"] <= first_run["time"]  # the VM starts once its image is there
    ar_transfer = next(e for e in recs[2]["events"] if e["event"] == "transfer")
    assert ar_transfer["channel"] == "ar" and ar_transfer["until"] <= recs[2]["requested_start"]
    assert sim.summary()["transfers"] == 3 and sim.summary()["image_seed"] is None  # XML images kept


def _be(i: int, submit: int, nodes: int, dur: int) -> Lease:
    return Lease(i, LeaseKind.BEST_EFFORT, submit, nodes, dur, dur, dur)


def test_imageless_leases_get_the_configurations_draw_with_the_seed():
    def run(seed):
        w = Workload("w", "code", [_be(i, 10 * i, 1, 100) for i in range(30)], 4)
        return simulate_workload(w, config="VM-REUSE-SKEWED", image_seed=seed)

    a, b, c = run(1), run(1), run(2)
    images = [[r["image"] for r in s.records()] for s in (a, b, c)]
    assert all(img and img.startswith("image") for img in images[0])
    assert images[0] == images[1] != images[2]
    assert a.summary()["image_seed"] == 1 and a.summary()["transfers"] > 0
    with pytest.raises(UserError, match="image-seed"):
        run(-1)


def test_the_json_document_is_strict_json():
    w = Workload("w", "code", [Lease(0, LeaseKind.ADVANCE_RESERVATION, 0, 1, 60, 60, 60, start=10,
                                     preemptible=False)], 2)
    doc = simulate_workload(w).to_json()
    text = json.dumps(doc, allow_nan=False)
    assert json.loads(text)["summary"]["mean_wait_s"] is None
    assert doc["leases"][0]["start"] == 10 and doc["leases"][0]["end"] == 70  # run to its end


def test_clock():
    assert [clock(0), clock(5442), clock(86400 + 61), clock(None), clock(math.nan)] == [
        "00:00:00", "01:30:42", "1d 00:01:01", "-", "-"]


# -- the Gantt chart -----------------------------------------------------------------------------------
def test_adjacent_nodes_make_one_block():
    assert _blocks((5, 0, 1, 2, 7, 6)) == [(0, 2), (5, 7)] and _blocks(()) == []


def test_the_chart_is_written_atomically(tmp_path, monkeypatch):
    run = simulate_leases([_be(0, 0, 2, 100), _be(1, 0, 1, 50)], 2)
    out = tmp_path / "g.svg"
    gantt_chart(run, 2, out)
    assert out.read_text().lstrip().startswith("<?xml") and "<svg" in out.read_text()

    from matplotlib.figure import Figure

    def broken(self, fname, **kw):
        with open(fname, "wb") as fh:
            fh.write(b"half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Figure, "savefig", broken)
    png = tmp_path / "g.png"
    with pytest.raises(UserError, match="No space left"):
        gantt_chart(run, 2, png)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.svg"]  # nothing half-written


def test_the_30_day_chart_draws_in_seconds(shared_data, tmp_path):
    sim = simulate_workload(shared_data / "swf" / "blue_30days.swf",
                            shared_data / "lwf" / "injected" / "30days" / "work_10-dur_3h-size_2medium.lwf",
                            "NOVM-SR")
    assert len(sim.run.runs) > 5000 and any(r.kind == "suspend" for r in sim.run.runs)
    t0 = time.perf_counter()
    png = sim.gantt(tmp_path / "g.png")
    assert time.perf_counter() - t0 < 10
    assert png.read_bytes()[:4] == b"\x89PNG"
