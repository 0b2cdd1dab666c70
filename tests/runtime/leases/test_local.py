"""Local enactment against real processes (no mocks): pinning, SIGSTOP/SIGCONT of whole process
groups, re-pinning, shutdown with a grace period, early exits, and a payload that outlives its
server and is adopted by the next one. Every test's payloads carry a serve id of their own, and a
fixture kills whatever of them is left."""

from __future__ import annotations

import contextlib
import os
import secrets
import shlex
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from tests.waits import collect, until

from skylease.control.leases.lease import ResourceTuple
from skylease.runtime.leases.local import ENV_SERVE_ID, TICK_S, LocalNodes, Payload
from skylease.runtime.leases.sandbox import PAYLOAD_PATH
from skylease.runtime.leases.site import Site, SiteNode, load_site

pytestmark = [pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only"),
              pytest.mark.timeout(60)]

MACHINE = tuple(sorted(os.sched_getaffinity(0)))
#: The processes of a payload's group that are its sandbox's own: bwrap outside, and its init inside.
SANDBOX = 2
TWO_CPUS = pytest.mark.skipif(len(MACHINE) < 2, reason="needs two CPUs to tell nodes apart")


def two_nodes() -> Site:
    return Site((SiteNode("a", ResourceTuple()), SiteNode("b", ResourceTuple())))


def cpus_allowed(pid: int, tid: int | None = None) -> set[int]:
    """Cpus_allowed_list of /proc, e.g. ``0-1,3``, as a set."""
    path = f"/proc/{pid}/status" if tid is None else f"/proc/{pid}/task/{tid}/status"
    text = Path(path).read_text()
    spec = text.split("Cpus_allowed_list:")[1].split()[0]
    out: set[int] = set()
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def stat_mode(path: Path) -> int:
    return path.stat().st_mode & 0o7777


def stat(pid: int) -> tuple[str, int, int] | None:
    """(state, process group, start ticks) of a process, or None."""
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    rest = data[data.rindex(b")") + 2:].split()
    return rest[0].decode(), int(rest[2]), int(rest[19])


def group(pgid: int) -> list[int]:
    """The live (not zombie) processes of a process group."""
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit() and (st := stat(int(name))) is not None and st[1] == pgid and st[0] != "Z":
            out.append(int(name))
    return out


def names(pids: list[int]) -> list[str]:
    """The processes' names (``comm``; "" for one that has ended)."""
    out = []
    for pid in pids:
        try:
            out.append(Path(f"/proc/{pid}/comm").read_text().strip())
        except OSError:
            out.append("")
    return out


def group_stopped(pgid: int) -> bool:
    """Every process of the group is stopped, or waits for one that is (a shell stopped between
    its vfork and its child's exec waits in state D)."""
    states = [stat(pid)[0] for pid in group(pgid)]
    return "T" in states and set(states) <= {"T", "D"}


def kill_serve_ids(ids: set[str]) -> None:
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            env = Path(f"/proc/{name}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(item.startswith(f"{ENV_SERVE_ID}=".encode()) and item.split(b"=", 1)[1].decode() in ids
               for item in env):
            with contextlib.suppress(OSError):
                os.kill(int(name), signal.SIGKILL)


@pytest.fixture
def make(tmp_path, payload_sandbox):
    """``make(site=None, serve_id=None)``: a LocalNodes on tmp_path/data; all closed (payloads
    killed) at the end, and any process still carrying one of the serve ids used is killed."""
    made: list[LocalNodes] = []
    ids: set[str] = set()

    def factory(site: Site | None = None, serve_id: str | None = None, **kw) -> LocalNodes:
        sid = serve_id or f"test-{secrets.token_hex(6)}"
        ids.add(sid)
        ln = LocalNodes(site or two_nodes(), tmp_path / "data", sid, sandbox=payload_sandbox, **kw)
        made.append(ln)
        return ln

    factory.ids = ids
    yield factory
    for ln in made:
        ln.close(kill=True, grace_s=0.2)
    kill_serve_ids(ids)


