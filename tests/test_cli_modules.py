"""The CLI package's table of which module adds which command (skylease.cli.COMMANDS): a call
imports the module of the command it names only, so the table must name the right one for every
command and group of the whole tree."""

from __future__ import annotations

import json
import subprocess
import sys

from skylease.cli import COMMAND_MODULES, COMMANDS, app, click_command


def _modules_of(info) -> set[str]:
    """The modules whose functions a group's commands, callback and subgroups are."""
    inst = info.typer_instance
    found = {c.callback.__module__ for c in inst.registered_commands}
    if inst.registered_callback is not None:
        found.add(inst.registered_callback.callback.__module__)
    for sub in inst.registered_groups:
        found |= _modules_of(sub)
    return found


def test_the_table_names_every_command_and_the_module_that_adds_it():
    whole = click_command()
    assert set(whole.commands) == set(COMMANDS)
    assert set(COMMANDS.values()) == set(COMMAND_MODULES)
    for c in app.registered_commands:
        name = c.name or c.callback.__name__.replace("_", "-")
        assert c.callback.__module__ == f"skylease.cli.{COMMANDS[name]}", name
    for g in app.registered_groups:
        assert _modules_of(g) == {f"skylease.cli.{COMMANDS[g.name]}"}, g.name


PROBE = """
import sys
from skylease.cli import main
code = main(sys.argv[1:])
print("MODULES", __import__("json").dumps(sorted(m for m in sys.modules if m.startswith("skylease.cli"))),
      file=sys.stderr)
"""


def _command_modules(*argv: str) -> list[str]:
    """The command modules (those of COMMAND_MODULES) a fresh ``skylease ARGV`` imports."""
    p = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    line = next(x for x in p.stderr.splitlines() if x.startswith("MODULES "))
    names = [m.removeprefix("skylease.cli.") for m in json.loads(line.removeprefix("MODULES "))]
    return [n for n in names if n in COMMAND_MODULES]


def test_a_call_imports_the_module_of_its_command_only():
    assert _command_modules("leases", "list", "--help") == ["leases"]
    assert _command_modules("login", "--help") == ["login"]
    assert _command_modules("serve", "user", "list", "--help") == ["serve"]
    assert _command_modules("--help") == sorted(COMMAND_MODULES)
