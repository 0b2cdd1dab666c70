"""Payload confinement and CPU pinning on a host reached over SSH (runtime/leases/host_sandbox.py),
against a real sshd host of a test site on this machine (its own hostname, PID and mount namespaces;
the SSH user root, so a payload runs as the host's payload user in a bubblewrap sandbox): a payload
reaches its own lease folder and nothing else of the SSH user's (its home, the server's folder on
the host: other leases' folders, exit files, payload logs), sees only its own processes, has the
fresh environment, and its whole group is pinned to its node's CPUs; a suspended payload's sandboxed
processes stop, and the default payload still counts its work; a host where payloads cannot be
confined or pinned is refused at start in one line. What the tests see on the host they read over
the site's own ssh (the host's /proc), or in the file system the host shares with this machine."""

from __future__ import annotations

import os
import secrets
import shutil
import time
from pathlib import Path

import pytest
from tests import hostnodes as hosts
from tests import waits

from skylease.control.leases.lease import ResourceTuple
from skylease.runtime.leases.host_nodes import HostNodes
from skylease.runtime.leases.sandbox import PAYLOAD_PATH, SandboxUnavailable
from skylease.runtime.leases.site import Site, SiteHost, SiteNode
from skylease.runtime.leases.ssh import SshConnection

pytestmark = [pytest.mark.timeout(120), pytest.mark.integration]  # real sshd hosts: CI's second level

#: The test site's first address (127.0.0.(BASE+1)): apart from other test modules' sites.
BASE = 80

# The processes of a process group on the host: "pid state depth cpus" lines (depth: how many PID
# namespaces below the host's it is in: 1 in the payload's sandbox; cpus: its Cpus_allowed_list).
_GROUP = """
import os, sys
g = int(sys.argv[1])
for n in os.listdir("/proc"):
    if n.isdigit():
        try:
            d = open("/proc/%s/stat" % n, "rb").read()
            st = dict(l.split(":", 1) for l in open("/proc/%s/status" % n).read().splitlines() if ":" in l)
        except OSError:
            continue
        r = d[d.rindex(b")") + 2:].split()
        if int(r[2]) == g and r[0] != b"Z":
            print(n, r[0].decode(), len(st["NSpid"].split()) - 1, st["Cpus_allowed_list"].strip())
"""


@pytest.fixture(scope="module")
def site(ssh_site):
    return ssh_site(1, base=BASE)


def two_nodes() -> Site:
    return Site((SiteNode("a", ResourceTuple()), SiteNode("b", ResourceTuple())))


def group(site, pgid: int) -> list[tuple[str, int, str]]:
    """(state, depth, cpus) of each live process of group ``pgid`` on the host."""
    r = site.ssh(site.hosts[0].name, f"python3 -c '{_GROUP}' {pgid}")
    assert r.returncode == 0, r.stderr
    return sorted((f[1], int(f[2]), f[3]) for f in (line.split() for line in r.stdout.splitlines()))


def cpu_list(cpus) -> str:
    return ",".join(str(c) for c in cpus)  # (the nodes of two_nodes() have one CPU each)


@pytest.fixture
def make(site, tmp_path):
    """``make(site=two_nodes(), **kw)``: a HostNodes on the site's host (its remote folder in the SSH
    user's home unless ``remote_dir`` is given); all closed (payloads killed) at the end, their
    folders in that home removed, and whatever still carries a serve id used killed on the host."""
    made: list[HostNodes] = []
    ids: list[str] = []

    def connection() -> SshConnection:
        return hosts.connection(site, 0, tmp_path / f"ssh{len(ids)}")

    def factory(nodes: Site | None = None, **kw) -> HostNodes:
        sid = f"test-{secrets.token_hex(6)}"
        ids.append(sid)
        hn = HostNodes(nodes or two_nodes(), tmp_path / "data", sid, connection=connection(), **kw)
        made.append(hn)
        return hn

    yield factory
    hosts.close_all(made)
    for sid in ids:
        shutil.rmtree(Path("/root/.skylease") / sid, ignore_errors=True)  # (the host's home is ours)
        site.ssh(site.hosts[0].name, f"for p in $(grep -l 'SKYLEASE_SERVE_ID={sid}' /proc/[0-9]*/environ "
                                     "2>/dev/null | cut -d/ -f3); do kill -9 -$p $p; done; true")


