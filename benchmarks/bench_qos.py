"""SpeQuloS as a service under load: `skylease serve` with 100 bags of tasks reporting their progress
and asking for predictions, beside the same requests to :class:`QoSService` in process (issue 20).

One request sequence, two layers, in one run:

* **HTTP**: a real ``python -m skylease serve`` on a free loopback port, in a temporary data folder,
  with SQLite there (or a fresh database on the PostgreSQL server of ``--db``). An administrator
  deposits credits for one user per client; each client registers its share of ``--bots`` bags of
  tasks (every other one with credits and strategy 9C-C-R, served by the Scheduler; the others
  without: progress and predictions only). Then C client processes (httpx, one connection each)
  send, for ``--seconds``, 80 % progress reports (``POST /qos/bots/{id}/reports``) and 20 %
  predictions (``GET /qos/bots/{id}/prediction``) of their own bags, picked at random.
* **service in process**: a fresh database of the same kind, the same users, deposits and bags,
  then the same requests, in the order the server answered them, through :class:`QoSService`
  (no HTTP, no JSON, no authentication), one at a time.

Each bag is a synthetic run (:class:`BagRun`): every report advances its time by one minute (the
bag's time, not the benchmark's), with the completions of that minute and their times; 90 % of its
tasks complete at an even pace over ``--life`` reports, the rest five times slower (the tail of a
desktop grid), plus what its cloud workers (CWs) complete. The CWs a served bag's answer starts
are reported as busy in the following reports, those it stops as released, as a real run's relay
does. A bag that completes is replaced at once by a new one in the same slot (a registration), so
``--bots`` bags are always registered and running.

At the end: the database's size, what its progress series takes per report (one report is one
minute of a bag: the paper's "less than a few hundred bytes per minute"), and the whole database
per report.

    python benchmarks/bench_qos.py                      # 4 clients, 60 s, SQLite
    python benchmarks/bench_qos.py --db 'postgresql:///postgres?host=/var/run/postgresql'
    python benchmarks/bench_qos.py --quick              # a smoke test: 2 clients, 2 s, 10 bags
    python benchmarks/bench_qos.py --profile prof.txt   # also sample the server with py-spy

``--db`` names a PostgreSQL *server* (any database on it): a fresh database is created there for
each layer (``skylease_bench_<random>``, so it needs CREATEDB) and dropped at the end.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(__file__))
from bench_serve import (
    DATABASE,
    HTTP,
    JSON_AND_AUTH,
    Databases,
    Layer,
    _write_site,
    client_counts,
    in_time,
    print_server_cpu,
    replay_limit,
    run_clients,
    service_options,
)

#: Request kinds: a served bag's report, an unserved bag's report, a prediction, a new bag.
KINDS = ("served", "report", "predict", "register")
LABEL = {"served": "report (served)", "report": "report (not served)", "predict": "prediction",
         "register": "registration"}
#: Share of reports among the clients' choices (the rest are predictions).
REPORT_SHARE = 0.8
#: Bag seconds per report: one report a minute.
PERIOD = 60.0
INFRASTRUCTURE = "bench-grid"
STRATEGY, TICK, CREDITS = "9C-C-R", 240.0, 200.0
#: Credits deposited for each user (enough for every bag it will ever order for).
DEPOSIT = 1e9
MAX_OPS_PER_CLIENT = 500_000
MAX_CLIENTS, MAX_BOTS, MAX_SECONDS = 64, 10_000, 600
#: Where a sample of the server's time goes (``--profile``): the first found from the innermost frame out.
CATEGORIES = (
    DATABASE,
    ("Information and Oracle (runtime/qos/bots.py)", ("runtime/qos/bots.py",)),
    ("Credit System (runtime/qos/ledger.py)", ("runtime/qos/ledger.py",)),
    ("Scheduler and SpeQuloS policy", ("runtime/qos/scheduler.py", "control/qos/")),
    ("QoSService", ("runtime/qos/service.py",)),
    *JSON_AND_AUTH,
    ("routes (service/qos_api.py)", ("service/qos_api.py",)),
    HTTP,
)


# -- the bags' synthetic runs ------------------------------------------------------------------------
class BagRun:
    """One bag of tasks as its run reports it (the slot's ``generation``-th bag: a new bag replaces a
    completed one). Deterministic in its arguments and the answers it is given."""

    def __init__(self, seed: int, client: int, slot: int, generation: int, served: bool, life: int) -> None:
        self.rng = random.Random(f"{seed}/{client}/{slot}/{generation}")
        self.served = served
        self.n = self.rng.randint(100, 2000)
        self.rate = 0.9 * self.n / life  # tasks completed per report before the tail
        self.t = 0.0
        self.completed = self.assigned = 0
        self.ctimes: list[float] = []
        self.atimes: list[float] = []
        self.acked_c = self.acked_a = 0
        self.cws: dict[int, str] = {}
        self.done = False

    def registration(self) -> dict[str, Any]:
        body: dict[str, Any] = {"infrastructure": INFRASTRUCTURE, "n_tasks": self.n}
        if self.served:
            body.update(strategy=STRATEGY, tick=TICK, credits=CREDITS)
        return body

    def _draw(self, mean: float) -> int:
        return int(mean) + (self.rng.random() < mean - int(mean))

    def next_report(self) -> dict[str, Any]:
        """The body of the next report: one more minute of the bag."""
        t0, self.t = self.t, self.t + PERIOD
        for sid, state in self.cws.items():  # started at the last answer: up and working by now
            if state == "booting":
                self.cws[sid] = "busy"
        busy = sum(s == "busy" for s in self.cws.values())
        tail = self.completed >= 0.9 * self.n
        k = self._draw(self.rate / 5 if tail else self.rate) + busy * self._draw(self.rate / 5)
        k = min(k, self.n - self.completed)
        self.ctimes += sorted(round(self.rng.uniform(t0, self.t), 3) for _ in range(k))
        self.completed += k
        # the volatile workers hold a minute's worth of tasks beyond those completed
        a = min(self.n, self.completed + max(1, round(self.rate)))
        self.atimes += sorted(round(self.rng.uniform(t0, self.t), 3) for _ in range(a - self.assigned))
        self.assigned = a
        return {"t": self.t, "submitted": self.n, "assigned": a, "completed": self.completed,
                "since_c": self.acked_c, "completions": self.ctimes[self.acked_c:],
                "since_a": self.acked_a, "assignments": self.atimes[self.acked_a:],
                "workers": {str(k): v for k, v in self.cws.items()}, "queued": self.n - a}

    def take(self, answer: dict[str, Any]) -> None:
        """The service's answer: what it acknowledged, the CWs to start and to stop, the end."""
        self.acked_c, self.acked_a = answer["acked_c"], answer["acked_a"]
        for sid in answer["start"]:
            self.cws[int(sid)] = "booting"
        for sid in answer["stop"]:
            self.cws[int(sid)] = "released"
        self.done = bool(answer["done"])


