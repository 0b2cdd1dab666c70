"""Thesis chapter 6 against the issue's bar: Sorting's savings at 50 % busy and 130 VMs, less energy
with busy desktops for every heuristic, the worked example; the grid matches the plain reference.

CI runs the bar on the cells it is about (0 % and 50 % users, 130 VMs, the thesis's 30 instances)
and the reference check on a few instances; the full 9,000-placement grid and its 60 s budget are
marked slow.
"""

import time

import numpy as np
import pytest

from skylease.experiments.sweep import run_campaign
from skylease.experiments.thesis.paper_placement import RELATED, STUDY_ALGORITHMS
from skylease.experiments.thesis.placement_report import done_when
from skylease.experiments.thesis.placement_study import (
    N_VMS,
    USERS,
    example_table,
    study_cell,
    study_instance,
    summary_table,
)
from skylease.planning.placement import energy, place

from ..planning.placement_reference import ref_energy, ref_place


def _grid(users, n_vms, instances, algorithms=STUDY_ALGORITHMS, models=("c",)):
    def cell(users, n_vms, rep, seed=0):
        return study_cell(users, n_vms, rep, seed, algorithms=algorithms, models=models)

    r = run_campaign(cell, {"users": list(users), "n_vms": list(n_vms)}, seeds=instances, mode="inline",
                     progress=False)
    assert not r.failed
    return summary_table(r.table)


def test_the_issue_bar_at_130_vms_with_30_instances():
    s = _grid((0.0, 0.5), (130,), 30)
    dw = done_when(s)
    assert dw["n_vms"] == 130 and set(dw["savings"]) == set(RELATED)
    assert min(dw["savings"].values()) >= 40.0, dw  # thesis: 48 / 45 / 46 %
    assert dw["lower_hold"] and dw["cells"] == 5, dw
    assert (s["unplaced"] == 0).all() and (s["instances"] == 30).all()


def test_worked_example_table():
    ex = example_table().set_index("algorithm")
    assert abs(ex.loc["Alg. 11 (Sorting), cores only", "energy_wh"] - 1784) <= 1
    assert abs(ex.loc["Alg. 12 (similar times)", "energy_wh"] - 1100) <= 1
    assert ex.loc["Alg. 12 (similar times)", "placement"] == ex.loc["Alg. 12 (similar times)",
                                                                    "thesis_placement"]


def test_instances_are_shared_across_users_shares_and_reproducible():
    v0, lab0 = study_instance(0.0, 70, 3)
    v5, lab5 = study_instance(0.5, 70, 3)
    assert v0.names == v5.names and lab0.names == lab5.names
    assert lab0.user.sum() == 0 and lab5.user.sum() == 55
    _, lab5b = study_instance(0.5, 70, 3)
    assert (lab5b.user_minutes == lab5.user_minutes).all()
    assert study_instance(0.5, 70, 4)[0].names != v5.names


@pytest.mark.parametrize(("users", "n_vms", "rep"), [(0.0, 40, 0), (0.5, 130, 1), (0.3, 90, 2)])
def test_study_instances_match_the_plain_reference(users, n_vms, rep):
    vms, lab = study_instance(users, n_vms, rep)
    args = (vms.cores.tolist(), vms.minutes.tolist(), lab.cores.tolist())
    for a in STUDY_ALGORITHMS:
        p = place(a, vms, lab)
        ref = ref_place(a, *args, lab.user.tolist())
        assert p.desktop.tolist() == ref, a
        for m in "abc":
            assert np.isclose(energy(p, vms, lab, m).total_wh,
                              ref_energy(ref, *args, lab.user_minutes.tolist(), m), rtol=1e-9)


@pytest.mark.slow
def test_full_grid_under_60_s_and_the_bar_on_every_size():
    study_cell(0.0, 40, 0)  # numba's compile or cache load is not the grid's
    t = time.perf_counter()
    s = _grid(USERS, N_VMS, 30)
    elapsed = time.perf_counter() - t
    assert elapsed < 60.0, elapsed
    assert (s["instances"] == 30).all() and len(s) == 6 * 10 * 5
    dw = done_when(s)
    assert min(dw["savings"].values()) >= 40.0 and dw["lower_hold"] and dw["cells"] == 50
