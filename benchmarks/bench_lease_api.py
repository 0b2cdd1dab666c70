"""Lease API throughput (issue 40, item 6): `POST /leases` and `GET /leases/{id}` per second at 8
concurrent clients, with 10,000 leases in the system, beside the same requests in process.

* **server**: a real ``python -m skylease serve`` on a free loopback port, in a temporary data
  folder, SQLite there (WAL) or a fresh database on the PostgreSQL server of ``--db``; a site of
  ``--nodes`` 1-CPU nodes, its defaults (NOVM-SR, time scale 1). ``--leases`` best-effort leases are
  put in first through the server's own lease manager in this process, on the same database, before
  the server starts (the server then recovers them from the journal, as after any restart): long
  leases of 1, 2 or 4 nodes that fill the nodes and queue behind them, owned by ten users.
* Then two phases of ``--seconds`` each, C client processes (the standard library's
  ``http.client``, one kept-alive connection and one user each):

  1. **POST**: best-effort requests of 1 node for 1 h to 1 day (``exec sleep`` payloads): they queue.
  2. **GET**: ``GET /leases/{id}`` of one of the client's own leases of phase 1, picked at random.

  Each answer is checked (201 / 200). Reported: requests/s, p50/p99 latency, the server's CPU per
  request, and the clients' own CPU (they share the machine's cores with the server).
* **manager in process** (the ablation without HTTP, JSON and auth): the same preload through a
  fresh :class:`LocalLeaseManager` on a fresh database, then the same requests in the order the
  server answered them, one at a time (the manager serialises every command under one lock anyway).
* **scheduler alone** (the peer without a database): :class:`LeaseScheduler`, the same preload and
  requests (submit + step per request, a lookup per GET).

    python benchmarks/bench_lease_api.py                 # 8 clients, 20 s a phase, 10,000 leases, SQLite
    python benchmarks/bench_lease_api.py --db 'postgresql:///postgres?host=/var/run/postgresql'
    python benchmarks/bench_lease_api.py --quick         # 2 clients, 2 s a phase, 300 leases
    python benchmarks/bench_lease_api.py --profile prof  # py-spy on the server: prof-post.txt, prof-get.txt

The target (issue 40): at least 500 POST/s and 1,000 GET/s at 8 clients, p99 under 50 ms.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing as mp
import os
import platform
import random
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_serve's helpers (imported when needed)

#: Every payload: a process that only waits.
PAYLOAD = "exec sleep 100000000"
#: The issue's figures.
TARGET = {"POST": 500.0, "GET": 1000.0}
TARGET_P99_MS = 50.0
PRELOAD_USERS = 10
MAX_OPS_PER_CLIENT = 500_000
MAX_CLIENTS, MAX_LEASES, MAX_SECONDS, MAX_NODES = 64, 50_000, 600, 1024


def preload_requests(n: int, seed: int) -> list[tuple[str, dict[str, Any]]]:
    """(owner, request) of the leases put in first: long best-effort leases of 1, 2 or 4 nodes."""
    rng = random.Random(seed)
    return [(f"p{i % PRELOAD_USERS}", {"nodes": rng.choice((1, 1, 2, 4)),
                                       "duration": rng.randint(6 * 3600, 7 * 86400), "command": PAYLOAD})
            for i in range(n)]


def post_body(rng: random.Random) -> dict[str, Any]:
    return {"nodes": 1, "duration": rng.randint(3600, 86400), "command": PAYLOAD}


@dataclass
class Answers:
    """One client's phase: each request's latency (s), in order, with its body or lease id."""

    client: int
    seconds: list[float] = field(default_factory=list)
    ends: list[float] = field(default_factory=list)  # perf_counter at each answer
    bodies: list[dict[str, Any]] = field(default_factory=list)  # POST: the request sent
    ids: list[int] = field(default_factory=list)  # POST: the lease made; GET: the lease asked for
    errors: list[str] = field(default_factory=list)
    cpu_s: float = 0.0  # the client's own CPU over its phase


def _client(client: int, url: str, token: str, phase: str, ids: list[int], seconds: float, seed: int,
            barrier: Any, results: Any) -> None:
    """One client process: one kept-alive connection, requests one after the other for ``seconds``."""
    import http.client

    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
    auth = {"Authorization": f"Bearer {token}"}
    post_headers = {**auth, "Content-Type": "application/json"}
    conn.request("GET", "/health")
    conn.getresponse().read()  # the connection is open before the clock starts
    rng = random.Random(seed * 1000 + client + (1 if phase == "POST" else 500))
    out = Answers(client)
    barrier.wait()
    cpu0 = sum(os.times()[:2])
    end = time.perf_counter() + seconds
    while len(out.seconds) < MAX_OPS_PER_CLIENT:
        t0 = time.perf_counter()
        if t0 >= end:
            break
        if phase == "POST":
            body = post_body(rng)
            conn.request("POST", "/leases", json.dumps(body).encode(), post_headers)
        else:
            lid = ids[rng.randrange(len(ids))]
            conn.request("GET", f"/leases/{lid}", headers=auth)
        r = conn.getresponse()
        data = r.read()
        t1 = time.perf_counter()
        want = 201 if phase == "POST" else 200
        if r.status != want:
            if len(out.errors) < 5:
                out.errors.append(f"{phase}: {r.status} {data[:200]!r}")
            continue
        out.seconds.append(t1 - t0)
        out.ends.append(t1)
        if phase == "POST":
            out.bodies.append(body)
            out.ids.append(json.loads(data)["id"])
        else:
            out.ids.append(lid)
    out.cpu_s = sum(os.times()[:2]) - cpu0
    conn.close()
    results.put(out)


@dataclass
class Layer:
    name: str
    phase: str
    clients: int
    seconds: list[float]
    wall_s: float
    server_cpu_s: float | None = None
    clients_cpu_s: float | None = None

    @property
    def n(self) -> int:
        return len(self.seconds)

    @property
    def per_s(self) -> float:
        return self.n / self.wall_s if self.wall_s > 0 else float("nan")

    def ms(self, q: float) -> float:
        import numpy as np

        return float(np.percentile(self.seconds, q)) * 1000 if self.seconds else float("nan")


def run_phase(phase: str, url: str, tokens: list[str], ids: list[list[int]], args: argparse.Namespace,
              server_pid: int) -> tuple[Layer, list[Answers]]:
    """C client processes for ``args.seconds``: every answer, the server's and the clients' CPU."""
    from bench_serve import _cpu_s, _finish_profiler, _start_profiler

    ctx = mp.get_context("spawn")  # fresh client processes, nothing inherited from this one
    barrier, results = ctx.Barrier(len(tokens) + 1), ctx.Queue()
    procs = [ctx.Process(target=_client, daemon=True,
                         args=(i, url, tok, phase, ids[i], args.seconds, args.seed, barrier, results))
             for i, tok in enumerate(tokens)]
    for p in procs:
        p.start()
    barrier.wait(timeout=300)
    cpu0, t0 = _cpu_s(server_pid), time.perf_counter()
    out = Path(f"{args.profile}-{phase.lower()}.txt") if args.profile else None
    spy = _start_profiler(out, server_pid, args.seconds) if out is not None else None
    got: list[Answers] = [results.get(timeout=args.seconds + 600) for _ in procs]
    wall, cpu = time.perf_counter() - t0, _cpu_s(server_pid) - cpu0
    for p in procs:
        p.join(timeout=30)
    if spy is not None and out is not None:
        _finish_profiler(spy, out, PROFILE_CATEGORIES)
    errors = [e for a in got for e in a.errors]
    if errors:
        raise SystemExit(f"the server answered errors in the {phase} phase: " + "; ".join(errors[:5]))
    got.sort(key=lambda a: a.client)
    seconds = [s for a in got for s in a.seconds]
    layer = Layer(f"server, {len(tokens)} client{'s' * (len(tokens) > 1)}", phase, len(tokens), seconds, wall,
                  cpu, sum(a.cpu_s for a in got))
    return layer, got


#: The profile's categories: bench_serve's, with the token cache and the group commit of this round.
PROFILE_CATEGORIES: tuple[tuple[str, tuple[str, ...]], ...] = ()


def _profile_categories() -> tuple[tuple[str, tuple[str, ...]], ...]:
    from bench_serve import CATEGORIES

    return (("views (pydantic LeaseView)", ("runtime/leases/views.py", "runtime/leases/api.py")),
            *CATEGORIES)


def in_order(answers: list[Answers]) -> list[tuple[int, Any, int]]:
    """(client, body or lease id, lease id) of every answered request, in the order the server
    answered them."""
    rows = [(t, a.client, a.bodies[i] if a.bodies else a.ids[i], a.ids[i])
            for a in answers for i, t in enumerate(a.ends)]
    rows.sort(key=lambda r: r[0])
    return [(c, x, lid) for _, c, x, lid in rows]


def id_map(answers: dict[str, list[Answers]], first: int) -> dict[int, int]:
    """The server's lease id of each POST -> the id the replay in process gave the same request (in
    the server's order, from ``first``: ids are given one after the other, and none is refused)."""
    return {lid: first + k for k, (_, _, lid) in enumerate(in_order(answers["POST"]))}


