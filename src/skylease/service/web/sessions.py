"""The dashboard's login sessions (issue 21).

A session id is ``secrets.token_urlsafe(32)`` (256 random bits) sent only in the ``skylease_session``
cookie and stored only as its SHA-256 digest (as tokens are: see :mod:`skylease.service.auth`), with
the user and an expiry. The CSRF token of a session's forms is derived from the session id with HMAC,
so it needs no storage and cannot be computed by anyone who cannot read the HttpOnly cookie.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from skylease.service.auth import User, token_digest
from skylease.service.db import users, web_sessions

__all__ = ["SESSION_S", "create_session", "csrf_ok", "csrf_token", "end_session", "user_for_session"]

#: How long a session lasts after login (seconds): a working day.
SESSION_S = 12 * 3600
_MAX_ID = 128  # longer cookies are not ours


def create_session(engine: Engine, user_name: str, now: float | None = None) -> str:
    """A new session of ``user_name``: its id (returned only here, never stored in clear)."""
    now = time.time() if now is None else now
    sid = secrets.token_urlsafe(32)
    with engine.begin() as conn:
        conn.execute(web_sessions.delete().where(web_sessions.c.expires <= int(now)))  # old ones go
        uid = conn.execute(sa.select(users.c.id).where(users.c.name == user_name)).scalar_one()
        conn.execute(web_sessions.insert().values(id_sha256=token_digest(sid), user_id=uid,
                                                  expires=int(now) + SESSION_S))
    return sid


def user_for_session(engine: Engine, sid: str | None, now: float | None = None) -> User | None:
    """The user of a live session, or None (no cookie, unknown, expired, or the user removed)."""
    if not sid or len(sid) > _MAX_ID:
        return None
    now = time.time() if now is None else now
    with engine.connect() as conn:
        row = conn.execute(sa.select(users.c.name, users.c.admin, users.c.created)
                           .select_from(web_sessions.join(users, users.c.id == web_sessions.c.user_id))
                           .where(web_sessions.c.id_sha256 == token_digest(sid),
                                  web_sessions.c.expires > int(now))).first()
    return None if row is None else User(row.name, bool(row.admin), row.created)


def end_session(engine: Engine, sid: str) -> None:
    with engine.begin() as conn:
        conn.execute(web_sessions.delete().where(web_sessions.c.id_sha256 == token_digest(sid)))


def csrf_token(sid: str) -> str:
    """The CSRF token of every form of session ``sid``."""
    return hmac.new(sid.encode(), b"skylease-csrf", hashlib.sha256).hexdigest()


def csrf_ok(sid: str, sent: str | None) -> bool:
    return sent is not None and hmac.compare_digest(csrf_token(sid), sent)
