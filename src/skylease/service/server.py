"""``skylease serve`` (issue 19): the long-lived server, its configuration and its database.

:class:`ServeConfig` is the server's TOML file (``--config FILE``); an option given on the command
line wins over the file. Paths in the file are relative to the file's folder. Defaults: loopback
(127.0.0.1) port 8642, the data folder ``$SKYLEASE_DATA/serve`` (``~/.local/share/skylease/serve``),
SQLite there, the lease clock at real time (``time_scale = 1``), the default site (one node per
core), the scheduler configuration NOVM-SR (the paper's configuration that *suspends* a preempted
best-effort lease rather than cancelling it: what a user of a shared machine expects), and 5 s of
grace between SIGTERM and SIGKILL for a payload that ends.

Security: a server that binds to anything but a loopback address serves the network, so it needs
``--allow-remote`` *and* a certificate and key (``--tls-cert``, ``--tls-key``): tokens are bearer
secrets and must not cross a network in clear. What is missing is said in one line, before
anything starts.

The server stops cleanly on SIGTERM or SIGINT: uvicorn finishes the requests under way, then the
lease manager is closed (its journal committed; the payloads keep running, to be adopted by the
next start).

Liveness: the lease manager and the threads started here (SpeQuloS's sweep and deposit policy, the
runs' sweep) are the server's vital parts (:mod:`skylease.service.health`): one that dies is logged
once, ``/health`` answers 503 with why, and the routes that need it answer 503 until a restart.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import ipaddress
import logging
import shutil
import signal
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, PrivateAttr, ValidationError
from sqlalchemy.engine import Engine

from skylease.model.errors import UserError
from skylease.model.files import KeyLines, read_toml
from skylease.model.schema import FileModel, validate
from skylease.runtime.health import Vital
from skylease.runtime.leases.api import LeaseManager
from skylease.service.db import check_data_dir, create_schema, engine_for, private_data_dir, shown_url
from skylease.service.health import QOS_DEPOSITS, QOS_SWEEP, RUNS_SWEEP, Vitals

__all__ = ["DEFAULT_PORT", "DEFAULT_SCHEDULER", "ServeConfig", "Served", "is_loopback", "load_serve_config",
           "open_database", "serve"]

DEFAULT_PORT = 8642
#: The scheduler configuration of a server (see the module's docstring).
DEFAULT_SCHEDULER = "NOVM-SR"

log = logging.getLogger("skylease.service")

#: The collector's thresholds while a server runs (Python's are 700, 10, 10). A server holding many
#: leases keeps about a million long-lived objects; each request makes thousands that live as long as
#: the request. With a young generation of 700 objects, those survive two young collections while
#: their request runs, are promoted to the old generation, and push it past the 25 % growth that sets
#: off a full collection: every 0.3-1.5 s, 60-90 ms each, while one user polls a list (measured with
#: benchmarks/bench_fair.py, docs/performance.md). A young generation of 50,000 lets them die young:
#: one full collection in that benchmark instead of 90.
SERVER_GC_THRESHOLD = (50_000, 20, 10)


def _webhook_prefix(prefix: str) -> str:
    from skylease.runtime.leases.webhooks import check_prefix

    return check_prefix(prefix)


#: A UNIX user name or number (``payload_user``).
_USER_NAME = r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$"


class ExtensionsTable(FileModel):
    """The ``[extensions]`` table: the site's rules for extensions (``PATCH /leases/{id}``,
    docs/decisions/lease-extensions.md); a key left out is no limit."""

    max_duration: Annotated[int, Field(ge=1, le=10 * 365 * 86400)] | None = None  # a lease's length in all
    extend_within: Annotated[int, Field(ge=1, le=10 * 365 * 86400)] | None = None  # in its last seconds only
    max_extensions: Annotated[int, Field(ge=0, le=1_000_000)] | None = None  # per lease


class ServeConfig(FileModel):
    """The server's configuration file (TOML); every key is optional."""

    host: Annotated[str, Field(min_length=1, max_length=253)] = "127.0.0.1"
    port: Annotated[int, Field(ge=0, le=65535)] = DEFAULT_PORT  # 0: any free port (the start line tells)
    db: Annotated[str, Field(min_length=1, max_length=4096)] | None = None  # a database URL
    db_password_file: Annotated[str, Field(min_length=1)] | None = None  # its password (db_password.py)
    data_dir: Annotated[str, Field(min_length=1)] | None = None
    time_scale: Annotated[float, Field(gt=0, le=1e6)] = 1.0  # lease seconds per real second
    site: Annotated[str, Field(min_length=1)] | None = None  # a site file (TOML)
    scheduler: Annotated[str, Field(min_length=1)] = DEFAULT_SCHEDULER  # a configuration name or a TOML file
    grace: Annotated[float, Field(ge=0, le=3600)] = 5.0  # seconds from SIGTERM to SIGKILL of a payload
    max_leases_per_user: Annotated[int, Field(ge=1, le=1_000_000)] = 10_000  # not over yet, per user
    # bags of tasks running at once, per user (docs/decisions/serve-fair-sharing.md)
    max_bots_per_user: Annotated[int, Field(ge=1, le=1_000_000)] = 1000
    allow_remote: bool = False
    # SpeQuloS's deposit policy: every `qos_deposit_every` seconds, each user's balance is topped up
    # to `qos_deposit_cap` credits (the paper's example: 200 nodes x price x 24 h a day). None: off.
    qos_deposit_cap: Annotated[float, Field(gt=0, le=1e12, allow_inf_nan=False)] | None = None
    qos_deposit_every: Annotated[float, Field(ge=1, le=366 * 86_400, allow_inf_nan=False)] = 86_400.0
    # a running bag whose run has not reported for this long is abandoned and its order paid back
    qos_abandon_after: Annotated[float, Field(ge=10, le=366 * 86_400, allow_inf_nan=False)] = 3600.0
    tls_cert: Annotated[str, Field(min_length=1)] | None = None
    tls_key: Annotated[str, Field(min_length=1)] | None = None
    # who lease payloads run as when the server is root (see skylease.runtime.leases.sandbox): "auto"
    # is a dedicated system user (skylease-payload, created when missing), else nobody
    payload_user: Annotated[str, Field(min_length=1, max_length=64, pattern=_USER_NAME)] = "auto"
    # a VM image of the site's repository: the VM overheads calibrated with it at the first start
    # (kept in the data folder: service/calibration.py)
    calibrate: Annotated[str, Field(min_length=1, max_length=255)] | None = None
    # what the server's log shows: "info" adds each VM's start (step by step: where a slow
    # resumption went), save and state carry, image carries and the acceleration chosen; "debug"
    # also the KVM probe's details
    log_level: Literal["warning", "info", "debug"] = "warning"
    extensions: ExtensionsTable = ExtensionsTable()  # (file only) the site's rules for extensions
    # warnings before a lease's end (docs/decisions/before-end-warnings.md, service/warning_config.py):
    # lease seconds before its planned end when its request names none (0: none), the webhook URL
    # prefixes a lease may name, and the file of the secret that signs the webhooks
    before_end: Annotated[int, Field(ge=0, le=10 * 365 * 86400)] = 0
    webhook_prefixes: Annotated[list[Annotated[str, Field(min_length=9, max_length=2048),
                                               AfterValidator(_webhook_prefix)]], Field(max_length=100)] = \
        Field(default_factory=list)
    webhook_secret_file: Annotated[str, Field(min_length=1)] | None = None
    _source: Path | None = PrivateAttr(default=None)  # the file it was read from (hidden from payloads)


