"""Haizea 1.0's behaviours (its released code, not the 2008 simulator), each behind a
:class:`SchedulerConfig` key whose default keeps the 2008 behaviour, and the built-in
configurations ``haizea-1.0``, ``haizea-1.0-transfers``, ``haizea-1.0-transfers-reuse`` checked
against Haizea 1.0's own timelines (the ``oracles/haizea10`` folder beside the data, through the
``shared_oracles`` fixture)."""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path

import pytest
from tests.cli_helpers import run

from skylease.control.leases import (
    HAIZEA10_CONFIGURATIONS,
    Lease,
    LeaseKind,
    LeaseState,
    SchedulerConfig,
)
from skylease.experiments.leases import load_config, simulate_workload
from skylease.model.errors import UserError
from skylease.sim.leases import LeaseRun, simulate_leases

H10 = HAIZEA10_CONFIGURATIONS["HAIZEA-1.0"][0]
H10_TRANSFERS = HAIZEA10_CONFIGURATIONS["HAIZEA-1.0-TRANSFERS"][0]


def _be(i: int, submit: int, nodes: int, dur: int, real: int | None = None,
        image: str | None = None) -> Lease:
    real = dur if real is None else real
    return Lease(i, LeaseKind.BEST_EFFORT, submit, nodes, dur, real, real, image=image,
                 image_size=1024 if image else 0)


def _ar(i: int, submit: int, start: int, nodes: int, dur: int, real: int | None = None,
        image: str | None = None) -> Lease:
    real = dur if real is None else real
    return Lease(i, LeaseKind.ADVANCE_RESERVATION, submit, nodes, dur, real, real, start=start,
                 preemptible=False, image=image, image_size=1024 if image else 0)


def _runs(run: LeaseRun, lid: int, kind: str) -> list[tuple[int, int]]:
    return [(r.start, r.stop) for r in run.runs if r.lease == lid and r.kind == kind]


# -- the keys -------------------------------------------------------------------------------------------
def test_every_new_key_defaults_to_the_2008_behaviour():
    cfg = SchedulerConfig()
    assert (cfg.enactment_overhead_s, cfg.override_suspend_s, cfg.override_resume_s, cfg.resume_rate,
            cfg.suspendresume_exclusion, cfg.shutdown_s, cfg.threshold, cfg.backfill_release,
            cfg.transfer_link, cfg.premature_end, cfg.migration_reservations, cfg.stop_when) == (
        0, None, None, None, "none", None, "2008", "end", "two-channels", "slide", False, "besteffort")


def test_a_toml_file_sets_the_haizea10_keys(tmp_path):
    f = tmp_path / "h.toml"
    f.write_text('base = "haizea-1.0"\nenactment_overhead_s = 5\nresume_rate = 64\n'
                 'suspendresume_exclusion = "global"\nstop_when = "besteffort"\n')
    cfg = load_config(f).scheduler
    assert cfg == H10.with_(enactment_overhead_s=5, resume_rate=64.0, suspendresume_exclusion="global",
                            stop_when="besteffort")
    assert load_config("HAIZEA-1.0-transfers").scheduler == H10_TRANSFERS
    assert load_config("haizea-1.0").name == "haizea-1.0"


def test_suspend_and_resume_times_follow_overhead_override_rates_and_exclusion():
    le = _be(0, 0, 3, 100)  # 3 VMs of 1,024 MB
    cfg = SchedulerConfig(enactment_overhead_s=2, override_suspend_s=0, resume_rate=32.0, suspend_rate=16.0,
                          suspendresume_exclusion="local")
    # local: one VM at a time per node, the overheads of each group of simultaneous operations add up
    assert cfg.suspend_s(le, (0, 1, 2)) == 0 + 3 * 2
    assert cfg.resume_s(le, (0, 1, 2)) == 32 + 3 * 2
    assert cfg.resume_s(le, (0, 0, 1)) == 2 * 32 + 3 * 2  # two VMs on node 0 resume one after the other
    assert cfg.with_(suspendresume_exclusion="global").resume_s(le, (0, 1, 2)) == 3 * (32 + 2)
    assert cfg.with_(suspendresume_exclusion="none").resume_s(le, (0, 1, 2)) == 32 + 2
    assert cfg.with_(override_resume_s=5).resume_s(le, (0, 1, 2)) == 5 + 3 * 2
    assert cfg.with_(override_suspend_s=None).suspend_s(le, (0, 1, 2)) == 64 + 3 * 2  # 1024 / 16


