"""Part 9 of ``skylease demo``: the lease manager as a service (issue 19).

A real ``skylease serve`` on a free loopback port, in a folder of the caller's, with a site of two
nodes and a fast lease clock; a user is added, asks for a best-effort lease of one node for an hour,
then for an advance reservation of both nodes that starts ten minutes after the first request and
lasts half an hour. Under the server's scheduler (NOVM-SR) the reservation preempts the best-effort
lease, which is suspended (its payload really stopped: SIGSTOP) while the reservation runs and
resumed after it. The demo waits until the best-effort lease is done, and returns each lease's
timeline (lease time from the first request) and the state of the suspended payload in /proc while
the reservation ran and after it; then the server is stopped.

It lives here, not in :mod:`skylease.experiments`, because it drives the service through its HTTP
client (:class:`skylease.service.client.Client`): imports point down, service -> experiments.
"""

from __future__ import annotations

import contextlib
import json
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skylease.experiments.leases import lease_timeline
from skylease.model.errors import UserError
from skylease.service.client import Client, ServiceError

__all__ = ["DEMO_SCALE", "ServeDemo", "serve_demo", "start_server", "stop_server"]

#: Lease seconds per real second: the demo's hour and a half of lease time takes about 4.5 s, and the
#: reservation is asked for half a second of real time before it starts.
DEMO_SCALE = 1200.0
#: The best-effort lease, and the advance reservation that starts 10 minutes after it is requested.
BE_REQUEST = {"type": "best-effort", "nodes": 1, "duration": 3600}
AR_AFTER_S, AR_NODES, AR_DURATION_S = 600, 2, 1800
_START = re.compile(r"^skylease serve: (https?://\S+) \(OpenAPI at /docs\)")


@dataclass(frozen=True)
class ServeDemo:
    """What the service demo did: where the server answered, each lease's timeline (lease time from
    the first request), the best-effort lease's payload (pid) and its /proc states halfway through
    the reservation and 10 lease minutes after it (``T``: stopped; ``S`` or ``R``: running; None:
    gone), the real seconds from the server's start to its stop, and what the dashboard showed the
    same user: its bars by kind on the Gantt chart (``dashboard_bars``)."""

    url: str
    timeline: list[str]
    leases: list[dict[str, Any]]
    payload_pid: int | None
    payload_states: list[str | None]
    seconds: float
    dashboard_bars: dict[str, int]


def serve_demo(folder: str | Path, *, time_scale: float = DEMO_SCALE, timeout_s: float = 60.0) -> ServeDemo:
    """Run the service demo in ``folder`` (the server's data folder: database, site, payload logs);
    :class:`~skylease.runtime.leases.sandbox.SandboxUnavailable` where payloads cannot be confined."""
    if not sys.platform.startswith("linux"):
        raise UserError("the lease service runs payloads with Linux's /proc, process groups and pidfds")
    from skylease.service.auth import add_user
    from skylease.service.server import load_serve_config, open_database

    data = Path(folder)
    data.mkdir(parents=True, exist_ok=True)
    from skylease.runtime.leases.sandbox import probe

    probe(data)  # payloads that cannot be confined here: SandboxUnavailable, before anything starts
    site = data / "site.toml"
    site.write_text("[[nodes]]   # two nodes of 1 CPU: node0 and node1\ncount = 2\n")
    engine = open_database(load_serve_config(None, data_dir=data))
    try:
        token = add_user(engine, "demo")
    finally:
        engine.dispose()
    t0 = time.perf_counter()
    server, url = start_server("--data-dir", str(data), "--site", str(site),
                               "--time-scale", f"{time_scale:g}", "--grace", "1")
    try:
        client = Client(url, token)
        try:
            try:
                leases, pid, states = _scenario(client, time_scale, timeout_s)
                bars = dashboard_bars(url, token)
            except ServiceError as exc:
                if server.poll() is None:
                    raise
                why = (server.communicate()[1] or "").strip().splitlines()
                raise ServiceError(f"{exc}; the server had exited with status {server.returncode}"
                                   + (f": {why[-1]}" if why else "")) from None
        finally:  # nothing of the demo outlives it (a stopped server leaves its payloads running)
            with contextlib.suppress(UserError, ServiceError):
                for v in client.leases(every=True):
                    if v["state"] not in ("done", "cancelled", "rejected"):
                        client.cancel(v["id"])
    finally:
        stop_server(server)
    origin = leases[0]["submit"]
    return ServeDemo(url, lease_timeline([_shifted(v, origin) for v in leases]), leases, pid,
                     states, time.perf_counter() - t0, bars)


