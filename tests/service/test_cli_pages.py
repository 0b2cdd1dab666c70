"""The client's list commands page through for the user (docs/decisions/serve-fair-sharing.md):
``skylease leases list|queue`` and ``skylease qos bots`` show the server's first page (``--limit N``:
N of them, and the title says when more are left), or every item with ``--all`` (page after page of
``--limit``, following X-Next-Cursor); a wrong ``--limit`` is one line and exit 2 before any call.
Against a real server process (the in-memory lease manager, SpeQuloS on SQLite)."""

from __future__ import annotations

import json

import httpx
from tests.cli_helpers import one_line, run


def test_list_commands_show_a_page_or_everything(fake_server, fake_tokens, capsys, monkeypatch):
    url, _ = fake_server
    monkeypatch.setenv("SKYLEASE_SERVER", url)
    monkeypatch.setenv("SKYLEASE_TOKEN", fake_tokens["alice"])
    api = {u: httpx.Client(base_url=url, timeout=10, headers={"Authorization": f"Bearer {fake_tokens[u]}"})
           for u in ("alice", "bob")}
    for i in range(9):
        user = "bob" if i in (2, 5) else "alice"
        assert api[user].post("/leases", json={"nodes": 1, "duration": 600}).status_code == 201
        assert api[user].post("/qos/bots", json={"infrastructure": "nd", "n_tasks": 4}).status_code == 201
    mine = [v["id"] for v in api["alice"].get("/leases").json()]
    assert len(mine) == 7

    code, out, _ = run(capsys, "leases", "list", "--limit", "3")
    assert code == 0 and "3 lease(s); more on the server: --all" in out
    code, out, _ = run(capsys, "leases", "list", "--limit", "3", "--json")
    assert [v["id"] for v in json.loads(out)] == mine[:3]
    code, out, _ = run(capsys, "leases", "list", "--limit", "3", "--all", "--json")  # three pages
    assert code == 0 and [v["id"] for v in json.loads(out)] == mine
    code, out, _ = run(capsys, "leases", "list", "--all")
    assert code == 0 and "7 lease(s)" in out and "more on the server" not in out
    code, out, _ = run(capsys, "leases", "queue", "--limit", "2", "--json")
    assert [v["id"] for v in json.loads(out)] == mine[:2]
    code, out, _ = run(capsys, "leases", "queue", "--all", "--limit", "2", "--json")
    assert [v["id"] for v in json.loads(out)] == mine  # (the in-memory manager queues every lease)
    code, out, _ = run(capsys, "leases", "queue", "--limit", "6")
    assert "queue: 6 lease(s); more on the server" in out

    bags = [b["id"] for b in api["alice"].get("/qos/bots", params={"limit": 1000}).json()]
    assert len(bags) == 7
    code, out, _ = run(capsys, "qos", "bots", "--limit", "4")
    assert code == 0 and "4 bag(s) of tasks; more on the server: --all" in out
    code, out, _ = run(capsys, "qos", "bots", "--all", "--limit", "2", "--json")
    assert [b["id"] for b in json.loads(out)] == bags
    code, out, _ = run(capsys, "qos", "bots", "--all", "--token", fake_tokens["bob"], "--json")
    assert len(json.loads(out)) == 2 and {b["owner"] for b in json.loads(out)} == {"bob"}

    for argv in (["leases", "list", "--limit", "0"], ["leases", "queue", "--limit", "1001"],
                 ["qos", "bots", "--limit", "x"]):
        one_line(capsys, argv, "--limit")
    for c in api.values():
        c.close()
