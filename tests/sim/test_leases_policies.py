"""Pluggable admission, preemption and host-selection policies (issue 22, Haizea 1.0's policy
manager): a site's own classes named in a configuration file, the one-line errors when they cannot
be used, and the built-in rules as defaults."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from tests.cli_helpers import one_line, run

from skylease.control.leases import SchedulerConfig
from skylease.control.leases.policies import (
    BUILTIN_POLICIES,
    AcceptAll,
    ARPreemptsBestEffort,
    Greedy,
    NoPreemption,
    PolicyError,
    load_policy,
)
from skylease.experiments.leases import load_config, simulate_workload

# A site's own module, as a site would write it (not the package's examples: the test shows that
# any importable module works).
SITE_MODULE = '''
from skylease.control.leases.lease import LeaseKind


class NoLongARs:
    def __init__(self, max_hours):
        if max_hours <= 0:
            raise ValueError(f"max_hours must be > 0, got {max_hours}")
        self.max_hours = max_hours

    def admit(self, lease, now):
        if lease.kind is LeaseKind.ADVANCE_RESERVATION and lease.duration > self.max_hours * 3600:
            return f"site rule: no advance reservation over {self.max_hours} h"
        return None


class PackNodes:
    def select(self, request):
        def load(k):
            return sum(1 for rr in request.table.on_node(k) if rr.start <= request.at < rr.end)
        order = sorted(request.candidates, key=lambda k: (request.victims.get(k, 0), -load(k), k))
        return order[: request.lease.nodes]


class NotAPolicy:
    pass
'''


def _lease(i: int, arrival: str, dur: str, start: str | None = None) -> str:
    when = f'<start><exact time="{start}"/></start>' if start else "<start/>"
    return f'''<lease-request arrival="{arrival}">
      <lease id="{i}" preemptible="{'false' if start else 'true'}">
        <nodes><node-set numnodes="1"><res amount="100" type="CPU"/><res amount="1024" type="Memory"/>
        </node-set></nodes>
        {when}
        <duration time="{dur}"/>
        <software><disk-image id="img.img" size="1024"/></software>
      </lease>
    </lease-request>'''


# Three nodes of two VMs each. Leases 1 and 2 fill node 0 for 10 minutes, lease 3 runs 2 h on
# node 1; lease 4 comes at 00:20, when node 0 is empty again and node 1 half full. Lease 5 is a
# 5-hour AR, lease 6 a 1-hour one.
WORKLOAD = f'''<?xml version="1.0"?>
<lease-workload name="packing">
  <site>
    <resource-types names="CPU Memory"/>
    <nodes><node-set numnodes="3"><res type="CPU" amount="200"/><res type="Memory" amount="2048"/>
    </node-set></nodes>
  </site>
  <lease-requests>
  {_lease(1, "00:00:00.00", "00:10:00.00")}
  {_lease(2, "00:00:00.00", "00:10:00.00")}
  {_lease(3, "00:00:00.00", "02:00:00.00")}
  {_lease(4, "00:20:00.00", "01:00:00.00")}
  {_lease(5, "00:00:00.00", "05:00:00.00", start="00:30:00.00")}
  {_lease(6, "00:00:00.00", "01:00:00.00", start="03:00:00.00")}
  </lease-requests>
</lease-workload>
'''


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with the site's policy module (importable) and the workload."""
    (tmp_path / "mysite_policies.py").write_text(SITE_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "packing.lwf").write_text(WORKLOAD)
    return tmp_path


def _config(folder: Path, name: str, body: str) -> Path:
    path = folder / name
    path.write_text('base = "haizea-1.0"\n' + textwrap.dedent(body))
    return path


ADMISSION = '''
[policies.admission]
class = "mysite_policies:NoLongARs"
max_hours = 4
'''
PACKING = '''
[policies.host_selection]
class = "mysite_policies:PackNodes"
'''


def _simulate(capsys: pytest.CaptureFixture[str], workload: Path, config: Path) -> dict:
    code, out, err = run(capsys, "leases", "simulate", "--workload", str(workload), "--config", str(config),
                         "--json")
    assert code == 0, err
    return {le["id"]: le for le in json.loads(out)["leases"]}