#: The path keys of the file, resolved against its folder.
_PATH_KEYS = ("data_dir", "site", "tls_cert", "tls_key", "db_password_file", "webhook_secret_file")
#: The command-line option of each key (for one-line errors).
OPTION = {k: "--" + k.replace("_", "-") for k in ServeConfig.model_fields}


def load_serve_config(path: Path | None = None, **overrides: Any) -> ServeConfig:
    """The configuration of ``path`` (None: the defaults), with the non-None ``overrides`` (options
    of the command line) applied on top."""
    from skylease.service.db_password import check_no_password

    values: dict[str, Any] = {}
    check_no_password(overrides.get("db"))  # before anything could show it
    if path is not None:
        doc, text = read_toml(Path(path))
        if isinstance(doc.get("db"), str):
            check_no_password(doc["db"], file=Path(path))
        cfg = validate(ServeConfig, doc, KeyLines(text, Path(path)))
        values = cfg.model_dump(exclude_unset=True)
        for key in _PATH_KEYS:
            if values.get(key) is not None:
                values[key] = str(Path(path).parent / Path(values[key]).expanduser())
        scheduler = values.get("scheduler")
        if scheduler is not None and scheduler.lower().endswith(".toml"):
            values["scheduler"] = str(Path(path).parent / Path(scheduler).expanduser())
    for key, value in overrides.items():
        if key not in ServeConfig.model_fields:
            raise TypeError(f"no configuration key {key!r}")
        if value is not None:
            values[key] = str(value) if isinstance(value, Path) else value
    try:
        cfg = ServeConfig.model_validate(values)
    except ValidationError as exc:  # an option's value: click checked its type, pydantic its range
        first = exc.errors(include_url=False)[0]
        key = str(first["loc"][0]) if first["loc"] else "config"
        raise UserError(f"{first['msg']}, got {first.get('input')!r}", field=OPTION.get(key, key)) from None
    cfg._source = None if path is None else Path(path)
    return cfg


