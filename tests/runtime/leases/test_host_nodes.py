"""HostNodes against real sshd hosts of a test site on this machine (skylease.testing.site: each host
its own hostname and PID namespace, on loopback addresses only): a payload runs on its host, is
stopped and continued there, its early exit and its shutdown are reported, a restarted server finds
and adopts it without starting it twice, and a host whose sshd dies is reported as not answering.
What the tests see on a host they read over SSH (the site's own ssh, not the connection under test)."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import time

import pytest
from tests import hostnodes as hosts
from tests import waits

from skylease.control.leases.lease import ResourceTuple
from skylease.runtime.leases.host_nodes import HostNodes
from skylease.runtime.leases.local import Payload
from skylease.runtime.leases.site import Site, SiteNode
from skylease.runtime.leases.ssh import SshError

pytestmark = [pytest.mark.timeout(120), pytest.mark.integration]  # real sshd hosts: CI's second level

#: The test site's first address (127.0.0.(BASE+1)): apart from other test modules' sites.
BASE = 40

# The states of a process group's live processes on a host: "pid state" lines.
_GROUP = """
import os, sys
g = int(sys.argv[1])
for n in os.listdir("/proc"):
    if n.isdigit():
        try:
            d = open("/proc/%s/stat" % n, "rb").read()
        except OSError:
            continue
        r = d[d.rindex(b")") + 2:].split()
        if int(r[2]) == g and r[0] != b"Z":
            print(n, r[0].decode())
