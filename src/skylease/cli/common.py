"""What the command modules share: the consoles, the --out folder check and the client's
options and call (``_ask``) for the commands that talk to a `skylease serve` server."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from skylease.model.errors import UserError

if TYPE_CHECKING:
    from rich.console import Console


class _LazyConsole:
    """A rich Console made at its first use: a command that prints JSON, or nothing, does not pay
    rich's import (a third of a client command's: docs/performance.md, "Client commands")."""

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._console: Console | None = None

    def made(self) -> Console:
        """The console itself (what rich's Live and Progress are given)."""
        if self._console is None:
            from rich.console import Console

            self._console = Console(**self._options)
        return self._console

    def __getattr__(self, name: str) -> Any:
        return getattr(self.made(), name)

    def line(self, text: str) -> None:
        """Print ``text`` as it is, one line (no markup, colour or wrapping): what rich would print
        of it with ``markup=False, highlight=False, soft_wrap=True``, without rich."""
        print(text, file=sys.stderr if self._options.get("stderr") else sys.stdout, flush=True)


# no emoji codes: a user's text such as 'nonsense:abc:' must print as typed
out = _LazyConsole(emoji=False)
err = _LazyConsole(stderr=True, emoji=False)

#: The command being run, as errors and warnings name it ("skylease leases list"; set by main).
PROG = "skylease"


def error_line(text: object) -> None:
    """Print ``PROG: error: TEXT`` on stderr, one line (docs/cli.md)."""
    err.line(f"{PROG}: error: {' '.join(str(text).split())}")


def _out_dir(text: str | Path) -> Path:
    """An --out folder as typed: "" would be the working folder (Path("") is "."), and " " a folder
    named by a space, so a blank name is refused before anything is written."""
    if not str(text).strip():
        raise UserError(f"{str(text)!r} is not a folder name (give one; . is the working folder)",
                        field="--out")
    return Path(text)


# -- leases on a server (the client of `skylease serve`) -------------------------------------------
ServerOption = Annotated[str | None, typer.Option("--server", help="The server's URL (default: "
                                                  "$SKYLEASE_SERVER, else the server of `skylease login`, "
                                                  "else http://127.0.0.1:8642).")]
TokenOption = Annotated[str | None, typer.Option("--token", help="Your token (default: $SKYLEASE_TOKEN, else "
                                                "the token file of `skylease login`; here, other local "
                                                "users can read it: a warning says so).")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the server's JSON answer.")]
# a list's page (src/skylease/service/paging.py: its MAX_LIMIT and DEFAULT_LIMIT; not imported here,
# it would load the server's libraries into every command's start)
LimitOption = Annotated[int | None, typer.Option("--limit", min=1, max=1000, help="At most this many (the "
                                                 "server's page: default 100, at most 1000); with --all, "
                                                 "the size of each page asked for.")]
AllOption = Annotated[bool, typer.Option("--all", help="All of them: the client asks for page after page "
                                         "until the last.")]


def _listed(what: str, items: list) -> str:
    """A list's title: how many, and how to see the rest when the server has more."""
    more = "; more on the server: --all (or a larger --limit)" if getattr(items, "more", False) else ""
    return f"{len(items)} {what}{more}"


def _ask(server: str | None, token: str | None, as_json: bool, call, render) -> None:
    """Send ``call(client)`` to the server and print its answer: JSON with ``--json``, else the
    tables ``render(server_tables module, answer)`` makes. A failing or unreachable server is one line
    and exit status 1 (a refusal, 4xx, is a UserError: exit 2)."""
    from skylease.service import client as sc

    c = sc.Client.from_options(server, token)
    try:
        answer = call(c)
    except sc.ServiceError as e:
        error_line(e)
        raise typer.Exit(1) from None
    if token is not None:  # (after the answer: an error stays one line)
        _token_warning("--token")
    if as_json:
        print(json.dumps(answer, allow_nan=False))
        return
    import skylease.cli.server_tables as server_tables  # (not `from skylease.cli`: no cycle)

    for table in render(server_tables, answer):
        out.print(table)



# a lease's or bag's id is parsed by the command, so that "-5" is a wrong value, not an unknown option
_ID_SETTINGS = {"ignore_unknown_options": True}


# -- login: the client's token file -----------------------------------------------------------
def _token_warning(option: str, prefix: str | None = None) -> None:
    from skylease.runtime.credentials import option_warning

    err.line(f"{prefix or PROG}: warning: {option_warning(option)}")
