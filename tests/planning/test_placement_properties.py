"""Invariants of every placement heuristic, on random labs and requests (hypothesis):
no desktop ever runs more cores than it has; every VM is placed or reported unplaced with a reason;
the numba heuristics give exactly the plain pure-Python reading's placements and energy."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from skylease.model.desktop import Desktops, VMs
from skylease.planning.placement import ALGORITHMS, energy, place

from .placement_reference import ref_energy, ref_place

NAMES = [*sorted(ALGORITHMS), "sorting-none"]


@st.composite
def instances(draw):
    n_d = draw(st.integers(1, 8))
    desk_cores = draw(st.lists(st.sampled_from([1, 2, 4, 8, 16]), min_size=n_d, max_size=n_d))
    users = draw(st.lists(st.sampled_from([0.0, 0.0, 45.0, 90.0, 240.0]), min_size=n_d, max_size=n_d))
    n_v = draw(st.integers(0, 14))
    cores = draw(st.lists(st.integers(1, 20), min_size=n_v, max_size=n_v))
    # few distinct durations, so that ties (and the tie-breaks) are exercised
    minutes = draw(st.lists(st.sampled_from([45.0, 60.0, 90.0, 600.0, 630.0, 43200.0]), min_size=n_v,
                            max_size=n_v))
    used = [draw(st.integers(0, c)) for c in desk_cores]  # the lab may already run VMs (online use)
    has_vm = [u > 0 for u in used]
    free = [c - u for c, u in zip(desk_cores, used, strict=True)]
    return (VMs(cores=cores, minutes=minutes), Desktops(cores=desk_cores, user_minutes=users),
            np.array(free), np.array(has_vm))


def _place(name, vms, lab, free, has_vm):
    if name == "sorting-none":
        return place("sorting", vms, lab, free=free, has_vm=has_vm, secondary="none")
    return place(name, vms, lab, free=free, has_vm=has_vm)


@settings(max_examples=150, deadline=None)
@given(instances(), st.sampled_from(NAMES))
def test_no_desktop_over_its_cores_and_every_vm_accounted_for(inst, name):
    vms, lab, free, has_vm = inst
    p = _place(name, vms, lab, free, has_vm)
    used = np.bincount(p.desktop[p.placed], weights=vms.cores[p.placed], minlength=len(lab))
    assert (used <= free).all()  # never more than the free cores the planner was given
    assert p.placed.sum() + len(p.unplaced) == len(vms)
    for v, reason in p.unplaced.items():
        assert p.desktop[v] == -1 and reason.startswith(f"needs {vms.cores[v]} cores")
        # it really did not fit: whatever was left free is smaller than the VM
        assert (free - used < vms.cores[v]).all()
    assert sorted(p.order.tolist()) == list(range(len(vms)))


@settings(max_examples=150, deadline=None)
@given(instances(), st.sampled_from(NAMES), st.sampled_from("abc"))
def test_same_placements_and_energy_as_the_plain_reference(inst, name, model):
    vms, lab, free, has_vm = inst
    p = _place(name, vms, lab, free, has_vm)
    ref = ref_place(name, vms.cores.tolist(), vms.minutes.tolist(), lab.cores.tolist(), lab.user.tolist(),
                    free=free.tolist(), has_vm=has_vm.tolist())
    assert p.desktop.tolist() == ref
    e = energy(p, vms, lab, model)
    want = ref_energy(ref, vms.cores.tolist(), vms.minutes.tolist(), lab.cores.tolist(),
                      lab.user_minutes.tolist(), model)
    assert np.isclose(e.total_wh, want, rtol=1e-9, atol=1e-9)
    assert (e.per_desktop_wh >= 0).all()
    assert (e.per_desktop_wh[np.setdiff1d(np.arange(len(lab)), p.desktop)] == 0).all()
