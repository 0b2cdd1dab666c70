"""`skylease data` (the public data sets) and `skylease traces` (availability traces)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from skylease.cli import format as fmt
from skylease.cli.app import data_app, traces_app
from skylease.cli.common import out

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
    table = fmt.table("name", "here", "files", "source", "license", title=f"Data in {folder}")
    for d in datasets.DATASETS:
        st = present[d.name]
        table.add_row(d.name, "yes" if st["present"] else "no",
                      f"{st['files_present']}/{len(d.files)}", d.source, d.license)
    out.print(table)
    out.print("Where each comes from:")
    width = max(len(d.name) for d in datasets.DATASETS)
    for d in datasets.DATASETS:  # whole, never wrapped or cut, so that they can be copied
        print(f"  {d.name:<{width}}  {d.homepage or (d.urls[0] if d.urls else '-')}")
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



@traces_app.command("stats")
def traces_stats_cmd(
    traces: Annotated[list[str], typer.Argument(help="Trace names (seti, nd, g5klyo, g5kgre, spot10, "
                                                "spot100, lanl) or files: FTA .tab(.gz), spot .json(.gz), "
                                                "SWF .swf(.gz), or a directory of .tr files.")],
    seed: Annotated[int, typer.Option(help="Seed of the generated traces (seti, nd).")] = 0,
    nodes: Annotated[int | None, typer.Option(min=1, help="Nodes (generated traces, spot ladders).")] = None,
    days: Annotated[float | None, typer.Option(min=0.001, help="Keep only the first DAYS days.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the rows as JSON.")] = False,
) -> None:
    """Table 2/3 statistics (node counts; availability and unavailability quartiles) of traces."""
    from skylease.traces.avail import format_stats_table, stats_with_paper

    rows = stats_with_paper(traces, seed, n_nodes=nodes, duration_s=None if days is None else days * 86400)
    if as_json:
        print(json.dumps(rows, default=float))
        return
    out.line(format_stats_table(rows))