# -- the server ---------------------------------------------------------------------------------------
def preload_manager(engine: Any, data: Path, site_file: Path, preload: list[tuple[str, dict[str, Any]]]
                    ) -> tuple[Any, float]:
    """The server's own lease manager (as ``skylease serve`` makes it) on ``engine``, the preload put
    in; returned started, with the seconds the preload took."""
    from skylease.runtime.leases.api import LeaseRequest
    from skylease.service.server import load_serve_config, local_manager

    cfg = load_serve_config(None, site=site_file, data_dir=data, grace=1.0)
    m = local_manager(engine, cfg, data)
    t0 = time.perf_counter()
    for owner, body in preload:
        m.request(owner, LeaseRequest.model_validate(body))
    return m, time.perf_counter() - t0


def run_server(args: argparse.Namespace, dbs: Any, work: Path, preload: list[tuple[str, dict[str, Any]]]
               ) -> tuple[list[Layer], dict[str, list[Answers]], dict[str, float]]:
    from bench_serve import _engine, _kill_payloads, _write_site
    from skylease.runtime.leases.site import load_site
    from skylease.service.auth import add_user
    from skylease.service.demo import start_server, stop_server

    data = work / "serve"
    site_file = _write_site(data, args.nodes)
    url_db = dbs.fresh()
    engine = _engine(url_db, data)
    info: dict[str, float] = {}
    tokens = [add_user(engine, f"c{i}") for i in range(args.clients)]
    m, info["preload_s"] = preload_manager(engine, data, site_file, preload)
    m.close()  # (its payloads go on: the server adopts them)
    t0 = time.perf_counter()
    proc, url = start_server("--data-dir", str(data), "--site", str(site_file), "--grace", "1",
                             *(["--db", url_db] if url_db else []))
    info["server_start_s"] = time.perf_counter() - t0
    layers, answers = [], {}
    try:
        post, answers["POST"] = run_phase("POST", url, tokens, [[] for _ in tokens], args, proc.pid)
        own = [a.ids or [0] for a in answers["POST"]]
        get, answers["GET"] = run_phase("GET", url, tokens, own, args, proc.pid)
        layers += [post, get]
        return layers, answers, info
    finally:
        stop_server(proc, timeout_s=60)
        _kill_payloads(load_site(site_file), data, engine)
        engine.dispose()