def environ(pid: int) -> dict[str, str]:
    return dict(item.split("=", 1) for item in Path(f"/proc/{pid}/environ").read_text().split("\0") if item)


def test_spawn_pins_every_process_to_its_node_and_sets_the_environment(make, tmp_path, payload_sandbox,
                                                                      monkeypatch):
    ln = make()
    before = os.sched_getaffinity(0)
    monkeypatch.setenv("SKYLEASE_TEST_SECRET", "server-only")  # (the server's environment reaches no payload)
    p = ln.spawn(3, 1, 1, command="sleep 30 & sleep 30 & wait", env={"SKYLEASE_NODES": "a,b"})
    assert os.sched_getaffinity(0) == before  # the spawning thread got its own affinity back
    # (both sleeps exec'd: a child of sh between its fork and its exec is named sh too, as CI saw)
    members = until(lambda: len(g := group(p.pid)) == SANDBOX + 3 and names(g).count("sleep") == 2 and g)
    assert members, "the group should hold the sandbox's two, sh and two sleeps"
    for pid in members:
        assert cpus_allowed(pid) == set(ln.site.cpus(1)), pid
    outer = environ(p.pid)  # the sandbox's leader: what a restarted server looks for
    assert (outer["SKYLEASE_LEASE"], outer["SKYLEASE_VNODE"], outer["SKYLEASE_NODE"]) == ("3", "1", "b")
    assert outer["SKYLEASE_SERVE_ID"] == ln.serve_id and "SKYLEASE_TEST_SECRET" not in outer
    (sh,) = [pid for pid in members if Path(f"/proc/{pid}/comm").read_text().strip() == "sh"]
    inner = environ(sh)  # the payload's own: built from nothing
    assert inner == {"PATH": PAYLOAD_PATH, "HOME": "/lease", "TMPDIR": "/tmp", "LANG": "C.UTF-8",
                     "SKYLEASE_NODES": "a,b", "SKYLEASE_LEASE": "3", "SKYLEASE_VNODE": "1",
                     "SKYLEASE_NODE": "b", "SKYLEASE_LEASE_DIR": "/lease", "PWD": "/lease"}
    folder = tmp_path / "data" / "leases" / "3"
    assert os.readlink(f"/proc/{sh}/cwd") == "/lease"
    assert os.stat(f"/proc/{sh}/cwd").st_ino == folder.stat().st_ino
    assert stat_mode(folder) == 0o700 and stat_mode(tmp_path / "data" / "leases") == 0o700
    if payload_sandbox.user is not None:  # a root server: the payload runs as the payload user
        assert os.stat(f"/proc/{sh}").st_uid == payload_sandbox.user.uid == folder.stat().st_uid
    assert stat(p.pid)[1] == p.pid and os.getsid(p.pid) == p.pid  # its own session and group
    assert (p.lease, p.vnode, p.node, p.state, p.start_ticks) == (3, 1, 1, "running", stat(p.pid)[2])


def test_suspend_stops_the_whole_group_and_resume_continues_it(make):
    ln = make()
    p = ln.spawn(1, 0, 0, command="sleep 30 & sleep 30 & wait")
    members = until(lambda: len(g := group(p.pid)) == SANDBOX + 3 and g)
    assert members
    assert ln.suspend(p) and p.state == "stopped"
    assert until(lambda: all(stat(pid)[0] == "T" for pid in members), 3), [stat(pid) for pid in members]
    assert ln.resume(p) and p.state == "running"
    assert until(lambda: all(stat(pid)[0] in "SR" for pid in members), 3), [stat(pid) for pid in members]


