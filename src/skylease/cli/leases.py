"""`skylease leases`: lease workloads simulated, and leases on a `skylease serve` server."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from skylease.cli import format as fmt
from skylease.cli.app import leases_app
from skylease.cli.common import (
    _ID_SETTINGS,
    AllOption,
    JsonOption,
    LimitOption,
    ServerOption,
    TokenOption,
    _ask,
    _listed,
    out,
)
from skylease.model.errors import UserError

if TYPE_CHECKING:
    from rich.text import Text


# -- leases ----------------------------------------------------------------------------------
@leases_app.command("simulate")
def leases_simulate_cmd(
    workload: Annotated[Path, typer.Option(help="Lease workload: SWF (best-effort leases, e.g. "
                                           "blue_30days.swf), plain LWF (advance reservations) or XML LWF "
                                           "(Haizea 1.0, with its site).")],
    inject: Annotated[Path | None, typer.Option(help="Plain LWF file of advance reservations to add "
                                                "(as the Haizea experiments inject them).")] = None,
    config: Annotated[str | None, typer.Option(help="NOVM-NOSR (default), NOVM-SR, VM-PREDEPLOY, VM-MULT, "
                                               "VM-REUSE-UNIFORM, VM-REUSE-SKEWED (the paper's), haizea-1.0, "
                                               "haizea-1.0-transfers, haizea-1.0-transfers-reuse (Haizea "
                                               "1.0's test configurations), or a TOML file of scheduler "
                                               "options (with --rules: default the rules file).")]
    = None,
    image_seed: Annotated[int | None, typer.Option(min=0, help="Seed of the image draw (configurations "
                                                   "that move images; default: the TOML's seed, or 0).")]
    = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document: leases and summary.")]
    = False,
    gantt: Annotated[Path | None, typer.Option(help="Also draw a Gantt chart (.png, .pdf or .svg).")] = None,
    rules: Annotated[Path | None, typer.Option(help="A scheduler configuration file whose "
                                               "[policies.admission] holds fairness rules: run the workload "
                                               "without and with them and report refusals, waits, "
                                               "utilisation, per user.")]
    = None,
    users: Annotated[str | None, typer.Option(help="Users of the leases that name none, round-robin in "
                                              "submission order: alice,bob or a count N (user1..userN).")]
    = None,
) -> None:
    """Simulate a lease workload: what happened to each lease, and the paper's metrics."""
    from skylease.experiments.leases import clock, load_workload, simulate_workload

    if rules is not None:
        from skylease.cli.leases_fairness import print_fairness

        print_fairness(workload, rules, inject=inject, config=config, users=users, image_seed=image_seed,
                       as_json=as_json, gantt=gantt)
        return
    if gantt is not None:
        from skylease.experiments.report import check_output  # pandas: only with a chart

        check_output(gantt, "--gantt")  # before a long run
    if users is not None:  # (the configuration's admission policy may count per user)
        from skylease.experiments.fairness_report import assign_users

        loaded = load_workload(workload, inject)
        assign_users(loaded.leases, users)
        sim = simulate_workload(loaded, None, config, image_seed)
    else:
        sim = simulate_workload(workload, inject, config, image_seed)
    if gantt is not None:
        sim.gantt(gantt)
    if as_json:
        print(json.dumps(sim.to_json(), allow_nan=False))
        return
    s = sim.summary()
    out.print(f"{s['workload']} ({s['format']}, {s['nodes']} nodes) under {s['configuration']}: "
              f"{s['leases']:,} leases, simulated in {s['wall_s']:.2f} s", markup=False, highlight=False,
              soft_wrap=True)
    table = fmt.table("metric", "value")
    table.add_row("all best-effort done", f"{s['all_best_effort_s']:,} s ({clock(s['all_best_effort_s'])})")
    for key, label in (("mean_wait_s", "mean wait (s)"), ("mean_bounded_slowdown", "mean bounded slowdown")):
        v = s[key]
        table.add_row(label, "-" if math.isnan(v) else f"{v:,.2f}")
    table.add_row("advance reservations accepted / rejected", f"{s['ar_accepted']} / {s['ar_rejected']}")
    if s["transfers"]:
        table.add_row("image transfers", f"{s['transfers']:,}")
    out.print(table)
    out.print("Leases by state: " + (", ".join(f"{k} {v:,}" for k, v in s["states"].items()) or "none"))
    if s["leases"] <= 12:  # every lease's story, rejected ones with their reason
        for line in sim.timeline():
            out.line(f"  {line}")
    rejected = sim.rejected()
    if rejected and s["leases"] > 12:
        out.print(f"Rejected ({len(rejected)}):")
        for lid, why in rejected[:10]:
            out.line(f"  lease {lid}: {why}")
        if len(rejected) > 10:
            out.print(f"  and {len(rejected) - 10} more")
    if gantt is not None:
        out.line(f"Gantt chart: {gantt}")