def client_choices(client: int, seed: int, slots: int) -> Any:
    """Client ``client``'s requests: (report or not, which of its bags), forever."""
    rng = random.Random(seed * 1000 + client + 1)
    while True:
        yield rng.random() < REPORT_SHARE, rng.randrange(slots)


def bag_slots(client: int, clients: int, bots: int) -> list[int]:
    """The global slots (0..bots-1) of ``client``'s bags; even slots are served."""
    return list(range(client, bots, clients))


@dataclass(frozen=True)
class Done:
    """One request as a client saw it (``at``: perf_counter when answered; the replay's order)."""

    client: int
    kind: str
    slot: int
    seconds: float
    status: int
    at: float
    started: int = 0  # CWs the answer started


@dataclass
class Bags:
    """A client's bags on one layer: the run in each slot, its id there, its generation."""

    seed: int
    client: int
    life: int
    slots: list[int]

    def __post_init__(self) -> None:
        self.runs = {s: BagRun(self.seed, self.client, s, 0, s % 2 == 0, self.life) for s in self.slots}
        self.ids: dict[int, int] = {}
        self.gen = dict.fromkeys(self.slots, 0)

    def renew(self, slot: int) -> BagRun:
        self.gen[slot] += 1
        self.runs[slot] = BagRun(self.seed, self.client, slot, self.gen[slot], slot % 2 == 0, self.life)
        return self.runs[slot]