def data_dir_of(cfg: ServeConfig) -> Path:
    """The server's data folder (database, site files, node caches)."""
    if cfg.data_dir is not None:
        return Path(cfg.data_dir).expanduser()
    from skylease.traces.datasets import default_data_dir

    return default_data_dir() / "serve"


def open_database(cfg: ServeConfig, warn: Callable[[str], None] | None = None, *,
                  create: bool = True) -> Engine:
    """The server's database (created where missing; with ``create=False``, for a command that only
    reads, an SQLite database must be there), or one line naming ``--db`` or ``--data-dir``;
    ``warn`` is told of a password file other users may read (once the database works: an error
    stays one line)."""
    from skylease.service.db_password import db_password

    notes: list[str] = []
    password = db_password(cfg.db, cfg.db_password_file, warn=notes.append)
    engine = engine_for(cfg.db, data_dir_of(cfg), password, create=create)
    from skylease.runtime.leases.journal import metadata
    from skylease.runtime.qos.service import METADATA as QOS_METADATA
    from skylease.runtime.runs.registry import METADATA as RUNS_METADATA

    create_schema(engine, metadata, *QOS_METADATA, RUNS_METADATA)
    for note in notes:
        (warn or log.warning)(note)
    return engine


# -- checks before anything starts --------------------------------------------------------------
def is_loopback(host: str) -> bool:
    """Whether ``host`` names only this machine (127.0.0.0/8, ::1 or localhost)."""
    if host.lower() in ("localhost", "localhost.", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _readable(path: str, option: str) -> Path:
    p = Path(path).expanduser()
    try:
        with p.open("rb") as fh:
            fh.read(1)
    except FileNotFoundError:
        raise UserError("file not found", file=p, field=option) from None
    except IsADirectoryError:
        raise UserError("is a folder, not a file", file=p, field=option) from None
    except OSError as exc:
        raise UserError(f"cannot read it: {exc.strerror or exc}", file=p, field=option) from None
    return p


def check_network(cfg: ServeConfig) -> ssl.SSLContext | None:
    """Refuse a non-loopback address without ``--allow-remote`` and TLS; check the TLS files."""
    if (cfg.tls_cert is None) != (cfg.tls_key is None):
        given, missing = ("--tls-cert", "--tls-key") if cfg.tls_key is None else ("--tls-key", "--tls-cert")
        raise UserError(f"{given} needs {missing} too", field=missing)
    if not is_loopback(cfg.host):
        missing = [o for o, ok in (("--allow-remote", cfg.allow_remote), ("--tls-cert", cfg.tls_cert),
                                   ("--tls-key", cfg.tls_key)) if not ok]
        if missing:
            raise UserError(f"{cfg.host} is not a loopback address: serving the network needs --allow-remote "
                            f"and a certificate (--tls-cert, --tls-key); missing {', '.join(missing)}",
                            field="--host")
    if cfg.tls_cert is None or cfg.tls_key is None:
        return None
    cert, key = _readable(cfg.tls_cert, "--tls-cert"), _readable(cfg.tls_key, "--tls-key")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(cert, key)
    except (ssl.SSLError, OSError, ValueError) as exc:
        raise UserError(f"not a certificate and its key (PEM): {' '.join(str(exc).split())}", file=cert,
                        field="--tls-cert") from None
    return context


def _listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` (uvicorn listens on it), or one line naming the option."""
    try:
        infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise UserError(f"cannot resolve {host!r}: {exc.strerror}", field="--host") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        # listening from here (uvicorn's backlog): a client that connects as soon as the start line
        # is printed waits in the queue until uvicorn serves, where a bound socket alone refused it
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise UserError(f"cannot listen on {host}:{port}: {exc.strerror or exc}", field="--port") from None
    sock.set_inheritable(True)
    return sock


# -- the manager --------------------------------------------------------------------------------
ManagerFactory = Callable[[Engine, ServeConfig, Path], LeaseManager]


def _local_parts(cfg: ServeConfig) -> tuple[Any, Any]:
    """The real manager's scheduler configuration and site (None: the default site), the files
    read and checked."""
    from skylease.experiments.leases import load_config

    try:
        scheduler = load_config(cfg.scheduler).scheduler
    except UserError as exc:  # load_config speaks of `leases simulate --config`
        raise UserError(exc.message, file=exc.file, line=exc.line,
                        field=exc.field if exc.file else "--scheduler") from None
    from skylease.runtime.leases.site import load_site

    return scheduler, load_site(Path(cfg.site)) if cfg.site is not None else None


def check_site_hosts(site: Any) -> None:
    """A site's hosts each answer over SSH with the site's keys
    (:func:`skylease.runtime.leases.ssh_check.check_hosts`): one line naming the site file and the
    host otherwise, before anything is created."""
    if not site.hosts:
        return
    from skylease.runtime.leases.ssh_check import check_hosts

    check_hosts(site)


def secret_paths(cfg: ServeConfig) -> list[Path]:
    """The server's files a payload must never see, besides the data folder: its configuration
    file, the TLS key and certificate, the database's password file, and an SQLite database kept
    elsewhere (its folder, for the WAL beside it)."""
    out = [Path(p) for p in (cfg._source, cfg.tls_key, cfg.tls_cert, cfg.db_password_file,
                             cfg.webhook_secret_file) if p is not None]
    if cfg.site is not None:  # the site's SSH key reaches every host as its user: never a payload's
        from skylease.runtime.leases.site import load_site

        with contextlib.suppress(Exception):  # (a site file that does not load is refused before)
            for host in load_site(Path(cfg.site)).hosts:
                out += [p for p in (host.identity_file, host.known_hosts) if p is not None]
    if cfg.db is not None:
        from sqlalchemy.engine import make_url

        with contextlib.suppress(Exception):  # (a URL that does not parse is refused later, naming --db)
            url = make_url(cfg.db.strip())
            if url.get_backend_name() == "sqlite" and url.database:
                out.append(Path(url.database).expanduser().resolve().parent)
    return out


def payload_sandbox(cfg: ServeConfig, data_dir: Path) -> Any:
    """This machine's payload confinement (:func:`skylease.runtime.leases.sandbox.probe`), checked
    by a confined run; or one line saying why payloads cannot be confined here and how to fix it."""
    from skylease.runtime.leases.sandbox import probe

    return probe(data_dir, payload_user=cfg.payload_user, hidden=secret_paths(cfg))


#: The journal setting holding each default-site node's disk, MB (fixed at the first start).
DEFAULT_SITE_DISK = "default_site_disk_mb"


def fixed_default_site(engine: Engine, data_dir: Path) -> Any:
    """The default site with each node's disk as the server's first start on this database found it
    (the data folder's free space then): the journal's replay at a restart must see the capacities
    its stored events (a rejection's reason) were computed with (docs/decisions/serve-default-site.md)."""
    from skylease.runtime.leases.journal import Journal
    from skylease.runtime.leases.site import default_site

    now = default_site(data_dir)
    disk = Journal(engine).init_settings({DEFAULT_SITE_DISK: now.nodes[0].capacity.disk})[DEFAULT_SITE_DISK]
    return default_site(data_dir, disk_mb=int(disk))


def local_manager(engine: Engine, cfg: ServeConfig, data_dir: Path, sandbox: Any = None, *,
                  nodes_factory: Callable[..., Any] | None = None) -> LeaseManager:
    """The real lease manager on this machine's nodes (runtime/leases/manager.py), started; its
    payloads confined by ``sandbox`` (default: :func:`payload_sandbox`); ``nodes_factory`` makes
    its enactment (default: LocalNodes; see LocalLeaseManager)."""
    from skylease.control.leases.changes import ExtensionRules
    from skylease.runtime.leases.manager import LocalLeaseManager
    from skylease.service.warning_config import warning_config

    scheduler, site = _local_parts(cfg)
    if site is None:
        site = fixed_default_site(engine, data_dir)
    if cfg.calibrate is not None:
        from skylease.service.calibration import calibrated

        scheduler = calibrated(scheduler, site, cfg.calibrate, cfg.time_scale, data_dir, log.warning)
    if sandbox is None:
        sandbox = payload_sandbox(cfg, data_dir)
    manager = LocalLeaseManager(engine, site, config=scheduler, time_scale=cfg.time_scale, data_dir=data_dir,
                                grace_s=cfg.grace, max_leases_per_user=cfg.max_leases_per_user,
                                sandbox=sandbox, nodes_factory=nodes_factory, payload_user=cfg.payload_user,
                                extension_rules=ExtensionRules(**cfg.extensions.model_dump()),
                                warnings=warning_config(cfg))
    return manager.start()


# -- running ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Served:
    """What a server started: where it answers, its data folder and its database."""

    url: str
    data_dir: Path
    database: str

    def line(self) -> str:
        return (f"skylease serve: {self.url} (OpenAPI at /docs), data in {self.data_dir}, database "
                f"{self.database}")


@contextlib.contextmanager
def _quiet_signals(server: Any) -> Iterator[list[int]]:
    """SIGINT and SIGTERM only stop the uvicorn ``server`` (which captures them while it serves, and
    raises them again when it has stopped): they must not kill this process before the manager is
    closed. The signals received are listed."""
    got: list[int] = []
    if threading.current_thread() is not threading.main_thread():  # only the main thread gets signals
        yield got
        return

    def stop(sig: int, _frame: object) -> None:
        got.append(sig)
        server.should_exit = True  # a signal before uvicorn listens for them stops it too

    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield got
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _deposit_policy(engine: Engine, qos: Any, cap: float, every: float, stopping: threading.Event,
                    vital: Vital) -> None:
    """SpeQuloS's deposit policy (decision S29): each user topped up to ``cap`` now, then every
    ``every`` seconds, in a thread that ends with the server (``vital`` if it dies; a pass that
    fails is logged and made again the next period, as a sweep's)."""
    from skylease.service.auth import list_users

    def run() -> None:
        while True:
            try:
                users = list_users(engine)
            except Exception:  # (the database may come back)
                log.exception("the deposit policy could not list the users")
                users = []
            for user in users:
                try:
                    qos.ledger.top_up(user.name, cap)
                except Exception:  # (one account's failure must not end the policy for the others)
                    log.exception("the deposit policy failed for %s", user.name)
            if stopping.wait(every):
                return

    vital.thread(run, name="qos-deposit-policy").start()


def _every(period: float, stopping: threading.Event, name: str, job: Callable[[], object],
           vital: Vital) -> None:
    """Run ``job`` every ``period`` seconds in a thread that ends with the server (``vital`` if it
    dies; a job that fails is logged and tried again the next period: a database may come back)."""
    def run() -> None:
        while not stopping.wait(period):
            try:
                job()
            except Exception:  # (logged; the next period tries again)
                log.exception("%s failed", name)

    vital.thread(run, name=name).start()


def serve(cfg: ServeConfig, *, manager_factory: ManagerFactory | None = None,
          announce: Callable[[Served], None] | None = None,
          warn: Callable[[str], None] | None = None) -> Served:
    """Run the server until SIGTERM or SIGINT. Everything a user can get wrong (the address, TLS,
    the database, the port in use, the scheduler configuration) is checked before it starts;
    ``warn`` is told what is not wrong but unwise (a password file other users may read). The
    collector runs with :data:`SERVER_GC_THRESHOLD` meanwhile."""
    threshold = gc.get_threshold()
    gc.set_threshold(*SERVER_GC_THRESHOLD)
    try:
        return _serve(cfg, manager_factory=manager_factory, announce=announce, warn=warn)
    finally:  # (serve() may run in the process of a test)
        gc.set_threshold(*threshold)


def _serve(cfg: ServeConfig, *, manager_factory: ManagerFactory | None,
           announce: Callable[[Served], None] | None, warn: Callable[[str], None] | None) -> Served:
    import uvicorn

    from skylease.service.leases_api import create_app

    tls = check_network(cfg)
    data_dir = data_dir_of(cfg)
    check_data_dir(data_dir)
    if manager_factory is None:
        _, site = _local_parts(cfg)  # a wrong scheduler or site file: said before anything is created
        if site is not None:
            check_site_hosts(site)
    # (a finer log is read for when things happened: its lines carry the time, to the millisecond)
    when = "" if cfg.log_level == "warning" else "%(asctime)s.%(msecs)03d "
    logging.basicConfig(level=logging.WARNING, format=f"skylease serve: {when}%(levelname)s: %(message)s",
                        datefmt="%H:%M:%S")
    logging.getLogger("skylease").setLevel(cfg.log_level.upper())  # (the libraries' own stay at warnings)
    # qemu.qmp logs a connection that QEMU's end cut as its own error; the enactment reports what
    # it means in its own words (a guest that could not start, resume or be saved)
    logging.getLogger("qemu.qmp").setLevel(logging.CRITICAL)
    existed = data_dir.exists()
    loosened = private_data_dir(data_dir)
    if loosened:
        log.warning("the data folder %s was open to other users (%s); it is private now (folders 0700, "
                    "files 0600)", data_dir, ", ".join(loosened[:3]) + (", ..." if len(loosened) > 3 else ""))
    if manager_factory is None:  # payloads that cannot be confined are never started: said before serving
        try:
            sandbox = payload_sandbox(cfg, data_dir)
        except UserError:
            if not existed:  # (nothing half-made: the folder was made for the probe only)
                shutil.rmtree(data_dir, ignore_errors=True)
            raise
        manager_factory = functools.partial(local_manager, sandbox=sandbox)
    engine = open_database(cfg, warn)
    sock = _listen(cfg.host, cfg.port)
    port = sock.getsockname()[1]
    host = f"[{cfg.host.strip('[]')}]" if ":" in cfg.host else cfg.host
    scheme = "https" if tls else "http"
    served = Served(f"{scheme}://{host}:{port}", data_dir.resolve(), shown_url(engine.url))
    manager: LeaseManager | None = None
    stopping = threading.Event()
    try:
        manager = manager_factory(engine, cfg, data_dir)
        from skylease.runtime.qos.service import QoSService
        from skylease.runtime.runs.registry import RunRegistry

        qos = QoSService(engine, max_bots_per_user=cfg.max_bots_per_user)
        runs = RunRegistry(engine)
        vitals = Vitals()
        app = create_app(manager, engine, qos, runs, vitals)
        if cfg.qos_deposit_cap is not None:
            _deposit_policy(engine, qos, cfg.qos_deposit_cap, cfg.qos_deposit_every, stopping,
                            vitals.vital(QOS_DEPOSITS, "the deposit policy"))
        sweep_s = min(60.0, cfg.qos_abandon_after / 10)
        _every(sweep_s, stopping, "qos-sweep", lambda: qos.sweep(time.time(), cfg.qos_abandon_after),
               vitals.vital(QOS_SWEEP, "the QoS sweep"))
        # a run silent as long as a bag is abandoned too (its reporter says it is alive every 30 s)
        _every(sweep_s, stopping, "runs-sweep", lambda: runs.sweep(time.time(), cfg.qos_abandon_after),
               vitals.vital(RUNS_SWEEP, "the runs' sweep"))
        config = uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=5,
                                ssl_certfile=cfg.tls_cert, ssl_keyfile=cfg.tls_key, lifespan="off")
        server = uvicorn.Server(config)
        app.state.stopping = lambda: server.should_exit  # (the dashboard's event streams end with it)
        with _quiet_signals(server):
            if announce is not None:
                announce(served)
            server.run(sockets=[sock])
    finally:
        stopping.set()
        sock.close()
        if manager is not None:
            manager.close()
        engine.dispose()
    return served
