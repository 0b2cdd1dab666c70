"""Pages of the service's lists (docs/decisions/serve-fair-sharing.md): every list route takes
``limit`` (1 to 1,000; else 422) and the cursor ``after`` (one of another list, or made up: 422); the
body stays a JSON list and the next page's cursor is in X-Next-Cursor and Link; a walk from the
first page to the last shows every item exactly once even while new ones arrive, and never one of
another user; the lease manager's own pages (bisection of per-owner ids, views built from
snapshots) equal its whole list cut in pages; the dashboard's lists page too."""

from __future__ import annotations

import os
import re

import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from skylease.control.leases.lease import ResourceTuple
from skylease.runtime.leases.api import LeaseRequest
from skylease.runtime.leases.manager import LocalLeaseManager
from skylease.runtime.leases.site import Site, SiteNode
from skylease.runtime.qos.service import QoSService
from skylease.runtime.runs.registry import RunRegistry, RunRequest, TaskRow
from skylease.service.leases_api import create_app
from skylease.service.paging import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    BadPage,
    decode,
    encode,
    list_url,
    page_from,
    pattern,
    split,
    walk,
)
from skylease.service.server import load_serve_config, open_database

from .conftest import three_users

BE = LeaseRequest(nodes=1, duration=600)
HTML = {"Accept": "text/html"}


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def service(both_databases, manager):
    """The app over the in-memory manager, with SpeQuloS and the runs on a real database (SQLite,
    then PostgreSQL)."""
    tokens = three_users(both_databases)
    qos, runs = QoSService(both_databases), RunRegistry(both_databases)
    with TestClient(create_app(manager, both_databases, qos, runs), raise_server_exceptions=False) as c:
        yield c, tokens, manager, qos, runs


# -- cursors ------------------------------------------------------------------------------------------
def test_a_cursor_names_its_list_and_its_pattern_is_exactly_what_decodes():
    c = encode("leases", 42)
    assert re.fullmatch(pattern("leases"), c) and decode("leases", c) == (42,)
    assert decode("leases", None) is None
    assert decode("tasks", encode("tasks", 2, 15), 2) == (2, 15)
    assert decode("bots.newest", encode("bots.newest", 2**63 - 1)) == (2**63 - 1,)  # the largest key
    for kind, cursor, n in (("queue", c, 1), ("leases", encode("tasks", 2, 15), 1),  # another list's
                            ("leases", "bm90IGEgY3Vyc29y", 1), ("leases", "%%%", 1), ("leases", "", 1),
                            ("leases", encode("leases", 2**63), 1), ("leases", "leases." + "1" * 120, 1),
                            ("leases", encode("leases", 1, 2), 1), ("tasks", encode("tasks", 1), 2),
                            ("leases", "leases.2A", 1), ("leases", "leases.-1", 1),
                            ("bots.newest", "botsxnewest.1", 1)):
        assert re.fullmatch(pattern(kind, n), cursor) is None, cursor  # (the schema refuses it too)
        with pytest.raises(BadPage, match="is not a cursor of this list"):
            decode(kind, cursor, n)


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(st.data())
def test_every_cursor_the_schema_allows_is_a_place_in_its_list(data):
    """What the OpenAPI document promises (schemathesis checks it): a value of the pattern decodes."""
    kind, n = data.draw(st.sampled_from([("leases", 1), ("tasks", 2), ("bots.newest", 1)]))
    cursor = data.draw(st.from_regex(pattern(kind, n), fullmatch=True))
    keys = decode(kind, cursor, n)
    assert keys is not None and len(keys) == n and all(0 <= k < 2**63 for k in keys)
    assert decode(kind, encode(kind, *keys), n) == keys


def test_a_page_and_its_cursor():
    items = list(range(1, 8))
    page, cursor = split(items[:4], 3, "leases", lambda i: (i,))  # one more fetched: there are more
    assert page == [1, 2, 3] and decode("leases", cursor) == (3,)
    assert split(items[:3], 3, "leases", lambda i: (i,)) == ([1, 2, 3], None)  # the last page
    assert split([], 3, "leases", lambda i: (i,)) == ([], None)
    pages = {None: ([1, 2], "a"), "a": ([3], "b"), "b": ([4], None)}
    assert list(walk(lambda c: pages[c], every=True)) == [1, 2, 3, 4]
    assert list(walk(lambda c: pages[c], every=False)) == [1, 2]
    with pytest.raises(BadPage, match="twice"):  # a server going round in circles: the walk stops
        list(walk(lambda c: ([1], "a"), every=True))