def _http_client(client: int, url: str, token: str, args: dict[str, Any], barrier: Any, results: Any) -> None:
    """One client process: registers its bags, then requests one after the other until the time is up."""
    import httpx

    bags = Bags(args["seed"], client, args["life"], bag_slots(client, args["clients"], args["bots"]))
    choices = client_choices(client, args["seed"], len(bags.slots))
    done: list[Done] = []
    errors: list[str] = []

    def register(http: httpx.Client, slot: int) -> httpx.Response:
        r = http.post("/qos/bots", json=bags.runs[slot].registration())
        if r.status_code == 201:
            bags.ids[slot] = r.json()["id"]
        return r

    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=300) as http:
        for slot in bags.slots:
            register(http, slot).raise_for_status()
        barrier.wait()
        end = time.perf_counter() + args["seconds"]
        while time.perf_counter() < end and len(done) < MAX_OPS_PER_CLIENT:
            is_report, i = next(choices)
            slot = bags.slots[i]
            run, started = bags.runs[slot], 0
            t0 = time.perf_counter()
            if is_report:
                kind = "served" if run.served else "report"
                r = http.post(f"/qos/bots/{bags.ids[slot]}/reports", json=run.next_report())
                if r.status_code == 200:
                    answer = r.json()
                    run.take(answer)
                    started = len(answer["start"])
            else:
                kind = "predict"
                r = http.get(f"/qos/bots/{bags.ids[slot]}/prediction")
                r.json()
            t1 = time.perf_counter()
            if r.status_code != 200 and len(errors) < 5:
                errors.append(f"{kind}: {r.status_code} {r.text[:200]}")
            done.append(Done(client, kind, slot, t1 - t0, r.status_code, t1, started))
            if run.done:  # a new bag in its slot
                bags.renew(slot)
                t0 = time.perf_counter()
                r = register(http, slot)
                t1 = time.perf_counter()
                if r.status_code != 201 and len(errors) < 5:
                    errors.append(f"register: {r.status_code} {r.text[:200]}")
                done.append(Done(client, "register", slot, t1 - t0, r.status_code, t1))
    results.put((client, done, errors))


# -- the storage a bag's reports take --------------------------------------------------------------
def storage(engine: Any) -> dict[str, float]:
    """The database's size, the progress series' (table and indexes) and its row count. SQLite:
    pages in use (dbstat) after a checkpoint, and the rows' own bytes; PostgreSQL: relation sizes."""
    import sqlalchemy as sa

    with engine.connect() as c:
        out: dict[str, float] = {
            "reports": c.execute(sa.text("SELECT count(*) FROM qos_progress")).scalar_one()}
        if engine.dialect.name == "sqlite":
            c.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
            q = ("SELECT sum(pgsize), sum(payload) FROM dbstat "
                 "WHERE name IN ('qos_progress', 'qos_progress_bot_id')")
            out["series"], out["series_payload"] = c.exec_driver_sql(q).one()
            out["database"] = c.exec_driver_sql("SELECT sum(pgsize) FROM dbstat").scalar_one()
        else:
            out["series"] = c.execute(sa.text("SELECT pg_total_relation_size('qos_progress')")).scalar_one()
            out["database"] = c.execute(sa.text(
                "SELECT sum(pg_total_relation_size(oid)) FROM pg_class WHERE relkind = 'r' "
                "AND relnamespace = 'public'::regnamespace")).scalar_one()
    return {k: float(v or 0) for k, v in out.items()}


def _engine(url: str | None, data: Path) -> Any:
    from skylease.runtime.leases.journal import metadata
    from skylease.runtime.qos.service import METADATA
    from skylease.service.db import create_schema, engine_for

    engine = engine_for(url, data)
    create_schema(engine, metadata, *METADATA)
    return engine


