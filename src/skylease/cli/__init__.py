"""The ``skylease`` command, one module per command group. It parses options and prints; the work
is done by the library."""

from __future__ import annotations

import copy
import functools
import importlib
import sys
from typing import TYPE_CHECKING

import typer

from skylease.cli.app import app
from skylease.cli.common import err
from skylease.model.errors import UserError

if TYPE_CHECKING:
    import click

__all__ = ["app", "click_command", "console_main", "main"]

#: The modules that add the commands to ``app``, in the order ``skylease --help`` lists them (typer
#: keeps the order in which commands are added).
COMMAND_MODULES = ("demo", "data", "mapping", "plan", "reproduce", "simulate", "leases", "qos", "login",
                   "serve", "run", "tasks")
for _name in COMMAND_MODULES:
    importlib.import_module(f"skylease.cli.{_name}")


# -- entry point -----------------------------------------------------------------------------
@functools.cache
def click_command(group: str | None = None) -> click.Command:
    """The app as a click command, built once (typer rebuilds it at every call: 0.06 s). With
    ``group`` (a command group's name, such as ``simulate``), the root holds that group alone: a call
    under it converts only its commands (the whole tree costs 0.03 s)."""
    if group is None:
        return typer.main.get_command(app)
    pruned = copy.copy(app)
    pruned.registered_commands = []
    pruned.registered_groups = [g for g in app.registered_groups if g.name == group]
    return typer.main.get_command(pruned)


def _command_for(argv: list[str] | None) -> click.Command:
    first = (sys.argv[1:] if argv is None else argv)[:1]
    if first and any(g.name == first[0] for g in app.registered_groups):
        return click_command(first[0])
    return click_command()


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; user mistakes become one line on stderr and exit code 2."""
    try:
        rv = _command_for(argv)(args=argv, prog_name="skylease", standalone_mode=False)
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
    if rv == 130:  # typer turns Ctrl-C inside a command into Exit(130), silently
        err.print("skylease: interrupted", markup=False)
    return rv if isinstance(rv, int) else 0  # typer.Exit(code) inside a command


# Recent typer vendors click (its errors derive from typer.TyperException); older typer raises
# click's own exceptions. Accept both, so the one-line error holds whichever typer is installed
# (click itself is imported only for an older typer: 15 ms of every call otherwise).
if hasattr(typer, "TyperException"):
    _EXIT: tuple[type[BaseException], ...] = (typer.Exit,)
    _ABORT: tuple[type[BaseException], ...] = (typer.Abort,)
    _CLICK_ERRORS: tuple[type[Exception], ...] = (typer.TyperException,)
else:  # pragma: no cover - typer < 0.24 (click not vendored)
    import click

    _EXIT = (typer.Exit, click.exceptions.Exit)
    _ABORT = (typer.Abort, click.exceptions.Abort)
    _CLICK_ERRORS = (click.ClickException,)


def console_main() -> None:
    """Console-script entry point."""
    sys.exit(main())


if __name__ == "__main__":
    console_main()
