"""``skylease login``: a token checked on its server, then kept in the token file for the client
commands (``skylease leases ...``, ``skylease qos ...``, ``skylease run --qos/--report``), so that it
never has to be given on a command line (docs/decisions/serve-secrets.md).

The token is checked first (``GET /me``, which needs a valid token): a token the server does not
know is one line and nothing is written. The file (runtime/credentials.py) holds the server's URL
too, so later commands need no ``--server``, and its token goes to that server only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from skylease.model.errors import UserError
from skylease.runtime.credentials import Login, check_token, write_login
from skylease.service.client import Client, ServiceError, TokenRefused, server_url

__all__ = ["LoggedIn", "login"]


@dataclass(frozen=True)
class LoggedIn:
    """Who the token is on which server, and where it was saved."""

    server: str
    name: str
    admin: bool
    path: Path


def login(server: str | None, token: str, path: Path | None = None) -> LoggedIn:
    """Check ``token`` on the server (``--server``, else as every client command finds it) and save
    both in the token file (``path``: the default one)."""
    url = server_url(server)
    tok = check_token(token, None)
    with Client(url, tok) as c:
        try:
            me = c.me()
        except TokenRefused:
            raise UserError(f"the server at {url} does not know this token; nothing written") from None
    if not isinstance(me, dict) or not isinstance(me.get("name"), str):
        raise ServiceError(f"the server at {url} did not answer GET /me as skylease serve does")
    saved = write_login(Login(url, tok), path)
    return LoggedIn(url, me["name"], bool(me.get("admin")), saved)
