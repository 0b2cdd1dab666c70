"""kill -9 of ``skylease serve`` with 20 leases on a site of four real SSH hosts (issue 37, "Crash
safety as today, across hosts"): test_serve_crash.py's scenario and crash, on a test site of four
sshd hosts (host1 and host2 hold two nodes each, host3 and host4 one: the scenario's six nodes).

After the restart: no lease is lost; the payloads running or stopped before the crash are the same
processes on the same hosts (found again on each host, adopted, not started again), the suspended one
stopped in its host's /proc; every lease ends as the simulator says; no lease has more than one
process per VM and run (every payload process seen on the hosts, sampled all along, is one row of
``lease_payloads``); and no payload is left on any host at the end.

A host's processes are read in its own /proc through this machine's (the test hosts are PID
namespaces of this kernel: ``NSpid`` gives the pid the host gives a process).
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from .payloads import proc_stat
from .test_serve_crash import (
    MEM,
    Server,
    assert_same_timelines,
    scenario,
    simulated_events,
    submit_all,
)

pytestmark = [pytest.mark.usefixtures("payload_sandbox"), pytest.mark.integration]

#: The test site's first address is 127.0.0.(BASE+1): its own (.ci/run runs this file beside others).
BASE = 100
#: Nodes per host (the scenario's six nodes on four hosts).
NODES_PER_HOST = (2, 2, 1, 1)
#: Lease seconds a second: half test_serve_crash.py's. The restart must end before the work of the
#: leases it adopts does (lease 3's at about s + 540, 270 lease seconds after it): a restart connects
#: to four hosts, and took 4 s here on a quiet machine, three times that under CI's load.
SCALE = 15

Key = tuple[str, int, int]  # (host, the pid the host gives it, start ticks)


def host_processes(serve_id: str, hosts: dict[str, str]) -> dict[Key, tuple[int, int, str]]:
    """Our payload group leaders on the hosts (``hosts``: PID namespace -> host name): (host, pid on
    the host, start ticks) -> (lease, vnode, state)."""
    out = {}
    mark = f"SKYLEASE_SERVE_ID={serve_id}".encode()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            host = hosts.get(os.readlink(f"/proc/{name}/ns/pid"))
            if host is None:
                continue
            with open(f"/proc/{name}/environ", "rb") as fh:
                items = fh.read().split(b"\0")
            if mark not in items:
                continue
            status = Path(f"/proc/{name}/status").read_text()
        except OSError:
            continue
        st = proc_stat(int(name))
        if st is None or st[0] == "Z" or st[1] != int(name):  # (a group leader: its pgrp, as we see it)
            continue
        inside = next(int(line.split()[-1]) for line in status.splitlines() if line.startswith("NSpid:"))
        env = dict(item.decode().partition("=")[::2] for item in items if item)
        out[(host, inside, st[2])] = (int(env["SKYLEASE_LEASE"]), int(env["SKYLEASE_VNODE"]), st[0])
    return out


class HostWatcher:
    """Every payload process that ever shows up on the hosts (sampled every 50 ms in a thread)."""

    def __init__(self, serve_id: str, hosts: dict[str, str]) -> None:
        self.serve_id, self.hosts = serve_id, hosts
        self.seen: dict[Key, tuple[int, int]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            for key, (lease, vnode, _) in host_processes(self.serve_id, self.hosts).items():
                self.seen[key] = (lease, vnode)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


class HostServer(Server):
    """test_serve_crash's server, its site the test site's hosts."""

    site: Any = None

    def options(self) -> dict[str, Any]:
        options = super().options() | {"time_scale": SCALE}
        path = Path(options["site"])
        text = (f'[ssh]\nuser = "root"\nidentity_file = "{self.site.key}"\n'
                f'known_hosts = "{self.site.known_hosts}"\n')
        for h, n in zip(self.site.hosts, NODES_PER_HOST, strict=True):
            text += (f'[[hosts]]\naddress = "{h.address}"\nname = "{h.name}"\nnodes = {n}\n'
                     "cpu = 1\nmemory = 1024\n")
        path.write_text(text)
        return options


def node_hosts(srv: Server) -> dict[str, str]:
    """Node name -> its host's name (``leases hosts``)."""
    return {h["name"]: h["host"] for h in srv.call("GET", "/hosts").json()}


def shown(srv: Server, views: dict[int, dict[str, Any]]) -> dict[int, list[tuple[int, str, int]]]:
    """Each lease's live payloads as the server shows them: (vnode, host, pid on the host)."""
    where = node_hosts(srv)
    return {i: sorted((p["vnode"], where[p["node"]], p["pid"]) for p in v["payloads"])
            for i, v in views.items()}


def states_on_hosts(srv: Server, hosts: dict[str, str]) -> dict[tuple[str, int], str]:
    """(host, pid on the host) -> state of each payload group leader of the server."""
    return {(h, pid): st for (h, pid, _), (_, _, st) in host_processes(srv.serve_id(), hosts).items()}


