"""The callers' tokens, remembered for a second (service/token_cache.py,
docs/decisions/serve-throughput.md): a token found is believed for the TTL without the database, a
removed user's token stops working once it is over, a token not found is never remembered, and the
cache stays bounded. Through the app: a removed user's token is 401 once the TTL is over."""

from __future__ import annotations

import time

import httpx

from skylease.service.auth import add_user, remove_user
from skylease.service.leases_api import create_app
from skylease.service.token_cache import TokenCache

from .served import serving


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_a_token_found_is_believed_for_the_ttl_then_asked_again(engine):
    token, clock = add_user(engine, "alice"), Clock()
    cache = TokenCache(engine, ttl_s=1.0, clock=clock)
    assert cache.cached(token) is None  # never looked up
    user = cache.lookup(token)
    assert user is not None and user.name == "alice" and not user.admin
    assert cache.cached(token) == user
    remove_user(engine, "alice")
    clock.t += 0.99
    assert cache.cached(token) == user  # within the TTL: the removal is not seen yet
    clock.t += 0.01
    assert cache.cached(token) is None  # the TTL is over: the database is asked again
    assert cache.lookup(token) is None and cache.cached(token) is None


def test_a_token_not_found_is_not_remembered(engine):
    clock = Clock()
    cache = TokenCache(engine, clock=clock)
    assert cache.lookup("not-a-token") is None
    token = add_user(engine, "bob")
    assert cache.cached(token) is None and cache.lookup(token) is not None  # known at once once added
    for bad in ("", "x" * 10_000, "\udcff"):
        assert cache.cached(bad) is None and cache.lookup(bad) is None


def test_the_cache_is_bounded(engine):
    tokens = [add_user(engine, f"u{i}") for i in range(5)]
    cache = TokenCache(engine, max_tokens=3, clock=Clock())
    for t in tokens:
        assert cache.lookup(t) is not None
    assert len(cache._known) <= 3
    assert cache.cached(tokens[-1]) is not None  # the last one looked up is kept


def test_a_removed_users_token_is_refused_once_the_ttl_is_over(manager, engine, tokens):
    """A real uvicorn server on the app with a 0.3 s TTL: alice's token works, she is removed, and
    within 0.3 s + a margin every call is 401."""
    app = create_app(manager, engine, tokens=TokenCache(engine, ttl_s=0.3))
    with serving(app) as (url, _), httpx.Client(base_url=url, timeout=10) as http:
        auth = {"Authorization": f"Bearer {tokens['alice']}"}
        assert http.get("/me", headers=auth).json() == {"name": "alice", "admin": False}
        assert http.get("/leases", headers=auth).status_code == 200
        remove_user(engine, "alice")
        removed = time.monotonic()
        while http.get("/me", headers=auth).status_code == 200:
            assert time.monotonic() - removed < 0.3 + 0.5, "the removed user's token still works"
            time.sleep(0.02)
        assert http.get("/leases", headers=auth).status_code == 401
        assert http.get("/me", headers={"Authorization": f"Bearer {tokens['bob']}"}).status_code == 200