# A payload that reports what it sees: which of $SECRETS exist for it, the names of the processes
# in its /proc, its environment, its CPUs and user, and that it writes its lease folder.
_LOOK = r"""
for f in $SECRETS; do [ -e "$f" ] && echo "SAW $f"; done
echo "home $(ls -A "$SSH_HOME" 2>/dev/null | tr '\n' ' ')"
echo "procs $(for p in /proc/[0-9]*; do cat $p/comm; done 2>/dev/null | sort -u | tr '\n' ' ')"
echo "uid $(id -u)"
grep Cpus_allowed_list /proc/self/status
echo mine > /lease/out && echo "wrote $(cat /lease/out)"
echo --env--
env
"""


def test_a_payload_on_a_host_reaches_its_lease_folder_and_nothing_else_of_the_ssh_user(make):
    hn = make()  # its remote folder in the SSH user's home (root's: .skylease/<serve id>/<address>)
    box = hn.confinement
    home, remote = box.home, box.remote_dir
    assert remote.startswith(f"{home}/.skylease/{hn.serve_id}/")
    other = hn.spawn(99, 0, 0, command="echo theirs > /lease/theirs; echo other-log; "
                                        "grep Cpus_allowed_list /proc/self/status; exec sleep 30")
    assert waits.until(lambda: "Cpus_allowed_list" in hn.output(other), 10)
    # the SSH user's own files in its home, the server's folder on the host and what lies in it
    keys = Path(home) / ".skylease" / hn.serve_id
    for name in ("id_ed25519", "known_hosts"):
        (keys / name).write_text("secret\n")
    (Path(remote) / "exits" / "1-1.json").write_text('{"code": 0, "time": 0}')
    there = [str(keys / "id_ed25519"), str(keys / "known_hosts"), f"{remote}/leases/99/theirs",
             f"{remote}/exits/1-1.json", f"{remote}/payloads/99-0.log", f"{remote}/payloads", remote,
             f"{home}/.skylease"]
    assert all(os.path.exists(p) for p in there)  # (outside its sandbox)
    # and where its own folder lies on the host, and the usual places of an SSH user's files
    secrets_ = [*there, f"{remote}/leases/7", f"{home}/.ssh", f"{home}/.ssh/authorized_keys"]

    p = hn.spawn(7, 0, 1, command=_LOOK, env={"SECRETS": " ".join(secrets_), "SSH_HOME": home})
    [ended] = waits.collect(hn, 1, 10)
    assert ended.pid == p.pid and ended.exit_code == 0, hn.output(p)
    out = hn.output(p)
    head, _, env_text = out.partition("--env--\n")
    lines = head.splitlines()
    assert not [line for line in lines if line.startswith("SAW")], out
    # of the SSH user's home, at most the way to the Python installation that runs the default
    # payload, where it lies there (bound read-only; here root's python3 may be a pyenv one)
    way = {Path(t).relative_to(home).parts[0] for t in box.sandbox.readable if t.startswith(f"{home}/")}
    assert set(next(line for line in lines if line.startswith("home")).split()[1:]) == way, out
    # only its own processes: the sandbox's init (bwrap), sh and what sh runs; not the other lease's
    # sleep, nor the helper's waiter (python3) or the host's sshd outside its sandbox
    procs = set(next(line for line in lines if line.startswith("procs ")).split()[1:])
    assert procs <= {"bwrap", "sh", "cat", "sort", "tr"} and "sh" in procs, procs
    assert f"uid {box.sandbox.user.uid}" in lines and box.sandbox.user.uid != 0
    assert f"Cpus_allowed_list:\t{cpu_list(hn.site.cpus(1))}" in lines
    assert "wrote mine" in lines
    env = dict(line.split("=", 1) for line in env_text.splitlines())
    env.pop("PWD", None)  # (the shell's own)
    assert env == {"PATH": PAYLOAD_PATH, "HOME": "/lease", "TMPDIR": "/tmp", "LANG": "C.UTF-8",
                   "SKYLEASE_LEASE": "7", "SKYLEASE_VNODE": "0", "SKYLEASE_NODE": "b",
                   "SKYLEASE_LEASE_DIR": "/lease", "SECRETS": " ".join(secrets_), "SSH_HOME": home}
    # what it wrote is in its lease folder on the host, which is the payload user's and private
    folder = Path(remote) / "leases" / "7"
    assert (folder / "out").read_text() == "mine\n"
    st = folder.stat()
    assert (st.st_uid, st.st_gid, st.st_mode & 0o777) == (box.sandbox.user.uid, box.sandbox.user.gid, 0o700)
    assert (Path(remote) / "leases" / "99" / "theirs").read_text() == "theirs\n"
    # the other payload, on node a, runs on node a's CPUs
    assert f"Cpus_allowed_list:\t{cpu_list(hn.site.cpus(0))}" in hn.output(other).splitlines()