def test_the_10_threshold_counts_the_suspension_and_for_a_queued_suspended_lease_the_resumption():
    le = _be(0, 0, 1, 100)
    assert H10.initial_threshold(le) == 0  # (1 + 1) x override 0
    assert H10.resume_threshold(le) == 2 * (0 + 1024 / 32 + 2)  # 68 s
    assert SchedulerConfig.novm_sr().resume_threshold(le) == 248  # the 2008 formula is untouched


# -- A: shutdown reservations -----------------------------------------------------------------------------
def test_a_normal_end_is_followed_by_a_shutdown_reservation_and_a_premature_end_is_not():
    cfg = SchedulerConfig(shutdown_s=1, enactment_overhead_s=2)
    leases = [_be(0, 0, 2, 100), _be(1, 0, 1, 100, real=40), _ar(2, 0, 500, 2, 100),
              _ar(3, 0, 700, 1, 100, 60)]
    run = simulate_leases(leases, 2, config=cfg, until="all")
    assert _runs(run, 0, "vm") == [(0, 100)] and _runs(run, 0, "shutdown") == [(100, 105)]  # 1 + 2 x 2 VMs
    assert leases[0].end == 105
    assert _runs(run, 1, "vm") == [(105, 145)] and _runs(run, 1, "shutdown") == [] and leases[1].end == 145
    # an AR's shutdown is inside its window: it still ends on time
    assert _runs(run, 2, "vm") == [(500, 595)] and _runs(run, 2, "shutdown") == [(595, 600)]
    assert leases[2].end == 600
    assert _runs(run, 3, "vm") == [(700, 760)] and _runs(run, 3, "shutdown") == [] and leases[3].end == 760


# -- B: suspension and resumption with overhead (the oracle's preemption run) ------------------------------
def test_an_ar_suspends_in_the_overhead_and_the_lease_resumes_at_memory_over_resume_rate():
    leases = [_be(0, 0, 1, 3600), _ar(1, 900, 1800, 4, 1800)]
    run = simulate_leases(leases, 4, config=H10)
    assert _runs(run, 0, "suspend") == [(1798, 1800)]  # override 0 + 2 s
    assert _runs(run, 0, "resume") == [(3600, 3634)]  # 1024 / 32 + 2
    assert _runs(run, 0, "vm") == [(0, 1798), (3634, 5436)] and leases[0].end == 5438


def test_an_ar_preempts_a_lease_whose_planned_shutdown_is_in_its_window():
    """A best-effort lease's shutdown goes with its VM (1.0 preempts leases, not reservations): an AR
    whose window holds the shutdown of a lease it preempts is accepted, and the shutdown is replaced
    by the suspension (before the fix, the shutdown blocked the node and the AR was rejected)."""
    leases = [_be(1, 0, 1, 3600), _be(2, 300, 2, 2400), _ar(3, 900, 1800, 4, 1800)]
    run = simulate_leases(leases, 4, config=H10)
    assert leases[2].state is LeaseState.DONE and leases[2].start == 1800
    assert _runs(run, 2, "suspend") == [(1796, 1800)]  # 2 VMs on 2 nodes: one group, 2 s per VM
    assert _runs(run, 1, "suspend") == [(1798, 1800)]
    assert [s for s, _ in _runs(run, 2, "shutdown")] == [max(e for _, e in _runs(run, 2, "vm"))]


