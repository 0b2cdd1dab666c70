"""Same clock, same schedule (issue 19): Haizea's scenario workloads submitted to a real
``python -m skylease serve`` at ``--time-scale 60`` give the timelines ``skylease leases simulate
--json`` gives on the same site and configuration: the same events in the same order, on the same
nodes, every time within 5 lease seconds (0.083 s of real time).

Each scenario gets its own server (a subprocess on a free loopback port, its own data folder and
SQLite database, a site file with the workload's nodes and capacities, an administrator). Each lease
request of the workload (its ``<lease-request>`` element, as XML) is sent when the server's lease
clock (``GET /health``'s ``now``) reaches ``T0 + arrival``, ``T0`` being a lease time just after the
servers started: an advance reservation's ``<exact>`` start is moved by ``T0`` as well, and the
server's event times (``GET /leases/{id}``), less ``T0``, are compared with the simulator's. The
server numbers leases from 1 in submission order; the workload's are matched to them in that order.
When the test's own client sends a request later than its arrival (its process stalled on a loaded
machine), the server rightly schedules it from when it came: the simulator is then run again on the
workload with the submit times the server recorded (each checked to be within the tolerance of when
the client sent it), and the timelines are compared with that.

The scenarios run at once (they mostly wait; their T0 are STAGGER_S apart so that their round-time
events do not all fall due at the same moment on this machine), about two minutes in all:

* ``preemption``, ``reservation``, ``wait`` under NOVM-SR, the server's default;
* ``reuse2`` under VM-REUSE-UNIFORM: its point is image reuse (two ARs bring their images to nodes
  0-1 and 2-3; the best-effort lease that comes later goes where its image already is, with no
  transfer), which only a configuration with image transfers *and* per-node image pools shows (the
  "uniform" image draw does nothing here: every lease names its image); the test also checks the
  node caches the server reports;
* ``preemption_prematureend2`` under NOVM-SR: both leases' payloads end before their requested
  duration (``<realduration>``); the server learns it only when the payload exits (the simulator
  knows it in advance), and the AR's early end lets the suspended lease slide back;

and in ``preemption`` the suspended best-effort lease's payload group is read in /proc: every process
stopped (state T) while it is suspended, running again afterwards, the same processes. That lease
is sent as the equivalent JSON with a payload command (a shell and a pipe of two sleeps), so that
its group has more than one process; the other leases run the default payload.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from skylease.runtime.leases.journal import Journal
from skylease.service.auth import add_user
from skylease.service.bodies import lease_request_from_xml
from skylease.service.client import Client
from skylease.service.server import load_serve_config, open_database
from skylease.traces.lwf import clock_seconds, read_xml_lwf

from .conftest import ServeProcess

# (a real `skylease serve` confines its payloads: without bubblewrap it refuses to start, so these skip)
# integration: real servers replaying the scenarios against the simulator's timelines (pytest -m integration)
pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("payload_sandbox")]

SCALE = 60  # lease seconds per real second
TOLERANCE_S = 5  # lease seconds
#: The scenario workloads and the configuration each runs under (see the module's docstring).
SCENARIOS = {"wait": "NOVM-SR", "preemption": "NOVM-SR", "reservation": "NOVM-SR",
             "reuse2": "VM-REUSE-UNIFORM", "preemption_prematureend2": "NOVM-SR"}
#: Payload commands given to some requests (by position in the workload; the others run the default
#: payload): preemption's best-effort lease runs a group of three processes (a shell and a pipe of
#: two sleeps, long enough to outlive the lease), to see that suspending it stops every one.
COMMANDS = {"preemption": {0: "sleep 100000 | sleep 100000"}}
#: Lease seconds between the T0 of one scenario and the next (the longest, wait, first).
STAGGER_S = 80
#: Keys of an event that are lease times (the server's are shifted by T0).
TIME_KEYS = ("time", "until", "planned_start")
#: Lease seconds (half a real second) after an event before the test reads /proc (the enactment
#: follows the step; a loaded machine may take a while to get to it).
SETTLE_S = 30
_TERMINAL = ("done", "rejected", "cancelled")
_REQUEST = re.compile(r"<lease-request\b.*?</lease-request>", re.S)
_EXACT = re.compile(r'(<exact\s+time=")([^"]*)(")')
_ARRIVAL = re.compile(r'(<lease-request\b[^>]*?\barrival=")([^"]*)(")')


def hms(t: int) -> str:
    return f"{t // 3600:02d}:{t % 3600 // 60:02d}:{t % 60:02d}"


def requests_of(path: Path) -> list[tuple[int, str]]:
    """The workload's requests in submission order: (arrival, ``<lease-request>`` element)."""
    text = path.read_text()
    arrivals = [int(x) for x in read_xml_lwf(path).requests["submit"]]
    elements = _REQUEST.findall(text)
    assert len(elements) == len(arrivals)
    return sorted(zip(arrivals, elements, strict=True), key=lambda r: r[0])  # stable: file order on ties


