"""The ``skylease`` typer app, its command groups and its root options (the commands are in the
modules beside this one, each adding its own to these groups)."""

from __future__ import annotations

from typing import Annotated

import typer

from skylease.cli.common import out

app = typer.Typer(
    name="skylease",
    help="Plan, run and simulate bags of tasks and resource leases on clouds, clusters and grids.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
data_app = typer.Typer(help="List, fetch and import the public data sets used by reproductions.",
                       invoke_without_command=True, no_args_is_help=False)
app.add_typer(data_app, name="data")
etc_app = typer.Typer(help="Generate and inspect ETC (expected time to compute) instances.",
                      no_args_is_help=True)
app.add_typer(etc_app, name="etc")
traces_app = typer.Typer(help="Inspect availability traces (desktop grids, best-effort grids, spot).",
                         no_args_is_help=True)
app.add_typer(traces_app, name="traces")
plan_app = typer.Typer(help="Provision cloud (and free local) instances for min cost under a "
                       "deadline, with HiGHS; or the cost/time Pareto front.", no_args_is_help=True)
app.add_typer(plan_app, name="plan")
simulate_app = typer.Typer(help="Simulate online provisioning policies on bags of tasks.",
                           no_args_is_help=True)
app.add_typer(simulate_app, name="simulate")
reproduce_app = typer.Typer(help="Regenerate a paper's tables and figures, ours beside theirs.",
                            no_args_is_help=True)
app.add_typer(reproduce_app, name="reproduce")
leases_app = typer.Typer(help="Simulate lease workloads (best-effort, advance-reservation and immediate "
                         "leases) with the lease scheduler; request, list, show and cancel leases on a "
                         "`skylease serve` server.", no_args_is_help=True)
app.add_typer(leases_app, name="leases")
serve_app = typer.Typer(help="Run the lease manager as a server (HTTP API, OpenAPI at /docs); `serve user "
                        "add NAME` gives a user a token.", invoke_without_command=True, no_args_is_help=False)
app.add_typer(serve_app, name="serve")
serve_user_app = typer.Typer(help="Add, list and remove the server's users.", no_args_is_help=True)
serve_app.add_typer(serve_user_app, name="user")
qos_app = typer.Typer(help="SpeQuloS on a `skylease serve` server: accounts and credits, bags of tasks, "
                      "predictions (runs use it with `skylease run --qos URL`).", no_args_is_help=True)
app.add_typer(qos_app, name="qos")


def _version(value: bool) -> None:
    if value:
        from skylease import __version__  # importlib.metadata: tens of ms, only for --version

        out.print(f"skylease {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """skylease: plan, run and simulate bags of tasks and resource leases."""