def _nodes_busy_at(leases: dict, t: int) -> set[int]:
    return {k for le in leases.values() for ev in le["events"]
            if ev["event"] == "start" and ev["time"] <= t < ev["until"] for k in ev["nodes"]}


def test_a_sites_admission_and_host_selection_classes_named_in_a_config_file(capsys, site):
    greedy = _simulate(capsys, site / "packing.lwf", _config(site, "greedy.toml", ADMISSION))
    packed = _simulate(capsys, site / "packing.lwf", _config(site, "packed.toml", ADMISSION + PACKING))
    for leases in (greedy, packed):
        assert leases[5]["state"] == "rejected"  # the 5-hour AR, with the policy's reason
        assert leases[5]["reason"] == "site rule: no advance reservation over 4 h"
        assert leases[6]["state"] == "done"  # the 1-hour AR is admitted as usual
    # at 00:30 lease 4 runs beside lease 3: greedy takes the empty node 0, packing joins node 1
    assert _nodes_busy_at(greedy, 1800) == {0, 1}
    assert _nodes_busy_at(packed, 1800) == {1}
    # without the admission policy the 5-hour AR is accepted
    default = _simulate(capsys, site / "packing.lwf", _config(site, "default.toml", ""))
    assert default[5]["state"] == "done"


def test_the_packaged_examples_are_the_howto_policies(tmp_path):
    path = _config(tmp_path, "c.toml", '''
        [policies.admission]
        class = "skylease.control.leases.examples:NoLongARs"
        max_hours = 4
        [policies.host_selection]
        class = "skylease.control.leases.examples:PackNodes"
        ''')
    cfg = load_config(path).scheduler
    assert type(cfg.admission).__name__ == "NoLongARs" and cfg.admission.max_hours == 4
    assert type(cfg.host_selection).__name__ == "PackNodes"
    assert cfg.preemption == ARPreemptsBestEffort()


@pytest.mark.parametrize(("body", "line", "field", "needle"), [
    ('class = "nosuch_module:X"', 4, "policies.admission.class", "no module named 'nosuch_module'"),
    ('class = "mysite_policies:Nope"', 4, "policies.admission.class", "has no class 'Nope'"),
    ('class = "mysite_policies:NotAPolicy"', 4, "policies.admission.class", "is not an admission policy"),
    ('class = "mysite_policies:PackNodes"', 4, "policies.admission.class", "is not an admission policy"),
    ('class = "NoLongARs"', 4, "policies.admission.class", "'module:Class'"),
    ('class = "mysite_policies:NoLongARs"\nmax_hour = 4', 5, "policies.admission.max_hour",
     "unknown parameter 'max_hour'"),
    ('class = "mysite_policies:NoLongARs"\nmax_hours = -1', 5, "policies.admission.max_hours",
     "max_hours must be > 0, got -1"),
    ('class = "mysite_policies:NoLongARs"', 4, "policies.admission.class", "needs the parameter 'max_hours'"),
])
def test_a_policy_that_cannot_be_used_is_one_line_naming_file_line_and_field(capsys, site, body, line, field,
                                                                            needle):
    config = site / "bad.toml"
    config.write_text(f'base = "haizea-1.0"\n\n[policies.admission]\n{body}\n')
    one_line(capsys, ["leases", "simulate", "--workload", str(site / "packing.lwf"), "--config", str(config)],
             f"{config}:{line}: {field}: ", needle)


def test_a_misspelt_policy_kind_is_an_unknown_key(capsys, site):
    config = site / "bad.toml"
    config.write_text('[policies.admision]\nclass = "accept-all"\n')
    one_line(capsys, ["leases", "simulate", "--workload", str(site / "packing.lwf"), "--config", str(config)],
             f"{config}:1:", "admision")


def test_the_defaults_are_the_built_in_rules_and_haizeas_names_load():
    cfg = SchedulerConfig()
    defaults = (AcceptAll(), ARPreemptsBestEffort(), Greedy())
    assert (cfg.admission, cfg.preemption, cfg.host_selection) == defaults
    for kind, named in BUILTIN_POLICIES.items():
        for name, cls in named.items():
            assert isinstance(load_policy(kind, name), cls)
    with pytest.raises(PolicyError, match="unknown parameter 'x'"):
        load_policy("admission", "accept-all", {"x": 1})
    with pytest.raises(ValueError, match="is not a host-selection policy"):
        SchedulerConfig(host_selection=AcceptAll())  # type: ignore[arg-type]


