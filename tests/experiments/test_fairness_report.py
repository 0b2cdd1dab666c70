"""`skylease leases simulate --rules`: the workload without and with the fairness rules (issue 40,
item 5; docs/decisions/fairness-rules.md): refusals by rule, waits, utilisation, per user, checked
by hand on a small workload; users from the workload, the SWF log and --users; bad input in one
line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from skylease.cli import main
from skylease.control.leases import Lease, LeaseKind
from skylease.experiments.fairness_report import assign_users, fairness_report, wait_of
from skylease.experiments.leases import load_workload

ROOT = Path(__file__).resolve().parents[2]
RES = '<res type="CPU" amount="100"/><res type="Memory" amount="1024"/>'
RULES = '[policies.admission]\nclass = "fairness"\nmax_stacked = 1\nmax_duration = "2h"\n'


def _workload(path: Path) -> Path:
    """Two nodes. alice: two 1-hour leases at once (the second waits 1 h without rules; refused by
    max_stacked with them); bob: a 3-hour lease (max_duration); carol, unnamed in the file."""
    def req(lid, arrival, user, duration="01:00:00", nodes=2):
        who = f' user="{user}"' if user else ""
        return (f'<lease-request arrival="{arrival}"{who}><lease id="{lid}" preemptible="true">'
                f'<nodes><node-set numnodes="{nodes}">{RES}</node-set></nodes><start/>'
                f'<duration time="{duration}"/></lease></lease-request>')

    site = f'<site><nodes><node-set numnodes="2">{RES}</node-set></nodes></site>'
    path.write_text(f'<lease-workload name="t">{site}<lease-requests>'
                    f'{req(1, "00:00:00", "alice")}{req(2, "00:00:01", "alice")}'
                    f'{req(3, "00:00:02", "bob", "03:00:00")}{req(4, "00:00:03", None, nodes=1)}'
                    '</lease-requests></lease-workload>')
    return path


def test_the_report_without_and_with_the_rules(tmp_path):
    (tmp_path / "rules.toml").write_text(RULES)
    r = fairness_report(_workload(tmp_path / "w.xml"), tmp_path / "rules.toml", users="carol")
    s = r.summary()
    # without: all four run one after another on the two nodes (1 h, 1 h, 3 h, 1 h on 1 node)
    assert s["without"]["refused"] == 0 and s["without"]["started"] == 4
    assert s["without"]["mean_wait_s"] == (0 + (3600 - 1) + (7200 - 2) + (18000 - 3)) / 4
    assert s["without"]["p95_wait_s"] == 18000 - 3
    assert s["with"]["refused_by"] == {"max_duration": 1, "max_stacked": 1}
    assert s["with"]["mean_wait_s"] == (0 + 3600 - 3) / 2  # alice's first, then carol's
    # utilisation over the same horizon (the run without the rules ends at 6 h): 2 + 2 + 6 + 1 node-hours
    assert s["horizon_s"] == 6 * 3600
    assert s["without"]["utilisation"] == pytest.approx(11 / 12)
    assert s["with"]["utilisation"] == pytest.approx(3 / 12) and s["with"]["node_hours"] == 3
    users = {u["user"]: u for u in r.users()}
    assert sorted(users) == ["alice", "bob", "carol"]  # lease 4 named by --users
    assert users["alice"]["with"]["refused_by"] == {"max_stacked": 1}
    assert users["bob"]["without"]["node_hours"] == 6 and users["bob"]["with"]["node_hours"] == 0
    assert [(x["id"], x["rule"]) for x in r.refused()] == [(2, "max_stacked"), (3, "max_duration")]
    assert r.refused()[0]["reason"] == "max_stacked: alice has 1 unfinished lease (at most 1)"
    json.dumps(r.to_json(), allow_nan=False)  # finite: NaN (no wait) is null


def test_users_round_robin_in_submission_order():
    leases = [Lease(i, LeaseKind.BEST_EFFORT, submit, 1, 10, 10, 10, owner="x" if i == 1 else None)
              for i, submit in enumerate((5, 0, 5, 1))]
    assign_users(leases, "a,b")
    # in submission order (submit, id): 1 (named: kept), then 1, 3, 0, 2 by (submit, id)
    assert [le.owner for le in leases] == ["b", "x", "a", "a"]
    assign_users(leases, None)
    more = [Lease(i, LeaseKind.BEST_EFFORT, 0, 1, 10, 10, 10) for i in range(4)]
    assign_users(more, "3")
    assert [le.owner for le in more] == ["user1", "user2", "user3", "user1"]


def test_an_swf_logs_user_id_names_the_owner(tmp_path):
    def job(n, submit, user):  # 18 fields: job, submit, wait, run, procs, cpu, mem, req procs, req time,
        return f"{n} {submit} 0 60 1 -1 -1 1 100 -1 1 {user} -1 -1 1 -1 -1 -1"  # req mem, status, user...

    path = tmp_path / "w.swf"
    path.write_text("\n".join([job(1, 0, 7), job(2, 5, -1), job(3, 9, 7)]) + "\n")
    assert [le.owner for le in load_workload(path).leases] == ["user7", None, "user7"]


def test_wait_counts_from_the_requested_start_of_a_reservation():
    ar = Lease(1, LeaseKind.ADVANCE_RESERVATION, 0, 1, 10, 10, 10, start=100)
    be = Lease(2, LeaseKind.BEST_EFFORT, 5, 1, 10, 10, 10)
    assert wait_of(ar) is None
    ar.first_start, be.first_start = 100, 50
    assert (wait_of(ar), wait_of(be)) == (0, 45)


def _run(capsys, *argv):
    code = main(list(argv))
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def test_the_cli_report_and_its_json(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    (tmp_path / "rules.toml").write_text(RULES)
    w = _workload(tmp_path / "w.xml")
    rules = str(tmp_path / "rules.toml")
    code, out, err = _run(capsys, "leases", "simulate", "--workload", str(w), "--rules", rules, "--users",
                          "carol")
    assert code == 0, err
    assert "without and with the rules of rules.toml" in out and "by max_stacked" in out
    assert "  lease 3 (bob): max_duration: asks for 03:00:00; at most 02:00:00" in out.splitlines()
    code, out, err = _run(capsys, "leases", "simulate", "--workload", str(w), "--rules", rules, "--json")
    doc = json.loads(out)
    assert set(doc) == {"summary", "users", "refused"} and doc["summary"]["with"]["refused"] == 2
    assert "anonymous" in {u["user"] for u in doc["users"]}  # lease 4, without --users
    # the shipped example: what the how-to shows
    examples = ROOT / "examples"
    code, out, err = _run(capsys, "leases", "simulate", "--workload", str(examples / "fair-week.xml"),
                          "--rules", str(examples / "fairness-rules.toml"), "--json")
    assert code == 0 and json.loads(out)["summary"]["with"]["refused_by"] == {"max_duration": 1, "min_gap": 8}


@pytest.mark.parametrize(("rules", "users", "says"), [
    ('base = "NOVM-SR"\n', None, "rules.toml:1: policies.admission: no rules"),
    ('[policies.admission]\nclass = "fairness"\nmax_stacked = 0\n', None,
     "rules.toml:3: policies.admission.max_stacked: "),
    ('[policies.admission]\nclass = "fairness"\nmin_gap = "soon"\n', None, "policies.admission.min_gap: "),
    ('[policies.admission]\nclass = "fairness"\nidle_reclaim = 0\n', None,
     "policies.admission.idle_reclaim: "),
    ('[policies.admission]\nclass = "fairness"\nidle_reclaim = "1h"\nidle_cpu = 2\n', None,
     "rules.toml:4: policies.admission.idle_cpu: "),
    (RULES, "a,,b", "--users: give user names"),
    (RULES, "0", "--users: must be 1..10,000 users"),
])
def test_bad_rules_or_users_are_one_line(tmp_path, capsys, rules, users, says):
    (tmp_path / "rules.toml").write_text(rules)
    argv = ["leases", "simulate", "--workload", str(_workload(tmp_path / "w.xml")), "--rules",
            str(tmp_path / "rules.toml"), *(["--users", users] if users else [])]
    code, out, err = _run(capsys, *argv)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and says in lines[0] and "Traceback" not in err, err
    assert out == ""


def test_an_empty_user_in_the_workload_is_one_line(tmp_path, capsys):
    w = tmp_path / "w.xml"
    w.write_text(_workload(tmp_path / "ok.xml").read_text().replace('user="bob"', 'user=" "'))
    code, _, err = _run(capsys, "leases", "simulate", "--workload", str(w))
    assert code == 2 and "w.xml:1: user: an empty user name" in err, err


def test_a_bad_idle_after_in_the_workload_is_one_line(tmp_path, capsys):
    w = tmp_path / "w.xml"
    text = _workload(tmp_path / "ok.xml").read_text()
    w.write_text(text.replace('user="bob"', 'user="bob" idle-after="soon"'))
    code, _, err = _run(capsys, "leases", "simulate", "--workload", str(w))
    assert code == 2 and "w.xml:1: idle-after: " in err and "Traceback" not in err, err


def test_the_report_counts_the_leases_reclaimed_idle(tmp_path, capsys):
    w = tmp_path / "w.xml"  # alice's first lease works 10 minutes of its hour, then idles
    text = _workload(tmp_path / "ok.xml").read_text()
    w.write_text(text.replace('user="alice"', 'user="alice" idle-after="00:10:00"', 1))
    (tmp_path / "rules.toml").write_text('[policies.admission]\nclass = "fairness"\nidle_reclaim = "20m"\n')
    code, out, err = _run(capsys, "leases", "simulate", "--workload", str(w), "--rules",
                          str(tmp_path / "rules.toml"), "--json")
    assert code == 0, err
    summary = json.loads(out)["summary"]
    assert (summary["without"]["reclaimed"], summary["with"]["reclaimed"]) == (0, 1), summary
    # alice's second lease waited for the first: 30 minutes (10 of work, 20 idle) instead of an hour
    assert summary["with"]["mean_wait_s"] < summary["without"]["mean_wait_s"], summary
