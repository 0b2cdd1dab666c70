"""The ``skylease`` command, one module per command group. It parses options and prints; the work
is done by the library.

A call imports only the module of the command it names (:data:`COMMANDS`): ``skylease leases list``
loads ``cli/leases.py`` and what its command imports, not the other groups' modules. ``--help``, a
word that is no command, and the whole click tree (:func:`click_command` without a name) load every
module of :data:`COMMAND_MODULES`. A new command goes in a module of its group; a new group or
top-level command gets its line in :data:`COMMANDS` (tests/test_cli_modules.py checks the table).
"""

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

__all__ = ["COMMANDS", "COMMAND_MODULES", "app", "click_command", "console_main", "main"]

#: The modules that add commands to ``app``, in the order ``skylease --help`` lists the commands
#: (typer keeps the order in which they are added; the whole tree sorts them by this order).
COMMAND_MODULES = ("demo", "data", "mapping", "plan", "reproduce", "simulate", "leases", "qos", "login",
                   "serve", "run", "tasks")
#: The module that adds each top-level command and command group.
COMMANDS = {"demo": "demo", "map": "mapping", "place": "mapping", "login": "login", "logout": "login",
            "run": "run", "status": "run", "export": "run", "show": "tasks", "failed": "tasks",
            "data": "data", "etc": "mapping", "traces": "data", "plan": "plan", "simulate": "simulate",
            "reproduce": "reproduce", "leases": "leases", "serve": "serve", "qos": "qos"}


def _load(modules: tuple[str, ...]) -> None:
    for name in modules:
        importlib.import_module(f"skylease.cli.{name}")


def _command_name(info: typer.models.CommandInfo) -> str:
    return info.name or info.callback.__name__.lower().replace("_", "-")


def _rank(info: typer.models.CommandInfo) -> int:
    return COMMAND_MODULES.index(info.callback.__module__.rpartition(".")[2])


# -- entry point -----------------------------------------------------------------------------
@functools.cache
def click_command(group: str | None = None, command: str | None = None) -> click.Command:
    """The app as a click command, built once (typer rebuilds it at every call: 0.06 s). With
    ``group`` (a top-level command's or group's name, such as ``simulate``), the root holds that one
    alone: a call under it imports its module only and converts only its commands (the whole tree
    costs 0.03 s); with ``command`` too (one of the group's commands or subgroups), the group holds
    that one alone."""
    from skylease.cli.examples import add_examples

    if group is None:
        _load(COMMAND_MODULES)
        whole = copy.copy(app)
        whole.registered_commands = sorted(app.registered_commands, key=_rank)  # (stable: a module's order)
        root = typer.main.get_command(whole)
    else:
        _load((COMMANDS[group],))
        pruned = copy.copy(app)
        pruned.registered_commands = [c for c in app.registered_commands if _command_name(c) == group]
        pruned.registered_groups = [_only(g, command) if command else g
                                    for g in app.registered_groups if g.name == group]
        root = typer.main.get_command(pruned)
    add_examples(root)  # every --help ends with an example (docs/cli.md)
    return root


def _only(info: typer.models.TyperInfo, command: str) -> typer.models.TyperInfo:
    """A group's ``info`` holding its command (or subgroup) ``command`` alone."""
    sub = copy.copy(info.typer_instance)
    sub.registered_commands = [c for c in sub.registered_commands if _command_name(c) == command]
    sub.registered_groups = [g for g in sub.registered_groups if g.name == command]
    only = copy.copy(info)
    only.typer_instance = sub
    return only


def _subcommands(group: str) -> set[str]:
    """The names of a group's commands and subgroups (its module loaded)."""
    _load((COMMANDS[group],))
    info = next((g for g in app.registered_groups if g.name == group), None)
    if info is None:  # a top-level command
        return set()
    inst = info.typer_instance
    return {_command_name(c) for c in inst.registered_commands} | {g.name for g in inst.registered_groups}


def _command_for(argv: list[str] | None) -> click.Command:
    words = (sys.argv[1:] if argv is None else argv)[:2]
    if not words or words[0] not in COMMANDS:
        return click_command()
    if len(words) == 2 and words[1] in _subcommands(words[0]):
        return click_command(words[0], words[1])
    return click_command(words[0])


def main(argv: list[str] | None = None) -> int:
    """Run the CLI. Exit codes (docs/cli.md): 0 done; 1 the work failed (failed tasks, no plan, a
    server that fails); 2 bad input or usage, one ``skylease CMD: error: ...`` line on stderr; 130
    interrupted."""
    from skylease.cli import common, errors

    args = sys.argv[1:] if argv is None else list(argv)
    cmd = _command_for(args)
    common.PROG = errors.command_path(cmd, args)
    try:
        rv = cmd(args=args, prog_name="skylease", standalone_mode=False)
    except UserError as e:
        err.line(errors.line(common.PROG, e))
        return 2
    except _EXIT as e:
        return int(getattr(e, "exit_code", 0) or 0)
    except (*_ABORT, KeyboardInterrupt):
        err.line(f"{common.PROG}: interrupted")
        return 130
    except _CLICK_ERRORS as e:  # bad option, unknown command, missing argument: usage errors
        if type(e).__name__ == "NoArgsIsHelpError":  # `skylease` or a group alone: its help, as --help
            print(e.ctx.get_help())
            return 0
        ctx = getattr(e, "ctx", None)
        prog = ctx.command_path if ctx is not None else common.PROG
        err.line(errors.line(prog, errors.usage_message(e)))
        return 2
    if rv == 130:  # typer turns Ctrl-C inside a command into Exit(130), silently
        err.line(f"{common.PROG}: interrupted")
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