# -- in process ---------------------------------------------------------------------------------------
def run_manager(args: argparse.Namespace, dbs: Any, work: Path, preload: list[tuple[str, dict[str, Any]]],
                answers: dict[str, list[Answers]]) -> list[Layer]:
    from bench_serve import _engine, _write_site
    from skylease.runtime.leases.api import LeaseRequest

    data = work / "manager"
    site_file = _write_site(data, args.nodes)
    engine = _engine(dbs.fresh(), data)
    m, _ = preload_manager(engine, data, site_file, preload)
    layers: list[Layer] = []
    limit = time.perf_counter() + 2 * args.seconds + 30  # (it is faster than the server: a bound for a bug)
    try:
        ids = id_map(answers, len(preload) + 1)
        for phase in ("POST", "GET"):
            seq = in_order(answers[phase])
            reqs = [LeaseRequest.model_validate(x) for _, x, _ in seq] if phase == "POST" else []
            seconds: list[float] = []
            t_start = time.perf_counter()
            for i, (client, x, _) in enumerate(seq):
                if time.perf_counter() > limit:
                    break
                owner = f"c{client}"
                t0 = time.perf_counter()
                if phase == "POST":
                    m.request(owner, reqs[i])
                else:
                    m.lease(owner, ids[x])
                seconds.append(time.perf_counter() - t0)
            layers.append(Layer("manager in process", phase, 1, seconds, time.perf_counter() - t_start))
        return layers
    finally:
        m.close(stop_payloads=True)
        engine.dispose()