@leases_app.command("request")
def leases_request_cmd(
    file: Annotated[Path | None, typer.Argument(help="A lease request: JSON, or a Haizea XML <lease> element "
                                                "(- reads standard input). Or give the options below.")]
    = None,
    nodes: Annotated[int | None, typer.Option(min=1, help="Nodes (VMs) of the lease (default 1).")] = None,
    duration: Annotated[str | None, typer.Option(metavar="DURATION", help="How long: 3600, 90m, 1h, "
                                                 "[D:]HH:MM:SS.")] = None,
    start: Annotated[str | None, typer.Option(metavar="TIME", help="Start of an advance reservation, in "
                                              "lease time (a duration since the server's epoch: "
                                              "[D:]HH:MM:SS, 2h, seconds).")] = None,
    start_in: Annotated[str | None, typer.Option(metavar="DURATION", help="Start of an advance "
                                                 "reservation, from now (a duration).")] = None,
    lease_type: Annotated[str | None, typer.Option("--type", help="best-effort, advance-reservation or "
                                                   "immediate (default: best-effort; with a start, "
                                                   "advance-reservation).")] = None,
    cpu: Annotated[float | None, typer.Option(help="CPUs per node (default 1).")] = None,
    memory: Annotated[int | None, typer.Option(min=0, help="Memory per node, MB (default 1024).")] = None,
    disk: Annotated[int | None, typer.Option(min=0, help="Disk per node, MB (default 0).")] = None,
    image: Annotated[str | None, typer.Option(help="Disk image name (from the site's repository).")] = None,
    image_size: Annotated[int | None, typer.Option(min=0, help="Disk image size, MB.")] = None,
    preemptible: Annotated[bool | None, typer.Option("--preemptible/--not-preemptible", help="Whether an "
                                                     "advance reservation may preempt it (default: "
                                                     "best-effort leases are).")] = None,
    command: Annotated[str | None, typer.Option(help="Payload of each VM, a shell line (default: one that "
                                                "lasts the lease's duration).")] = None,
    vm: Annotated[bool | None, typer.Option("--vm", help="Each VM a QEMU guest booted from --image (a "
                                            "kernel + initrd folder or a .qcow2/.raw disk of the "
                                            "site's repository).")] = None,
    before_end: Annotated[int | None, typer.Option(min=0, max=10 * 365 * 86400, metavar="SECONDS",
                                                   help="Warn it this many lease seconds before its planned "
                                                   "end (0: never; default: the server's).")] = None,
    webhook: Annotated[str | None, typer.Option(metavar="URL", help="Also POST the warning there, signed "
                                                "(a URL the server allows).")] = None,
    server: ServerOption = None, token: TokenOption = None, as_json: JsonOption = False,
) -> None:
    """Request a lease from a server: it is scheduled, reserved, queued, or refused with the reason."""
    from skylease.service.client import read_request_file, request_from_options

    options = {"nodes": nodes, "type": lease_type, "cpu": cpu, "memory": memory, "disk": disk, "image": image,
               "image_size": image_size, "preemptible": preemptible, "command": command, "vm": vm,
               "before_end": before_end, "webhook": webhook,
               "duration": None if duration is None else _lease_seconds(duration, "--duration"),
               "start": None if start is None else _lease_seconds(start, "--start"),
               "start_in": None if start_in is None else _lease_seconds(start_in, "--start-in")}
    if file is not None:
        extra = [f"--{k.replace('_', '-')}" for k, v in options.items() if v is not None]
        if extra:
            raise UserError(f"give a FILE or options, not both ({', '.join(extra)} with FILE)",
                            field=extra[0])
        body, content_type = read_request_file(file)
    else:
        body = request_from_options(**options).model_dump_json(exclude_unset=True).encode()
        content_type = "application/json"
    _ask(server, token, as_json, lambda c: c.request(body, content_type),
         lambda t, v: [t.leases_table([v])])