def test_kill_9_with_20_leases_on_4_hosts_loses_none_and_starts_none_twice(ssh_site, tmp_path, capsys):
    site = ssh_site(len(NODES_PER_HOST), base=BASE)
    hosts = {os.readlink(f"/proc/{h.pid}/ns/pid"): h.name for h in site.hosts}
    srv = HostServer(tmp_path / "serve", None)
    srv.site = site
    srv.add_users(capsys)
    srv.start()
    watcher = HostWatcher(srv.serve_id(), hosts)
    t_crash = t_restart = 0
    restart_s = 0.0
    try:
        answers = submit_all(srv, scenario())
        ids = [a["id"] for a in answers]
        owners = {a["id"]: a["owner"] for a in answers}
        ar5, ar6 = answers[4]["requested_start"], answers[5]["requested_start"]
        srv.sleep_until(ar5 + 5)  # (the moment test_serve_crash.py's crash comes: see it)
        before = srv.leases()
        states = {i: v["state"] for i, v in before.items()}
        assert all(states[i] == "active" for i in (1, 3, 4, 5)) and states[2] == "suspended", states
        pids = shown(srv, before)
        assert [len(pids[i]) for i in (1, 2, 3, 4)] == [1, 2, 1, 2], pids
        assert {h for i in (1, 2, 3, 4, 5) for _, h, _ in pids[i]} == {h.name for h in site.hosts}, pids
        srv.kill9()
        t_crash = srv.now_from_db()
        assert t_crash < ar6 - 10, (ar5, t_crash, ar6)
        on_hosts = states_on_hosts(srv, hosts)
        assert all(on_hosts[(h, pid)] == "T" for _, h, pid in pids[2]), (pids[2], on_hosts)
        assert all(on_hosts[(h, pid)] in "RS" for i in (1, 3, 4) for _, h, pid in pids[i]), (pids, on_hosts)
        srv.sleep_until(ar6 + 60)

        t0 = time.monotonic()
        srv.start()
        t_restart, restart_s = srv.now(), time.monotonic() - t0
        after = srv.leases()
        assert sorted(after) == ids and all(after[i]["owner"] == owners[i] for i in ids)  # none lost
        again = shown(srv, after)
        for i in (1, 2, 3, 4):  # adopted on their hosts, not started again
            assert again[i] == pids[i], (f"restarted in {restart_s:.1f} s at lease time {t_restart}: "
                                         + why_not_adopted(srv, i, after[i], pids))
        on_hosts = states_on_hosts(srv, hosts)
        victims = [i for i in (3, 4) if after[i]["state"] == "suspended"]
        assert len(victims) == 1 and after[2]["state"] == "suspended", \
            {i: after[i]["state"] for i in (1, 2, 3, 4)}
        for i in (2, *victims):
            assert all(on_hosts[(h, pid)] == "T" for _, h, pid in pids[i]), (i, pids[i], on_hosts)

        final = srv.wait_all_over(timeout=300)
        assert all(v["state"] == "done" for v in final.values()), {i: v["state"] for i, v in final.items()}
        t_end = time.monotonic() + 10
        while (left := host_processes(srv.serve_id(), hosts)) and time.monotonic() < t_end:
            time.sleep(0.1)
        assert not left, left
    finally:
        watcher.stop()
        srv.stop()
    srv.assert_quiet()
    events = srv.events()
    assert_same_timelines(events, simulated_events(srv, events, migration=False))
    # one process per VM and run, and every process seen on a host is a row
    rows = srv.payload_rows()
    assert all(r["state"] in ("exited", "killed", "lost") for r in rows), rows
    names = node_hosts_in_order(srv)
    recorded = {(names[r["node"]], r["pid"], r["start_ticks"]): (r["lease"], r["vnode"]) for r in rows}
    assert len(recorded) == len(rows), "a process recorded twice"
    assert set(watcher.seen) <= set(recorded), {k: v for k, v in watcher.seen.items() if k not in recorded}
    assert all(recorded[k] == v for k, v in watcher.seen.items())
    per_run = Counter((r["lease"], r["vnode"], r["run"]) for r in rows)
    assert max(per_run.values()) == 1, per_run
    print(f"\n[hosts crash] down from lease time {t_crash} to {t_restart} (the restart took "
          f"{restart_s:.1f} s); {len(rows)} payloads; MEM {MEM} MB")


def why_not_adopted(srv: Server, lease: int, view: dict[str, Any], pids: dict) -> str:
    """What a failure says of a payload not adopted after the restart (in full: pytest shortens
    the repr of other messages)."""
    rows = [r for r in srv.payload_rows() if r["lease"] == lease]
    logs = "\n".join(f"--- server {k}:\n{srv.stderr(k)[-3000:]}" for k in range(1, srv.starts + 1))
    return (f"lease {lease}'s payloads before the crash {pids[lease]}, after: state {view['state']}, "
            f"live {view['payloads']}, ended {view['ended_payloads']}; its rows {rows}\n{logs}")


def node_hosts_in_order(srv: Server) -> list[str]:
    """Each node's host, in node order (the site file's)."""
    from skylease.runtime.leases.site import load_site

    site = load_site(srv.data.parent / "site.toml")
    return [n.host.name for n in site.nodes]
