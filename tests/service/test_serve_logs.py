"""Payload results (issue 40, item 3) from a real `skylease serve` with the real local lease manager
(2 nodes of this machine, --time-scale 60): a lease of two VMs whose payloads print known lines on
their standard output and error and exit with known codes (3 and 4). ``GET
/leases/{id}/vms/{vnode}/log``, `skylease leases logs` and the lease's dashboard page give each VM's
exit status and the end of its log; a running payload's log is read while it runs; a VM not
started yet says so with an empty log. Another user gets 404 (as for a lease that does not exist),
a VM the lease does not have 404, a wrong ``bytes`` 422; the CLI's errors are one line, exit 2.
And a lease on a test site of two SSH hosts (127.0.0.201-202): its logs are read on the hosts; a
host that stops answering leaves its VM's exit status answered and its log said unreachable."""

from __future__ import annotations

import json

import httpx
import pytest
from tests.waits import waited

from skylease.cli import main

from .payloads import cancel_unfinished
from .web import HTML, login

# (a real `skylease serve` confines its payloads: without bubblewrap it refuses to start, so these skip)
pytestmark = [pytest.mark.usefixtures("payload_sandbox"), pytest.mark.timeout(180)]

SCALE = 60
#: Each VM prints a line on its standard output, one on its standard error, and exits 3 + its index.
COMMAND = ('echo "hello from VM $SKYLEASE_VNODE"; echo "to stderr $SKYLEASE_VNODE" >&2; '
           "exit $((3 + SKYLEASE_VNODE))")


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["leases", *argv])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.fixture
def serve(serve_process, tmp_path, capsys):
    """A real server on 2 nodes of this machine; alice, bob and the administrator root."""
    site = tmp_path / "site.toml"
    site.write_text("[[nodes]]\ncount = 2\n")
    proc = serve_process(site=site, time_scale=SCALE, grace=1)
    proc.add_users(capsys)
    proc.start()
    yield proc
    cancel_unfinished(proc)


def _two_vms_ended(serve) -> tuple[int, dict]:
    """A 2-VM lease of COMMAND requested by alice, and its view once both payloads ended."""
    r = serve.call("POST", "/leases", "alice", json={"nodes": 2, "duration": 600, "cpu": 0.1,
                                                     "memory": 64, "command": COMMAND})
    assert r.status_code == 201, r.text
    lid = r.json()["id"]
    view = waited("both payloads ended", lambda: (v := serve.call("GET", f"/leases/{lid}", "alice").json())
                 ["ended_payloads"] and len(v["ended_payloads"]) == 2 and v)
    return lid, view


def test_each_vms_exit_status_and_log_through_the_api_the_cli_and_the_page(serve, capsys, monkeypatch):
    lid, view = _two_vms_ended(serve)
    by_vnode = {p["vnode"]: p for p in view["ended_payloads"]}

    # -- the API: each VM's exit status (as the lease's ended_payloads say) and its log
    for k in (0, 1):
        r = serve.call("GET", f"/leases/{lid}/vms/{k}/log", "alice")
        assert r.status_code == 200, r.text
        got = r.json()
        assert got["state"] == "exited" and got["exit_code"] == 3 + k, got
        assert got["reason"] == by_vnode[k]["reason"] and got["node"] == by_vnode[k]["node"], got
        assert got["log"] == "payload" and got["log_error"] is None, got
        assert got["text"] == f"hello from VM {k}\nto stderr {k}\n", got
    r = serve.call("GET", f"/leases/{lid}/vms/1/log", "alice", params={"bytes": 9})
    assert r.status_code == 200 and r.json()["text"] == "stderr 1\n", r.text
    assert serve.call("GET", f"/leases/{lid}/vms/0/log", "root").json()["exit_code"] == 3  # an admin's

    # -- who and what may not be seen
    for user, path in (("bob", f"/leases/{lid}/vms/0/log"), ("alice", f"/leases/{lid}/vms/2/log"),
                       ("alice", "/leases/999/vms/0/log")):
        r = serve.call("GET", path, user)
        assert r.status_code == 404 and r.headers["content-type"].startswith("application/json"), r.text
    assert "no lease" in serve.call("GET", f"/leases/{lid}/vms/0/log", "bob").json()["detail"]
    for bad in ("0", "131073", "-1", "abc"):
        r = serve.call("GET", f"/leases/{lid}/vms/0/log", "alice", params={"bytes": bad})
        assert r.status_code == 422 and "bytes" in r.json()["detail"], r.text
    assert httpx.get(f"{serve.url}/leases/{lid}/vms/0/log", timeout=30).status_code == 401

    # -- the CLI
    monkeypatch.setenv("SKYLEASE_SERVER", serve.url)
    monkeypatch.setenv("SKYLEASE_TOKEN", serve.tokens["alice"])
    code, out, err = _cli(capsys, "logs", str(lid))
    assert code == 0 and err == "", err
    for k in (0, 1):
        head = (f"== lease {lid} VM {k} on {by_vnode[k]['node']}: exited, exit code {3 + k} "
                f"({by_vnode[k]['reason']}); payload log:\nhello from VM {k}\nto stderr {k}\n")
        assert head in out, out
    code, out, err = _cli(capsys, "logs", str(lid), "--vnode", "1", "--bytes", "9", "--json")
    assert code == 0, err
    got = json.loads(out)
    assert [(x["vnode"], x["exit_code"], x["text"]) for x in got] == [(1, 4, "stderr 1\n")]
    code, out, err = _cli(capsys, "logs", str(lid), "--vnode", "5")
    assert code == 2 and out == "" and "no VM 5" in _one_line(err), err
    code, out, err = _cli(capsys, "logs", str(lid), "--bytes", "0")
    assert code == 2 and out == "" and "--bytes" in err and "Traceback" not in err, err
    monkeypatch.setenv("SKYLEASE_TOKEN", serve.tokens["bob"])
    code, out, err = _cli(capsys, "logs", str(lid))
    assert code == 2 and out == "" and f"no lease {lid}" in _one_line(err), err

    # -- the lease's page: each VM's exit status and the last lines of its log
    with httpx.Client(base_url=serve.url, timeout=30) as browser:
        assert login(browser, serve.tokens["alice"]).status_code == 303
        page = browser.get(f"/leases/{lid}", headers=HTML)
        assert page.status_code == 200, page.text
        html = page.text
        assert f"VMs of lease {lid}: exit status" in html, html
        for k in (0, 1):
            assert (f"<td>{k}</td><td>{by_vnode[k]['node']}</td><td><span class=\"state s-exited\">exited"
                    f"</span></td><td>{3 + k}</td>") in html, html
            assert f'<pre class="log">hello from VM {k}\nto stderr {k}</pre>' in html, html
    with httpx.Client(base_url=serve.url, timeout=30) as browser:
        assert login(browser, serve.tokens["bob"]).status_code == 303
        assert browser.get(f"/leases/{lid}", headers=HTML).status_code == 404


