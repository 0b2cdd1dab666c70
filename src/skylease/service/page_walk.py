"""The client's side of the service's list pages (the rules: skylease.service.paging): a page's
limits, and the walk from one page to the next. No FastAPI here: ``skylease leases list`` imports
this module, and the server's libraries would cost it most of its answer time (docs/performance.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TypeVar

from skylease.model.errors import UserError

#: Items a page holds when the request names no ``limit``.
DEFAULT_LIMIT = 100
#: The most items a page may hold (``limit`` beyond it is 422).
MAX_LIMIT = 1000

T = TypeVar("T")


class BadPage(UserError):
    """A limit out of bounds, or a cursor that is not one of this list's (answered 422)."""


def walk(fetch: Callable[[str | None], tuple[list[T], str | None]], every: bool) -> Iterator[T]:
    """The items of a list page by page: ``fetch(cursor)`` answers a page and the next cursor; only
    the first page unless ``every``. A cursor given twice (a server going round in circles) ends
    the walk with a :class:`BadPage`."""
    cursor: str | None = None
    seen: set[str] = set()
    while True:
        page, cursor = fetch(cursor)
        yield from page
        if not every or cursor is None:
            return
        if cursor in seen:
            raise BadPage(f"the server gave the cursor {cursor[:40]!r} twice: the walk stops")
        seen.add(cursor)
