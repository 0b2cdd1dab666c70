"""`skylease serve`: the lease manager as a server, and its users."""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from skylease.cli import format as fmt
from skylease.cli.app import serve_app, serve_user_app
from skylease.cli.common import JsonOption, err, out
from skylease.cli.format import duration_option

# -- serve ------------------------------------------------------------------------------------


class LogLevel(StrEnum):
    warning = "warning"
    info = "info"
    debug = "debug"


ServeConfigOption = Annotated[Path | None, typer.Option("--config", help="The server's TOML file "
                                                        "(options given here win over it).")]
DbOption = Annotated[str | None, typer.Option("--db", help="Database URL: sqlite:///FILE or "
                                              "postgresql://USER@HOST/DB, without a password (default: "
                                              "SQLite in the data folder).")]
DbPasswordFileOption = Annotated[Path | None, typer.Option("--db-password-file", help="A file holding the "
                                                           "PostgreSQL password (default: "
                                                           "$SKYLEASE_DB_PASSWORD).")]
DataDirOption = Annotated[Path | None, typer.Option("--data-dir", help="The server's data folder (default: "
                                                    "$SKYLEASE_DATA/serve, ~/.local/share/skylease/serve).")]


@serve_app.callback()
def serve_cmd(
    ctx: typer.Context,
    config: ServeConfigOption = None,
    db: DbOption = None,
    db_password_file: DbPasswordFileOption = None,
    host: Annotated[str | None, typer.Option(help="Address to listen on (default 127.0.0.1; another than "
                                             "loopback needs --allow-remote and TLS).")] = None,
    port: Annotated[int | None, typer.Option(min=0, max=65535, help="Port (default 8642; 0: a free one).")]
    = None,
    time_scale: Annotated[float | None, typer.Option(help="Lease seconds per real second (default 1; 60 runs "
                                                     "an hour of leases in a minute).")] = None,
    data_dir: DataDirOption = None,
    site: Annotated[Path | None, typer.Option(help="Site file (TOML: nodes, image repository; default: one "
                                              "node per core).")] = None,
    scheduler: Annotated[str | None, typer.Option(help="Scheduler configuration: NOVM-SR (default), "
                                                  "NOVM-NOSR, ... or a TOML file, as `leases simulate "
                                                  "--config`.")] = None,
    grace: Annotated[float | None, typer.Option(metavar="DURATION", parser=duration_option(),
                                                help="Time from SIGTERM to SIGKILL of a payload that ends, "
                                                "a duration (default 5 s).")] = None,
    allow_remote: Annotated[bool, typer.Option("--allow-remote", help="Allow an address other than "
                                               "loopback (with --tls-cert and --tls-key).")] = False,
    tls_cert: Annotated[Path | None, typer.Option(help="TLS certificate (PEM): serve HTTPS.")] = None,
    tls_key: Annotated[Path | None, typer.Option(help="TLS private key (PEM).")] = None,
    calibrate: Annotated[str | None, typer.Option(metavar="IMAGE", help="Calibrate the VM overheads with "
                                                  "this VM image of the site's repository at the first "
                                                  "start (kept in the data folder).")] = None,
    log_level: Annotated[LogLevel | None, typer.Option(help="What the log (standard error) shows: warning "
                                                       "(default), info (each VM's start step by step, its "
                                                       "save, image carries), debug.")] = None,
) -> None:
    """Run the lease manager as a server until SIGTERM or Ctrl-C."""
    if ctx.invoked_subcommand is not None:
        return
    from skylease.service.server import load_serve_config, serve

    cfg = load_serve_config(config, host=host, port=port, db=db, db_password_file=db_password_file,
                            data_dir=data_dir, time_scale=time_scale, site=site, scheduler=scheduler,
                            grace=grace, tls_cert=tls_cert, tls_key=tls_key,
                            allow_remote=allow_remote or None, calibrate=calibrate,
                            log_level=None if log_level is None else log_level.value)
    served = serve(cfg, announce=lambda s: out.line(s.line()), warn=_serve_warning)
    out.line(f"skylease serve: stopped ({served.url})")


def _serve_warning(text: str) -> None:
    err.line(f"skylease serve: warning: {text}")


def _serve_database(config: Path | None, db: str | None, data_dir: Path | None, password_file: Path | None,
                    *, create: bool = True):
    from skylease.service.server import load_serve_config, open_database

    return open_database(load_serve_config(config, db=db, data_dir=data_dir, db_password_file=password_file),
                         _serve_warning, create=create)


