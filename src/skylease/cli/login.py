"""`skylease login` and `skylease logout`: the client's token file."""

from __future__ import annotations

import sys

import typer

from skylease.cli.app import app
from skylease.cli.common import ServerOption, err, error_line, out
from skylease.model.errors import UserError

# -- login: the client's token file -----------------------------------------------------------

def _read_token(url: str) -> str:
    """The token typed without echo on a terminal, else the first line of standard input."""
    if sys.stdin is not None and sys.stdin.isatty():
        import getpass

        try:
            return getpass.getpass(f"Token for {url}: ")
        except EOFError:
            return ""
    line = sys.stdin.readline() if sys.stdin is not None else ""
    if not line.strip():
        raise UserError("no token on standard input: pipe the line `skylease serve user add` printed, or "
                        "run skylease login in a terminal")
    return line


@app.command("login")
def login_cmd(server: ServerOption = None) -> None:
    """Save your token for a server (0600, ~/.config/skylease/token), after checking it there: typed
    without echo, or piped on standard input. The client commands then need no --token."""
    from skylease.service import client as sc
    from skylease.service.login import login

    url = sc.server_url(server)  # a wrong URL is said before the token is asked for
    try:
        done = login(url, _read_token(url))
    except sc.ServiceError as e:
        error_line(e)
        raise typer.Exit(1) from None
    out.line(f"logged in to {done.server} as {done.name}{' (administrator)' if done.admin else ''}; token "
             f"saved in {done.path}")
    import os

    if os.environ.get("SKYLEASE_TOKEN", "").strip():
        err.line("skylease login: note: SKYLEASE_TOKEN is set, and wins over the token file while it is")


@app.command("logout")
def logout_cmd() -> None:
    """Remove your token file (written by `skylease login`)."""
    from skylease.runtime.credentials import remove_login, token_path

    path = token_path()
    removed = remove_login(path)
    out.print(f"token file {path} removed" if removed else f"no token file ({path})", markup=False,
              highlight=False, soft_wrap=True)
