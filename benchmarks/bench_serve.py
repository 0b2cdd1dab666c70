"""Lease service under load: `skylease serve` with 1,000 leases in the system, beside the same requests
to the lease manager in process and to the scheduler alone (issue 19).

One request sequence, three layers, in one run:

* **HTTP**: a real ``python -m skylease serve`` on a free loopback port, in a temporary data folder,
  with SQLite there (or a fresh database on the PostgreSQL server of ``--db``), a site of ``--nodes``
  1-CPU nodes, its default scheduler (NOVM-SR) and clock (time scale 1). ``--leases`` best-effort
  leases are put in first (1, 2 or 4 nodes for 6 h to 7 days: they fill every node and queue behind
  them). Then C client processes (httpx, one connection and one user each) send requests for
  ``--seconds``: 40 % best-effort requests (1 or 2 nodes, 1 h to 1 day: they queue), 20 % advance
  reservations (1 node, 30 min to 2 h, starting 1 to 30 days from now: each preempts a running
  lease, planned to be suspended for it, or is refused when it does not fit), 30 % ``GET
  /leases/{id}`` of one of the client's own leases, 10 % ``GET /leases`` (the first page of the
  client's leases: the server's default page, since issue 33).
* **manager**: a fresh database of the same kind, the same leases put in, then the same requests,
  in the order the server answered them, through :class:`LocalLeaseManager` in this process (the
  journal, the local enactment, the views; no HTTP), one at a time.
* **scheduler**: the same through :class:`LeaseScheduler` alone (submit + step per request, as the
  manager does; show and list are lookups; no database, no processes).

Every payload is ``exec sleep``: the payloads' own CPU is not what is measured. The server's
payloads outlive it (as after any stop); they are found and killed at the end.

    python benchmarks/bench_serve.py                        # 4 and 16 clients, 60 s each, SQLite
    python benchmarks/bench_serve.py --db 'postgresql:///postgres?host=/var/run/postgresql'
    python benchmarks/bench_serve.py --quick                # a smoke test: 2 clients, 2 s, 100 leases
    python benchmarks/bench_serve.py --profile prof.txt     # also sample the server with py-spy

``--db`` names a PostgreSQL *server* (any database on it): the benchmark creates a fresh database
there for each layer (``skylease_bench_<random>``, so it needs CREATEDB) and drops it at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing as mp
import os
import platform
import random
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from skylease.service.paging import DEFAULT_LIMIT

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("be", "ar", "show", "list")
WEIGHTS = (0.4, 0.2, 0.3, 0.1)
LABEL = {"be": "best-effort", "ar": "AR", "show": "show", "list": "list"}
#: Every VM's payload: a process that only waits.
PAYLOAD = "exec sleep 100000000"
#: Bounds: requests per client, and the run's size options.
MAX_OPS_PER_CLIENT = 200_000
MAX_CLIENTS, MAX_LEASES, MAX_SECONDS, MAX_NODES = 64, 20_000, 600, 1024


# -- the requests -----------------------------------------------------------------------------------
def preload_requests(n: int, seed: int) -> list[dict[str, Any]]:
    """The leases put in before the clients start: long best-effort leases of 1, 2 or 4 nodes."""
    rng = random.Random(seed)
    return [{"nodes": rng.choice((1, 1, 2, 4)), "duration": rng.randint(6 * 3600, 7 * 86400),
             "command": PAYLOAD} for _ in range(n)]


def client_ops(client: int, seed: int) -> Iterator[tuple[str, dict[str, Any] | None, float]]:
    """Client ``client``'s requests: (kind, the lease request for be/ar, which own lease a show
    picks as a fraction of their count). The first is a best-effort request, so a show has a lease."""
    rng = random.Random(seed * 1000 + client + 1)
    kind = "be"
    while True:
        body: dict[str, Any] | None = None
        if kind == "be":
            body = {"nodes": rng.choice((1, 2)), "duration": rng.randint(3600, 86400), "command": PAYLOAD}
        elif kind == "ar":
            body = {"type": "advance-reservation", "nodes": 1, "duration": rng.randint(1800, 7200),
                    "start_in": rng.randint(86400, 30 * 86400), "command": PAYLOAD}
        yield kind, body, rng.random()
        kind = rng.choices(KINDS, WEIGHTS)[0]


@dataclass(frozen=True)
class Done:
    """One request as a client saw it (``at``: perf_counter when answered; the order of the replay)."""

    client: int
    kind: str
    body: dict[str, Any] | None
    pick: float
    seconds: float
    status: int
    at: float


def _http_client(client: int, url: str, token: str, seed: int, seconds: float, barrier: Any,
                 results: Any) -> None:
    """One client process: its own connection, requests one after the other until the time is up."""
    import httpx

    ops = client_ops(client, seed)
    own: list[int] = []
    done: list[Done] = []
    errors: list[str] = []
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=300) as http:
        http.get("/health").raise_for_status()  # the connection is open before the clock starts
        barrier.wait()
        end = time.perf_counter() + seconds
        while time.perf_counter() < end and len(done) < MAX_OPS_PER_CLIENT:
            kind, body, pick = next(ops)
            if kind == "show" and not own:
                kind = "list"
            t0 = time.perf_counter()
            if body is not None:
                r = http.post("/leases", json=body)
            elif kind == "show":
                r = http.get(f"/leases/{own[int(pick * len(own))]}")
            else:
                r = http.get("/leases")
            answer = r.json()
            t1 = time.perf_counter()
            if r.status_code == 201:
                own.append(answer["id"])
            elif r.status_code not in (200, 409) and len(errors) < 5:
                errors.append(f"{kind}: {r.status_code} {r.text[:200]}")
            done.append(Done(client, kind, body, pick, t1 - t0, r.status_code, t1))
    results.put((client, done, errors))


# -- measures -----------------------------------------------------------------------------------------
@dataclass
class Layer:
    name: str
    clients: int
    done: list[Done]
    wall_s: float
    cpu_s: float | None = None  # the server's CPU time over the run

    @property
    def per_s(self) -> float:
        return len(self.done) / self.wall_s

    def ms(self, q: float, kind: str | None = None) -> float:
        xs = [d.seconds for d in self.done if kind is None or d.kind == kind]
        return float(np.percentile(xs, q)) * 1000 if xs else float("nan")

    def mean_ms(self, kinds: tuple[str, ...]) -> float:
        xs = [d.seconds for d in self.done if d.kind in kinds]
        return float(np.mean(xs)) * 1000 if xs else float("nan")

    def refused(self) -> int:
        return sum(d.status == 409 for d in self.done)


def _cpu_s(pid: int) -> float:
    """utime + stime of a process, in seconds."""
    with open(f"/proc/{pid}/stat", "rb") as fh:
        rest = fh.read().rsplit(b")", 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")


# -- databases ------------------------------------------------------------------------------------------
class Databases:
    """Fresh databases for the layers: SQLite files in their data folders (``server`` None), or new
    databases on a PostgreSQL server, dropped by :meth:`close`."""

    def __init__(self, server: str | None) -> None:
        self.server = server
        self.made: list[str] = []
        self._admin: Any = None
        if server is not None:
            import sqlalchemy as sa

            url = sa.engine.make_url(server)
            if url.get_backend_name() != "postgresql":
                raise SystemExit(f"--db must be a PostgreSQL server URL, got {server!r}")
            self._url = url.set(drivername="postgresql+psycopg")
            self._admin = sa.create_engine(self._url, isolation_level="AUTOCOMMIT",
                                           connect_args={"connect_timeout": 5})

    def fresh(self) -> str | None:
        """A URL for a new, empty database (None: SQLite in the data folder)."""
        if self._admin is None:
            return None
        import sqlalchemy as sa

        name = f"skylease_bench_{secrets.token_hex(6)}"
        with self._admin.connect() as c:
            c.execute(sa.text(f'CREATE DATABASE "{name}"'))
        self.made.append(name)
        return self._url.set(database=name).render_as_string(hide_password=False)

    def kind(self) -> str:
        if self._admin is None:
            return "SQLite (WAL, synchronous=NORMAL)"
        import sqlalchemy as sa

        with self._admin.connect() as c:
            return "PostgreSQL " + str(c.execute(sa.text("SHOW server_version")).scalar()).split()[0]

    def __enter__(self) -> Databases:
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):  # (dropping is tidying up: it must not hide an error)
            self.close()

    def close(self) -> None:
        if self._admin is None:
            return
        import sqlalchemy as sa

        with self._admin.connect() as c:
            for name in self.made:
                c.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        self._admin.dispose()


def _write_site(folder: Path, nodes: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "site.toml"
    path.write_text(f"[[nodes]]\ncount = {nodes}\n")
    return path


def _engine(url: str | None, data: Path) -> Any:
    from skylease.runtime.leases.journal import metadata
    from skylease.service.db import create_schema, engine_for

    engine = engine_for(url, data)
    create_schema(engine, metadata)
    return engine


def _kill_payloads(site: Any, data: Path, engine: Any) -> int:
    """Kill what a stopped server left running (its payloads keep running after a stop, by design);
    how many there were."""
    from skylease.runtime.leases.journal import Journal
    from skylease.runtime.leases.local import LocalNodes
    from skylease.runtime.leases.sandbox import probe

    serve_id = Journal(engine).settings().get("serve_id")
    if serve_id is None:
        return 0
    sandbox = probe(data)  # (the server's payloads ran confined: found and ended as the server does)
    nodes = LocalNodes(site, data, serve_id, sandbox=sandbox)
    found = [p for p in nodes.find_own() if nodes.adopt(p)]
    nodes.close(kill=True, grace_s=1.0)
    left = LocalNodes(site, data, serve_id, sandbox=sandbox)
    try:
        if left.find_own():
            raise SystemExit(f"payloads of the benchmark's server are still running (serve id {serve_id})")
    finally:
        left.close()
    return len(found)


# -- layer 1: the server over HTTP ---------------------------------------------------------------------
def run_http(args: argparse.Namespace, clients: int, dbs: Databases, work: Path,
             preload: list[dict[str, Any]]) -> tuple[Layer, dict[str, int]]:
    import httpx

    from skylease.runtime.leases.site import load_site
    from skylease.service.auth import add_user
    from skylease.service.demo import start_server, stop_server

    data = work / f"serve-{clients}"
    site_file = _write_site(data, args.nodes)
    url_db = dbs.fresh()
    engine = _engine(url_db, data)
    tokens = {name: add_user(engine, name) for name in ("preload", *(f"c{i}" for i in range(clients)))}
    proc, url = start_server("--data-dir", str(data), "--site", str(site_file), "--grace", "1",
                             *(["--db", url_db] if url_db else []))
    info: dict[str, int] = {}
    try:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {tokens['preload']}"},
                          timeout=300) as http:
            for body in preload:
                r = http.post("/leases", json=body)
                if r.status_code != 201:
                    raise SystemExit(f"a preloaded lease was refused: {r.status_code} {r.text[:300]}")
            info["queued"] = len(http.get("/queue").json())
        done, wall, cpu = run_clients(_http_client, [(i, url, tokens[f"c{i}"], args.seed, args.seconds)
                                                     for i in range(clients)], proc.pid, args)
        return Layer(f"HTTP server, {clients} client{'s' * (clients > 1)}", clients, done, wall, cpu), info
    finally:
        stop_server(proc, timeout_s=60)
        info["payloads_killed"] = _kill_payloads(load_site(site_file), data, engine)
        engine.dispose()


def run_clients(target: Any, each: list[tuple[Any, ...]], server_pid: int, args: argparse.Namespace,
                categories: tuple[tuple[str, tuple[str, ...]], ...] | None = None,
                ) -> tuple[list[Any], float, float]:
    """One client process per ``each`` running ``target(*its args, barrier, results)``: they start
    together at the barrier, put ``(client, answers, errors)`` in ``results`` when their time is up.
    Returns every answer (each with its time ``at``) in the order the server gave them, the wall
    seconds and the server's CPU seconds over that time (and profiles it when ``args.profile``)."""
    ctx = mp.get_context("spawn")  # fresh client processes, nothing inherited from this one
    barrier, results = ctx.Barrier(len(each) + 1), ctx.Queue()
    procs = [ctx.Process(target=target, args=(*a, barrier, results), daemon=True) for a in each]
    for p in procs:
        p.start()
    barrier.wait(timeout=300)
    cpu0, t0 = _cpu_s(server_pid), time.perf_counter()
    profiler = _start_profiler(args.profile, server_pid, args.seconds) if args.profile else None
    got = [results.get(timeout=args.seconds + 600) for _ in procs]
    wall, cpu = time.perf_counter() - t0, _cpu_s(server_pid) - cpu0
    for p in procs:
        p.join(timeout=30)
    if profiler is not None:
        _finish_profiler(profiler, args.profile, categories or CATEGORIES)
    errors = [e for _, _, errs in got for e in errs]
    if errors:
        raise SystemExit("the server answered errors: " + "; ".join(errors[:5]))
    return sorted((d for _, ds, _ in got for d in ds), key=lambda d: d.at), wall, cpu