@leases_app.command("when")
def leases_when_cmd(
    duration: Annotated[str, typer.Option(metavar="DURATION", help="How long: 3600, 90m, 1h, [D:]HH:MM:SS.")],
    nodes: Annotated[int, typer.Option(min=1, max=100_000, help="Nodes (VMs).")] = 1,
    not_before: Annotated[str | None, typer.Option(metavar="TIME", help="Not before this lease time (a "
                                                   "duration since the server's epoch; default: now).")]
    = None,
    cpu: Annotated[float | None, typer.Option(help="CPUs per node (default 1).")] = None,
    memory: Annotated[int | None, typer.Option(min=0, help="Memory per node, MB (default 1024).")] = None,
    disk: Annotated[int | None, typer.Option(min=0, help="Disk per node, MB (default 0).")] = None,
    server: ServerOption = None, token: TokenOption = None, as_json: JsonOption = False,
) -> None:
    """When could a lease start on a server? The earliest start an advance reservation of it would be
    accepted at, and the nodes free then; nothing is requested (docs/howto/serve.md)."""
    from pydantic import ValidationError

    from skylease.runtime.leases.api import OfferQuery

    params = {"nodes": nodes, "duration": _lease_seconds(duration, "--duration"), "cpu": cpu,
              "memory": memory, "disk": disk,
              "not_before": None if not_before is None else _lease_seconds(not_before, "--not-before")}
    try:  # (checked here: a mistake is one line naming the option, no server needed)
        OfferQuery.model_validate({k: v for k, v in params.items() if v is not None})
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        key = str(first["loc"][0]) if first["loc"] else "duration"
        what = str(first["msg"])
        raise UserError(what[:1].lower() + what[1:], field="--" + key.replace("_", "-")) from None
    _ask(server, token, as_json, lambda c: c.offers(params), lambda t, o: [t.offer_table(o)])


def _lease_seconds(text: str, option: str) -> int:
    """A lease's duration or time: whole seconds (the lease clock's), rounded up."""
    try:
        return math.ceil(fmt.parse_duration(text))
    except (ValueError, OverflowError) as e:
        raise UserError(str(e), field=option) from None


# parsed here, so that "-5" is a wrong id (not an unknown option) and the error shows the value
LeaseIdArgument = Annotated[str, typer.Argument(metavar="ID", help="The lease's id.")]



def _lease_id(text: str) -> int:
    if not text.strip().isdigit() or len(text.strip()) > 16:
        raise UserError(f"{text!r} is not a lease id (a whole number >= 0)", field="ID")
    return int(text)


@leases_app.command("cancel", context_settings=_ID_SETTINGS)
def leases_cancel_cmd(
    lease_id: LeaseIdArgument,
    server: ServerOption = None, token: TokenOption = None, as_json: JsonOption = False,
) -> None:
    """Cancel a lease on a server: it leaves the queue or its reservations, its payloads are stopped."""
    lid = _lease_id(lease_id)
    _ask(server, token, as_json, lambda c: c.cancel(lid), lambda t, v: [t.leases_table([v])])


@leases_app.command("extend", context_settings=_ID_SETTINGS)
def leases_extend_cmd(
    lease_id: LeaseIdArgument,
    by: Annotated[str | None, typer.Option(metavar="DURATION", help="End this much later: 3600, 90m, 1h, "
                                           "[D:]HH:MM:SS.")] = None,
    end: Annotated[str | None, typer.Option(metavar="TIME", help="End at this lease time (a duration since "
                                            "the server's epoch).")] = None,
    server: ServerOption = None, token: TokenOption = None, as_json: JsonOption = False,
) -> None:
    """Extend a lease on a server (within the site's rules): it ends later, or is refused with the
    reason, the latest end that fits and, for a reservation, the earliest start that would."""
    from pydantic import ValidationError

    from skylease.runtime.leases.api import LeaseChange

    lid = _lease_id(lease_id)
    if (by is None) == (end is None):
        raise UserError("give exactly one of --by DURATION and --end TIME", field="--by")
    key, text = ("by", by) if by is not None else ("end", end)
    change = {key: _lease_seconds(str(text), f"--{key}")}
    try:  # (checked here: a mistake is one line naming the option, no server needed)
        LeaseChange.model_validate(change)
    except ValidationError as exc:
        what = str(exc.errors(include_url=False)[0]["msg"])
        raise UserError(what[:1].lower() + what[1:], field=f"--{key}") from None
    _ask(server, token, as_json, lambda c: c.extend(lid, change), lambda t, v: [t.leases_table([v])])