def test_a_dashboard_page_is_checked_as_the_api_checks_it():
    assert page_from({}) == page_from({"limit": str(DEFAULT_LIMIT)})
    assert page_from({"limit": "7", "after": "abc"}).limit == 7
    for params in ({"limit": "0"}, {"limit": str(MAX_LIMIT + 1)}, {"limit": "x"}, {"after": "a b"},
                   {"after": ""}, {"limit": "1" * 30}):
        with pytest.raises(BadPage):
            page_from(params)
    assert list_url("/bots", DEFAULT_LIMIT) == "/bots"
    assert list_url("/leases", 5, after="abc", queue_after=None) == "/leases?limit=5&after=abc"


# -- the JSON routes ----------------------------------------------------------------------------------
LISTS = ["/leases", "/queue", "/qos/bots", "/runs"]


@pytest.mark.parametrize("path", [*LISTS, "/runs/{run}/tasks"])
def test_a_limit_out_of_bounds_or_a_wrong_cursor_is_422(service, path):
    client, tokens, _, _, runs = service
    path = path.format(run=runs.register("root", RunRequest(name="r", n_tasks=3)).id)
    h = auth(tokens["root"])
    for query in ("limit=0", f"limit={MAX_LIMIT + 1}", "limit=x", "limit=-1", "after=", "after=%20x",
                  "after=" + "a" * 200, "after=" + encode("elsewhere", 1), "after=bm90IGEgY3Vyc29y",
                  "after=" + encode("leases" if "leases" not in path else "queue", 1)):
        r = client.get(f"{path}?{query}", headers=h)
        assert r.status_code == 422, (query, r.text)
        assert list(r.json()) == ["detail"] and r.json()["detail"], r.text
    r = client.get(f"{path}?limit={MAX_LIMIT}", headers=h)
    assert r.status_code == 200 and isinstance(r.json(), list)


def next_of(r) -> str | None:
    cursor = r.headers.get("x-next-cursor")
    link = r.headers.get("link")
    assert (cursor is None) == (link is None), r.headers
    if link is not None:
        m = re.fullmatch(r'<(/[^>]*)>; rel="next"', link)
        assert m and f"after={cursor}" in m.group(1), link
    return cursor


def walk_api(client, path: str, token: str, limit: int, between=lambda: None) -> tuple[list[int], int]:
    """Every id of a list route, page by page (``between()`` runs between two pages); how many pages."""
    ids, cursor, pages = [], None, 0
    while True:
        r = client.get(path, params={"limit": limit, **({"after": cursor} if cursor else {})},
                       headers=auth(token))
        assert r.status_code == 200, r.text
        assert isinstance(r.json(), list) and len(r.json()) <= limit
        ids += [x.get("id", x.get("task")) for x in r.json()]
        pages += 1
        cursor = next_of(r)
        if cursor is None:
            return ids, pages
        assert pages < 1000
        between()


def test_the_lease_lists_walk_every_lease_once_while_new_ones_arrive(service):
    client, tokens, manager, _, _ = service
    for i in range(7):
        manager.request("alice" if i % 3 else "bob", BE)
    before = [v.id for v in manager.leases("alice")]
    arrived = []

    def more() -> None:  # new leases of both users between two pages: faster than the walk, a while
        for _ in range(2 if len(arrived) < 6 else 0):
            arrived.append(manager.request("alice", BE).id)
            manager.request("bob", BE)

    ids, pages = walk_api(client, "/leases", tokens["alice"], 2, more)
    mine = [v.id for v in manager.leases("alice")]
    assert ids == sorted(set(ids)) == mine  # each once, in order, none of bob's
    assert set(before) < set(ids) and set(arrived) <= set(ids) and len(arrived) == 6 and pages == 5
    queue, _ = walk_api(client, "/queue", tokens["alice"], 3)
    assert queue == [v.id for v in manager.queue("alice")] == mine
    everyone, _ = walk_api(client, "/leases", tokens["root"], 4)
    assert everyone == [v.id for v in manager.leases(None)]
    # a cursor says where to go on in the caller's own list: bob's cursor shows alice only hers
    r = client.get("/leases", params={"limit": 1}, headers=auth(tokens["bob"]))
    bobs = next_of(r)
    r = client.get("/leases", params={"after": bobs}, headers=auth(tokens["alice"]))
    assert r.status_code == 200 and {v["owner"] for v in r.json()} == {"alice"}
    first_bob = r.json() and min(v.id for v in manager.leases("bob"))
    assert all(v["id"] > first_bob for v in r.json())


def test_a_list_without_a_limit_is_its_first_page_of_the_default_size(service):
    client, tokens, manager, _, _ = service
    for _ in range(DEFAULT_LIMIT + 5):
        manager.request("alice", BE)
    r = client.get("/leases", headers=auth(tokens["alice"]))
    assert [v["id"] for v in r.json()] == [v.id for v in manager.leases("alice")][:DEFAULT_LIMIT]
    rest = client.get("/leases", params={"after": next_of(r)}, headers=auth(tokens["alice"]))
    assert len(rest.json()) == 5 and next_of(rest) is None
    link = r.headers["link"]  # (the next page's URL answers the same)
    assert client.get(link[1:link.index(">")], headers=auth(tokens["alice"])).json() == rest.json()


