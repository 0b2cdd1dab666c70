"""A client's token for a `skylease serve` server, and the token file `skylease login` writes.

Which token a command sends (docs/decisions/serve-secrets.md): the command's own option (``--token``,
``--qos-token``, ``--report-token``), else ``$SKYLEASE_TOKEN``, else the token file when it was
written for the same server. An option is the most explicit, so it wins, but it is readable by
every local user in ``/proc/PID/cmdline`` for as long as the command runs: the CLI warns about it
(:func:`option_warning`). The environment and the file are not.

The token file is ``$XDG_CONFIG_HOME/skylease/token`` (else ``~/.config/skylease/token``): TOML with
the ``server`` it was checked on and the ``token``. Its token is sent to that server only (another
server would learn it). It is written atomically, readable by its owner only from the moment it
exists (a temporary file created 0600 in the same folder, then renamed over the old one; the folder
created 0700), and a token file that other users may read or write is refused, as ssh refuses
such a private key.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from skylease.model.errors import UserError

__all__ = ["TOKEN_ENV", "Login", "check_token", "option_warning", "read_login", "remove_login",
           "same_server", "token_for", "token_path", "write_login"]

TOKEN_ENV = "SKYLEASE_TOKEN"
#: The longest token a client sends (the server ignores longer ones: service/auth.py).
MAX_TOKEN = 512


@dataclass(frozen=True)
class Login:
    """What the token file holds: a server's URL and the caller's token there."""

    server: str
    token: str


def token_path(environ: Mapping[str, str] | None = None) -> Path:
    """The token file: ``$XDG_CONFIG_HOME/skylease/token``, else ``~/.config/skylease/token`` (a
    relative XDG_CONFIG_HOME is ignored, as the XDG base directory specification says)."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CONFIG_HOME", "")
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".config"
    return root / "skylease" / "token"


def same_server(a: str, b: str) -> bool:
    """Whether two server URLs name the same server (case of scheme and host, a trailing slash and
    an explicit default port aside)."""
    def key(url: str) -> tuple[str, str, int | None, str]:
        p = urlsplit(url.strip())
        try:
            port = p.port or {"http": 80, "https": 443}.get(p.scheme.lower())
        except ValueError:
            port = None
        return p.scheme.lower(), (p.hostname or "").lower(), port, p.path.rstrip("/")

    return key(a) == key(b)


def check_token(token: str, where: str | None) -> str:
    """``token`` stripped, or one line saying why it cannot be one (without printing it back)."""
    tok = token.strip()
    if not tok:
        raise UserError("empty token", field=where)
    if len(tok) > MAX_TOKEN or not all("!" <= c <= "~" for c in tok):
        raise UserError(f"not a token: a token is one word of at most {MAX_TOKEN} printable ASCII "
                        "characters (the line `skylease serve user add` printed)", field=where)
    return tok


def option_warning(option: str) -> str:
    """The one-line warning for a token given on the command line."""
    return (f"{option} is readable by every local user (ps, /proc/PID/cmdline) while this command runs: "
            f"save it once with `skylease login`, or set {TOKEN_ENV}")


# -- the token file ---------------------------------------------------------------------------------
def read_login(path: Path | None = None) -> Login | None:
    """The token file's login (None: there is no token file), or one line naming the file."""
    path = token_path() if path is None else path
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UserError(f"cannot read the token file: {exc.strerror or exc}", file=path) from None
    if stat.S_ISREG(st.st_mode) and st.st_mode & 0o077:
        raise UserError(f"the token file is open to other users (mode {stat.filemode(st.st_mode)}): "
                        f"chmod 600 {path}, or run `skylease login` again", file=path)
    server, token = _token_file(path)
    server = server.strip()
    if not server:
        raise UserError("empty (run `skylease login` again)", file=path, field="server")
    try:
        token = check_token(token, "token")
    except UserError as exc:
        raise UserError(f"{exc.message} (run `skylease login` again)", file=path, field="token") from None
    return Login(server, token)


def _token_file(path: Path) -> tuple[str, str]:
    """The token file's server and token. A file as `skylease login` writes it (two strings) is read
    with tomllib alone; any other goes through the file schema, whose one-line errors name the
    file, line and key. (The schema is a pydantic model: building it, and pydantic's look-up of its
    plug-ins, is most of a client command's start otherwise: docs/performance.md.)"""
    import tomllib

    with contextlib.suppress(OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        doc = tomllib.loads(path.read_bytes().decode("utf-8-sig"))
        if doc.keys() == {"server", "token"} and all(type(v) is str for v in doc.values()):
            return doc["server"], doc["token"]
    from skylease.model.schema import FileModel, load_toml

    class TokenFile(FileModel):
        server: str
        token: str  # (checked by check_token: a schema error would print the token back)

    checked, _ = load_toml(path, TokenFile)
    return checked.server, checked.token


def write_login(login: Login, path: Path | None = None) -> Path:
    """Write the token file atomically, readable by its owner only from its creation; its path."""
    path = token_path() if path is None else path
    token = check_token(login.token, "token")
    if not all(" " < c < "\x7f" for c in login.server):
        raise UserError("not a server URL (control characters or spaces)", field="--server")
    text = ("# skylease login: your token on one server (keep this file 0600; `skylease logout` removes it)\n"
            f"server = {json.dumps(login.server)}\ntoken = {json.dumps(token)}\n")
    folder = path.parent
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create the folder of the token file: {exc.strerror or exc}",
                        file=folder) from None
    # mkstemp opens with O_CREAT | O_EXCL and mode 0600: the token is never in a file others can read
    try:
        fd, tmp = tempfile.mkstemp(prefix=".token-", dir=folder)
    except OSError as exc:
        raise UserError(f"cannot write in the folder of the token file: {exc.strerror or exc}",
                        file=folder) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise UserError(f"cannot write the token file: {exc.strerror or exc}", file=path) from None
    with contextlib.suppress(OSError):  # the rename itself durable (not every file system can)
        dir_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    return path


def remove_login(path: Path | None = None) -> bool:
    """Remove the token file; whether there was one."""
    path = token_path() if path is None else path
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    except IsADirectoryError:
        raise UserError("is a folder, not a token file", file=path) from None
    except OSError as exc:
        raise UserError(f"cannot remove the token file: {exc.strerror or exc}", file=path) from None
    return True


# -- which token a command sends --------------------------------------------------------------------
def token_for(server: str, option_value: str | None, option: str, *,
              environ: Mapping[str, str] | None = None, path: Path | None = None) -> str:
    """The token to send to ``server``: the option's value, else ``$SKYLEASE_TOKEN``, else the
    token file's if it was written for ``server``; or one line naming ``option`` saying how to give
    one."""
    env = os.environ if environ is None else environ
    if option_value is not None:
        return check_token(option_value, option)
    if env.get(TOKEN_ENV, "").strip():
        return check_token(env[TOKEN_ENV], TOKEN_ENV)
    path = token_path(env) if path is None else path
    login = read_login(path)
    if login is not None and same_server(login.server, server):
        return login.token
    elsewhere = f" (the token file {path} is for {login.server})" if login is not None else ""
    raise UserError(f"no token for {server.rstrip('/')}{elsewhere}: run `skylease login --server "
                    f"{server.rstrip('/')}` once, or set {TOKEN_ENV}", field=option)