# -- C: migration reserved right after the suspension -------------------------------------------------------
def test_a_migration_is_reserved_after_the_suspension_not_folded_into_the_resumption():
    # 2 nodes. Lease 0 runs on node 0; AR 1 takes both nodes [500, 600) and suspends it; AR 2 then
    # holds node 0 [600, 2000), so lease 0 resumes on node 1 at 600: it migrates from 500 (when its
    # suspension ended) for 1024 / 12.5 = 82 s.
    leases = [_be(0, 0, 1, 1000), _ar(1, 100, 500, 2, 100), _ar(2, 100, 600, 1, 1400)]
    for migration_reservations, migrate_at in ((True, 500), (False, 600)):
        cfg = H10.with_(migration_reservations=migration_reservations)
        sim = simulate_workload_of(leases, 2, cfg)
        ev = [e for e in sim[0]["events"] if e["event"] == "migrate"]
        assert [(e["time"], e["from"], e["to"]) for e in ev] == [(migrate_at, [0], [1])]
        resumes = [(e["time"], e.get("until")) for e in sim[0]["events"] if e["event"] == "resume"]
        assert resumes == [(600, 634)]
        if migration_reservations:
            assert ev[0]["until"] == 582


def simulate_workload_of(leases: list[Lease], n_nodes: int, cfg: SchedulerConfig) -> dict[int, dict]:
    """Each lease's ``--json`` record after simulating ``leases``."""
    from skylease.control.leases.records import lease_events, lease_record

    fresh = [Lease(le.id, le.kind, le.submit, le.nodes, le.duration, le.real_duration, le.dedicated,
                   start=le.start, preemptible=le.preemptible, image=le.image, image_size=le.image_size)
             for le in leases]
    run = simulate_leases(fresh, n_nodes, config=cfg, until="all")
    events = lease_events(run.log, run.runs, run.transfers)
    return {le.id: lease_record(le, events.get(le.id, [])) for le in fresh}


# -- D, E: one transfer link; AR transfers in the latest slot, never moved ----------------------------------
def test_a_be_transfer_waits_behind_an_ar_transfer_on_the_one_link():
    leases = [_ar(0, 0, 100, 1, 50, image="a.img"), _be(1, 0, 1, 50, image="b.img")]
    run = simulate_leases(leases, 2, config=H10_TRANSFERS, until="all")
    assert [(t.start, t.end, t.channel) for t in run.transfers] == [(18, 100, "ar"), (100, 182, "be")]
    two = simulate_leases([_ar(0, 0, 100, 1, 50, image="a.img"), _be(1, 0, 1, 50, image="b.img")], 2,
                          config=H10_TRANSFERS.with_(transfer_link="two-channels"), until="all")
    assert sorted((t.start, t.end, t.channel) for t in two.transfers) == [(0, 82, "be"), (18, 100, "ar")]


def test_an_ar_transfer_takes_the_latest_free_slot_and_scheduled_ones_never_move():
    # AR 0's image is due at 1000: [918, 1000). AR 1's (due at 1050) cannot go after it, so it takes
    # the slot before it; EDF (2008) would have moved AR 0's earlier to give AR 1 [968, 1050).
    def leases():
        return [_ar(0, 0, 1000, 1, 50, image="a.img"), _ar(1, 10, 1050, 1, 50, image="b.img")]
    run = simulate_leases(leases(), 2, config=H10_TRANSFERS, until="all")
    assert sorted((t.start, t.end) for t in run.transfers) == [(836, 918), (918, 1000)]
    edf = simulate_leases(leases(), 2, config=H10_TRANSFERS.with_(transfer_link="two-channels"), until="all")
    assert sorted((t.start, t.end) for t in edf.transfers) == [(886, 968), (968, 1050)]


# -- F: aggressive backfilling frees its reservation when the reserved VM starts -----------------------------
def test_the_future_reservation_is_freed_when_the_reserved_lease_starts():
    def decided(cfg: SchedulerConfig) -> int:
        leases = [_be(0, 0, 1, 100), _be(1, 0, 1, 100), _be(2, 0, 1, 100)]
        run = simulate_leases(leases, 1, config=cfg)
        return next(e.now for e in run.log if e.lease == 2 and e.what == "reserve")
    # lease 0 ends at 100 and is shut down by 102, lease 1 runs [102, 202) and is shut down by 204
    assert decided(H10) == 102  # lease 1 starts: lease 2 reserves then
    assert decided(H10.with_(backfill_release="end")) == 202  # the 2008 code: when its VM ends


