"""Desktop labs, SPECpower tables, VM files and the synthetic UnaCloud-like trace."""

import numpy as np
import pytest

from skylease.model.errors import UserError
from skylease.model.power import THESIS_POWER
from skylease.traces.lab import draw_users, read_desktops, read_power_table, thesis_lab
from skylease.traces.vms import VM_CORES, fits_lab, read_vms, sample_vms, vm_trace


def test_thesis_lab_is_70_by_4_plus_39_by_8_and_shuffles_reproducibly():
    lab = thesis_lab()
    assert len(lab) == 109 and lab.total_cores == 592
    assert (lab.cores[:70] == 4).all() and (lab.cores[70:] == 8).all()
    assert lab.names[0] == "pc001" and lab.names[-1] == "pc109"
    a, b = thesis_lab(3), thesis_lab(3)
    assert a.names == b.names and a.names != lab.names
    assert sorted(a.names) == sorted(lab.names)
    assert all(a.cores[k] == (4 if int(n[2:]) <= 70 else 8) for k, n in enumerate(a.names))


def test_draw_users_share_and_session_lengths():
    m = draw_users(109, 0.5, 1)
    assert (m > 0).sum() == 55  # 54.5 rounded up
    assert ((m == 0) | ((m >= 60) & (m <= 240))).all()
    assert (draw_users(109, 0.0, 1) == 0).all()
    assert (draw_users(10, 1.0, 1) > 0).all()
    with pytest.raises(ValueError):
        draw_users(10, 1.5, 1)


def test_spec_power_tables_read(shared_data):
    t = read_power_table(shared_data / "power" / "PowerModelSpecPowerIbmX3250XeonX3470.txt")
    assert t.table[0] == 41.6 and t.table[-1] == 113.0 and t.name.endswith("X3470")
    assert t.watts(np.array([5.0]))[0] == pytest.approx((41.6 + 46.7) / 2)


def test_desktops_file_with_power_tables_and_users(tmp_path, shared_data):
    (tmp_path / "x3470.txt").write_text(
        (shared_data / "power" / "PowerModelSpecPowerIbmX3250XeonX3470.txt").read_text())
    f = tmp_path / "lab.csv"
    f.write_text("# a small lab\nname,cores,power,user_minutes\nalpha,4,thesis,\nbeta,8,x3470.txt,120\n"
                 "gamma,8,,0\n")
    lab = read_desktops(f)
    assert lab.names == ("alpha", "beta", "gamma") and lab.cores.tolist() == [4, 8, 8]
    assert lab.user.tolist() == [False, True, False]
    assert lab.power_models[0] is THESIS_POWER and lab.power_models[1].name == "x3470"
    assert lab.power_index.tolist() == [0, 1, 0]
    assert lab.monitor_w.tolist() == [20.0] * 3 and lab.user_w.tolist() == [87.0] * 3


@pytest.mark.parametrize(("text", "where"), [
    ("cores\n4\nfour\n", ":3: cores: value 'four' is not a number"),
    ("cores\n4\n0\n", ":3: cores: value '0' is below the minimum 1"),
    ("cores\n2.5\n", ":2: cores: value '2.5' is not a whole number"),
    ("cores,colour\n4,red\n", ":1: colour: unknown column"),
    ("name\npc1\n", ":1: cores: missing column"),
    ("cores\n", ":1: no data rows"),
    ("", ":1: empty file"),
    ("name,cores\na,4\na,8\n", ":3: name: desktop name also used on line 2"),
    ("cores,user_minutes\n4,-3\n", ":2: user_minutes: value '-3' is below"),
    ("cores,power\n4,missing.txt\n", ":2: power: power table 'missing.txt'"),
    ("cores\n4,5\n", ":2: row has 2 field(s)"),
])
def test_bad_desktops_files_name_file_line_and_field(tmp_path, text, where):
    f = tmp_path / "lab.csv"
    f.write_text(text)
    with pytest.raises(UserError) as exc:
        read_desktops(f)
    assert str(exc.value).startswith(str(f)) and where in str(exc.value)


def test_vms_file_and_its_mistakes(tmp_path):
    f = tmp_path / "vms.csv"
    f.write_text("name,cores,minutes,memory_gb\nweb,2,90,4\nbatch,8,600,\n")
    vms = read_vms(f)
    assert vms.names == ("web", "batch") and vms.cores.tolist() == [2, 8]
    assert vms.minutes.tolist() == [90.0, 600.0] and vms.memory_gb.tolist() == [4.0, 1.0]
    for text, where in (("cores,minutes\n2,0\n", ":2: minutes: value '0' must be > 0"),
                        ("cores,minutes\n2,inf\n", ":2: minutes: value 'inf' is not a finite number"),
                        ("cores\n2\n", ":1: minutes: missing column")):
        f.write_text(text)
        with pytest.raises(UserError, match=where.replace("(", r"\(")):
            read_vms(f)


def test_synthetic_trace_follows_the_spec_distributions():
    t = vm_trace()
    assert len(t) == 9800 and set(np.unique(t.cores)) <= set(VM_CORES)
    assert t.minutes.min() >= 45 and t.minutes.max() <= 43200
    share_1 = (t.cores == 1).mean()
    assert abs(share_1 - 0.35) < 0.02
    # log-uniform: the median is near sqrt(45 x 43200) = 1394 minutes
    assert 1200 < np.median(t.minutes) < 1600
    assert vm_trace().names == t.names and (vm_trace().minutes == t.minutes).all()


def test_instances_fit_the_lab_and_keep_trace_order():
    lab = thesis_lab()
    vms = sample_vms(vm_trace(), 130, 5, lab.cores)
    assert len(vms) == 130 and list(vms.names) == sorted(vms.names)
    assert fits_lab(vms.cores, lab.cores)
    assert not fits_lab(np.full(40, 6), lab.cores)  # 40 VMs of 6 cores, 39 eight-core desktops
    assert not fits_lab(np.full(149, 4), lab.cores)  # 596 > 592 cores
    assert fits_lab(np.full(39, 8), lab.cores)
    with pytest.raises(UserError, match="never fit"):
        sample_vms(vm_trace(), 9000, 1, lab.cores)