@leases_app.command("list")
def leases_list_cmd(server: ServerOption = None, token: TokenOption = None, as_json: JsonOption = False,
                    limit: LimitOption = None, every: AllOption = False) -> None:
    """Your leases on a server (an administrator's: every lease), by id: the first page, or --all."""
    _ask(server, token, as_json, lambda c: c.leases(limit, every),
         lambda t, vs: [t.leases_table(vs, title=_listed("lease(s)", vs))])


@leases_app.command("show", context_settings=_ID_SETTINGS)
def leases_show_cmd(
    lease_id: LeaseIdArgument,
    server: ServerOption = None, token: TokenOption = None, as_json: JsonOption = False,
) -> None:
    """One lease on a server: its state, events, reservations, where it runs and its payloads."""
    lid = _lease_id(lease_id)
    _ask(server, token, as_json, lambda c: c.lease(lid), lambda t, v: t.lease_detail(v))


@leases_app.command("queue")
def leases_queue_cmd(server: ServerOption = None, token: TokenOption = None, as_json: JsonOption = False,
                     limit: LimitOption = None, every: AllOption = False) -> None:
    """The best-effort leases waiting on a server, in queue order: the first page, or --all."""
    _ask(server, token, as_json, lambda c: c.queue(limit, every),
         lambda t, vs: [t.leases_table(vs, title="queue: " + _listed("lease(s)", vs))])


@leases_app.command("hosts")
def leases_hosts_cmd(server: ServerOption = None, token: TokenOption = None,
                     as_json: JsonOption = False) -> None:
    """A server's nodes: capacity, leases running now, cached images (administrators only)."""
    _ask(server, token, as_json, lambda c: c.hosts(), lambda t, hs: [t.hosts_table(hs)])


# (the server's most: runtime/leases/api.py's MAX_LOG_BYTES; not imported here, it would load pydantic
# into every command's start)
MAX_LOG_BYTES = 128 * 1024


@leases_app.command("logs", context_settings=_ID_SETTINGS)
def leases_logs_cmd(
    lease_id: LeaseIdArgument,
    vnode: Annotated[int | None, typer.Option("--vnode", min=0, metavar="K", help="Only VM K of the lease "
                                              "(0 first; default: every VM).")] = None,
    limit: Annotated[int | None, typer.Option("--bytes", min=1, max=MAX_LOG_BYTES, metavar="N",
                                              help="How much of each log's end, in bytes (default: "
                                              "the server's, 8192; at most 131072).")] = None,
    server: ServerOption = None, token: TokenOption = None, as_json: JsonOption = False,
) -> None:
    """A lease's VMs on a server: each one's state or exit status, and the end of its log (a VM
    lease's guest: its serial console)."""
    lid = _lease_id(lease_id)

    def call(c):  # (every VM: the lease says how many)
        vnodes = [vnode] if vnode is not None else range(int(c.lease(lid)["nodes"]))
        return [c.vm_log(lid, k, limit) for k in vnodes]

    _ask(server, token, as_json, call, lambda _t, logs: [_vm_log_text(x) for x in logs])


def _vm_log_text(x: dict) -> Text:
    """One VM's header line (where it ran, how it stands or ended) and its log as it is (no markup,
    nothing wrapped)."""
    from rich.text import Text

    status = x["state"]
    if x.get("exit_code") is not None:
        status += f", exit code {x['exit_code']}"
    if x.get("reason"):
        status += f" ({x['reason']})"
    where = f" on {x['node']}" if x.get("node") else ""
    head = f"== lease {x['lease']} VM {x['vnode']}{where}: {status}; {x['log']} log"
    head += f" unavailable: {x['log_error']}" if x.get("log_error") else (":" if x["text"] else ": empty")
    text = x["text"] if not x["text"] or x["text"].endswith("\n") else x["text"] + "\n"
    return Text(head + "\n" + text, no_wrap=True, overflow="ignore", end="")
