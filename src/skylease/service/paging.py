"""Pages of the service's lists (docs/decisions/serve-fair-sharing.md).

Every list route (``GET /leases``, ``/queue``, ``/qos/bots``, ``/runs``, ``/runs/{id}/tasks``) and
every list of the dashboard answers one page: at most ``limit`` items (default
:data:`DEFAULT_LIMIT`, at most :data:`MAX_LIMIT`), after the cursor ``after`` (none: the first page).
The body stays a JSON list, as before pages existed, so a client of before reads the first page; the
next page's cursor is in the ``X-Next-Cursor`` header and in ``Link: <URL>; rel="next"`` (the same
request with ``after`` set), both absent on the last page.

A cursor is opaque to clients (a client gives back what it was given; the form may change): the
list's name and the sort key of the page's last item in hexadecimal (``leases.2a``: the lease 42 and
those before it were shown). Each route's OpenAPI document gives the pattern of its cursors, so the
schema tells the truth: every value it allows is a place in that list, and one of another list's
(or anything else) is 422. A list is sorted on a key that only grows for new items (an id, or a
task's rank and number), so a walk from the first page to the last shows every item that was there
when it began exactly once, and the new ones that arrive behind it. The cursor only says where to
go on in the caller's own list: every page is filtered on the caller, so another user's cursor shows
nothing of theirs.
"""

# No `from __future__ import annotations`: FastAPI reads page_query's parameters at run time.
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar
from urllib.parse import urlencode

from fastapi import HTTPException, Query, Request, Response

from skylease.service.page_walk import DEFAULT_LIMIT, MAX_LIMIT, BadPage, walk  # (the client's side)

__all__ = ["CURSOR", "DEFAULT_LIMIT", "MAX_CURSOR", "MAX_LIMIT", "PAGED", "BadPage", "PageQuery", "decode",
           "encode", "keys_of", "list_url", "next_link", "page_from", "page_query", "paged", "pattern",
           "split", "walk"]

#: The longest cursor accepted, and its alphabet (a list's name, dots, hexadecimal keys).
MAX_CURSOR = 120
CURSOR = r"^[a-z0-9.]+$"
#: A key of a cursor: hexadecimal, at most 2**63 - 1 (ids are at most 2**53 in the API; 2**63 bounds
#: the database).
_KEY = r"(?:[0-7][0-9a-f]{15}|[0-9a-f]{1,15})"

T = TypeVar("T")


def pattern(kind: str, n: int = 1) -> str:
    """The pattern of the cursors of the list ``kind`` whose sort key is ``n`` numbers."""
    return "^" + re.escape(kind) + "".join(rf"\.{_KEY}" for _ in range(n)) + "$"


def encode(kind: str, *keys: int) -> str:
    """The cursor after the item whose sort key is ``keys`` in the list ``kind``."""
    return ".".join((kind, *(format(int(k), "x") for k in keys)))


def decode(kind: str, cursor: str | None, n: int = 1) -> tuple[int, ...] | None:
    """The ``n`` keys of a cursor of the list ``kind`` (None: no cursor, the first page); a cursor of
    another list, or none at all, is :class:`BadPage` naming ``after``."""
    if cursor is None:
        return None
    if len(cursor) > MAX_CURSOR or re.fullmatch(pattern(kind, n)[1:-1], cursor) is None:
        raise BadPage(f"{cursor[:40]!r} is not a cursor of this list: give the X-Next-Cursor of the "
                      "page before, or no cursor for the first page", field="after")
    return tuple(int(k, 16) for k in cursor[len(kind) + 1:].split("."))


@dataclass(frozen=True)
class PageQuery:
    """A list request's page: at most ``limit`` items after the cursor ``after``."""

    limit: int
    after: str | None