def test_the_cpu_a_payloads_processes_used_counts_its_children_and_stops_while_it_is_stopped(make):
    """The idle_reclaim rule's measure: a busy payload's group (its working child in the sandbox
    included) uses CPU, a sleeping one almost none, a stopped one none; an ended one has no figure."""
    ln = make()
    busy = ln.spawn(1, 0, 0, command="sh -c 'while :; do :; done' & wait")
    idle = ln.spawn(1, 1, 1, command="exec sleep 30")
    first = ln.cpu_seconds([busy, idle])
    time.sleep(0.6)
    then = ln.cpu_seconds([busy, idle])
    assert None not in first and None not in then, (first, then)
    assert then[0] - first[0] > 0.2 and then[1] - first[1] < 0.05, (first, then)
    assert ln.suspend(busy)
    time.sleep(0.2)
    stopped = ln.cpu_seconds([busy])[0]
    time.sleep(0.5)
    assert ln.cpu_seconds([busy])[0] == stopped
    ln.shutdown(busy, 0.0)
    assert until(lambda: ln.cpu_seconds([busy]) == [None], 5), ln.cpu_seconds([busy])


def test_the_default_payload_runs_its_duration_not_counting_the_time_it_is_stopped(make):
    """A plain `sleep 1.5` stopped 2 s after 0.5 s would end at once when continued (about 2.5 s
    in all); the default payload counts its running time only, so it ends at 1.5 s + the stop.

    Lower bound: across a stop it loses at most one sleep step (TICK_S) of its running time.
    Upper bound: plus the interpreter's start (a few hundred ms at most on a loaded 2-core
    machine) and the notice of its exit (a pidfd: at once): 1 s of margin."""
    ln = make()
    duration = 1.5
    t0 = time.monotonic()
    p = ln.spawn(1, 0, 0, duration_s=duration)
    time.sleep(0.5)
    ln.suspend(p)
    s0 = time.monotonic()
    assert until(lambda: stat(p.pid)[0] == "T", 2)
    time.sleep(2.0)
    ln.resume(p)
    stopped = time.monotonic() - s0
    (ended,) = collect(ln, 1, timeout=10)
    total = time.monotonic() - t0
    assert ended is p and p.state == "exited" and p.exit_code == 0
    assert duration + stopped - TICK_S - 0.02 <= total <= duration + stopped + 1.0, (total, stopped)


def test_a_default_payload_stopped_in_its_start_up_still_works_its_duration(make):
    """A suspension right after a start (the scheduler may preempt a lease seconds after starting
    it; at 60 lease seconds a real second, within the payload's start-up) must not make the payload
    take the time it stays stopped for work: stopped before it counts, it found `now - since` past
    its duration when continued and ended at once (seen under load in the crash tests: a lease of
    45 s recorded 18 s of work). The stop waits until it counts (its SIGCONT handler is set)."""
    ln = make()
    duration = 1.0
    p = ln.spawn(1, 0, 0, duration_s=duration)
    assert p.counts_work
    ln.suspend(p)  # at once: the interpreter in the sandbox has not started yet
    assert until(lambda: stat(p.pid)[0] == "T", 2)
    time.sleep(1.5)  # longer than its duration
    ln.resume(p)
    resumed = time.monotonic()
    (ended,) = collect(ln, 1, timeout=10)
    after = time.monotonic() - resumed
    assert ended is p and p.exit_code == 0
    # it had worked at most its start-up before the stop: nearly all of its second is left
    assert after >= duration - 0.4, after


@TWO_CPUS
def test_migrate_repins_every_thread_of_every_process_of_the_group(make, payload_sandbox):
    ln = make()
    threaded = (f"{shlex.quote(payload_sandbox.interpreter)} -c 'import threading, time; "
                "[threading.Thread(target=time.sleep, args=(30,), daemon=True).start() for _ in range(2)]; "
                "time.sleep(30)'")
    p = ln.spawn(1, 0, 0, command=f"{threaded} & sleep 30 & wait")

    def tasks() -> list[tuple[int, int]]:
        return [(pid, int(t)) for pid in group(p.pid) for t in os.listdir(f"/proc/{pid}/task")]

    assert until(lambda: len(tasks()) == SANDBOX + 1 + 3 + 1, 10), tasks()  # sh, python (3 threads), sleep
    assert all(cpus_allowed(pid, tid) == set(ln.site.cpus(0)) for pid, tid in tasks())
    assert ln.migrate(p, 1) and p.node == 1
    assert {(pid, tid): cpus_allowed(pid, tid) for pid, tid in tasks()} == {
        task: set(ln.site.cpus(1)) for task in tasks()}