def site_file(path: Path, workload: Path) -> Path:
    xml = read_xml_lwf(workload)
    res = xml.node_resources
    path.write_text(f"[[nodes]]\ncount = {xml.n_nodes}\ncpu = {res['CPU']:g}\n"
                    f"memory = {int(res['Memory'])}\n")
    return path


def simulate(workload: Path, config: str) -> subprocess.Popen:
    """``skylease leases simulate --workload W --config C --json`` (its ``leases`` are the records)."""
    argv = ["leases", "simulate", "--workload", str(workload), "--config", config, "--json"]
    return subprocess.Popen([sys.executable, "-m", "skylease", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def add_admin(data: Path) -> str:
    """An administrator's token in the database of a server whose data folder is ``data``."""
    data.mkdir(parents=True)
    engine = open_database(load_serve_config(None, data_dir=data))
    try:
        return add_user(engine, "tester", admin=True)
    finally:
        engine.dispose()


def group_states(pgid: int) -> dict[int, str]:
    """pid -> state (field 3 of /proc/PID/stat) of every live process of process group ``pgid``."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            data = Path(f"/proc/{name}/stat").read_bytes()
        except OSError:
            continue
        fields = data[data.rindex(b")") + 2:].split()
        if int(fields[2]) == pgid and fields[0] != b"Z":
            out[int(name)] = fields[0].decode()
    return out


@dataclass
class Served:
    """One scenario's run: the simulator's records, the server's views (by workload order), T0."""

    name: str
    config: str
    simulated: list[dict[str, Any]]
    views: list[dict[str, Any]] = field(default_factory=list)
    t0: int = 0
    hosts: list[dict[str, Any]] = field(default_factory=list)
    # (phase, payload leader, the state the server says, the group's states in /proc)
    samples: list[tuple[str, int, str, dict[int, str]]] = field(default_factory=list)
    sent: list[tuple[int, int, int, float]] = field(default_factory=list)  # (arrival, seen, submit, real s)
    resimulated: bool = False  # simulated again with the arrivals the server recorded (a late send)
    stderr: str = ""
    returncode: int | None = None
    wall_s: float = 0.0
    # (lease, VM) -> host -> the lines its payload's log holds there (host scenarios)
    outputs: dict[tuple[int, int], dict[str, list[str]]] = field(default_factory=dict)


class Server:
    """A real server of one scenario and a client of it (an admin user)."""

    def __init__(self, url: str, token: str) -> None:
        self.client = Client(url, token)
        self.http = httpx.Client(base_url=url, timeout=10)

    def now(self) -> int:
        return int(self.http.get("/health").json()["now"])

    def close(self) -> None:
        self.client.close()
        self.http.close()

    def wait_until(self, t: int) -> int:
        """Returns the server's lease time once it is ``t`` or later."""
        while (now := self.now()) < t:
            ahead = (t - now) / SCALE
            time.sleep(ahead - 0.05 if ahead > 0.1 else 0.002)
        return now


def resubmitted(path: Path, submits: list[int]) -> str:
    """The workload's text with its requests' arrivals replaced by ``submits`` (in submission order,
    as :func:`requests_of` gives them)."""
    text = path.read_text()
    arrivals = [int(x) for x in read_xml_lwf(path).requests["submit"]]
    order = sorted(range(len(arrivals)), key=lambda i: arrivals[i])  # file positions in submission order
    new = dict(zip(order, submits, strict=True))  # file position -> the time it was submitted
    position = iter(range(len(arrivals)))
    return _ARRIVAL.sub(lambda m: m.group(1) + hms(new[next(position)]) + m.group(3), text)


def shifted(element: str, t0: int) -> str:
    """A ``<lease-request>`` element whose exact start (if any) is ``t0`` later."""
    return _EXACT.sub(lambda m: m.group(1) + hms(t0 + clock_seconds(m.group(2))) + m.group(3), element)


def run_scenario(name: str, config: str, scenarios: Path, tmp: Path, ready: threading.Barrier, delay: int,
                 watch: Callable[[Server, Served, list[dict[str, Any]]], None] | None = None, *,
                 site_of: Callable[[Path, Path], Path] = site_file,
                 commands: Callable[[int], str | None] | None = None,
                 after: Callable[[Served, Path], None] | None = None) -> Served:
    """Start the scenario's server; once every scenario's server is up (``ready``: starting one
    loads the machine), send its requests on time, follow its leases until they are over.
    ``name`` is the workload's, or ``WORKLOAD@VARIANT``; ``site_of(path, workload)`` writes the site
    file; ``commands(i)`` is the payload command of the i-th request (None: COMMANDS' or the default
    payload); ``after(run, data)`` is called once the server stopped."""
    t_wall = time.monotonic()
    workload = scenarios / f"{name.split('@')[0]}.lwf"
    proc = simulation = None
    try:
        simulated = config
        if name.endswith("@hosts"):  # (the server turns migration off on a site with hosts: so here)
            simulated = str(tmp / f"{name}-config.toml")
            Path(simulated).write_text(f'base = "{config}"\nmigration = false\n')
        simulation = simulate(workload, simulated)  # (while the server starts)
        data = tmp / name
        token = add_admin(data)
        site = site_of(tmp / f"{name}-site.toml", workload)
        proc = ServeProcess(data, time_scale=SCALE, site=site, scheduler=config)  # python -m skylease serve
        url = proc.start(cwd=tmp)
        server = Server(url, token)
        assert server.client.leases() == []  # the first call of a process is slower: not a timed one
        printed, err = simulation.communicate(timeout=120)
        assert simulation.returncode == 0, err
        # (in submission order, as the server numbers them: by arrival, then file order)
        out = Served(name, config, sorted(json.loads(printed)["leases"], key=lambda rec: rec["submit"]))
    except BaseException:
        ready.abort()  # (the other scenarios do not wait for this one)
        if simulation is not None and simulation.poll() is None:
            simulation.kill()
            simulation.communicate()
        if proc is not None:
            proc.stop()
        raise
    try:
        ready.wait()
        out.t0 = server.now() + SCALE + delay  # a real second ahead at least: the first arrival on time too
        ids = []
        for i, (arrival, element) in enumerate(requests_of(workload)):
            body, ctype = shifted(element, out.t0), "application/xml"
            command = commands(i) if commands is not None else COMMANDS.get(name, {}).get(i)
            if command is not None:  # the same request as JSON, with a payload command
                doc = lease_request_from_xml(body).model_dump(exclude_none=True)
                body, ctype = json.dumps({**doc, "command": command}), "application/json"
            seen = server.wait_until(out.t0 + arrival)
            t = time.monotonic()
            view = server.client.request(body.encode(), ctype)
            out.sent.append((arrival, seen - out.t0, view["submit"] - out.t0, time.monotonic() - t))
            ids.append(view["id"])
        assert ids == list(range(1, len(ids) + 1)), ids
        end = out.t0 + max(ev["time"] for rec in out.simulated for ev in rec["events"])
        deadline = time.monotonic() + (end - server.now()) / SCALE + 20
        while True:
            listed = {v["id"]: v for v in server.client.leases()}
            views = [listed[i] for i in ids]
            if watch is not None:
                watch(server, out, views)
            if all(v["state"] in _TERMINAL for v in views):
                break
            assert time.monotonic() < deadline, f"{name}: leases not over: {[v['state'] for v in views]}"
            time.sleep(0.25)
        out.views = [server.client.lease(i) for i in ids]  # (GET /leases/{id}: as `leases show`)
        out.hosts = server.client.hosts()
        server.close()
    finally:
        out.returncode, _, out.stderr = proc.stop()
    submits = [submit for _, _, submit, _ in out.sent]
    if submits != [arrival for arrival, *_ in out.sent]:
        # This test's client sent a request late (its process stalled on a loaded machine): the server
        # scheduled what it was sent, when it was sent. The simulator is given the same: the workload
        # with the arrivals the server recorded.
        again = tmp / f"{name}-as-submitted.lwf"
        again.write_text(resubmitted(workload, submits))
        simulation = simulate(again, simulated)
        printed, err = simulation.communicate(timeout=120)
        assert simulation.returncode == 0, err
        out.simulated = sorted(json.loads(printed)["leases"], key=lambda rec: rec["submit"])
        out.resimulated = True
    if after is not None:
        after(out, data)
    out.wall_s = time.monotonic() - t_wall
    return out


def watch_suspension(server: Server, out: Served, views: list[dict[str, Any]],
                     states_of: Callable[[int], dict[int, str]] = group_states) -> None:
    """Lease 1's payload group in /proc (with the state the server reports for it): while it runs
    before the AR, while it is suspended (after its ``suspend`` event, before its ``resume``: the
    processes stay stopped until the ``start`` that follows, 21 lease seconds later), and while it
    runs again after that ``start``. Each reading is at least SETTLE_S after the event, and at
    least SETTLE_S before the run's planned end."""
    v = views[0]
    evs = v["events"]
    names = [ev["event"] for ev in evs]
    now = server.now()
    if "start" not in names or not v["payloads"]:
        return
    first, last = evs[names.index("start")], evs[len(names) - 1 - names[::-1].index("start")]
    if "suspend" not in names:
        if not first["time"] + SETTLE_S <= now <= first["until"] - SETTLE_S:
            return
        phase = "before"
    elif "resume" not in names:
        if now < evs[names.index("suspend")]["time"] + SETTLE_S:
            return
        phase = "suspended"
    else:
        running = last["time"] + SETTLE_S <= now <= last["until"] - SETTLE_S
        if last is first or v["state"] != "active" or not running:
            return
        phase = "resumed"
    pid = v["payloads"][0]["pid"]
    out.samples.append((phase, pid, v["payloads"][0]["state"], states_of(pid)))



# -- the same scenarios on a site of four SSH hosts (issue 37) ---------------------------------------
#: The scenarios also run on a test site of four real sshd hosts (host1..host4, one node each):
#: ``NAME@hosts``. Every lease there runs a payload that prints its host's name first.
HOST_SCENARIOS = {f"{name}@hosts": SCENARIOS[name]
                  for name in ("wait", "preemption", "reservation", "reuse2")}
#: What each payload on a host prints first (``uname -n``: the host's name, from its UTS namespace).
SAY_HOST = 'echo "on $(uname -n)"'


def host_site_file(site: Any) -> Callable[[Path, Path], Path]:
    """Writes a site file whose nodes are the test site's hosts, one node each, with the workload's
    capacities."""

    def write(path: Path, workload: Path) -> Path:
        xml = read_xml_lwf(workload)
        res = xml.node_resources
        assert xml.n_nodes == len(site.hosts), (xml.n_nodes, len(site.hosts))
        text = (f'[ssh]\nuser = "root"\nidentity_file = "{site.key}"\nknown_hosts = "{site.known_hosts}"\n'
                f"connect_timeout = 10\n")
        for h in site.hosts:
            text += (f'[[hosts]]\naddress = "{h.address}"\nname = "{h.name}"\nnodes = 1\n'
                     f"cpu = {res['CPU']:g}\nmemory = {int(res['Memory'])}\n")
        path.write_text(text)
        return path

    return write


def host_command(name: str, i: int) -> str:
    """The payload of request ``i`` of a host scenario: says its host, then sleeps until shut down
    (preemption's best-effort lease: a pipe of two sleeps, as on this machine)."""
    if name == "preemption@hosts" and i == 0:
        return f"{SAY_HOST}; sleep 100000 | sleep 100000"
    return f"{SAY_HOST}; exec sleep 100000"


def pid_namespace(pid: int) -> str:
    return os.readlink(f"/proc/{pid}/ns/pid")


def host_group_states(ns: str, pgid: int) -> dict[int, str]:
    """:func:`group_states` of process group ``pgid`` of a host whose PID namespace is ``ns`` (the
    test hosts are namespaces of this kernel: this /proc shows their processes with this machine's
    pids), keyed by the pids the host gives them."""
    inside: dict[int, int] = {}  # this machine's pid -> the host's
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{name}/ns/pid") != ns:
                continue
            status = Path(f"/proc/{name}/status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("NSpid:"):
                inside[int(name)] = int(line.split()[-1])
    leader = next((mine for mine, theirs in inside.items() if theirs == pgid), None)
    if leader is None:
        return {}
    return {inside.get(q, -q): st for q, st in group_states(leader).items()}


def host_outputs(site: Any) -> Callable[[Served, Path], None]:
    """After a host scenario: each payload's log, read on the host its node is on (over SSH), by
    (lease, VM): ``Served.outputs``."""

    def read(run: Served, data: Path) -> None:
        engine = open_database(load_serve_config(None, data_dir=data))
        try:
            serve_id = Journal(engine).settings()["serve_id"]
        finally:
            engine.dispose()
        for h in site.hosts:
            logs = f".skylease/{serve_id}/{h.address}/payloads"
            each = 'for f in *.log; do echo "== $f"; cat "$f"; done'
            done = site.ssh(h.name, f"cd {logs} 2>/dev/null && {each}")
            current = None
            for line in done.stdout.splitlines():
                if line.startswith("== "):
                    lease, vnode = line[3:].removesuffix(".log").split("-")
                    current = (int(lease), int(vnode))
                    run.outputs.setdefault(current, {})[h.name] = []
                elif current is not None:
                    run.outputs[current][h.name].append(line)

    return read


@pytest.fixture(scope="module")
def served(shared_data, tmp_path_factory, request) -> dict[str, Served | BaseException]:
    """Every scenario run at once, on this machine's nodes and on the test site's hosts; a scenario
    that failed (or could not run: no sshd here) gives its exception (its tests raise it)."""
    scenarios = shared_data / "lwf" / "scenarios"
    tmp = tmp_path_factory.mktemp("timeline")
    t0 = time.monotonic()
    runs = dict(SCENARIOS)
    site = None
    results: dict[str, Served | BaseException] = {}
    try:
        site = request.getfixturevalue("ssh_site")(4)
        runs.update(HOST_SCENARIOS)
    except (pytest.skip.Exception, pytest.fail.Exception) as exc:  # (skipped or failed: said per test)
        results.update({name: exc for name in HOST_SCENARIOS})
    # the longest scenarios (wait: 7,200 lease seconds) first: the last T0 is STAGGER_S apart from
    # the one before, and the fixture lasts as long as the latest end
    runs = dict(sorted(runs.items(), key=lambda item: not item[0].startswith("wait")))
    ready = threading.Barrier(len(runs), timeout=120)
    with ThreadPoolExecutor(len(runs)) as pool:
        futures = {}
        for i, (name, config) in enumerate(runs.items()):
            kwargs: dict[str, Any] = {}
            watch = watch_suspension if name == "preemption" else None
            if name.endswith("@hosts"):
                ns = {h.name: pid_namespace(h.pid) for h in site.hosts}
                kwargs = {"site_of": host_site_file(site), "after": host_outputs(site),
                          "commands": lambda i, name=name: host_command(name, i)}
                if name == "preemption@hosts":  # (lease 1 runs on node 0: host1)
                    def watch(server, out, views, ns=ns["host1"]):
                        watch_suspension(server, out, views, lambda pid: host_group_states(ns, pid))
            futures[name] = pool.submit(run_scenario, name, config, scenarios, tmp, ready, i * STAGGER_S,
                                        watch, **kwargs)
        results.update({name: f.exception() or f.result() for name, f in futures.items()})
    print(f"\n[timeline] all scenarios: {time.monotonic() - t0:.1f} s of wall time")
    return results


def differences(run: Served) -> tuple[list[str], int]:
    """What differs between the server's and the simulator's timelines (beyond the tolerance), and
    the largest time difference in lease seconds."""
    problems, worst = [], 0
    assert len(run.views) == len(run.simulated)
    for sim, got in zip(run.simulated, run.views, strict=True):
        where = f"{run.name}: lease {sim['id']} (server lease {got['id']})"
        same = ("type", "nodes", "image", "state")
        if [got[k] for k in same] != [sim[k] for k in same]:
            problems.append(f"{where}: {[got[k] for k in same]} != simulated {[sim[k] for k in same]}")
        s_names = [ev["event"] for ev in sim["events"]]
        g_names = [ev["event"] for ev in got["events"]]
        if s_names != g_names:
            problems.append(f"{where}: events {g_names} != simulated {s_names}")
            continue
        for s_ev, g_ev in zip(sim["events"], got["events"], strict=True):
            if set(s_ev) != set(g_ev):
                problems.append(f"{where}: {g_ev} has other keys than simulated {s_ev}")
                continue
            for key, value in s_ev.items():
                if key in TIME_KEYS:
                    diff = abs(g_ev[key] - run.t0 - value)
                    worst = max(worst, diff)
                    if diff > TOLERANCE_S:
                        problems.append(f"{where}: {s_ev['event']} {key} {g_ev[key] - run.t0} != "
                                        f"simulated {value}")
                elif g_ev[key] != value:
                    problems.append(f"{where}: {s_ev['event']} {key} {g_ev[key]!r} != simulated {value!r}")
    return problems, worst


def run_of(served: dict[str, Served | BaseException], name: str) -> Served:
    run = served[name]
    if isinstance(run, BaseException):
        raise run
    return run


@pytest.mark.parametrize("name", [*SCENARIOS, *HOST_SCENARIOS])
def test_the_server_gives_the_simulators_timeline(served, name):
    run = run_of(served, name)
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr[-3000:]
    problems, worst = differences(run)
    problems += [f"{name}: lease {v['id']} is over and has payloads {v['payloads']}" for v in run.views
                 if v["payloads"]]
    # the server records a request when it gets it: no earlier than the test saw its clock reach the
    # time to send, and within the tolerance of it
    problems += [f"{name}: request {i + 1} sent at {seen}, recorded as submitted at {submit}"
                 for i, (_, seen, submit, _) in enumerate(run.sent)
                 if not seen <= submit <= seen + TOLERANCE_S]
    again = " (simulated again with the submit times the server recorded)" if run.resimulated else ""
    print(f"\n[timeline] {name} ({run.config}): worst difference {worst} lease s = {worst / SCALE:.3f} s; "
          f"{run.wall_s:.1f} s of wall time; sent (arrival, seen, submit, real s): {run.sent}{again}")
    assert not problems, "\n".join(problems[:12])


#: How many processes the suspended lease's payload group has: on this machine, its sandbox's two
#: (bwrap and its init), the shell and its two sleeps; on a host, also the helper's waiter that leads it.
GROUP_SIZE = {"preemption": 5, "preemption@hosts": 6}


@pytest.mark.parametrize("name", list(GROUP_SIZE))
def test_the_suspended_lease_is_stopped_and_continues(served, name):
    """Every process of the suspended lease's payload group is stopped (T) while the AR runs, and
    the same processes run again afterwards (on a host: read in the host's own /proc)."""
    run = run_of(served, name)
    by_phase: dict[str, list[tuple[int, str, dict[int, str]]]] = {}
    for phase, pid, said, states in run.samples:
        by_phase.setdefault(phase, []).append((pid, said, states))
    counts = {k: len(v) for k, v in by_phase.items()}
    print(f"\n[timeline] preemption: /proc readings of lease 1's payload group by phase: {counts}")
    # read all along each phase (15, 30 and 30 real seconds, every quarter of a second)
    assert all(counts.get(k, 0) >= n for k, n in (("before", 5), ("suspended", 20), ("resumed", 20))), counts
    pid, _, states = by_phase["before"][0]
    group = set(states)
    assert len(group) == GROUP_SIZE[name] and pid in group, states
    for phase, expected in (("before", "running"), ("suspended", "stopped"), ("resumed", "running")):
        for p, said, states in by_phase[phase]:
            assert p == pid and set(states) == group, (phase, pid, group, states)  # the same processes, alive
            assert said == expected, (phase, said)
            stopped = {q for q, s in states.items() if s in "Tt"}
            assert stopped == (group if expected == "stopped" else set()), (phase, states)


@pytest.mark.parametrize("name", ["reuse2", "reuse2@hosts"])
def test_image_reuse_leaves_the_images_where_the_schedule_put_them(served, name):
    run = run_of(served, name)
    caches = {h["index"]: h["cache"] for h in run.hosts}
    assert caches == {0: ["foobar1.img"], 1: ["foobar1.img"], 2: ["foobar2.img"], 3: ["foobar2.img"]}
    if name.endswith("@hosts"):  # (and they are the hosts' nodes, each on its own host)
        assert [(h["name"], h["host"], h["state"]) for h in run.hosts] == \
            [(f"host{k}-0", f"host{k}", "up") for k in range(1, 5)]


@pytest.mark.parametrize("name", list(HOST_SCENARIOS))
def test_each_payload_ran_on_the_host_the_schedule_gave_it(served, name):
    """Each VM's payload printed the name of the host its node is on (host k holds node k-1), on
    each host the schedule gave it and on no other (a lease suspended and resumed on its node goes on
    as the same process: it says it once)."""
    run = run_of(served, name)
    expected: dict[tuple[int, int], dict[str, list[str]]] = {}
    for v in run.views:
        for ev in v["events"]:
            if ev["event"] == "start":
                for vnode, k in enumerate(ev["nodes"]):
                    host = f"host{k + 1}"
                    expected.setdefault((v["id"], vnode), {})[host] = [f"on {host}"]
    assert expected and run.outputs == expected


def test_a_client_makes_one_tls_context_and_one_connection_for_its_calls(monkeypatch):
    """A lease request is sent when the clock says so: the client must not spend tens of
    milliseconds (more on a loaded machine) making a TLS context and a connection for each call."""
    import ssl
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    peers: list[tuple[str, int]] = []

    class Answer(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            peers.append(self.client_address)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"[]")

        def log_message(self, *args: object) -> None:
            pass

    made = []
    real = ssl.create_default_context
    monkeypatch.setattr(ssl, "create_default_context", lambda *a, **k: made.append(1) or real(*a, **k))
    http = ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=http.serve_forever, daemon=True).start()
    try:
        with Client(f"http://127.0.0.1:{http.server_address[1]}", "token") as client:
            assert [client.leases() for _ in range(5)] == [[]] * 5
    finally:
        http.shutdown()
        http.server_close()
    # one TLS context at most (an http:// server's client makes none from the system's certificates)
    assert len(made) <= 1 and len(peers) == 5 and len(set(peers)) == 1, (made, peers)


# -- what the timelines needed of the lease manager ---------------------------------------------
SPAWN_S = 0.3  # a slow machine's payload start, made slower


@pytest.fixture
def slow_spawning_manager(tmp_path, payload_sandbox):
    """A lease manager (4 nodes, 600 lease seconds a real second) whose payloads take SPAWN_S each
    to start, as many payloads do on a loaded machine."""
    from skylease.control.leases.lease import ResourceTuple
    from skylease.runtime.leases.local import LocalNodes
    from skylease.runtime.leases.manager import LocalLeaseManager
    from skylease.runtime.leases.site import Site, SiteNode

    class SlowNodes(LocalNodes):
        def spawn(self, *args: Any, **kwargs: Any) -> Any:
            time.sleep(SPAWN_S)
            return super().spawn(*args, **kwargs)

    site = Site(tuple(SiteNode(f"node{i}", ResourceTuple(1.0, 1024, 0, 2.0**62)) for i in range(4)),
                machine=(min(os.sched_getaffinity(0)),))
    engine = open_database(load_serve_config(None, data_dir=tmp_path))
    manager = LocalLeaseManager(engine, site, time_scale=600, data_dir=tmp_path,
                                nodes=SlowNodes(site, tmp_path, "timeline-test", sandbox=payload_sandbox)
                                ).start()
    yield manager
    manager.close(stop_payloads=True)
    engine.dispose()


def test_a_request_is_answered_before_its_payloads_start_and_the_next_one_is_stamped_on_arrival(
        slow_spawning_manager):
    """wait.lwf sends 8 requests at lease time 0: the first lease starts at once on 4 nodes. Its
    answer must not wait for its 4 payloads to start, and the second request, which arrives while
    the manager thread starts them, is submitted at the lease time it arrived, not when the
    manager thread is done."""
    from skylease.runtime.leases.api import LeaseRequest

    m = slow_spawning_manager
    wide = LeaseRequest(nodes=4, duration=60_000)
    t = time.monotonic()
    first = m.request("alice", wide)
    answered_s = time.monotonic() - t
    time.sleep(SPAWN_S / 3)  # the manager thread is starting the payloads now
    arrived = m.now()
    second = m.request("alice", wide)
    assert first.state == "active" and second.state in ("pending", "queued", "scheduled")
    assert answered_s < SPAWN_S, answered_s
    # at 600 lease s a second, the 4 payloads take 720 lease s to start; arrival to submission: < 0.1 s
    assert arrived <= second.submit <= arrived + 60, (arrived, second.submit)
    deadline = time.monotonic() + 4 * SPAWN_S + 10
    while len(m.lease(None, first.id).payloads) < 4:  # and the payloads do start
        assert time.monotonic() < deadline, m.lease(None, first.id)
        time.sleep(0.05)
    assert {p["state"] for p in m.lease(None, first.id).payloads} == {"running"}