# -- layers 2 and 3: in process ------------------------------------------------------------------------
def replay_limit(args: argparse.Namespace) -> float:
    """Seconds an in-process replay may take (it is faster than the server: this only bounds a bug)."""
    return 2 * args.seconds + 30


def in_time(args: argparse.Namespace, sequence: list[Done]) -> Iterator[Done]:
    """The requests of ``sequence`` that an in-process replay reaches within :func:`replay_limit`."""
    end = time.perf_counter() + replay_limit(args)
    for d in sequence:
        if time.perf_counter() > end:
            return
        yield d


def run_manager(args: argparse.Namespace, dbs: Databases, work: Path, preload: list[dict[str, Any]],
                sequence: list[Done], tag: str) -> tuple[Layer, dict[str, int]]:
    from skylease.experiments.leases import load_config
    from skylease.runtime.leases.api import LeaseRefused, LeaseRequest
    from skylease.runtime.leases.manager import LocalLeaseManager
    from skylease.runtime.leases.site import load_site

    data = work / f"manager-{tag}"
    site = load_site(_write_site(data, args.nodes))
    engine = _engine(dbs.fresh(), data)
    m = LocalLeaseManager(engine, site, config=load_config("NOVM-SR").scheduler, data_dir=data,
                          grace_s=1.0).start()
    try:
        for body in preload:
            m.request("preload", LeaseRequest.model_validate(body))
        requests = [None if d.body is None else LeaseRequest.model_validate(d.body) for d in sequence]
        own: dict[int, list[int]] = defaultdict(list)
        done: list[Done] = []
        t_start = time.perf_counter()
        for d, req in zip(in_time(args, sequence), requests, strict=False):
            user, status = f"c{d.client}", 200
            t0 = time.perf_counter()
            try:
                if req is not None:
                    own[d.client].append(m.request(user, req).id)
                    status = 201
                elif d.kind == "show":
                    ids = own[d.client]
                    m.lease(user, ids[int(d.pick * len(ids))])
                else:
                    m.leases(user, None, DEFAULT_LIMIT + 1)  # (the server's first page)
            except LeaseRefused:
                status = 409
            t1 = time.perf_counter()
            done.append(Done(d.client, d.kind, d.body, d.pick, t1 - t0, status, t1))
        wall = time.perf_counter() - t_start
        with m._lock:  # (the state reached, for the report)
            state = {"leases": len(m._owner), "queued": len(m.sched.queue),
                     "reservations": len(m.sched.table.reservations)}
        return Layer("manager in process", 1, done, wall), state
    finally:
        m.close(stop_payloads=True)
        engine.dispose()