# -- layer 1: the server over HTTP -----------------------------------------------------------------
def run_http(args: argparse.Namespace, clients: int, dbs: Databases,
             work: Path) -> tuple[Layer, dict[str, float]]:
    import httpx

    from skylease.service.auth import add_user
    from skylease.service.demo import start_server, stop_server

    data = work / f"serve-{clients}"
    site_file = _write_site(data, 1)
    url_db = dbs.fresh()
    engine = _engine(url_db, data)
    tokens = {f"c{i}": add_user(engine, f"c{i}") for i in range(clients)}
    admin = add_user(engine, "bench-admin", admin=True)
    empty = storage(engine)["database"]  # (the schema and the users: what the run adds is measured)
    proc, url = start_server("--data-dir", str(data), "--site", str(site_file), "--grace", "1",
                             *(["--db", url_db] if url_db else []))
    try:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {admin}"}, timeout=300) as http:
            for user in tokens:
                http.post(f"/qos/accounts/{user}/deposits", json={"credits": DEPOSIT}).raise_for_status()
        opts = {"seed": args.seed, "life": args.life, "clients": clients, "bots": args.bots,
                "seconds": args.seconds}
        done, wall, cpu = run_clients(_http_client, [(i, url, tokens[f"c{i}"], opts) for i in range(clients)],
                                      proc.pid, args, CATEGORIES)
        layer = Layer(f"HTTP server, {clients} client{'s' * (clients > 1)}", clients, done, wall, cpu)
    finally:
        stop_server(proc, timeout_s=60)
    try:
        st = storage(engine)
        st["growth"] = st["database"] - empty
        return layer, st
    finally:
        engine.dispose()


# -- layer 2: QoSService in process ----------------------------------------------------------------
def run_service(args: argparse.Namespace, clients: int, dbs: Databases, work: Path,
                sequence: list[Done]) -> Layer:
    from skylease.model.errors import UserError
    from skylease.runtime.qos.service import QoSService

    data = work / f"service-{clients}"
    data.mkdir(parents=True, exist_ok=True)
    engine = _engine(dbs.fresh(), data)
    try:
        qos = QoSService(engine)
        bags = {i: Bags(args.seed, i, args.life, bag_slots(i, clients, args.bots)) for i in range(clients)}
        for i, b in bags.items():
            qos.deposit(f"c{i}", DEPOSIT)
            for slot in b.slots:
                b.ids[slot] = _register(qos, f"c{i}", b.runs[slot])
        done: list[Done] = []
        t_start = time.perf_counter()
        for d in in_time(args, sequence):
            b, user, started, status = bags[d.client], f"c{d.client}", 0, 200
            t0 = time.perf_counter()
            try:
                started = _replay(qos, b, user, d)
            except UserError:  # (a bag that diverged from the server's: counted as failed)
                status = 400
            t1 = time.perf_counter()
            done.append(Done(d.client, d.kind, d.slot, t1 - t0, status, t1, started))
        return Layer("service in process", 1, done, time.perf_counter() - t_start)
    finally:
        engine.dispose()


def _register(qos: Any, user: str, run: BagRun) -> int:
    body = run.registration()
    return qos.register(user, body.pop("infrastructure"), body.pop("n_tasks"), **body).id


def _replay(qos: Any, b: Bags, user: str, d: Done) -> int:
    """One request of the server's sequence through ``qos``; the CWs its answer started."""
    from skylease.control.qos.relay import Report

    if d.kind == "register":
        b.ids[d.slot] = _register(qos, user, b.renew(d.slot))
        return 0
    if d.kind == "predict":
        qos.predict(user, b.ids[d.slot])
        return 0
    body = b.runs[d.slot].next_report()
    r = Report(body["t"], body["submitted"], body["assigned"], body["completed"], body["since_c"],
               tuple(body["completions"]), body["since_a"], tuple(body["assignments"]),
               {int(k): v for k, v in body["workers"].items()}, (), body["queued"])
    answer = asdict(qos.report(user, b.ids[d.slot], r))
    b.runs[d.slot].take(answer)
    return len(answer["start"])


# -- the report ------------------------------------------------------------------------------------
def _print_layers(layers: list[Layer]) -> None:
    print(f"{'layer':<26} {'requests':>8} {'req/s':>8} {'p50 ms':>7} {'p99 ms':>7} {'failed':>6}  "
          + " ".join(f"{LABEL[k] + ' p50/p99':>30}" for k in KINDS))
    for la in layers:
        failed = sum(d.status >= 300 for d in la.done)
        print(f"{la.name:<26} {len(la.done):>8,} {la.per_s:>8,.1f} {la.ms(50):>7.2f} {la.ms(99):>7.2f} "
              f"{failed:>6,}  " + " ".join(f"{f'{la.ms(50, k):.2f} / {la.ms(99, k):.2f}':>30}"
                                           for k in KINDS))