def test_the_bags_and_runs_walk_every_item_once_and_only_the_callers(service):
    client, tokens, _, qos, runs = service
    for i in range(5):
        qos.register("alice" if i % 2 == 0 else "bob", "nd", 4)
        runs.register("alice" if i % 2 == 0 else "bob", RunRequest(name=f"r{i}", n_tasks=2))

    def more() -> None:
        qos.register("alice", "nd", 4)
        qos.register("bob", "nd", 4)
        runs.register("alice", RunRequest(name="late", n_tasks=2))
        runs.register("bob", RunRequest(name="late", n_tasks=2))

    bags, _ = walk_api(client, "/qos/bots", tokens["alice"], 2, more)
    assert bags == [b["id"] for b in qos.bots("alice")]  # oldest first, each once: the late ones too
    there = [r.id for r in runs.runs("alice")]
    listed, pages = walk_api(client, "/runs", tokens["alice"], 2, more)
    # newest first: the runs there when the walk began, each once (the later ones are newer than
    # the first page: the next walk shows them first), none of bob's
    assert listed == there and pages >= 2 and len(runs.runs("alice")) > len(there)


def test_a_run_task_table_pages_with_a_cursor_or_an_offset(service):
    client, tokens, _, _, runs = service
    rid = runs.register("alice", RunRequest(name="r", n_tasks=50)).id
    statuses = ("done", "failed", "running", "queued")
    runs.report("alice", rid, [TaskRow(task=t, status=statuses[t % 4]) for t in range(50)])
    a = auth(tokens["alice"])
    first = client.get(f"/runs/{rid}/tasks", headers=a)  # (a table's default page: 1,000 rows)
    whole = first.json()
    assert len(whole) == 50 and next_of(first) is None
    tasks, pages = walk_api(client, f"/runs/{rid}/tasks", tokens["alice"], 7)
    assert tasks == [t["task"] for t in whole] and pages == 8  # failed first, then running, done, queued
    cursor = next_of(client.get(f"/runs/{rid}/tasks", params={"limit": 7}, headers=a))
    both = client.get(f"/runs/{rid}/tasks", params={"after": cursor, "offset": 3, "limit": 2}, headers=a)
    assert [t["task"] for t in both.json()] == tasks[10:12]  # after the first 7, 3 skipped
    other = runs.register("alice", RunRequest(name="other", n_tasks=5)).id  # another run's cursor: a place
    assert client.get(f"/runs/{other}/tasks", params={"after": cursor}, headers=a).json() == []  # (none past)
    leases = encode("leases", 3)  # another list's: 422
    assert client.get(f"/runs/{rid}/tasks", params={"after": leases}, headers=a).status_code == 422
    bobs = client.get(f"/runs/{rid}/tasks", params={"after": cursor}, headers=auth(tokens["bob"]))
    assert bobs.status_code == 404


def test_the_openapi_document_tells_the_pages(service):
    client = service[0]
    doc = client.get("/openapi.json").json()
    for path in [*LISTS, "/runs/{run}/tasks"]:
        op = doc["paths"][path]["get"]
        names = {p["name"]: p for p in op["parameters"]}
        assert names["limit"]["schema"]["maximum"] == MAX_LIMIT and names["limit"]["schema"]["minimum"] == 1
        assert names["after"]["schema"]["anyOf"][0]["maxLength"] > 0
        assert {"X-Next-Cursor", "Link"} <= set(op["responses"]["200"]["headers"])