def run_scheduler(args: argparse.Namespace, site: Any, preload: list[dict[str, Any]],
                  sequence: list[Done]) -> Layer:
    from skylease.control.leases import Lease, LeaseKind, LeaseScheduler, LeaseState
    from skylease.experiments.leases import load_config
    from skylease.runtime.leases.clock import RealClock

    sched = LeaseScheduler(site.n_nodes, capacity=site.capacity, config=load_config("NOVM-SR").scheduler)
    clock = RealClock(time.time())
    stepped, next_id = -1, 1

    def step(t: int) -> None:
        nonlocal stepped
        sched.step(t)
        stepped = max(stepped, t)

    def request(body: dict[str, Any]) -> Lease:
        """What the manager does with a request, without the journal and the processes."""
        nonlocal next_id
        now = clock.now()
        while (nxt := sched.next_event(stepped)) <= now:  # what fell due since the last request
            step(int(nxt))
        ar = body.get("type") == "advance-reservation"
        lease = Lease(next_id, LeaseKind.ADVANCE_RESERVATION if ar else LeaseKind.BEST_EFFORT, now,
                      body["nodes"], body["duration"], body["duration"], body["duration"],
                      start=now + body["start_in"] if ar else None, preemptible=not ar)
        next_id += 1
        sched.submit(lease)
        step(now)
        return lease

    for body in preload:
        request(body)
    own: dict[int, list[int]] = defaultdict(list)
    done: list[Done] = []
    t_start = time.perf_counter()
    for d in in_time(args, sequence):
        status = 200
        t0 = time.perf_counter()
        if d.body is not None:
            lease = request(d.body)
            status = 409 if lease.state is LeaseState.REJECTED else 201
            if status == 201:
                own[d.client].append(lease.id)
        elif d.kind == "show":
            ids = own[d.client]
            sched.lease(ids[int(d.pick * len(ids))])
        else:
            [sched.lease(i) for i in own[d.client][:DEFAULT_LIMIT + 1]]
        t1 = time.perf_counter()
        done.append(Done(d.client, d.kind, d.body, d.pick, t1 - t0, status, t1))
    return Layer("scheduler alone", 1, done, time.perf_counter() - t_start)