def _print_mix(http: Layer, service: Layer) -> None:
    n = {k: sum(d.kind == k for d in http.done) for k in KINDS}
    print(f"  requests/s by kind ({http.name}): "
          + ", ".join(f"{LABEL[k]} {n[k] / http.wall_s:,.1f} ({n[k]:,})" for k in KINDS))
    print(f"  cloud workers started by the answers: {sum(d.started for d in http.done):,} by the server, "
          f"{sum(d.started for d in service.done):,} in process; bags completed and replaced: "
          f"{n['register']:,}")


def _print_storage(st: dict[str, float], kind: str) -> None:
    reports = st["reports"] or 1
    what = "pages in use (dbstat)" if kind == "sqlite" else "pg_total_relation_size"
    line = (f"  storage ({what}): the progress series (qos_progress and its indexes) {st['series']:,.0f} B "
            f"for {st['reports']:,.0f} reports = {st['series'] / reports:,.1f} B per report, i.e. per bag "
            f"per minute at one report a minute")
    if "series_payload" in st:
        line += f" (the rows' own bytes: {st['series_payload'] / reports:,.1f} B)"
    print(line)
    print(f"  the whole database grew by {st['growth']:,.0f} B (to {st['database']:,.0f} B) during the run = "
          f"{st['growth'] / reports:,.1f} B per report (bags, orders, the ledger's bills and refunds, "
          "indexes included)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    service_options(ap, "4", "2 clients, 2 s, 10 bags, life 4")
    ap.add_argument("--bots", type=int, default=100,
                    help="bags of tasks registered at all times (default 100)")
    ap.add_argument("--life", type=int, default=30,
                    help="reports until a bag is 90%% complete (default 30; its tail takes longer)")
    args = ap.parse_args(argv)
    if args.quick:
        args.seconds, args.clients, args.bots, args.life = min(args.seconds, 2.0), "2", 10, 4
    counts = client_counts(ap, args.clients)
    if not (all(1 <= c <= MAX_CLIENTS for c in counts) and 0 < args.seconds <= MAX_SECONDS
            and all(c <= args.bots <= MAX_BOTS for c in counts) and 1 <= args.life <= 10_000):
        ap.error(f"out of bounds: 1-{MAX_CLIENTS} clients, 0-{MAX_SECONDS} s, at least one bag per client "
                 f"and at most {MAX_BOTS}, a life of 1-10000 reports")
    with Databases(args.db) as dbs, tempfile.TemporaryDirectory(prefix="bench-qos-") as tmp:
        print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
              f"load average at start {os.getloadavg()[0]:.1f}")
        print(f"database: {dbs.kind()}; {args.bots} bags of tasks registered at all times, half of them "
              f"served ({STRATEGY}, {CREDITS:g} credits, tick {TICK:g} s), of 100-2000 tasks, one report a "
              f"bag-minute, 90 % complete after {args.life} reports")
        print(f"for {args.seconds:g} s: {REPORT_SHARE:.0%} progress reports, {1 - REPORT_SHARE:.0%} "
              "predictions (GET /qos/bots/ID/prediction); a completed bag is replaced by a new one "
              "(a registration)")
        work = Path(tmp)
        for clients in counts:
            http, st = run_http(args, clients, dbs, work)
            args.profile = None  # (the first run only)
            service = run_service(args, clients, dbs, work, http.done)
            print(f"\n{clients} clients, {args.seconds:g} s:")
            _print_layers([http, service])
            _print_mix(http, service)
            print(f"  requests/s: service in process / server {service.per_s / http.per_s:,.2f}x; "
                  f"mean ms per request: server {http.wall_s / len(http.done) * 1000:.2f} "
                  "(wall / requests), "
                  f"in process {service.wall_s / len(service.done) * 1000:.2f}")
            print_server_cpu(http)
            if len(service.done) < len(http.done):
                print(f"  (service in process: {len(service.done):,} of the {len(http.done):,} requests "
                      f"within {replay_limit(args):g} s)")
            _print_storage(st, "sqlite" if args.db is None else "postgresql")
    return 0


if __name__ == "__main__":
    sys.exit(main())