# -- G: premature end: future leases are scheduled again from scratch ----------------------------------------
def test_after_a_premature_end_a_suspended_lease_waits_for_its_migration_estimate_again():
    # the oracle's preemption_prematureend2 without transfers: the AR really ends at 2400, not 2700
    leases = [_be(0, 0, 1, 3600, real=2700), _ar(1, 900, 1800, 4, 900, real=600)]
    run = simulate_leases(leases, 4, config=H10)
    assert _runs(run, 0, "resume") == [(2482, 2516)]  # 2400 + 1024 / 12.5
    slide = simulate_leases([_be(0, 0, 1, 3600, real=2700), _ar(1, 900, 1800, 4, 900, real=600)], 4,
                            config=H10.with_(premature_end="slide"))
    assert _runs(slide, 0, "resume") == [(2400, 2434)]


def test_after_a_premature_end_a_reserved_lease_without_reuse_transfers_its_image_again():
    # lease 0 (2 nodes) runs from 82 (its image) and really ends at 382 instead of 1082; lease 1
    # (2 nodes) had reserved [1084, ...) with its image sent at once [82, 164); rescheduled from
    # scratch at 382, its image is sent again.
    leases = [_be(0, 0, 2, 1000, real=300, image="a.img"), _be(1, 0, 2, 100, image="b.img")]
    run = simulate_leases(leases, 2, config=H10_TRANSFERS, until="all")
    assert [(t.start, t.end) for t in run.transfers if (1, (0, 1)) in t.users] == [(82, 164), (382, 464)]
    assert leases[1].first_start == 464
    reuse = HAIZEA10_CONFIGURATIONS["HAIZEA-1.0-TRANSFERS-REUSE"][0]
    leases = [_be(0, 0, 2, 1000, real=300, image="a.img"), _be(1, 0, 2, 100, image="b.img")]
    run = simulate_leases(leases, 2, config=reuse, until="all")  # its nodes keep the image
    assert [(t.start, t.end) for t in run.transfers if (1, (0, 1)) in t.users] == [(82, 164)]
    assert leases[1].first_start == 382


# -- stop_when ----------------------------------------------------------------------------------------------
def test_stop_when_all_makes_all_best_effort_the_stop_time():
    def leases():
        return [_be(0, 0, 1, 100), _ar(1, 0, 500, 1, 100)]
    assert simulate_leases(leases(), 2, config=H10).all_best_effort == 600
    assert simulate_leases(leases(), 2, config=H10.with_(stop_when="besteffort")).all_best_effort == 102