def test_shutdown_kills_a_payload_that_ignores_sigterm_after_the_grace_without_waiting(make):
    ln = make()
    p = ln.spawn(1, 0, 0, command="trap '' TERM; while :; do sleep 0.1; done")
    assert until(lambda: len(group(p.pid)) >= 1)
    time.sleep(0.2)  # the trap is set
    t0 = time.monotonic()
    assert ln.shutdown(p, grace_s=1.0)
    assert time.monotonic() - t0 < 0.2  # the caller does not wait for the grace period
    time.sleep(0.6)
    assert stat(p.pid) is not None and stat(p.pid)[0] != "Z" and ln.exited() == []  # TERM ignored
    (ended,) = collect(ln, 1, timeout=5)
    assert ended is p and p.exit_code == -signal.SIGKILL
    assert 1.0 <= time.monotonic() - t0 <= 3.0
    # the group is gone (its other processes end once the SIGKILL reaches them: on a starved
    # machine, a moment after the leader's end is reported) and the leader reaped
    assert until(lambda: group(p.pid) == [], 5) and stat(p.pid) is None
    assert not ln.shutdown(p) and not ln.suspend(p)  # nothing left to signal


def test_shutdown_of_a_stopped_payload_continues_it_so_that_sigterm_ends_it(make):
    ln = make()
    p = ln.spawn(1, 0, 0, duration_s=30)
    time.sleep(0.3)
    ln.suspend(p)
    assert until(lambda: stat(p.pid)[0] == "T", 2)
    t0 = time.monotonic()
    ln.shutdown(p, grace_s=5.0)
    (ended,) = collect(ln, 1, timeout=4)
    # ended by SIGTERM, as its sandbox reports it (128 + the signal), not by the SIGKILL
    assert ended.exit_code == 128 + signal.SIGTERM and time.monotonic() - t0 < 4.0


def test_a_shutdown_while_the_sandbox_is_set_up_ends_it_at_once_not_at_the_grace(make):
    """Right after a spawn the sandbox may hold no payload process yet: the shutdown's SIGTERM
    goes to the sandbox itself then (a payload started after it would never be told to end)."""
    ln = make()
    for lease in range(1, 6):
        p = ln.spawn(lease, 0, 0, command="sleep 60")
        t0 = time.monotonic()
        assert ln.shutdown(p, grace_s=5.0)
        (ended,) = collect(ln, 1, timeout=8)
        assert ended is p and ended.exit_code != -signal.SIGKILL, ended
        assert time.monotonic() - t0 < 3.0


def test_an_early_exit_is_reported_with_its_code_its_group_killed_and_no_zombie_left(make):
    noticed = threading.Event()
    ln = make(on_exit=noticed.set)
    p = ln.spawn(4, 2, 1, command="sleep 30 & echo bye; exit 7")
    (ended,) = collect(ln, 1)
    assert noticed.is_set()
    assert (ended.lease, ended.vnode, ended.state, ended.exit_code) == (4, 2, "exited", 7)
    assert ended is p and p.ended_at is not None
    st = stat(p.pid)
    assert st is None or st[2] != p.start_ticks  # reaped: no zombie of ours under that pid
    assert until(lambda: group(p.pid) == [], 2)  # the background sleep went with its VM
    assert until(lambda: ln.output(p) == "bye\n", 2) and ln.live() == []  # (the keeper may lag a moment)
    assert ln.exited() == []  # reported once