# -- the dashboard's lists ------------------------------------------------------------------------------
def test_the_dashboard_lists_page_too(service):
    client, tokens, manager, qos, runs = service
    for _ in range(5):
        manager.request("alice", BE)
        qos.register("alice", "nd", 4)
        runs.register("alice", RunRequest(name="r", n_tasks=2))
    assert client.post("/login", data={"token": tokens["alice"]}, follow_redirects=False).status_code == 303
    ids = [v.id for v in manager.leases("alice")]
    page = client.get("/leases?limit=2", headers=HTML).text
    shown = [int(i) for i in re.findall(r'<a href="/leases/(\d+)">', page)]
    assert shown == ids[:2]
    nxt = re.search(r'<a href="([^"]+)" rel="next">next page</a>', page)
    assert nxt and "limit=2" in nxt.group(1)
    page2 = client.get(nxt.group(1).replace("&amp;", "&"), headers=HTML).text
    assert [int(i) for i in re.findall(r'<a href="/leases/(\d+)">', page2)] == ids[2:4]
    assert 'rel="first"' in page2
    for path, link in (("/bots", r'<a href="/bots/(\d+)">'), ("/runs", r'<a href="/runs/(\d+)">')):
        page = client.get(f"{path}?limit=2", headers=HTML).text
        assert len(re.findall(link, page)) == 2 and 'rel="next"' in page, path
        assert f'data-live="{path}/live?limit=2"' in page  # the live fragment is the same page
        live = client.get(f"{path}/live?limit=2", headers=HTML)
        assert live.status_code == 200 and len(re.findall(link, live.text)) == 2
        for bad in ("limit=0", "after=xyz", f"limit={MAX_LIMIT + 1}"):
            r = client.get(f"{path}?{bad}", headers=HTML)
            assert r.status_code == 422 and 'class="error"' in r.text, (path, bad)
            assert client.get(f"{path}/live?{bad}", headers=HTML).status_code == 422
    assert client.get("/leases?after=xyz", headers=HTML).status_code == 422
    escaped = client.get('/bots?limit=2&x="><script>', headers=HTML).text
    assert "<script>" not in escaped.split("</header>")[1]  # (the query is never echoed raw)


# -- the real lease manager ----------------------------------------------------------------------------
@pytest.fixture
def real(tmp_path, payload_sandbox):
    site = Site(tuple(SiteNode(f"node{i}", ResourceTuple(1.0, 1024, 0, 2.0**62)) for i in range(2)),
                machine=(min(os.sched_getaffinity(0)),))
    engine = open_database(load_serve_config(None, data_dir=tmp_path))
    m = LocalLeaseManager(engine, site, time_scale=1, data_dir=tmp_path, sandbox=payload_sandbox).start()
    yield m
    m.close(stop_payloads=True)
    engine.dispose()


def test_the_managers_pages_are_its_whole_list_cut_in_pages(real):
    long = LeaseRequest(nodes=1, duration=3600, command="sleep 600")
    for i in range(9):  # two run, the rest wait in the queue
        real.request("alice" if i % 3 else "bob", long)
    for owner in ("alice", "bob", None):
        whole = real.leases(owner)
        assert [v.id for v in whole] == sorted(v.id for v in whole)
        assert real.leases(owner, limit=0) == []
        paged, after = [], None
        while page := real.leases(owner, after, 2):
            paged += page
            after = page[-1].id
        assert [v.model_dump() for v in paged] == [v.model_dump() for v in whole]
        queue = real.queue(owner)
        assert queue and [v.id for v in queue] == sorted(v.id for v in queue)  # (queue order is id order)
        assert [v.id for v in real.queue(owner, queue[0].id, 2)] == [v.id for v in queue[1:3]]
        assert {v.owner for v in whole} == ({owner} if owner else {"alice", "bob"})
    view = real.lease(None, 1)
    assert view.running_on and view.payloads and view.events  # (a running lease's view is whole)
    late = real.request("alice", long).id  # a new lease comes after every cursor given before
    assert real.leases("alice", real.leases("alice")[-2].id)[-1].id == late


def test_a_list_longer_than_a_chunk_is_whole_and_in_order(real):
    """Lists longer than the manager takes under one hold of its lock (SNAPSHOT_CHUNK leases, a scan
    of SCAN_CHUNK of the queue) are taken in chunks: nothing lost, nothing twice, in id order."""
    from skylease.runtime.leases.manager import SCAN_CHUNK, SNAPSHOT_CHUNK

    long = LeaseRequest(nodes=1, duration=3600, command="sleep 600")
    for _ in range(SCAN_CHUNK + 100):  # bob's fill the queue past one scan
        real.request("bob", long)
    mine = [real.request("alice", long).id for _ in range(3)]
    bobs = [v.id for v in real.leases("bob")]
    assert len(bobs) == SCAN_CHUNK + 100 and bobs == sorted(bobs) and len(set(bobs)) == len(bobs)
    assert [v.id for v in real.leases("bob", limit=SNAPSHOT_CHUNK * 2 + 7)] == bobs[:SNAPSHOT_CHUNK * 2 + 7]
    after = bobs[SNAPSHOT_CHUNK - 1]
    assert [v.id for v in real.leases("bob", after, 3)] == bobs[SNAPSHOT_CHUNK:SNAPSHOT_CHUNK + 3]
    assert [v.id for v in real.leases(None)] == bobs + mine
    assert [v.id for v in real.queue("alice")] == mine  # (found behind more than a scan of bob's)
    assert [v.id for v in real.queue("alice", mine[0], 1)] == mine[1:2]
    with real._lock:  # (the scheduler's own queue, read at once)
        whole = [le.id for le in real.sched.queue]
    assert [v.id for v in real.queue(None)] == whole and whole[-3:] == mine and len(whole) > SCAN_CHUNK