def run_scheduler(args: argparse.Namespace, preload: list[tuple[str, dict[str, Any]]],
                  answers: dict[str, list[Answers]]) -> list[Layer]:
    from skylease.control.leases import Lease, LeaseKind, LeaseScheduler
    from skylease.experiments.leases import load_config
    from skylease.runtime.leases.clock import RealClock

    sched = LeaseScheduler(args.nodes, config=load_config("NOVM-SR").scheduler)
    clock = RealClock(time.time())
    stepped, next_id = -1, 1

    def request(body: dict[str, Any]) -> Lease:
        """What the manager does with a request, without the journal, the views and the processes."""
        nonlocal next_id, stepped
        now = clock.now()
        while (nxt := sched.next_event(stepped)) <= now:
            sched.step(int(nxt))
            stepped = max(stepped, int(nxt))
        lease = Lease(next_id, LeaseKind.BEST_EFFORT, now, body["nodes"], body["duration"], body["duration"],
                      body["duration"], preemptible=True)
        next_id += 1
        sched.submit(lease)
        sched.step(now)
        stepped = max(stepped, now)
        return lease

    for _, body in preload:
        request(body)
    layers: list[Layer] = []
    ids = id_map(answers, len(preload) + 1)
    for phase in ("POST", "GET"):
        seconds: list[float] = []
        t_start = time.perf_counter()
        for _, x, _ in in_order(answers[phase]):
            t0 = time.perf_counter()
            if phase == "POST":
                request(x)
            else:
                sched.lease(ids[x])
            seconds.append(time.perf_counter() - t0)
        layers.append(Layer("scheduler alone", phase, 1, seconds, time.perf_counter() - t_start))
    return layers


# -- the report ---------------------------------------------------------------------------------------
def print_table(layers: list[Layer]) -> None:
    print(f"{'phase':<5} {'layer':<20} {'requests':>9} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} "
          f"{'server CPU ms/req':>18} {'clients CPU ms/req':>19}")
    for la in layers:
        scpu = "" if la.server_cpu_s is None else f"{la.server_cpu_s / max(la.n, 1) * 1000:.3f}"
        ccpu = "" if la.clients_cpu_s is None else f"{la.clients_cpu_s / max(la.n, 1) * 1000:.3f}"
        print(f"{la.phase:<5} {la.name:<20} {la.n:>9,} {la.per_s:>9,.1f} {la.ms(50):>8.2f} {la.ms(99):>8.2f} "
              f"{scpu:>18} {ccpu:>19}")