def page_query(kind: str, n: int = 1, default: int = DEFAULT_LIMIT) -> Callable[..., PageQuery]:
    """A FastAPI dependency for the list ``kind``'s ``limit`` (1 to :data:`MAX_LIMIT`, ``default``
    when absent) and ``after`` query parameters (a cursor of that list: its pattern is in the
    OpenAPI document; anything else is 422)."""

    def dependency(
        limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description=f"At most this many items (default "
                                    f"{default}, at most {MAX_LIMIT}).")] = default,
        after: Annotated[str | None, Query(min_length=1, max_length=MAX_CURSOR, pattern=pattern(kind, n),
                                           description="The next page's cursor: the X-Next-Cursor header "
                                                       "of the page before (none: the first page).")] = None,
    ) -> PageQuery:
        return PageQuery(limit, after)

    return dependency


def page_from(params: Mapping[str, str], after_key: str = "after", default: int = DEFAULT_LIMIT) -> PageQuery:
    """The page a dashboard list's query string names: ``limit`` and the cursor ``after_key``,
    checked as the API checks them (else :class:`BadPage` naming the parameter)."""
    text = params.get("limit")
    limit = default
    if text is not None:
        if not (text.isdigit() and len(text) <= 7 and 1 <= int(text) <= MAX_LIMIT):
            raise BadPage(f"must be a whole number from 1 to {MAX_LIMIT:,}, got {text[:20]!r}", field="limit")
        limit = int(text)
    after = params.get(after_key)
    if after is not None and not (0 < len(after) <= MAX_CURSOR and re.match(CURSOR, after)):
        raise BadPage(f"{after[:40]!r} is not a cursor", field=after_key)
    return PageQuery(limit, after)


def list_url(path: str, limit: int, default: int = DEFAULT_LIMIT, **cursors: str | None) -> str:
    """A dashboard list's URL: ``path`` with ``limit`` (unless ``default``) and the cursors given."""
    params = {k: v for k, v in cursors.items() if v is not None}
    if limit != default:
        params = {"limit": str(limit), **params}
    return f"{path}?{urlencode(params)}" if params else path


def keys_of(kind: str, query: PageQuery, n: int = 1) -> tuple[int, ...] | None:
    """The cursor's keys, or 422 with the reason (for the JSON routes)."""
    try:
        return decode(kind, query.after, n)
    except BadPage as exc:
        raise HTTPException(422, f"after: {exc.message}") from None


def split(items: Sequence[T], limit: int, kind: str, key: Callable[[T], tuple[int, ...]]
          ) -> tuple[list[T], str | None]:
    """A page of ``items`` (fetched with one more than ``limit``: whether more follow) and the next
    page's cursor (None: the last page)."""
    page = list(items[:limit])
    cursor = encode(kind, *key(page[-1])) if len(items) > limit and page else None
    return page, cursor


def next_link(request: Request, cursor: str, limit: int) -> str:
    """The next page's URL: this request's path and query, ``after`` and ``limit`` set (relative to
    the request's URL, as RFC 8288 allows)."""
    url = request.url.include_query_params(after=cursor, limit=limit)
    return f"{url.path}?{url.query}"


def paged(request: Request, response: Response, items: Sequence[T], limit: int, kind: str,
          key: Callable[[T], tuple[int, ...]]) -> list[T]:
    """The page of ``items`` (one more than ``limit`` fetched) a list route answers; the next page's
    cursor goes in ``response``'s headers."""
    page, cursor = split(items, limit, kind, key)
    if cursor is not None:
        response.headers["X-Next-Cursor"] = cursor
        response.headers["Link"] = f'<{next_link(request, cursor, limit)}>; rel="next"'
    return page


#: The OpenAPI answer of a list route: its headers.
PAGED: dict[int | str, dict[str, Any]] = {200: {
    "description": "One page of the list (a JSON array).",
    "headers": {
        "X-Next-Cursor": {"description": "The next page's cursor (give it as `after`); absent on the last "
                                         "page.", "schema": {"type": "string"}},
        "Link": {"description": 'The next page: `<URL>; rel="next"`; absent on the last page.',
                 "schema": {"type": "string"}}}}}