@serve_user_app.command("add")
def serve_user_add_cmd(
    name: Annotated[str, typer.Argument(help="The user's name (letters, digits, . _ @ -).")],
    admin: Annotated[bool, typer.Option("--admin", help="An administrator: sees and cancels every lease, "
                                        "lists the hosts.")] = False,
    db: DbOption = None, config: ServeConfigOption = None, data_dir: DataDirOption = None,
    db_password_file: DbPasswordFileOption = None,
) -> None:
    """Add a user to the server's database and print its token (once: only a hash is kept)."""
    from skylease.service.auth import add_user, check_name

    check_name(name)  # before the database is opened (or created)
    token = add_user(_serve_database(config, db, data_dir, db_password_file), name, admin)
    print(token)
    err.print(f"user {name!r}{' (admin)' if admin else ''} added; the line above is its token, shown only "
              "now: its user saves it with `skylease login` (or sets SKYLEASE_TOKEN)", markup=False,
              highlight=False, soft_wrap=True)


@serve_user_app.command("list")
def serve_user_list_cmd(db: DbOption = None, config: ServeConfigOption = None, data_dir: DataDirOption = None,
                        db_password_file: DbPasswordFileOption = None, as_json: JsonOption = False) -> None:
    """The server's users."""
    from skylease.service.auth import list_users

    users = list_users(_serve_database(config, db, data_dir, db_password_file, create=False))
    if as_json:
        print(json.dumps([{"name": u.name, "admin": u.admin, "created": u.created.isoformat()}
                          for u in users]))
        return
    t = fmt.table("user", "admin", "created", title=f"{len(users)} user(s)")
    for u in users:
        t.add_row(u.name, "yes" if u.admin else "no", u.created.isoformat(timespec="seconds"))
    out.print(t)


@serve_user_app.command("remove")
def serve_user_remove_cmd(
    name: Annotated[str, typer.Argument(help="The user's name.")],
    db: DbOption = None, config: ServeConfigOption = None, data_dir: DataDirOption = None,
    db_password_file: DbPasswordFileOption = None,
) -> None:
    """Remove a user: its token stops working (its leases stay)."""
    from skylease.service.auth import remove_user

    remove_user(_serve_database(config, db, data_dir, db_password_file, create=False), name)
    out.print(f"user {name!r} removed", markup=False, highlight=False)


@serve_app.command("calibrate")
def serve_calibrate_cmd(
    site: Annotated[Path, typer.Option(help="The site file (its machines are measured: this machine's "
                                       "nodes and each host).")],
    image: Annotated[str, typer.Option(help="A VM image of the site's repository the guests boot from "
                                       "(a folder with vmlinuz and initrd.img, or a .qcow2/.raw disk).")],
    sizes: Annotated[str, typer.Option(help="Guest memory sizes in MB, comma-separated.")] = "96,128,256",
    time_scale: Annotated[float, typer.Option(min=0.001, help="The server's lease seconds per real second "
                                              "(the overheads are written in lease seconds).")] = 1.0,
    output: Annotated[Path | None, typer.Option("--out", help="Write the scheduler configuration there "
                                                "(for `skylease serve --scheduler FILE`).")] = None,
    base: Annotated[str, typer.Option(help="The configuration the calibrated keys change.")] = "NOVM-SR",
    pause: Annotated[float, typer.Option(min=0.0, max=3600.0, help="Seconds each guest stays saved before "
                                         "it is resumed (a resumption is slower the longer its guest "
                                         "was saved; default 0: at once).")] = 0.0,
    as_json: JsonOption = False,
) -> None:
    """Boot guests of each memory size on each machine of the site; time their start, save, resume
    and power-off; fit the scheduler's overheads (suspend and resume rates, fixed part, shutdown)."""
    from skylease.service.calibration import calibrate

    keys, samples, text = calibrate(site, image, sizes, time_scale, base,
                                    say=None if as_json else (lambda s: err.line(f"calibrate: {s}")),
                                    pause_s=pause)
    if output is not None:
        part = output.with_name(output.name + ".part")
        part.write_text(text)
        part.replace(output)
    if as_json:
        print(json.dumps({"keys": keys, "time_scale": time_scale,
                          "samples": [s.__dict__ for s in samples]}))
        return
    t = fmt.table("machine", "node", "MB", "start s", "save s", "resume s", "power-off s",
                  title=f"{len(samples)} guest(s), real seconds")
    for s in samples:
        t.add_row(s.machine, s.node, str(s.memory_mb), f"{s.start_s:.2f}", f"{s.suspend_s:.2f}",
                  f"{s.resume_s:.2f}", "killed" if s.shutdown_s is None else f"{s.shutdown_s:.2f}")
    out.print(t)
    out.line(f"the scheduler's overheads at {time_scale:g} lease seconds a second: "
             + ", ".join(f"{k} = {v}" for k, v in keys.items() if v is not None)
             + (f" (written to {output})" if output is not None else ""))
