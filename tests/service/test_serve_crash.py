"""Crash tests of ``skylease serve`` (issue 19, "Crash"): a real server process with 20 leases in the
system (running, suspended by an advance reservation under NOVM-SR, queued, future ARs, an immediate
lease) is killed with SIGKILL and restarted on the same data folder and database. Then no lease is
lost, none is started twice (one payload process per VM per run: the ``lease_payloads`` table and
/proc agree), running payloads are adopted (same pid), suspended ones stay stopped until they resume,
every lease ends as the simulator says it would have without the crash (every event within 5 lease
seconds), and no payload outlives its lease. On SQLite and on PostgreSQL.

Also: a crash at the worst moment (the request's transaction committed, its payload not spawned yet,
or spawned but not recorded), provoked for real through the manager's enactment (seamed_serve.py:
the real server whose spawn of one lease's payload SIGKILLs it); and a payload that dies while the
server is down (its lease ends, its row says why).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from skylease.cli import main
from skylease.control.leases import Lease, LeaseKind
from skylease.experiments.leases import load_config
from skylease.service.server import DEFAULT_SCHEDULER
from skylease.sim.leases import simulate_leases

from .payloads import (
    TERMINAL,
    ProcWatcher,
    assert_no_payload_left,
    assert_processes_match_states,
    payload_processes,
    state_in_proc,
)

# (a real `skylease serve` confines its payloads: without bubblewrap it refuses to start, so these skip)
# kill -9 and restarts of real servers: CI's integration level
pytestmark = [pytest.mark.usefixtures("payload_sandbox"), pytest.mark.integration]

#: Lease seconds per real second. (At 60, a machine running three copies of this file at once
#: missed the scenario's moments: its windows, in real seconds, are twice as wide at 30.)
SCALE = 30
#: Event times of the service and of the simulator may differ by this many lease seconds.
TOLERANCE = 5
#: Real seconds between a payload's SIGTERM and its SIGKILL: the died-while-down test kills the
#: server within this grace of a cancelled lease's stubborn payload.
GRACE_S = 5
NODES = 6
#: Every VM asks for 256 MB: suspending or resuming it takes 6 lease seconds, and a lease that has
#: run 66 s may be suspended for an AR (NOVM-SR's thresholds with 256 MB).
MEM = 256
START_RE = re.compile(r"^skylease serve: (https?://\S+) \(OpenAPI at /docs\)")
#: The real server with a fault injected through the lease manager's enactment.
SEAMED = Path(__file__).resolve().parent / "seamed_serve.py"


# -- a real server ----------------------------------------------------------------------------------
@dataclass
class Server:
    """``python -m skylease serve`` on a free loopback port, its data in ``data``, its database ``db``
    (None: SQLite in ``data``); ``tokens`` of alice, bob and the administrator root."""

    data: Path
    db: str | None
    tokens: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen | None = None
    url: str = ""
    starts: int = 0
    env: dict[str, str] | None = None  # the server's environment (None: this process's)

    @property
    def db_url(self) -> str:
        return self.db or f"sqlite:///{self.data / 'skylease.sqlite'}"

    def options(self) -> dict[str, Any]:
        """The server's configuration (its site file written)."""
        site = self.data.parent / "site.toml"
        site.write_text(f"[[nodes]]\ncount = {NODES}\ncpu = 1\nmemory = 1024\n")
        options = {"port": 0, "data_dir": str(self.data), "time_scale": SCALE, "site": str(site),
                   "grace": GRACE_S}
        return options | ({"db": self.db} if self.db else {})

    def argv(self, faults: dict[str, int] | None = None) -> list[str]:
        """``python -m skylease serve`` with :meth:`options`; with ``faults``, seamed_serve.py instead
        (``kill_before_spawn``, ``kill_after_spawn``, ``fail_spawn``: a lease id)."""
        options = self.options()
        if faults:
            return [sys.executable, str(SEAMED), json.dumps({"options": options, **faults})]
        argv = [sys.executable, "-m", "skylease", "serve"]
        for key, value in options.items():
            argv += ["--" + key.replace("_", "-"), str(value)]
        return argv

    def add_users(self, capsys) -> None:
        for name, admin in (("alice", False), ("bob", False), ("root", True)):
            argv = ["serve", "user", "add", name, "--data-dir", str(self.data)]
            argv += (["--admin"] if admin else []) + (["--db", self.db] if self.db else [])
            assert main(argv) == 0
            self.tokens[name] = capsys.readouterr().out.strip()

    def start(self, faults: dict[str, int] | None = None, timeout: float = 60) -> None:
        self.starts += 1
        err = open(self.data.parent / f"server-{self.starts}.err", "w")  # noqa: SIM115 (the server's)
        env = {**(self.env or os.environ), "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(self.argv(faults), env=env, stdout=subprocess.PIPE, stderr=err,
                                     text=True)
        err.close()
        line = self.proc.stdout.readline().strip()
        m = START_RE.match(line)
        assert m is not None, f"no start line: {line!r}; stderr: {self.stderr()[-3000:]}"
        self.url = m.group(1)
        deadline = time.monotonic() + timeout
        while True:
            try:
                if httpx.get(self.url + "/health", timeout=5).json()["ok"]:
                    return
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline and self.proc.poll() is None, self.stderr()[-3000:]
            time.sleep(0.05)

    def stderr(self, start: int | None = None) -> str:
        """What the server of the last start (or of start ``start``, from 1) wrote to stderr."""
        return (self.data.parent / f"server-{start or self.starts}.err").read_text()

    def assert_quiet(self) -> None:
        """No server process so far logged an error (nor a replay that differs from the journal)."""
        for k in range(1, self.starts + 1):
            err = (self.data.parent / f"server-{k}.err").read_text()
            assert "Traceback" not in err and "ERROR" not in err, err

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(timeout=10)
        self.proc.stdout.close()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc.stdout.close()

    def call(self, method: str, path: str, user: str = "root", **kw: Any) -> httpx.Response:
        auth = {"Authorization": f"Bearer {self.tokens[user]}"}
        return httpx.request(method, self.url + path, headers=auth, timeout=30, **kw)

    def now(self) -> int:
        return int(httpx.get(self.url + "/health", timeout=10).json()["now"])

    def leases(self) -> dict[int, dict[str, Any]]:
        r = self.call("GET", "/leases")
        assert r.status_code == 200, r.text
        return {v["id"]: v for v in r.json()}

    def wait_until(self, t: int, timeout: float = 60) -> None:
        """Until lease time ``t`` (sleeping the real time it is away)."""
        deadline = time.monotonic() + timeout
        while (now := self.now()) < t:
            assert time.monotonic() < deadline, f"lease time {now} never reached {t}"
            time.sleep(min(0.5, max(0.01, (t - now) / SCALE)))

    def setting(self, key: str) -> Any:
        """What the server stored at its first start (its clock's epoch and scale, its id)."""
        rows = self.query(f"SELECT value FROM lease_server WHERE key = '{key}'")
        return json.loads(rows[0]["value"])

    def now_from_db(self) -> int:
        """Lease time now, by the server's clock (while it is down too)."""
        return int((time.time() - self.setting("epoch")) * self.setting("time_scale"))

    def sleep_until(self, t: int) -> None:
        """Until lease time ``t``, by the server's clock (while it is down too)."""
        time.sleep(max(0.0, self.setting("epoch") + t / self.setting("time_scale") - time.time()))

    def wait_all_over(self, timeout: float) -> dict[int, dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while True:
            views = self.leases()
            if all(v["state"] in TERMINAL for v in views.values()):
                return views
            assert time.monotonic() < deadline, {i: v["state"] for i, v in views.items()}
            time.sleep(0.25)

    # -- the database, read directly ---------------------------------------------------------------
    def query(self, sql: str) -> list[dict[str, Any]]:
        engine = sa.create_engine(self.db_url)
        try:
            with engine.connect() as c:
                return [dict(r) for r in c.execute(sa.text(sql)).mappings()]
        finally:
            engine.dispose()

    def serve_id(self) -> str:
        return self.setting("serve_id")

    def payload_rows(self) -> list[dict[str, Any]]:
        return self.query("SELECT * FROM lease_payloads ORDER BY id")

    def events(self) -> dict[int, list[tuple[str, int, int]]]:
        out: dict[int, list[tuple[str, int, int]]] = {}
        for r in self.query("SELECT lease, what, at, now FROM lease_events ORDER BY seq"):
            out.setdefault(r["lease"], []).append((r["what"], r["at"], r["now"]))
        return out


@pytest.fixture(params=["sqlite", "postgresql"])
def server(request, tmp_path, capsys):
    db = request.getfixturevalue("postgres_url") if request.param == "postgresql" else None
    srv = Server(tmp_path / "serve", db)
    srv.add_users(capsys)
    yield srv
    srv.stop()
    _kill_payloads(srv)


def _kill_payloads(srv: Server) -> None:
    """Whatever a failed test left running."""
    try:
        serve_id = srv.serve_id()
    except Exception:  # no database, no payloads
        return
    for pid, _ticks in payload_processes(serve_id):
        with contextlib.suppress(OSError):
            os.killpg(pid, 9)


# -- the scenario ---------------------------------------------------------------------------------
def scenario() -> list[tuple[str, dict[str, Any]]]:
    """20 requests (owner, body), sent at once at about lease time s. At the crash (once AR 5 has
    begun, at about s + 155, and before the suspension for AR 6 is due, at about s + 204): 1
    (immediate), 3 and 4 run; 2 is suspended (5, an AR from s + 150 to s + 750, preempted it, and
    the site is full until s + 600); 6, 7 and 8 are ARs in the future (6, due while the server is
    down, preempts 3 or 4, which is suspended late, at the restart); 9-20 are queued, one holding
    the backfilling reservation. The work of 3 and of 16 ends before their time (premature ends),
    even though 3 worked unstopped while the server was down."""
    be = {"type": "best-effort", "memory": MEM}
    ar = {"type": "advance-reservation", "memory": MEM}
    reqs: list[tuple[str, dict[str, Any]]] = [
        ("alice", {"type": "immediate", "nodes": 1, "duration": 600, "memory": MEM}),
        ("alice", {**be, "nodes": 2, "duration": 480}),
        ("bob", {**be, "nodes": 1, "duration": 600, "real_duration": 540}),
        ("bob", {**be, "nodes": 2, "duration": 600}),
        ("alice", {**ar, "nodes": 2, "duration": 600, "start_in": 150}),
        ("bob", {**ar, "nodes": 1, "duration": 300, "start_in": 210}),
        ("bob", {**ar, "nodes": 1, "duration": 120, "start_in": 700}),
        ("alice", {**ar, "nodes": 3, "duration": 120, "start_in": 900}),
    ]
    sizes = [(1, 150), (2, 120), (1, 90), (3, 100), (1, 200), (2, 150), (1, 120), (2, 90), (1, 60),
             (1, 180), (2, 100), (3, 80)]
    for i, (n, d) in enumerate(sizes):
        body = {**be, "nodes": n, "duration": d}
        if i == 7:
            body["real_duration"] = d // 2
        if i == 6:
            body["preemptible"] = False
        reqs.append(("alice" if i % 2 else "bob", body))
    assert len(reqs) == 20
    return reqs


def submit_all(srv: Server, reqs: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    out = []
    for owner, body in reqs:
        r = srv.call("POST", "/leases", owner, json=body)
        assert r.status_code == 201, (body, r.status_code, r.text)
        out.append(r.json())
    return out


# -- what the simulator says -------------------------------------------------------------------------
def worked(events: list[tuple[str, int, int]]) -> int:
    """Lease seconds a lease's VMs ran: from each start to the next suspension or end."""
    total, since = 0, None
    for what, at, _ in events:
        if what == "start":
            since = at
        elif what in ("suspend", "end") and since is not None:
            total, since = total + at - since, None
    return total


Timelines = dict[int, list[tuple[str, int, int]]]  # lease -> its events (what, at, decided at)


def simulated_events(srv: Server, served: Timelines, migration: bool = True) -> Timelines:
    """The same requests at the same submit times (as the server journaled them), on the simulator
    with the server's configuration and site. A lease's real duration is the time its VMs really
    ran on the server, which must be its request's (``real_duration``, else ``duration``) within the
    tolerance: work is neither lost nor made up by the crash; the rest of the schedule follows
    from the requests and those ends. (The real ends are measured: a second too late or too early,
    as a payload's exit allows, may tip a tie between two leases the other way; so it is given.)
    ``migration``: the configuration's (off on a site with hosts, as the server sets it)."""
    leases, wrong = [], []
    requests = {r["id"]: json.loads(r["request"]) for r in srv.query("SELECT id, request FROM leases")}
    for r in srv.query("SELECT body FROM lease_inputs WHERE kind = 'submit' ORDER BY seq"):
        b = json.loads(r["body"])
        real = requests[b["id"]].get("real_duration", b["duration"])
        ran = worked(served[b["id"]])
        if abs(ran - real) > TOLERANCE:
            wrong.append(f"lease {b['id']} worked {ran} s, not {real} s: {served[b['id']]}")
        leases.append(Lease(b["id"], LeaseKind(b["kind"]), b["submit"], b["nodes"], b["duration"],
                            max(1, min(ran, b["duration"])), b["duration"], start=b["start"], cpu=b["cpu"],
                            memory=b["memory"], disk=b["disk"], image=b["image"], image_size=b["image_size"],
                            preemptible=b["preemptible"]))
    assert not wrong, "\n".join(wrong)
    from skylease.runtime.leases.site import load_site

    site = load_site(srv.data.parent / "site.toml")
    run = simulate_leases(leases, site.n_nodes, capacity=site.capacity[0],
                          config=load_config(DEFAULT_SCHEDULER).scheduler.with_(migration=migration),
                          until="all")
    out: dict[int, list[tuple[str, int, int]]] = {}
    for e in run.log:
        out.setdefault(e.lease, []).append((e.what, e.at, e.now))
    return out


def assert_same_timelines(got: Timelines, want: Timelines) -> None:
    """The same events for every lease, in the same order, each within the tolerance."""
    assert sorted(got) == sorted(want)
    bad = []
    for lid in sorted(want):
        g, w = got[lid], want[lid]
        if [e[0] for e in g] != [e[0] for e in w] or any(
                abs(a[i] - b[i]) > TOLERANCE for a, b in zip(g, w, strict=True) for i in (1, 2)):
            bad.append(f"lease {lid}:\n  served    {g}\n  simulated {w}")
    if bad:  # the whole picture (pytest shows it with the failure)
        for lid in sorted(want):
            print(f"lease {lid}:\n  served    {got[lid]}\n  simulated {want[lid]}")
    assert not bad, "timelines differ from the simulator's:\n" + "\n".join(bad)


def fresh_runs(events: list[tuple[str, int, int]]) -> list[int]:
    """The start times of a lease's runs that need new processes (a start not after a resume)."""
    runs, resumed = [], False
    for what, at, _ in events:
        if what == "resume":
            resumed = True
        elif what == "start":
            if not resumed:
                runs.append(at)
            resumed = False
    return runs


def assert_one_process_per_vm_and_run(srv: Server, seen: dict[tuple[int, int], tuple[int, int]],
                                      down: tuple[int, int]) -> list[dict[str, Any]]:
    """Every payload process ever seen in /proc is a row of ``lease_payloads``; each lease has one
    row (process) per VM for each run that needed a new one (its first start, or a start after it
    was requeued without suspension), except a run that began while the server was down
    (``down``), none for any other time; and every row is over. The rows."""
    rows = srv.payload_rows()
    assert all(r["state"] in ("exited", "killed", "lost") for r in rows), rows
    recorded = {(r["pid"], r["start_ticks"]): (r["lease"], r["vnode"]) for r in rows}
    assert len(recorded) == len(rows), "a process recorded twice"
    assert set(seen) <= set(recorded), {k: v for k, v in seen.items() if k not in recorded}
    assert all(recorded[k] == v for k, v in seen.items())
    per_run = Counter((r["lease"], r["vnode"], r["run"]) for r in rows)
    assert max(per_run.values(), default=1) == 1, per_run
    requests = srv.query("SELECT id, request FROM leases")
    nodes = {r["id"]: json.loads(r["request"]).get("nodes", 1) for r in requests}
    for lid, evs in srv.events().items():
        runs = fresh_runs(evs)
        got = sorted({r["run"] for r in rows if r["lease"] == lid})
        starts = {at for what, at, _ in evs if what == "start"}
        assert set(got) <= starts and len(got) <= len(runs), (lid, got, evs)
        up = [t for t in runs if not down[0] <= t <= down[1]]
        assert up == [t for t in got if not down[0] <= t <= down[1]], (lid, got, evs, down)
        for t in got:
            vms = sorted(r["vnode"] for r in rows if r["lease"] == lid and r["run"] == t)
            assert vms == list(range(nodes[lid])), (lid, t, vms)
    return rows


def assert_as_without_the_crash(srv: Server, watcher: ProcWatcher, down: tuple[int, int]) -> None:
    """After the last server stopped: it logged no error (a replay that differs from the journal's
    events is one), every lease's timeline is the simulator's, and no lease ever had more than one
    process per VM and run."""
    srv.assert_quiet()
    events = srv.events()
    assert_same_timelines(events, simulated_events(srv, events))
    assert_one_process_per_vm_and_run(srv, watcher.seen, down)


# -- the tests --------------------------------------------------------------------------------------
def test_kill_9_and_restart_lose_no_lease_and_start_none_twice(server: Server):
    """The scenario's 20 leases; SIGKILL between AR 5's start and the suspension due for AR 6; the
    server stays down past AR 6's start (its victim should be suspended then, and works on);
    restarted on the same data and database. Then
    (a) every lease is there with its owner; (b) the payloads running or stopped before are the
    same processes, stopped where the schedule says so now, and no lease ever has more than one
    process per VM per run; (c) every lease ends as on the simulator; (d) no process outlives its
    lease, and at the restart every lease's processes match its state."""
    srv = server
    srv.start()
    watcher = ProcWatcher(srv.serve_id())
    try:
        s = srv.now()
        answers = submit_all(srv, scenario())
        ids = [a["id"] for a in answers]
        owners = {a["id"]: a["owner"] for a in answers}
        ar5, ar6 = answers[4]["requested_start"], answers[5]["requested_start"]
        # the crash comes once 5 has begun (2's suspension for it is over: at ar5) and before the
        # suspension of 6's victim is due (at ar6 - 6): the times the server gave the requests,
        # not when the test sent them (20 requests take a while on a busy machine)
        srv.sleep_until(ar5 + 5)
        before = srv.leases()
        assert_processes_match_states(srv)
        states = {i: v["state"] for i, v in before.items()}
        assert all(states[i] == "active" for i in (1, 3, 4, 5)), states
        assert states[2] == "suspended" and states[6] == states[7] == states[8] == "scheduled", states
        assert all(states[i] in ("pending", "scheduled") for i in range(9, 21)), states
        pids = {i: sorted((p["vnode"], p["pid"]) for p in v["payloads"]) for i, v in before.items()}
        assert [len(pids[i]) for i in (1, 2, 3, 4)] == [1, 2, 1, 2], pids
        srv.kill9()
        t_crash = srv.now_from_db()
        assert t_crash < ar6 - 10, (s, ar5, t_crash, ar6)  # 6's victim: suspended while the server is down
        srv.assert_quiet()

        # the payloads outlive the server: running ones run, the suspended one stays stopped
        assert all(state_in_proc(pid) == "T" for _, pid in pids[2]), pids[2]
        assert all(state_in_proc(pid) in ("R", "S") for i in (1, 3, 4) for _, pid in pids[i]), pids
        srv.sleep_until(ar6 + 60)  # 6's victim (3 or 4) works on unstopped, 60 lease seconds at least
        assert all(state_in_proc(pid) in ("R", "S") for i in (1, 3, 4) for _, pid in pids[i]), pids

        srv.start()
        t_restart = srv.now()
        after = srv.leases()
        assert sorted(after) == ids and all(after[i]["owner"] == owners[i] for i in ids)  # (a) none lost
        bobs = [v["id"] for v in srv.call("GET", "/leases", "bob").json()]
        assert bobs == [i for i in ids if owners[i] == "bob"]
        # (b) adopted, not started again: the same processes, running or stopped as the schedule says
        victims = [i for i in (3, 4) if after[i]["state"] == "suspended"]
        assert len(victims) == 1 and after[1]["state"] == "active", (
            {i: after[i]["state"] for i in (1, 3, 4)}, f"restarted too late? (from {t_crash} to {t_restart})")
        assert after[2]["state"] == "suspended", (
            f"the restart took too long (from {t_crash} to {t_restart}): nothing left to check")
        for i in (1, 2, 3, 4):
            assert sorted((p["vnode"], p["pid"]) for p in after[i]["payloads"]) == pids[i], (i, after[i])
        for i in (2, *victims):  # stopped: the suspension due while the server was down is enacted now
            assert all(state_in_proc(pid) == "T" for _, pid in pids[i]), (i, pids[i])
        assert all(state_in_proc(pid) in ("R", "S") for _, pid in pids[1]), pids[1]
        assert_processes_match_states(srv)

        final = srv.wait_all_over(timeout=300)
        assert all(v["state"] == "done" for v in final.values()), {i: v["state"] for i, v in final.items()}
        assert_no_payload_left(srv, timeout=10)  # (d) every lease is over, no process left
        assert all(v["payloads"] == [] for v in srv.leases().values())
    finally:
        watcher.stop()
        srv.stop()
    assert_as_without_the_crash(srv, watcher, (t_crash, t_restart))  # (c), and (b) once more


def payloads_of(srv: Server, lease: int) -> dict[int, int]:
    """vnode -> pid of the lease's live payload processes, from /proc."""
    procs = payload_processes(srv.serve_id())
    return {vnode: pid for (pid, _), (lid, vnode, _) in procs.items() if lid == lease}


def wait_for_payloads(srv: Server, lease: int, n: int, timeout: float = 10) -> dict[int, int]:
    """The lease's ``n`` payloads, once the manager thread has started them (a request is answered
    once journaled; its payloads are spawned right after)."""
    deadline = time.monotonic() + timeout
    while len(got := payloads_of(srv, lease)) < n:
        assert time.monotonic() < deadline, (lease, got)
        time.sleep(0.02)
    return got


def request_then_die(srv: Server, user: str, body: dict[str, Any]) -> None:
    """Submit a request to a server set to die while enacting it. The journal commits before the
    answer, and the manager thread enacts once the request is answered: the answer may be sent or
    not before the process dies (a crash between the commit and the answer loses only the answer)."""
    try:
        r = srv.call("POST", "/leases", user, json=body)
    except httpx.TransportError:
        pass
    else:
        assert r.status_code == 201, r.text
    assert srv.proc.wait(timeout=10) == -9


def test_a_crash_between_the_commit_and_the_spawn_neither_loses_nor_doubles_the_lease(server: Server):
    """The worst moments, provoked for real (seamed_serve.py): the server dies right after a
    request's transaction commits, before the lease's payloads are spawned (its answer may be lost
    with it), then, restarted, right after spawning the first VM of another lease, before recording
    it. Restarted again: both leases are there, each VM has exactly one process (the unrecorded one
    adopted, the missing ones started), and every lease ends as on the simulator."""
    srv = server
    be = {"type": "best-effort", "memory": MEM, "duration": 240}
    srv.start({"kill_before_spawn": 2})
    watcher = ProcWatcher(srv.serve_id())
    try:
        assert srv.call("POST", "/leases", "alice", json={**be, "nodes": 1}).status_code == 201
        first = wait_for_payloads(srv, 1, 1)
        request_then_die(srv, "bob", {**be, "nodes": 2})
        t_crash = srv.now_from_db()
        assert payloads_of(srv, 2) == {} and payloads_of(srv, 1) == first  # committed, not started

        srv.start({"kill_after_spawn": 3})
        views = srv.leases()
        assert sorted(views) == [1, 2] and views[2]["owner"] == "bob" and views[2]["state"] == "active"
        assert sorted(p["vnode"] for p in views[2]["payloads"]) == [0, 1]  # started now, once
        assert payloads_of(srv, 1) == first  # adopted
        request_then_die(srv, "alice", {**be, "nodes": 2})
        spawned = payloads_of(srv, 3)
        assert list(spawned) == [0]  # its first VM runs, unrecorded
        assert [r for r in srv.payload_rows() if r["lease"] == 3] == []

        srv.start()
        t_restart = srv.now()
        views = srv.leases()
        assert sorted(views) == [1, 2, 3] and views[3]["state"] == "active"
        assert {p["vnode"]: p["pid"] for p in views[3]["payloads"]}[0] == spawned[0]  # adopted
        assert sorted(payloads_of(srv, 3)) == [0, 1]
        assert_processes_match_states(srv)
        r = srv.call("POST", "/leases", "bob", json={**be, "nodes": 2})
        assert r.status_code == 201 and r.json()["id"] == 4
        srv.wait_all_over(timeout=60)
        assert_no_payload_left(srv, timeout=10)
    finally:
        watcher.stop()
        srv.stop()
    assert_as_without_the_crash(srv, watcher, (t_crash, t_restart))


def test_a_payload_that_died_while_the_server_was_down_ends_its_lease(server: Server):
    """While the server is down, the payloads of lease 1 (3 VMs) and of lease 3 (suspended by an AR
    and resumed before the crash) die. Restarted, the server records each as lost, with the
    reason, and ends their leases then (a premature end: the queued lease 6 slides back to now),
    instead of leaving them running with no process or starting them again; lease 2 is adopted.
    Lease 4's payload ignores SIGTERM and was cancelled just before the crash, within its grace:
    it is killed, not taken for a payload that was never recorded."""
    srv = server
    srv.start()
    be = {"type": "best-effort", "memory": MEM}
    try:
        answers = submit_all(srv, [
            ("alice", {**be, "nodes": 3, "duration": 600, "preemptible": False}),
            ("bob", {**be, "nodes": 1, "duration": 600, "preemptible": False}),
            ("bob", {**be, "nodes": 1, "duration": 600}),
            ("alice", {**be, "nodes": 1, "duration": 600, "preemptible": False,
                       "command": "trap '' TERM; while :; do sleep 0.05; done"}),
            ("alice", {"type": "advance-reservation", "memory": MEM, "nodes": 1, "duration": 60,
                       "start_in": 80}),
            ("bob", {**be, "nodes": 4, "duration": 600}),  # (still running when the test cancels it)
        ])
        srv.wait_until(answers[4]["requested_start"] + 60 + 30)  # the AR is over, 3 has resumed
        views = srv.leases()
        whats = [e["event"] for e in views[3]["events"]]
        assert "suspend" in whats and whats[-2:] == ["resume", "start"], whats
        assert all(views[i]["state"] == "active" for i in (1, 2, 3, 4)), views
        assert views[6]["state"] == "scheduled" and views[6]["start"] is None
        dead = [*payloads_of(srv, 1).values(), *payloads_of(srv, 3).values()]
        kept, stubborn = payloads_of(srv, 2), payloads_of(srv, 4)
        assert len(dead) == 4 and len(kept) == len(stubborn) == 1
        assert srv.call("DELETE", "/leases/4").status_code == 200
        t_crash = srv.now()
        srv.kill9()  # within the GRACE_S of lease 4's payload: nobody will SIGKILL it
        for pid in dead:
            os.killpg(pid, 9)
        assert payloads_of(srv, 4) == stubborn
        srv.start()
        t_restart = srv.now()
        views = srv.leases()
        for i in (1, 3):
            assert views[i]["state"] == "done" and t_crash <= views[i]["end"] <= t_restart, views[i]
            assert views[i]["payloads"] == [] and payloads_of(srv, i) == {}
        assert views[2]["state"] == "active" and payloads_of(srv, 2) == kept  # adopted
        assert views[6]["state"] == "active" and t_crash <= views[6]["start"] <= t_restart  # slid back
        assert views[4]["state"] == "cancelled" and views[4]["payloads"] == []
        deadline = time.monotonic() + 10
        while payloads_of(srv, 4) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert payloads_of(srv, 4) == {}  # shut down again
        assert_processes_match_states(srv)
        rows = {r["pid"]: r for r in srv.payload_rows()}
        for pid in dead:
            assert (rows[pid]["state"], rows[pid]["reason"]) == ("lost", "gone while the server was down")
        assert (rows[stubborn[0]]["state"], rows[stubborn[0]]["reason"]) == ("killed", "lease cancelled")
        assert len(rows) == 3 + 1 + 1 + 1 + 1 + 4  # nothing started again, nothing recorded twice
        for i in (2, 6):
            assert srv.call("DELETE", f"/leases/{i}").status_code == 200
        assert_no_payload_left(srv, timeout=10)
    finally:
        srv.stop()
    srv.assert_quiet()


def test_the_default_payload_counts_its_work_from_the_start_of_its_run(tmp_path, payload_sandbox):
    """A payload started late (after a restart) works only what is left of its run: its running
    time counts from ``since``, the Unix time its reservation began."""
    from skylease.runtime.leases.local import LocalNodes
    from skylease.runtime.leases.site import default_site

    with LocalNodes(default_site(tmp_path), tmp_path, "since-test", sandbox=payload_sandbox) as nodes:
        t0 = time.time()
        late = nodes.spawn(1, 0, 0, duration_s=1.0, since=t0 - 0.7)  # its run began 0.7 s ago
        on_time = nodes.spawn(2, 0, 0, duration_s=1.0)
        ended: dict[int, float] = {}
        while len(ended) < 2 and time.time() < t0 + 10:
            ended.update({p.lease: p.ended_at - t0 for p in nodes.exited()})
            time.sleep(0.01)
    assert late.pid != on_time.pid
    assert 0.25 <= ended[1] <= 0.6 and 0.95 <= ended[2] <= 1.4, ended
