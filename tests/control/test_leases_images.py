"""Image preparation: EDF and FIFO transfer channels, piggybacking, pools (decisions H8, H13 in
docs/decisions/haizea.md)."""

from __future__ import annotations

from skylease.control.leases import Lease, LeaseKind, LeaseScheduler, LeaseState, SchedulerConfig
from skylease.control.leases.images import ImagePool, ImagePools, Transfer, edf_times


def test_edf_pushes_a_feasible_set_to_its_deadlines():
    a = Transfer("a", 0, 10, deadline=100)
    # new transfer (10 s) due by 50: ordered new (50), a (100); pushed late: new [40, 50), a [90, 100)
    assert edf_times([a], 10, 50, t0=0) == [(90, 100), (40, 50)]
    # a tight set: each one right before the next
    assert edf_times([Transfer("a", 0, 10, deadline=20)], 10, 20, t0=0) == [(0, 10), (10, 20)]


def test_edf_refuses_an_infeasible_set():
    assert edf_times([Transfer("a", 0, 10, deadline=15)], 10, 15, t0=0) is None
    assert edf_times([], 10, 15, t0=6) is None
    assert edf_times([], 10, 15, t0=5) == [(5, 15)]


def test_pool_evicts_the_least_recently_used_unreferenced_image():
    pool = ImagePool(3 * 4096)
    for i, name in enumerate(["a", "b", "c"]):
        assert pool.add(name, 4096, lease=i, node=0, timeout=100 * (i + 1))
    pool.release("a", 0, 0)
    pool.release("b", 1, 0)
    assert pool.add("d", 4096, lease=3, node=0, timeout=400)  # evicts "a" (timeout 100 < 200)
    assert set(pool.entries) == {"b", "c", "d"}
    assert pool.add("b", 4096, lease=4, node=0, timeout=500)  # already pooled: re-referenced
    assert not pool.add("e", 4096, lease=5, node=0, timeout=600)  # all referenced: a per-VM copy
    assert pool.has("b", valid_at=500) and not pool.has("b", valid_at=501)


def test_pools_index_follows_evictions():
    pools = ImagePools(2, 4096)
    assert pools.add(0, "a", 4096, lease=0, timeout=10)
    pools.release(0, "a", 0)
    assert pools.nodes_with("a") == {0}
    assert pools.add(0, "b", 4096, lease=1, timeout=20)  # evicts a
    assert pools.nodes_with("a") == set() and pools.nodes_with("b") == {0} and pools.has(0, "b")


def _be(i: int, submit: int, nodes: int, dur: int, image: str) -> Lease:
    return Lease(i, LeaseKind.BEST_EFFORT, submit, nodes, dur, dur, dur, image=image, image_size=4096)


MULT = SchedulerConfig.vm_mult().with_(runtime_overhead_pct=0, boot_s=0, suspension=False)


def test_be_images_go_fifo_and_later_leases_piggyback(run_leases):
    # T_img = 4096 / 12.5 = 328 s. Lease 0 (image a) waits for its transfer [0, 328); lease 1 (image b)
    # for the next one [328, 656); lease 2 (image a) joins lease 0's transfer while it has not started
    # (same step), so it starts at 328 too.
    leases = [_be(0, 0, 1, 100, "a"), _be(1, 0, 1, 100, "b"), _be(2, 0, 1, 100, "a")]
    sched = run_leases(leases, 3, MULT)
    assert [le.first_start for le in leases] == [328, 656, 328]
    assert not sched.images.fifo  # all done


def test_an_ar_whose_image_cannot_arrive_in_time_is_rejected():
    ar = Lease(0, LeaseKind.ADVANCE_RESERVATION, 0, 1, 100, 100, 100, start=300, preemptible=False, image="a",
               image_size=4096)
    ok = Lease(1, LeaseKind.ADVANCE_RESERVATION, 0, 1, 100, 100, 100, start=400, preemptible=False, image="a",
               image_size=4096)
    sched = LeaseScheduler(2, config=MULT)
    sched.submit(ar)
    sched.submit(ok)
    sched.step(0)
    assert ar.state is LeaseState.REJECTED and "cannot reach" in (ar.reason or "")
    assert ok.state is LeaseState.SCHEDULED
    (tr,) = sched.images.edf
    assert (tr.start, tr.end, tr.deadline) == (72, 400, 400)  # as late as possible


def test_reuse_skips_the_transfer_of_a_pooled_image(run_leases):
    cfg = MULT.with_(reuse=True)
    leases = [_be(0, 0, 1, 100, "a"), _be(1, 1000, 1, 100, "a")]
    run_leases(leases, 1, cfg)
    assert leases[0].first_start == 328 and leases[1].first_start == 1000  # the image is in node 0's pool