# -- Haizea 1.0's own timelines ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def haizea10(shared_oracles):
    """The oracle folder and its comparator (a standard-library script, imported in place)."""
    folder = shared_oracles / "haizea10"
    spec = importlib.util.spec_from_file_location("haizea10_compare", folder / "compare.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return folder, mod


def _oracle_runs(shared_oracles: Path) -> list[str]:
    return sorted(p.stem for p in (shared_oracles / "haizea10").glob("*__*.json"))


@pytest.mark.parametrize("run", ["preemption__notransfers", "wait__transfers_noreuse",
                                 "preemption_prematureend2__transfers_noreuse"])
def test_the_haizea10_configurations_reproduce_haizea10_timelines(haizea10, shared_data, run):
    folder, compare = haizea10
    workload, config = run.split("__")
    oracle = compare.oracle_view(json.loads((folder / f"{run}.json").read_text()))
    sim = simulate_workload(shared_data / "lwf" / "scenarios" / f"{workload}.lwf",
                            config=compare.NAMED[config])
    fields = compare.compare(oracle, compare.ours_view(sim.to_json()))
    assert [f[:3] for f in fields if not f[3]] == [] and len(fields) > 10


def test_the_leases_of_the_oracle_runs_end_done(haizea10, shared_data):
    folder, _ = haizea10
    for path in sorted(folder.glob("*__*.json")):
        workload, config = path.stem.split("__")
        cfg = {"notransfers": "haizea-1.0", "transfers_noreuse": "haizea-1.0-transfers",
               "transfers_reuse": "haizea-1.0-transfers-reuse"}[config]
        sim = simulate_workload(shared_data / "lwf" / "scenarios" / f"{workload}.lwf", config=cfg)
        assert all(le.state is LeaseState.DONE for le in sim.workload.leases), path.name


def test_a_lease_database_made_before_the_haizea10_keys_keeps_its_configuration_identity():
    from skylease.runtime.leases.manager import _config_key

    # the identities `skylease serve` journaled for these configurations before the keys existed
    assert _config_key(SchedulerConfig()) == "952d66a17823b8f4"
    assert _config_key(SchedulerConfig.novm_sr()) == "cbf5eb8b67c58c37"
    assert _config_key(H10) != _config_key(H10.with_(shutdown_s=None))  # the new keys do count


@pytest.mark.parametrize(("text", "want"), [("1.0", "1.0"), ('"1.0"', "1.0"), ("2008", "2008")])
def test_the_threshold_formula_may_be_written_as_a_number(tmp_path, text, want):
    f = tmp_path / "t.toml"
    f.write_text(f"threshold = {text}\n")
    assert load_config(f).scheduler.threshold == want


def test_a_resumption_longer_than_its_estimate_is_planned_with_its_real_length():
    # an override of 7 s is 1.0's estimate of the whole resumption; one VM after the other (global)
    # with 5 s of overhead each it really takes 2 x (7 + 5) = 24 s: planned with 7 s the lease would
    # have to be suspended again at once, and again, until it could be planned nowhere
    cfg = H10.with_(enactment_overhead_s=5, override_suspend_s=3, override_resume_s=7,
                    suspendresume_exclusion="global")
    leases = [_be(0, 0, 2, 1000), _ar(1, 100, 500, 2, 100)]
    run = simulate_leases(leases, 2, config=cfg)
    assert leases[0].state is LeaseState.DONE
    assert _runs(run, 0, "suspend") == [(484, 500)] and _runs(run, 0, "resume") == [(600, 624)]


def test_a_zero_suspension_needs_an_enactment_overhead(tmp_path):
    with pytest.raises(ValueError, match="at least 1 s"):
        SchedulerConfig(override_suspend_s=0)
    f = tmp_path / "z.toml"
    f.write_text("override_resume_s = 0\n")
    with pytest.raises(UserError, match="override_resume_s = 0 needs enactment_overhead_s"):
        load_config(f)


def test_the_lease_service_stops_a_lease_s_processes_during_its_shutdown():
    from skylease.control.leases import LeaseScheduler
    from skylease.runtime.leases.manager import desired

    sched = LeaseScheduler(1, config=SchedulerConfig(shutdown_s=5))
    le = _be(0, 0, 1, 100)
    sched.submit(le)
    sched.step(0)
    assert desired(sched, le, 100) == ("run", (0,))
    sched.step(100)  # the VM ends; the shutdown runs until 105
    assert le.state is LeaseState.ACTIVE and desired(sched, le, 100) == ("none", ())
    sched.step(105)
    assert le.state is LeaseState.DONE and le.end == 105


@pytest.mark.slow
def test_30_days_of_blue_horizon_with_10_percent_ars_under_haizea10_take_under_a_minute(capsys, shared_data):
    """Issue 22's speed target (benchmarks/bench_haizea10.py; Haizea 1.0 itself: 1,964 s): the
    command as a user types it, suspension and resumption on, every lease to its end."""
    argv = ["leases", "simulate", "--workload", shared_data / "swf" / "blue_30days.swf", "--inject",
            shared_data / "lwf" / "injected" / "30days" / "work_10-dur_2h-size_2medium.lwf",
            "--config", "haizea-1.0"]
    t0 = time.perf_counter()
    code, out, err = run(capsys, *argv)
    elapsed = time.perf_counter() - t0
    assert code == 0, err
    assert "under haizea-1.0" in out
    assert elapsed < 60, f"{elapsed:.1f} s"