def test_no_preemption_rejects_the_ar_that_would_preempt(shared_data):
    workload = shared_data / "lwf" / "scenarios" / "preemption.lwf"  # a 4-node AR over a running BE lease
    sim = simulate_workload(workload, config="haizea-1.0")
    assert [le.state.value for le in sim.workload.leases] == ["done", "done"]
    cfg = load_config("haizea-1.0")
    cfg = type(cfg)(cfg.name, cfg.scheduler.with_(preemption=NoPreemption()), cfg.images)
    sim = simulate_workload(workload, config=cfg)
    be, ar = sim.workload.leases
    assert be.state.value == "done" and "preempt" not in [e for e, _ in be.history]
    assert ar.state.value == "rejected" and "nodes can be free" in (ar.reason or "")


def test_a_policy_choosing_nodes_it_was_not_offered_is_its_authors_bug(shared_data):
    class Anywhere:
        def select(self, request):
            return [max(request.table.n_nodes, 99)] * request.lease.nodes

    workload = shared_data / "lwf" / "scenarios" / "preemption.lwf"
    cfg = load_config("haizea-1.0")
    cfg = type(cfg)(cfg.name, cfg.scheduler.with_(host_selection=Anywhere()), cfg.images)
    with pytest.raises(ValueError, match="host selection Anywhere gave lease"):
        simulate_workload(workload, config=cfg)


def test_the_lease_service_identity_counts_a_policy_by_class_and_parameters(tmp_path, site):
    from skylease.runtime.leases.manager import _config_key

    default = _config_key(load_config("haizea-1.0").scheduler)
    path = _config(site, "c.toml", ADMISSION)
    # the lease service loads its --scheduler file with the same loader: the policies reach it
    assert _config_key(load_config(path).scheduler) == _config_key(load_config(path).scheduler) != default
    other = _config(site, "d.toml", ADMISSION.replace("4", "5"))
    assert _config_key(load_config(other).scheduler) != _config_key(load_config(path).scheduler)


def test_the_lease_service_gets_the_policies_of_its_scheduler_file(capsys, site):
    """`skylease serve --scheduler FILE` builds its manager from the same loader: the site's
    policies reach the real lease manager, and a bad one stops the server before it starts."""
    from skylease.model.errors import UserError
    from skylease.service.server import _local_parts, load_serve_config

    good = _config(site, "good.toml", ADMISSION + PACKING)
    scheduler, _ = _local_parts(load_serve_config(None, scheduler=str(good)))
    assert type(scheduler.admission).__name__ == "NoLongARs" and scheduler.admission.max_hours == 4
    assert type(scheduler.host_selection).__name__ == "PackNodes"
    bad = _config(site, "bad.toml", ADMISSION.replace("NoLongARs", "Nope"))
    with pytest.raises(UserError) as e:
        _local_parts(load_serve_config(None, scheduler=str(bad)))
    assert (str(e.value.file), e.value.line, e.value.field) == (str(bad), 4, "policies.admission.class")


def test_a_policy_file_is_found_beside_its_configuration_file(tmp_path, monkeypatch):
    """`class = "FILE.py:Class"` (the loader of `skylease run --policy`, issue 35): the file is
    read from the configuration's folder, whatever the working folder; a TOML value must fit the
    constructor's annotation."""
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "rules.py").write_text(SITE_MODULE.replace("(self, max_hours)", "(self, max_hours: float)"))
    path = _config(conf, "c.toml", '''
        [policies.admission]
        class = "rules.py:NoLongARs"
        max_hours = 3
        ''')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    admission = load_config(path).scheduler.admission
    assert type(admission).__name__ == "NoLongARs" and admission.max_hours == 3
    bad = _config(conf, "bad.toml", '''
        [policies.admission]
        class = "rules.py:NoLongARs"
        max_hours = "3"
        ''')
    from skylease.model.errors import UserError

    with pytest.raises(UserError) as e:
        load_config(bad)
    assert (e.value.line, e.value.field) == (5, "policies.admission.max_hours")
    assert e.value.message == "parameter 'max_hours' of NoLongARs takes float, got '3'"