def test_a_suspended_payload_on_a_host_stops_in_its_sandbox_and_the_default_payload_counts_work(make, site):
    hn = make(remote_dir=None)
    q = hn.spawn(1, 0, 0, command="sleep 60 & sleep 60; wait")
    node_cpus = cpu_list(hn.site.cpus(0))
    # the waiter and bwrap on the host, the sandbox's init, sh and two sleeps in the sandbox
    assert waits.until(lambda: len(group(site, q.pid)) == 6, 5)
    procs = group(site, q.pid)
    assert [depth for _, depth, _ in procs].count(1) == 4, procs
    assert {cpus for _, _, cpus in procs} == {node_cpus}  # the whole group is pinned
    assert hn.suspend(q)
    assert waits.until(lambda: {state for state, _, _ in group(site, q.pid)} == {"T"}, 5), group(site, q.pid)
    assert hn.resume(q)
    assert waits.until(lambda: {state for state, _, _ in group(site, q.pid)} <= {"R", "S"}, 5)

    t0 = time.time()
    p = hn.spawn(2, 0, 1, duration_s=0.5)
    assert hn.suspend(p)  # during its start-up: stopped once it counts its work
    assert waits.until(lambda: {state for state, _, _ in group(site, p.pid)} == {"T"}, 5), group(site, p.pid)
    stopped = group(site, p.pid)
    assert sum(d for _, d, _ in stopped) >= 2, stopped  # (the sandbox's init and the payload among them)
    assert {cpus for _, _, cpus in stopped} == {cpu_list(hn.site.cpus(1))}
    time.sleep(1.0)
    assert hn.exited() == []
    assert hn.resume(p)
    [ended] = waits.collect(hn, 1, 10)
    assert ended.pid == p.pid and ended.exit_code == 0, hn.output(p)
    assert 1.5 <= ended.ended_at - t0 <= 4.0


def test_a_node_with_cpus_the_host_lacks_is_refused_at_start_in_one_line(make, site):
    h = site.hosts[0]
    have = len(os.sched_getaffinity(0))  # (the host's sshd runs with the CPUs of this test's process)
    where = SiteHost(h.name, h.address, 22, "root", site.key, site.known_hosts)
    nodes = Site((SiteNode(f"{h.name}-0", ResourceTuple(cpu=1), host=where),
                  SiteNode(f"{h.name}-1", ResourceTuple(cpu=have), host=where)))
    with pytest.raises(SandboxUnavailable) as caught:
        make(nodes)
    assert str(caught.value) == (
        f"root@{h.address}:22: cannot pin lease payloads: node {h.name}-1 is pinned to CPUs "
        f"{'1' if have == 1 else f'1-{have}'}, but the host has {'0' if have == 1 else f'0-{have - 1}'} "
        f"(missing {have}): give its nodes fewer CPUs")
    assert "\n" not in str(caught.value)


def test_a_payload_user_that_cannot_be_is_refused_at_start_in_one_line(make, site):
    address = site.hosts[0].address
    with pytest.raises(SandboxUnavailable, match=rf"^root@{address}:22: cannot confine lease payloads: no "
                                                 r"payload user: 'root' is root \(uid or gid 0\)"):
        make(payload_user="root")
    with pytest.raises(SandboxUnavailable, match=rf"^root@{address}:22: cannot confine lease payloads: no "
                                                 r"payload user: no user 'no-such-user-here'"):
        make(payload_user="no-such-user-here")