def print_ratios(layers: list[Layer]) -> None:
    for phase in ("POST", "GET"):
        server, manager, sched = (next(la for la in layers if la.phase == phase and la.name.startswith(s))
                                  for s in ("server", "manager", "scheduler"))
        print(f"  {phase}: requests/s scheduler / server {sched.per_s / server.per_s:,.1f}x, "
              f"manager / server {manager.per_s / server.per_s:,.2f}x, "
              f"scheduler / manager {sched.per_s / manager.per_s:,.1f}x; "
              f"server CPU {server.server_cpu_s / server.wall_s:.0%} of a core, clients' CPU "
              f"{server.clients_cpu_s / server.wall_s:.0%} of a core")
        ok = server.per_s >= TARGET[phase] and server.ms(99) < TARGET_P99_MS
        print(f"  {phase} target ({TARGET[phase]:,.0f}/s, p99 < {TARGET_P99_MS:g} ms): "
              f"{'met' if ok else 'not met'} ({server.per_s:,.1f}/s, p99 {server.ms(99):.1f} ms)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20.0, help="length of each phase (default 20)")
    ap.add_argument("--clients", type=int, default=8, help="concurrent clients (default 8)")
    ap.add_argument("--leases", type=int, default=10_000, help="leases put in first (default 10,000)")
    ap.add_argument("--nodes", type=int, default=32, help="the site's nodes (default 32)")
    ap.add_argument("--db", default=None, help="a PostgreSQL server URL (default: SQLite files)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--profile", default=None,
                    help="py-spy on the server in each phase: raw stacks to PREFIX-post.txt, PREFIX-get.txt")
    ap.add_argument("--no-peers", action="store_true", help="the server only (no replay in process)")
    ap.add_argument("--quick", action="store_true", help="a smoke test: 2 clients, 2 s a phase, 300 leases")
    args = ap.parse_args(argv)
    if args.quick:
        args.seconds, args.clients, args.leases, args.nodes = min(args.seconds, 2.0), 2, 300, 8
    if not (1 <= args.clients <= MAX_CLIENTS and 0 < args.seconds <= MAX_SECONDS
            and 0 <= args.leases <= MAX_LEASES and 1 <= args.nodes <= MAX_NODES):
        ap.error(f"out of bounds: 1-{MAX_CLIENTS} clients, 0-{MAX_SECONDS} s, 0-{MAX_LEASES} leases, "
                 f"1-{MAX_NODES} nodes")
    global PROFILE_CATEGORIES
    PROFILE_CATEGORIES = _profile_categories()
    from bench_serve import Databases

    dbs = Databases(args.db)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"load average at start {os.getloadavg()[0]:.1f}")
    print(f"database: {dbs.kind()}; site: {args.nodes} nodes of 1 CPU; scheduler NOVM-SR; time scale 1")
    preload = preload_requests(args.leases, args.seed)
    try:
        with tempfile.TemporaryDirectory(prefix="bench-lease-api-") as tmp:
            work = Path(tmp)
            layers, answers, info = run_server(args, dbs, work, preload)
            print(f"{args.leases:,} best-effort leases put in first ({info['preload_s']:.1f} s through the "
                  f"manager in process; the server recovered them in {info['server_start_s']:.1f} s); then "
                  f"{args.clients} clients, {args.seconds:g} s of POST /leases (best-effort, 1 node), "
                  f"then {args.seconds:g} s of GET /leases/ID")
            if not args.no_peers:
                layers += run_manager(args, dbs, work, preload, answers)
                layers += run_scheduler(args, preload, answers)
                layers.sort(key=lambda la: (la.phase != "POST",))
            print_table(layers)
            if not args.no_peers:
                print_ratios(layers)
    finally:
        with contextlib.suppress(Exception):
            dbs.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
