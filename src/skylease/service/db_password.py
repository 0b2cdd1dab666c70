"""The database's password (docs/decisions/serve-secrets.md): never in a URL, never shown.

A URL on the command line is readable by every local user in ``/proc/PID/cmdline`` for as long as
the server runs, and a configuration file is often shared or kept in a repository; so a ``--db``
URL (or the configuration file's ``db``) that carries a password is refused, in one line saying
how to give it instead. The password comes, in order, from:

1. a file: ``--db-password-file FILE``, else the configuration file's ``db_password_file`` (its
   first line; a file other users may read is warned about, not refused: a service group may be
   meant to read it);
2. ``$SKYLEASE_DB_PASSWORD``;
3. otherwise nothing is added, and libpq looks where it always does (``PGPASSWORD``,
   ``~/.pgpass``, a ``passfile=`` in the URL).

The password goes into the engine's URL object only, which messages show through
``db.shown_url`` (password hidden).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Mapping
from pathlib import Path

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from skylease.model.errors import UserError
from skylease.model.files import read_text

__all__ = ["PASSWORD_ENV", "check_no_password", "db_password"]

PASSWORD_ENV = "SKYLEASE_DB_PASSWORD"
#: Query parameters of a PostgreSQL URL that are secrets themselves (libpq's keywords).
_SECRET_KEYS = {"password", "sslpassword"}
#: user:password@ in a URL that does not parse (so nothing of it is echoed).
_USERINFO_PASSWORD = re.compile(r":[^/?#@]*@")
HOW = (f"leave it out of the URL and set {PASSWORD_ENV}, or give a file holding it (--db-password-file "
       "FILE, or db_password_file in the --config file)")


def _has_password(url: str) -> bool:
    text = url.strip()
    try:
        parsed = make_url(text)
    except (ArgumentError, ValueError, TypeError):
        return bool(_USERINFO_PASSWORD.search(text)) or "password=" in text.lower()
    return parsed.password is not None or any(k.lower() in _SECRET_KEYS for k in parsed.query)


def check_no_password(url: str | None, *, file: Path | None = None) -> None:
    """Refuse a database URL that carries a password: given on the command line (``file`` None),
    or as the ``db`` key of the configuration ``file``."""
    if url is None or not _has_password(url):
        return
    if file is None:
        raise UserError("a URL with a password is readable by every local user (/proc/PID/cmdline): "
                        + HOW, field="--db")
    raise UserError("a URL with a password: keep the password out of the configuration file's URL; "
                    + HOW, file=file, field="db")


def _is_postgresql(url: str | None) -> bool:
    if url is None:
        return False
    try:
        return make_url(url.strip()).get_backend_name() in ("postgresql", "postgres")
    except (ArgumentError, ValueError, TypeError):
        return False  # (engine_for says what is wrong with it)


def _read_password_file(path: Path, warn: Callable[[str], None]) -> str:
    try:
        st = path.stat()
    except OSError:
        st = None  # (read_text says why)
    text = read_text(path)
    lines = text.splitlines()
    if not lines or not lines[0]:
        raise UserError("is empty: the file holds the database's password on its first line", file=path,
                        field="--db-password-file")
    if any(line.strip() for line in lines[1:]):
        raise UserError("holds more than one line: the file holds the database's password alone",
                        file=path, field="--db-password-file")
    if st is not None and st.st_mode & 0o044:
        warn(f"{path}: the database's password file is readable by other users (mode "
             f"{stat.filemode(st.st_mode)}): chmod 600 {path}")
    return lines[0]


def db_password(url: str | None, password_file: str | Path | None, *,
                environ: Mapping[str, str] | None = None,
                warn: Callable[[str], None] = lambda _m: None) -> str | None:
    """The password to connect to ``url`` with (see the module's doc), or None: libpq's own."""
    env = os.environ if environ is None else environ
    if password_file is not None:
        if not _is_postgresql(url):
            raise UserError("a password file goes with a PostgreSQL --db (postgresql://USER@HOST/DB)",
                            field="--db-password-file")
        return _read_password_file(Path(password_file).expanduser(), warn)
    if _is_postgresql(url) and env.get(PASSWORD_ENV):
        return env[PASSWORD_ENV]
    return None
