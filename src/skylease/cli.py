"""The ``skylease`` command. It parses options and prints; the work is done by the library."""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated

import click
import typer
from rich.console import Console
from rich.table import Table

from skylease import __version__
from skylease.model.errors import UserError

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

out = Console()
err = Console(stderr=True)


def _version(value: bool) -> None:
    if value:
        out.print(f"skylease {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """skylease: plan, run and simulate bags of tasks and resource leases."""


# -- demo ------------------------------------------------------------------------------------
@app.command()
def demo(
    out_dir: Annotated[Path | None, typer.Option("--out", help="Keep results in this folder "
                                                 "(re-running skips finished cells).")] = None,
    seeds: Annotated[int, typer.Option(min=1, max=100, help="Repetitions per cell.")] = 5,
    inline: Annotated[bool, typer.Option("--inline", help="Run in this process, without Dask.")]
    = False,
    workers: Annotated[int, typer.Option(min=1, help="Dask worker processes.")] = 2,
    scheduler: Annotated[str | None, typer.Option(help="Address of a running Dask scheduler "
                                                  "(e.g. tcp://host:8786) to use instead of a "
                                                  "local cluster.")] = None,
) -> None:
    """A short tour: a campaign of fixed-size pools on the simulator, on Dask."""
    from skylease.experiments.demo import (
        DEMO_MEAN_S,
        DEMO_SD_S,
        DEMO_TASKS,
        DEMO_VM,
        fixed_pool_table,
        run_fixed_pool_demo,
    )

    t0 = time.perf_counter()
    out.rule("[bold]skylease demo")
    out.print(f"Bag: {DEMO_TASKS} tasks, gamma runtimes {DEMO_MEAN_S:.0f} ± {DEMO_SD_S:.0f} s. "
              f"Hosts boot in {DEMO_VM.boot_time:.0f} s and cost ${DEMO_VM.price:.2f} per started "
              f"{DEMO_VM.billing_unit / 3600:.0f} h.")
    where = ("in this process" if inline else f"on the Dask cluster at {scheduler}" if scheduler
             else "in parallel on a Dask LocalCluster")
    out.print(f"1. Fixed pools of n hosts (the user guesses n up front), {seeds} random bags "
              f"each, simulated {where}:")
    with tempfile.TemporaryDirectory(prefix="skylease-demo-") as tmp:
        folder = out_dir if out_dir is not None else Path(tmp)
        res = run_fixed_pool_demo(folder, seeds=seeds, mode="inline" if inline else "processes",
                                  workers=workers, scheduler=scheduler,
                                  progress=sys.stderr.isatty())
        _fail_if_cells_failed(res.failed)
    t = fixed_pool_table(res)
    table = Table("hosts", "makespan (s)", "± sd", "cost ($)", "charged hours", "utilisation",
                  title="FixedPool(n), mean over seeds")
    for row in t.itertuples(index=False):
        table.add_row(str(row.pool_size), f"{row.makespan_s_mean:,.0f}", f"{row.makespan_s_std:,.0f}",
                      f"{row.cost_mean:.2f}", f"{row.charged_units_mean:.1f}",
                      f"{row.utilisation_mean:.0%}")
    out.print(table)
    out.print(f"   {res.ran} cells run, {res.skipped} reused from {out_dir or 'a previous run'}"
              if res.skipped else f"   {res.ran} cells run in {res.elapsed_s:.1f} s.")
    if out_dir is not None:
        out.print(f"   Results: {out_dir / 'results.csv'}")
    out.print("More hosts finish sooner, but each one pays its started hours: picking n well "
              "is what the adaptive policies automate.")
    out.print(f"[dim]demo took {time.perf_counter() - t0:.1f} s[/dim]")


def _fail_if_cells_failed(failed: list[dict]) -> None:
    if failed:
        first = failed[0]
        raise UserError(f"{len(failed)} cell(s) failed; first {first['params']}: {first['error']}")


# -- data ------------------------------------------------------------------------------------
DirOption = Annotated[Path | None, typer.Option("--dir", help="Data folder (default: "
                                                "$SKYLEASE_DATA or ~/.local/share/skylease).")]


@data_app.callback()
def data_list(ctx: typer.Context, data_dir: DirOption = None) -> None:
    """List the data sets, where they come from, their license, and whether they are here."""
    if ctx.invoked_subcommand is not None:
        return
    from skylease.traces import datasets

    folder = data_dir or datasets.default_data_dir()
    present = {s["name"]: s for s in datasets.status(folder)}
    table = Table("name", "here", "files", "source", "license", "url", title=f"Data in {folder}")
    for d in datasets.DATASETS:
        st = present[d.name]
        table.add_row(d.name, "yes" if st["present"] else "no",
                      f"{st['files_present']}/{len(d.files)}", d.source, d.license,
                      d.urls[0] if d.urls else d.homepage)
    out.print(table)
    out.print("Get one: skylease data fetch NAME   (or, offline: skylease data import NAME PATH)")


@data_app.command("fetch")
def data_fetch(name: str, data_dir: DirOption = None) -> None:
    """Download a data set from its public source into the data folder."""
    from skylease.traces import datasets

    path = datasets.fetch(name, data_dir)
    out.print(f"{name}: {path}")


@data_app.command("import")
def data_import(
    name: str,
    path: Annotated[Path, typer.Argument(help="Folder holding a local copy of the data set.")],
    link: Annotated[bool, typer.Option(help="Symlink the files instead of copying.")] = False,
    data_dir: DirOption = None,
) -> None:
    """Import a local copy of a data set (checked file by file) into the data folder."""
    from skylease.traces import datasets

    dest = datasets.import_local(name, path, data_dir, link=link)
    out.print(f"{name}: {dest}")


@data_app.command("path")
def data_path(name: str, data_dir: DirOption = None) -> None:
    """Print the folder holding a data set (error if it is not here)."""
    from skylease.traces import datasets

    print(datasets.locate(name, data_dir))


# -- entry point -----------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    """Run the CLI; user mistakes become one line on stderr and exit code 2."""
    try:
        app(args=argv, prog_name="skylease", standalone_mode=False)
    except UserError as e:
        err.print(f"skylease: error: {e}", markup=False, highlight=False, soft_wrap=True)
        return 2
    except _EXIT as e:
        return int(getattr(e, "exit_code", 0) or 0)
    except (*_ABORT, KeyboardInterrupt):
        err.print("skylease: interrupted", markup=False)
        return 130
    except _CLICK_ERRORS as e:  # bad option, unknown command, missing argument: usage errors
        msg = " ".join(e.format_message().split())
        ctx = getattr(e, "ctx", None)
        path = ctx.command_path.removeprefix("skylease").strip() if ctx is not None else ""
        cmd = f" {path}" if path else ""
        err.print(f"skylease{cmd}: error: {msg} (see --help)", markup=False, highlight=False,
                  soft_wrap=True)
        return 2
    return 0


# Recent typer vendors click (its errors derive from typer.TyperException); older typer raises
# click's own exceptions. Accept both, so the one-line error holds whichever typer is installed.
_EXIT: tuple[type[BaseException], ...] = (typer.Exit, click.exceptions.Exit)
_ABORT: tuple[type[BaseException], ...] = (typer.Abort, click.exceptions.Abort)
_CLICK_ERRORS: tuple[type[Exception], ...] = (
    click.ClickException,
    *((typer.TyperException,) if hasattr(typer, "TyperException") else ()),
)


def console_main() -> None:
    """Console-script entry point."""
    sys.exit(main())


if __name__ == "__main__":
    console_main()