# -- profiling (py-spy samples every thread of the server) ----------------------------------------------
def _start_profiler(out: Path, pid: int, seconds: float) -> subprocess.Popen | None:
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(spy).exists():
        print("--profile: py-spy is not installed (pip install py-spy); not profiling", file=sys.stderr)
        return None
    # --gil: the samples of the thread running Python (idle threads are not told apart reliably here)
    argv = [spy, "record", "--pid", str(pid), "--duration", str(max(1, int(seconds) - 1)), "--rate", "200",
            "--gil", "--format", "raw", "--output", str(out), "--nonblocking"]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


#: The server's parts every route goes through (for the categories of a profile).
DATABASE = ("database", ("sqlalchemy", "sqlite3", "psycopg"))
JSON_AND_AUTH = (("validation and JSON (pydantic)", ("pydantic", "fastapi/encoders", "json/")),
                 ("auth", ("service/auth.py", "hashlib", "hmac")))
HTTP = ("HTTP (uvicorn, starlette, FastAPI, anyio)", ("uvicorn", "h11", "httptools", "starlette", "fastapi",
                                                      "anyio", "asyncio"))
#: Where a sample's time goes: the first of these found from the innermost frame outwards.
CATEGORIES = (
    DATABASE,
    ("journal", ("runtime/leases/journal.py",)),
    ("enactment", ("runtime/leases/local.py",)),
    ("views and records", ("control/leases/records.py",)),
    ("scheduler", ("control/leases/",)),
    *JSON_AND_AUTH,
    ("manager", ("runtime/leases/manager.py",)),
    HTTP,
)


