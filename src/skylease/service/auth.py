"""Users and their bearer tokens (issue 19).

A token is ``secrets.token_urlsafe(32)``: 256 random bits, shown once when the user is added and
stored only as its SHA-256 hex digest. A fast hash is the right one here: a slow password hash
(bcrypt, scrypt, argon2) exists to make guessing a *low-entropy* password from a stolen digest
expensive, and nobody can enumerate 2^256 tokens however fast the hash is; a fast hash also keeps
every API call cheap. A token is looked up by its digest (a unique index), so the server never
compares secret strings byte by byte; the digest found is then compared in constant time anyway.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError

from skylease.model.errors import UserError
from skylease.service.db import users

__all__ = ["NAME_RE", "User", "add_user", "check_name", "list_users", "remove_user", "token_digest",
           "user_for_token"]

#: What a user name may be: it appears in tables, logs and URLs.
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")
_MAX_TOKEN = 512  # longer "tokens" are not ours: no need to hash megabytes sent by a client


@dataclass(frozen=True)
class User:
    name: str
    admin: bool
    created: dt.datetime

    @property
    def scope(self) -> str | None:
        """The owner the layers below are asked about for this user: None for an administrator
        (who reaches every lease, bag, run and account), else the user's own name."""
        return None if self.admin else self.name


def token_digest(token: str) -> str:
    """The SHA-256 hex digest under which a token is stored."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def check_name(name: str) -> str:
    if not NAME_RE.match(name):
        raise UserError(f"{name!r} is not a user name: 1 to 64 letters, digits and . _ @ -, starting with a "
                        "letter or digit", field="NAME")
    return name


def add_user(engine: Engine, name: str, admin: bool = False) -> str:
    """Add a user; its token (returned here only, never stored in clear)."""
    check_name(name)
    token = secrets.token_urlsafe(32)
    row = {"name": name, "admin": admin, "token_sha256": token_digest(token),
           "created": dt.datetime.now(dt.UTC)}
    try:
        with engine.begin() as conn:
            if conn.execute(sa.select(users.c.id).where(users.c.name == name)).first() is not None:
                raise UserError(f"user {name!r} already exists (remove it first to give it a new token)",
                                field="NAME")
            conn.execute(users.insert().values(**row))
    except IntegrityError:  # added at the same moment by another process
        raise UserError(f"user {name!r} already exists", field="NAME") from None
    return token


def user_for_token(engine: Engine, token: str) -> User | None:
    """The user whose token this is, or None."""
    if not token or len(token) > _MAX_TOKEN:
        return None
    digest = token_digest(token)
    with engine.connect() as conn:
        row = conn.execute(sa.select(users.c.name, users.c.admin, users.c.created, users.c.token_sha256)
                           .where(users.c.token_sha256 == digest)).first()
    if row is None or not hmac.compare_digest(row.token_sha256, digest):
        return None
    return User(row.name, bool(row.admin), row.created)


def list_users(engine: Engine) -> list[User]:
    """Every user, by name."""
    with engine.connect() as conn:
        rows = conn.execute(sa.select(users.c.name, users.c.admin, users.c.created).order_by(users.c.name))
        return [User(r.name, bool(r.admin), r.created) for r in rows]


def remove_user(engine: Engine, name: str) -> None:
    """Remove a user (its token stops working; its leases stay, under its name)."""
    with engine.begin() as conn:
        if conn.execute(users.delete().where(users.c.name == name)).rowcount == 0:
            raise UserError(f"no user {name!r}", field="NAME")