def test_the_log_keeps_the_last_64_kib(make):
    ln = make()
    # 3000 numbered lines of 50 bytes: 150 KB
    p = ln.spawn(1, 0, 0, command="i=0; while [ $i -lt 3000 ]; do printf '%049d\\n' $i; i=$((i+1)); done")
    collect(ln, 1)
    assert until(lambda: ln.output(p).endswith(f"{2999:049d}\n"), 5)  # the keeper has written it all
    sizes = [p.log.stat().st_size, p.log.with_name(p.log.name + ".1").stat().st_size]
    assert 64 * 1024 <= sum(sizes) <= 128 * 1024 and max(sizes) <= 64 * 1024, sizes
    lines = ln.output(p).splitlines()
    assert len(lines) >= 64 * 1024 // 50 - 1 and [int(x) for x in lines[1:]] == list(
        range(3000 - len(lines) + 1, 3000))


CHILD = """
import sys, time
from pathlib import Path
from skylease.runtime.leases.local import LocalNodes
from skylease.runtime.leases.sandbox import probe
from skylease.runtime.leases.site import load_site
data = Path(sys.argv[2])
ln = LocalNodes(load_site(Path(sys.argv[1])), data, sys.argv[3], sandbox=probe(data))
a = ln.spawn(5, 1, 1, duration_s=float(sys.argv[4]))
b = ln.spawn(6, 0, 0, command="sleep 60")
ln.suspend(b)
print(a.pid, a.start_ticks, b.pid, b.start_ticks, flush=True)
time.sleep(60)
"""


def test_a_payload_outlives_its_server_and_the_next_one_finds_adopts_and_watches_it(make, tmp_path):
    site_file = tmp_path / "site.toml"
    site_file.write_text('[[nodes]]\nname = "n"\ncount = 2\n')
    sid = f"test-{secrets.token_hex(6)}"
    make.ids.add(sid)
    server = subprocess.Popen([sys.executable, "-c", textwrap.dedent(CHILD), str(site_file),
                               str(tmp_path / "data"), sid, "4"], stdout=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline()
        a_pid, a_ticks, b_pid, b_ticks = map(int, line.split())
        t_spawned = time.monotonic()
    finally:
        server.send_signal(signal.SIGKILL)  # kill -9 of the server
        server.wait()
    assert until(lambda: group_stopped(b_pid), 2), [stat(pid) for pid in group(b_pid)]
    assert stat(a_pid)[0] in "SR" and stat(a_pid)[2] == a_ticks  # it outlived the server

    assert make(load_site(site_file), serve_id="someone-else").find_own() == []
    ln = make(load_site(site_file), serve_id=sid)
    found = sorted(ln.find_own(), key=lambda q: q.lease)
    assert [(q.lease, q.vnode, q.node, q.pid, q.start_ticks, q.state) for q in found] == [
        (5, 1, 1, a_pid, a_ticks, "running"), (6, 0, 0, b_pid, b_ticks, "stopped")]
    assert found[0].log == tmp_path / "data" / "payloads" / "5-1.log"

    stale = Payload(5, 1, 1, a_pid, a_ticks + 1)  # the pid now names another process
    assert not ln.adopt(stale) and not ln.adopt(Payload(5, 1, 1, 2**22 + 7, 1))
    a, b = found
    assert ln.adopt(a) and ln.adopt(b) and sorted(q.pid for q in ln.live()) == sorted([a_pid, b_pid])

    ln.resume(b)
    assert until(lambda: stat(b_pid)[0] in "SR", 2)
    ln.shutdown(b, grace_s=5.0)  # signals reach an adopted group too
    ended = collect(ln, 2, timeout=10)  # b now; a when its 4 s are up
    assert [q.lease for q in ended] == [6, 5]
    assert all(q.state == "exited" and q.exit_code is None for q in ended)  # not our children
    # it ran its course: neither the crash nor the adoption ended it
    assert time.monotonic() - t_spawned >= 3.5
    assert group(a_pid) == [] and group(b_pid) == []
