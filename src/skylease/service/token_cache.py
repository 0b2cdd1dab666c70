"""Who a bearer token belongs to, remembered for a second (docs/decisions/serve-throughput.md).

Every API call names its caller by a token; looking its digest up in the database was 6 % of the
server's CPU under load and, as a plain function, a hop to a worker thread on every call. A token
found is remembered here for at most :data:`TOKEN_TTL_S` seconds: a call within that time of the
last lookup is answered on the event loop, without the database. So a removed user's token (``skylease
serve user remove``, from another process) keeps working for at most that long after the removal;
a token not found is never remembered (a user added a moment ago is known at once). At most
:data:`MAX_TOKENS` tokens are kept; when full, the cache is emptied (lookups refill it).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from sqlalchemy.engine import Engine

from skylease.service.auth import User, token_digest, user_for_token

__all__ = ["MAX_TOKENS", "TOKEN_TTL_S", "TokenCache"]

#: How long a token found is believed without asking the database again (seconds).
TOKEN_TTL_S = 1.0
#: How many tokens the cache keeps at most.
MAX_TOKENS = 10_000


class TokenCache:
    """Tokens of ``engine``'s users, each believed for ``ttl_s`` seconds of ``clock`` after its
    lookup (``clock``: a monotonic clock in seconds; a seam for tests)."""

    def __init__(self, engine: Engine, ttl_s: float = TOKEN_TTL_S, max_tokens: int = MAX_TOKENS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.engine, self.ttl_s, self.max_tokens, self.clock = engine, ttl_s, max_tokens, clock
        # digest -> (user, when it was looked up); keyed by the digest, so no token is kept in clear
        self._known: dict[str, tuple[User, float]] = {}

    def cached(self, token: str) -> User | None:
        """The token's user if it was looked up less than ``ttl_s`` ago, else None (then ask
        :meth:`lookup`, which may block on the database: not on an event loop)."""
        if not token or len(token) > 512:
            return None
        hit = self._known.get(token_digest(token))
        if hit is None or self.clock() - hit[1] >= self.ttl_s:
            return None
        return hit[0]

    def lookup(self, token: str) -> User | None:
        """The token's user from the database (None: no such token), remembered if found."""
        when = self.clock()  # (before the query: a removal committed after it is seen within ttl_s)
        user = user_for_token(self.engine, token)
        if user is not None:
            if len(self._known) >= self.max_tokens:
                self._known.clear()
            self._known[token_digest(token)] = (user, when)
        return user