"""


@pytest.fixture(scope="module")
def site(ssh_site):
    return ssh_site(3, base=BASE)


def two_nodes() -> Site:
    return Site((SiteNode("a", ResourceTuple()), SiteNode("b", ResourceTuple())))


def group_states(site, host: str, pgid: int) -> list[str]:
    r = site.ssh(host, f"python3 -c '{_GROUP}' {pgid}")
    assert r.returncode == 0, r.stderr
    return sorted(line.split()[1] for line in r.stdout.splitlines())


def until(cond, timeout: float = 10.0):
    """(SSH round trips: a longer default wait than the local tests')"""
    return waits.until(cond, timeout, 0.02)


def collect(hn: HostNodes, n: int, timeout: float = 10.0) -> list[Payload]:
    return waits.collect(hn, n, timeout)


@pytest.fixture
def make(site, tmp_path):
    """``make(host=0, serve_id=None, **kw)``: a HostNodes on that host of the site; all closed
    (payloads killed) at the end, and whatever still carries a serve id used is killed on every host."""
    made: list[HostNodes] = []
    ids: set[str] = set()

    def factory(host: int = 0, serve_id: str | None = None, **kw) -> HostNodes:
        sid = serve_id or f"test-{secrets.token_hex(6)}"
        ids.add(sid)
        h = site.hosts[host]
        conn = hosts.connection(site, host, tmp_path / f"ssh{len(made)}")
        kw.setdefault("remote_dir", f"{tmp_path}/on-{h.name}")  # (the hosts share this machine's files)
        hn = HostNodes(two_nodes(), tmp_path / "data", sid, connection=conn, **kw)
        made.append(hn)
        return hn

    yield factory
    hosts.close_all(made)
    for h, up in site.status():
        if up:
            for sid in ids:
                site.ssh(h.name, f"for p in $(grep -l 'SKYLEASE_SERVE_ID={sid}' /proc/[0-9]*/environ "
                                 "2>/dev/null | cut -d/ -f3); do kill -9 -$p $p; done; true")


def test_a_payload_runs_on_its_host_and_its_output_names_it(make, site):
    hn = make(host=1)
    p = hn.spawn(3, 0, 1, command='hostname; echo "node=$SKYLEASE_NODE lease=$SKYLEASE_LEASE"; pwd; '
                                   'echo "serve=${SKYLEASE_SERVE_ID-unset}"', env={"EXTRA": "x"})
    [ended] = collect(hn, 1)
    assert (ended.lease, ended.vnode, ended.pid, ended.exit_code, ended.state) == (3, 0, p.pid, 0, "exited")
    lines = hn.output(p).splitlines()
    assert lines[0] == site.hosts[1].name == "host2"
    assert lines[1] == "node=b lease=3"
    assert lines[2] == "/lease"  # its lease folder <remote_dir>/leases/3, in its sandbox
    assert lines[3] == "serve=unset"  # the mark is the leader's, not the payload's
    assert hn.live() == []


def test_suspend_stops_the_group_on_its_host_and_resume_continues_it(make, site):
    hn = make()
    p = hn.spawn(1, 0, 0, command="sleep 60 & sleep 60; wait")
    host = site.hosts[0].name
    # the waiter, the sandbox's two (bwrap, its init), sh, two sleeps
    assert until(lambda: len(group_states(site, host, p.pid)) == 6, 5)
    assert hn.suspend(p) and p.state == "stopped"
    assert until(lambda: set(group_states(site, host, p.pid)) == {"T"}, 5)
    assert hn.resume(p) and p.state == "running"
    assert until(lambda: set(group_states(site, host, p.pid)) <= {"R", "S"}, 5)
    assert hn.live() == [p]


def test_the_default_payload_works_its_duration_not_counting_a_stop(make):
    hn = make()
    t0 = time.time()
    p = hn.spawn(2, 0, 0, duration_s=1.0)
    assert p.counts_work
    assert hn.suspend(p)  # during its start-up: it is stopped once it counts its work
    time.sleep(1.5)
    assert hn.exited() == []
    assert hn.resume(p)
    [ended] = collect(hn, 1)
    assert ended.exit_code == 0
    assert 2.4 <= ended.ended_at - t0 <= 5.0


def test_an_early_exit_is_reported_with_its_code_and_time(make, site):
    hn = make()
    t0 = time.time()
    p = hn.spawn(4, 1, 0, command="sleep 0.3; exit 7")
    [ended] = collect(hn, 1)
    assert ended.pid == p.pid and ended.exit_code == 7
    assert t0 + 0.3 <= ended.ended_at <= time.time()
    assert group_states(site, site.hosts[0].name, p.pid) == []
    assert not hn.suspend(p) and not hn.resume(p) and not hn.shutdown(p)


def test_shutdown_ends_a_payload_by_sigterm_or_after_the_grace_by_sigkill(make, site):
    hn = make()
    polite = hn.spawn(5, 0, 0, command="sleep 60")
    stubborn = hn.spawn(5, 1, 0, command="trap '' TERM; while :; do sleep 0.05; done")
    assert until(lambda: len(group_states(site, site.hosts[0].name, stubborn.pid)) >= 2, 5)
    t0 = time.monotonic()
    assert hn.shutdown(polite, grace_s=1.0) and hn.shutdown(stubborn, grace_s=1.0)
    assert time.monotonic() - t0 < 1.0  # the caller does not wait for the grace
    ended = {p.pid: p for p in collect(hn, 2, timeout=6)}
    took = time.monotonic() - t0
    assert ended[polite.pid].exit_code == 128 + signal.SIGTERM  # as its sandbox reports it
    assert ended[stubborn.pid].exit_code == -signal.SIGKILL
    assert 1.0 <= took <= 4.0
    assert group_states(site, site.hosts[0].name, stubborn.pid) == []


def test_a_restarted_server_finds_and_adopts_its_payloads_and_starts_nothing_twice(make, site):
    first = make()
    running = first.spawn(6, 0, 0, command="sleep 60")
    stopped = first.spawn(6, 1, 1, command="sleep 60")
    assert first.suspend(stopped)
    first.close()  # the server goes away; its payloads do not
    host = site.hosts[0].name
    assert group_states(site, host, running.pid) and set(group_states(site, host, stopped.pid)) == {"T"}

    second = make(serve_id=first.serve_id)
    found = sorted(second.find_own(), key=lambda p: p.vnode)
    assert [(p.lease, p.vnode, p.node, p.pid, p.start_ticks, p.state) for p in found] == [
        (6, 0, 0, running.pid, running.start_ticks, "running"),
        (6, 1, 1, stopped.pid, stopped.start_ticks, "stopped")]
    assert all(second.adopt(p) for p in found)
    assert sorted(p.pid for p in second.live()) == sorted([running.pid, stopped.pid])
    assert not second.adopt(Payload(6, 0, 0, running.pid, running.start_ticks + 1))  # another process
    assert make(serve_id="someone-else").find_own() == []
    # nothing was started again: the host has exactly these two payloads of this server
    r = site.ssh(host, f"grep -l 'SKYLEASE_SERVE_ID={first.serve_id}' /proc/[0-9]*/environ 2>/dev/null "
                       "| wc -l")
    assert int(r.stdout) == 2
    # and the adopted ones are watched: their ends are reported by the new one
    assert second.resume(found[1])
    assert second.shutdown(found[0], grace_s=1.0) and second.shutdown(found[1], grace_s=1.0)
    assert sorted(p.pid for p in collect(second, 2)) == sorted([running.pid, stopped.pid])


def host_processes(sshd: int) -> list[int]:
    """Every process of a test host: those in the PID namespace of its sshd (the namespace's first)."""
    ns = os.readlink(f"/proc/{sshd}/ns/pid")
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{name}/ns/pid") == ns:
                    out.append(int(name))
    return out


def test_a_host_that_stops_answering_is_reported_within_the_bound_and_back_when_it_answers(make, site):
    changes: list[bool] = []
    hn = make(host=1, down_after_s=2.0)
    assert hn.host_state().up  # (it answered its first heartbeat before the constructor returned)
    hn.on_state = lambda: changes.append(hn.host_state().up)
    p = hn.spawn(7, 0, 0, command="sleep 60")
    contact = hn.host_state().last_contact
    assert contact is not None and time.time() - contact < 2.0
    # every process of the host stopped: it stops answering without closing its connection; the
    # missing heartbeats are what tell
    frozen = host_processes(site.hosts[1].pid)
    t0 = time.monotonic()
    for pid in frozen:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGSTOP)
    try:
        assert until(lambda: not hn.host_state().up, 2.0 + 3.0)
        took = time.monotonic() - t0
        assert 2.0 - 1.0 <= took <= 2.0 + 1.0  # (the last heartbeat came up to beat_s = 1 s before)
        state = hn.host_state()
        assert state.reason == "no heartbeat for 2 s"
        assert state.last_contact is not None and time.time() - state.last_contact >= 1.9
        assert site.ssh(site.hosts[0].name, "true").returncode == 0  # (the other host answers)
        t1 = time.monotonic()
        with pytest.raises(SshError, match=r"^root@127\.0\.0\.42:22: not answering: no heartbeat for 2 s$"):
            hn.suspend(p)
        assert time.monotonic() - t1 < 0.5  # at once, not after ssh's timeouts
    finally:
        for pid in frozen:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
    # answering again: reconnected within a retry or two, its payload still tracked and in hand
    assert until(lambda: hn.host_state().up, 15.0)
    assert changes == [False, True]
    assert hn.live() == [p] and hn.suspend(p)
    assert set(group_states(site, site.hosts[1].name, p.pid)) == {"T"}
    print(json.dumps({"down_after_s": 2.0, "noticed_s": round(took, 2)}))