def _finish_profiler(proc: subprocess.Popen, out: Path,
                     categories: tuple[tuple[str, tuple[str, ...]], ...] = CATEGORIES) -> None:
    _, err = proc.communicate(timeout=120)
    if proc.returncode != 0 or not out.exists():
        print(f"--profile: py-spy failed: {err.strip()[-300:]}", file=sys.stderr)
        return
    counts: Counter[str] = Counter()
    for line in out.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        frames = stack.split(";")[1:]  # (the first is the process or thread)
        where = "other"
        for frame in reversed(frames):
            hit = next((name for name, keys in categories if any(k in frame for k in keys)), None)
            if hit is not None:
                where = hit
                break
        counts[where] += int(n)
    total = sum(counts.values()) or 1
    print(f"profile of the server (py-spy, every thread, {total:,} samples not idle; {out}):")
    for where, n in counts.most_common():
        print(f"  {where:<44} {n / total:6.1%}")


# -- the report ----------------------------------------------------------------------------------------
def _print_layers(layers: list[Layer]) -> None:
    head = (f"{'layer':<28} {'requests':>8} {'req/s':>8} {'p50 ms':>7} {'p99 ms':>7} {'refused':>7}  "
            + " ".join(f"{LABEL[k] + ' p50':>13}" for k in KINDS))
    print(head)
    for la in layers:
        print(f"{la.name:<28} {len(la.done):>8,} {la.per_s:>8,.1f} {la.ms(50):>7.2f} {la.ms(99):>7.2f} "
              f"{la.refused():>7,}  " + " ".join(f"{la.ms(50, k):>13.3f}" for k in KINDS))