def dashboard_bars(url: str, token: str) -> dict[str, int]:
    """Log in to the dashboard as a browser does (the token form, then the session cookie) and
    count the bars of the leases page's Gantt chart by kind (plan ahead apart, as ``planned``)."""
    import httpx

    with httpx.Client(base_url=url, timeout=10) as browser:
        login = browser.post("/login", data={"token": token})
        page = browser.get("/leases", headers={"Accept": "text/html"})
        if login.status_code != 303 or page.status_code != 200 or 'id="gantt"' not in page.text:
            raise ServiceError(f"the dashboard did not open: {login.status_code}, {page.status_code}")
        counts: dict[str, int] = {}
        for lease in browser.get("/leases/gantt.json").json()["leases"]:
            for bar in lease["bars"]:
                kind = "planned" if bar.get("plan") else bar["kind"]
                counts[kind] = counts.get(kind, 0) + 1
        return counts


def _scenario(client: Client, scale: float, timeout_s: float) -> tuple[list[dict[str, Any]], int | None,
                                                                        list[str | None]]:
    be = client.request(json.dumps(BE_REQUEST).encode(), "application/json")
    ar_body = {"type": "advance-reservation", "nodes": AR_NODES, "duration": AR_DURATION_S,
               "start": be["submit"] + AR_AFTER_S}
    ar = client.request(json.dumps(ar_body).encode(), "application/json")
    deadline = time.monotonic() + timeout_s
    # halfway through the reservation, the best-effort lease's payload is stopped; after it, it runs
    _wait_until(client, ar_body["start"] + AR_DURATION_S // 2, scale, deadline)
    pid, states = None, []
    for p in client.lease(be["id"]).get("payloads") or []:
        pid = int(p["pid"])
        states.append(_proc_state(pid))
    _wait_until(client, ar_body["start"] + AR_DURATION_S + AR_AFTER_S, scale, deadline)
    if pid is not None:
        states.append(_proc_state(pid))
    while client.lease(be["id"])["state"] != "done":
        if time.monotonic() > deadline:
            raise UserError(f"the service demo's leases did not end within {timeout_s:g} s")
        time.sleep(0.05)
    return [client.lease(be["id"]), client.lease(ar["id"])], pid, states


def _wait_until(client: Client, t: int, scale: float, deadline: float) -> None:
    """Until the server's lease clock reaches ``t``."""
    while (now := int(client.call("GET", "/health")["now"])) < t:
        if time.monotonic() > deadline:
            raise UserError("the service demo's lease clock did not advance")
        time.sleep(min(0.2, max(0.005, (t - now) / scale)))


def _proc_state(pid: int) -> str | None:
    """The process's state letter in /proc (``T``: stopped), None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0].decode()
    except (OSError, IndexError):
        return None


def _shifted(view: dict[str, Any], origin: int) -> dict[str, Any]:
    """A lease view with its times counted from ``origin`` (the lease time of the first request)."""
    def shift(d: dict[str, Any]) -> dict[str, Any]:
        return {k: v - origin if k in ("time", "until", "submit", "planned_start", "start", "end")
                and isinstance(v, int) else v for k, v in d.items()}

    out = shift(view)
    out["events"] = [shift(e) for e in view.get("events") or []]
    return out


def start_server(*options: str) -> tuple[subprocess.Popen, str]:
    """``python -m skylease serve --port 0 OPTIONS`` in a process of its own, and its URL once its
    start line says it answers (the line is printed when it listens)."""
    argv = [sys.executable, "-m", "skylease", "serve", "--port", "0", *options]
    server = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    line = server.stdout.readline().strip() if server.stdout else ""
    m = _START.match(line)
    if m is None:
        server.kill()
        why = (server.communicate()[1] or "").strip().splitlines()
        raise UserError(f"the lease server did not start: {why[-1] if why else line or 'no output'}")
    return server, m.group(1)


def stop_server(server: subprocess.Popen, timeout_s: float = 30.0) -> None:
    """SIGTERM, as a user's Ctrl-C: the server answers what is under way and closes its journal
    (its payloads go on); SIGKILL if it has not stopped within ``timeout_s``."""
    if server.poll() is None:
        server.send_signal(signal.SIGTERM)
    try:
        server.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        server.kill()
        server.communicate()