def test_a_running_payloads_log_and_a_vm_not_started(serve):
    r = serve.call("POST", "/leases", "alice", json={"nodes": 1, "duration": 6000, "cpu": 0.1, "memory": 64,
                                                     "command": "echo started; exec sleep 600"})
    assert r.status_code == 201, r.text
    lid = r.json()["id"]
    got = waited("the running payload's first line", lambda: (
        x := serve.call("GET", f"/leases/{lid}/vms/0/log", "alice").json())["text"] and x)
    assert got["state"] == "running" and got["exit_code"] is None and got["text"] == "started\n", got
    # an advance reservation far ahead: its VMs have not started, their logs are empty
    r = serve.call("POST", "/leases", "alice", json={"type": "advance-reservation", "start_in": 100_000,
                                                     "nodes": 2, "duration": 60, "cpu": 0.1, "memory": 64})
    assert r.status_code == 201, r.text
    ar = r.json()["id"]
    got = serve.call("GET", f"/leases/{ar}/vms/1/log", "alice").json()
    assert got == {"lease": ar, "vnode": 1, "node": None, "state": "not started", "exit_code": None,
                   "reason": None, "log": "payload", "text": "", "log_error": None}, got


#: The SSH test site's first address is 127.0.0.(SSH_BASE+1): its own range (127.0.0.201-202).
SSH_BASE = 200


@pytest.mark.integration  # a test site of real sshd hosts, as the other serve-on-hosts tests
def test_a_lease_on_ssh_hosts_gives_its_logs_read_there_and_says_when_a_host_does_not_answer(
        ssh_site, serve_process, tmp_path, capsys):
    site = ssh_site(2, base=SSH_BASE)
    text = f'[ssh]\nuser = "root"\nidentity_file = "{site.key}"\nknown_hosts = "{site.known_hosts}"\n'
    for h in site.hosts:
        text += f'[[hosts]]\naddress = "{h.address}"\nname = "{h.name}"\nnodes = 1\ncpu = 1\nmemory = 1024\n'
    (tmp_path / "hosts.toml").write_text(text)
    serve = serve_process(name="hosts", site=tmp_path / "hosts.toml", time_scale=SCALE, grace=1)
    serve.add_users(capsys)
    serve.start()
    lid, view = _two_vms_ended(serve)
    nodes = {p["vnode"]: p["node"] for p in view["ended_payloads"]}
    assert sorted(nodes.values()) == [f"{h.name}-0" for h in site.hosts], nodes
    for k in (0, 1):
        got = serve.call("GET", f"/leases/{lid}/vms/{k}/log", "alice").json()
        assert (got["state"], got["exit_code"], got["node"], got["log_error"]) == ("exited", 3 + k, nodes[k],
                                                                                    None), got
        assert got["text"] == f"hello from VM {k}\nto stderr {k}\n", got
    assert serve.call("GET", f"/leases/{lid}/vms/0/log", "bob").status_code == 404
    # a host that stops answering: the VM's state still answers, its log is said to be unreachable
    k = next(v for v, n in nodes.items() if n.startswith(site.hosts[1].name))
    site.kill_host(site.hosts[1].name)
    got = waited("the host's log said unreachable", lambda: (
        x := serve.call("GET", f"/leases/{lid}/vms/{k}/log", "alice").json())["log_error"] and x, timeout=60)
    assert got["state"] == "exited" and got["exit_code"] == 3 + k and got["text"] == "", got
    assert site.hosts[1].name in got["log_error"], got