def _print_ratios(http: Layer, manager: Layer, sched: Layer) -> None:
    lease = ("be", "ar")
    print(f"  requests/s: scheduler / server {sched.per_s / http.per_s:,.1f}x, "
          f"manager / server {manager.per_s / http.per_s:,.2f}x, "
          f"scheduler / manager {sched.per_s / manager.per_s:,.1f}x")
    print(f"  lease requests (best-effort + AR), mean ms: scheduler {sched.mean_ms(lease):.3f}, "
          f"manager {manager.mean_ms(lease):.3f}, server {http.mean_ms(lease):.3f} "
          f"({http.mean_ms(lease) / manager.mean_ms(lease):.1f}x the manager's, "
          f"{http.mean_ms(lease) / sched.mean_ms(lease):,.0f}x the scheduler's)")
    print_server_cpu(http)


def print_server_cpu(http: Layer) -> None:
    if http.cpu_s is not None:
        per = http.cpu_s / len(http.done) * 1000
        print(f"  server CPU: {http.cpu_s / http.wall_s:.0%} of a core, {per:.2f} ms per request (the "
              f"clients share the same {os.cpu_count()} cores)")


def service_options(ap: argparse.ArgumentParser, clients: str, quick: str) -> None:
    """The options of a benchmark of the service (this one and bench_qos.py)."""
    ap.add_argument("--seconds", type=float, default=60.0, help="length of each run (default 60)")
    ap.add_argument("--clients", default=clients,
                    help=f"concurrent clients, comma-separated (default {clients})")
    ap.add_argument("--db", default=None, help="a PostgreSQL server URL (default: SQLite files)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--profile", type=Path, default=None,
                    help="sample the server with py-spy during the first run; raw stacks to this file")
    ap.add_argument("--quick", action="store_true", help=f"a smoke test: {quick}")


def client_counts(ap: argparse.ArgumentParser, text: str) -> list[int]:
    """``--clients``: a comma-separated list of numbers."""
    try:
        return [int(c) for c in text.split(",")]
    except ValueError:
        ap.error(f"--clients: not a list of numbers: {text!r}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    service_options(ap, "4,16", "2 clients, 2 s, 100 leases, 8 nodes")
    ap.add_argument("--leases", type=int, default=1000, help="leases put in first (default 1000)")
    ap.add_argument("--nodes", type=int, default=32, help="the site's nodes (default 32)")
    args = ap.parse_args(argv)
    if args.quick:
        args.seconds, args.clients, args.leases, args.nodes = min(args.seconds, 2.0), "2", 100, 8
    counts = client_counts(ap, args.clients)
    if not (all(1 <= c <= MAX_CLIENTS for c in counts) and 0 < args.seconds <= MAX_SECONDS
            and 0 <= args.leases <= MAX_LEASES and 1 <= args.nodes <= MAX_NODES):
        ap.error(f"out of bounds: 1-{MAX_CLIENTS} clients, 0-{MAX_SECONDS} s, 0-{MAX_LEASES} leases, "
                 f"1-{MAX_NODES} nodes")
    dbs = Databases(args.db)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"load average at start {os.getloadavg()[0]:.1f}")
    print(f"database: {dbs.kind()}; site: {args.nodes} nodes of 1 CPU; scheduler NOVM-SR; time scale 1")
    print(f"{args.leases:,} best-effort leases put in first; then for {args.seconds:g} s: 40 % best-effort "
          "requests, 20 % ARs 1-30 days ahead, 30 % show (GET /leases/ID), 10 % list (GET /leases)")
    from skylease.runtime.leases.site import load_site

    preload = preload_requests(args.leases, args.seed)
    try:
        with tempfile.TemporaryDirectory(prefix="bench-serve-") as tmp:
            work = Path(tmp)
            for clients in counts:
                http, info = run_http(args, clients, dbs, work, preload)
                args.profile = None  # (the first run only)
                manager, state = run_manager(args, dbs, work, preload, http.done, str(clients))
                site = load_site(_write_site(work / "site", args.nodes))
                sched = run_scheduler(args, site, preload, http.done)
                print(f"\n{clients} clients, {args.seconds:g} s: before the clients, {info['queued']:,} "
                      f"leases queued; after, {state['leases']:,} leases, {state['queued']:,} queued, "
                      f"{state['reservations']:,} reservations in the slot table")
                _print_layers([http, manager, sched])
                _print_ratios(http, manager, sched)
                for la in (manager, sched):
                    if len(la.done) < len(http.done):
                        print(f"  ({la.name}: {len(la.done):,} of the {len(http.done):,} requests within "
                              f"{replay_limit(args):g} s)")
    finally:
        with contextlib.suppress(Exception):
            dbs.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