def test_a_host_whose_sshd_is_killed_is_reported_as_not_answering_at_once(make, site):
    hn = make(host=2, down_after_s=5.0)
    assert hn.host_state().up
    hn.spawn(8, 0, 0, command="sleep 60")
    sshd = site.hosts[2].pid
    t0 = time.monotonic()
    os.kill(sshd, signal.SIGKILL)  # the first process of its PID namespace: every process of the host ends
    assert until(lambda: not hn.host_state().up, 5.0 + 2.0)
    took = time.monotonic() - t0
    assert took < 2.0  # the connection closed: no need to wait for missing heartbeats
    assert hn.host_state().reason
    assert hn.exited() == []  # its payloads' fate is unknown, not an exit
    print(json.dumps({"killed_noticed_s": round(took, 2)}))


def test_the_helper_answers_on_its_own_too(make):
    """Each command of the helper also runs as a session of its own (python3 -c SOURCE COMMAND)."""
    hn = make()
    p = hn.spawn(9, 0, 0, command="echo hello; exec sleep 60")
    assert until(lambda: "hello" in hn.output(p), 5)

    def alone(*args: str) -> dict:
        code, out, err = hn.conn.run(hn._argv(*args))
        assert code == 0, err
        return json.loads(out)

    [found] = alone("find", hn.serve_id)["found"]
    assert (found["pid"], found["ticks"], found["lease"], found["vnode"], found["node"]) == \
        (p.pid, p.start_ticks, 9, 0, "a")
    assert alone("signal", str(p.pid), str(p.start_ticks)) == {"ok": True, "leader": True, "state": "running"}
    assert alone("signal", str(p.pid), str(p.start_ticks + 1), "KILL")["ok"] is False  # not that process
    assert alone("signal", str(p.pid), str(p.start_ticks), "STOP")["state"] == "stopped"
    code, out, _ = hn.conn.run(hn._argv("tail", hn.log_path(p), "3"))
    assert (code, out) == (0, b"lo\n")
    code, out, _ = hn.conn.run(hn._argv("signal", str(p.pid), str(p.start_ticks), "HUP"))
    assert code == 2 and out == b""  # a usage error: argparse's, on stderr


def test_the_cpu_a_payloads_processes_used_on_the_host(make):
    """The idle_reclaim rule's measure (the helper's ``cpu``): a busy payload's group uses about a
    core, a sleeping one almost none, and an ended one has no figure."""
    hn = make()
    busy = hn.spawn(10, 0, 0, command="sh -c 'while :; do :; done' & wait")  # (its child works)
    idle = hn.spawn(10, 1, 0, command="exec sleep 60")
    first = hn.cpu_seconds([busy, idle])
    time.sleep(1.0)
    then = hn.cpu_seconds([busy, idle])
    assert None not in first and None not in then, (first, then)
    assert then[0] - first[0] > 0.3, (first, then)  # (a core, shared with the test's other work)
    assert then[1] - first[1] < 0.05, (first, then)
    hn.shutdown(busy, 0.0)
    assert waits.until(lambda: hn.cpu_seconds([busy]) == [None], 5.0), hn.cpu_seconds([busy])
