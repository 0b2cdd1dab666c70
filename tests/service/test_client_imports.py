"""The client commands (they only talk HTTP to a server) import what they need and no more: not
numpy, pandas, SQLAlchemy, Dask, the server's libraries (FastAPI, uvicorn), httpx or pydantic; and
rich only to print tables (its import is a third of a command's time). Their answer time is mostly
import time (benchmarks/client_latency.py measures it against curl; docs/performance.md); the module
list is the deterministic half of that check. Each command runs in a fresh interpreter against a
real server process (the in-memory manager)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import httpx

#: Never imported by a client command (top-level packages, and skylease's packages below the client).
HEAVY = ("numpy", "pandas", "sqlalchemy", "dask", "distributed", "fastapi", "starlette", "uvicorn",
         "matplotlib", "scipy", "numba", "highspy", "psycopg", "click", "pygments",
         # the client talks HTTP with the standard library (service/http_transport.py), and typer
         # below 0.29 parses its options without pydantic (pyproject.toml: docs/performance.md)
         "httpx", "httpcore", "h11", "anyio", "pydantic", "pydantic_core")
HEAVY_OURS = ("skylease.experiments", "skylease.sim", "skylease.planning", "skylease.control",
              "skylease.traces", "skylease.service.paging", "skylease.service.bodies",
              "skylease.runtime.leases", "skylease.runtime.qos", "skylease.model.files")

PROBE = """
import sys
from skylease.cli import main
code = main(sys.argv[1:])
print("MODULES", __import__("json").dumps(sorted(sys.modules)), file=sys.stderr)
sys.exit(code)
"""


def _loaded(argv: list[str], env: dict[str, str], stdin: str | None = None,
            heavy_too: tuple[str, ...] = ()) -> tuple[int, str, list[str]]:
    p = subprocess.run([sys.executable, "-c", PROBE, *argv], env=env, input=stdin, capture_output=True,
                       text=True, timeout=60)
    line = next((x for x in p.stderr.splitlines() if x.startswith("MODULES ")), None)
    assert line is not None, p.stderr
    mods = json.loads(line.removeprefix("MODULES "))
    heavy = sorted(m for m in mods if m.split(".")[0] in (*HEAVY, *heavy_too) or m.startswith(HEAVY_OURS))
    return p.returncode, p.stderr, heavy


def test_client_commands_import_nothing_heavy(fake_server, fake_tokens, tmp_path):
    tokens = fake_tokens
    url, _ = fake_server
    alice = {"Authorization": f"Bearer {tokens['alice']}"}
    lease = httpx.post(f"{url}/leases", json={"nodes": 1, "duration": 600}, headers=alice, timeout=10).json()
    env = {k: v for k, v in os.environ.items() if k not in ("SKYLEASE_TOKEN", "SKYLEASE_SERVER")}
    env.update(XDG_CONFIG_HOME=str(tmp_path / "config"), SKYLEASE_SERVER=url, COLUMNS="200")
    code, err, heavy = _loaded(["login"], env, stdin=tokens["alice"] + "\n",  # the token file, as a user has
                               heavy_too=("rich",))  # (no table: not rich either)
    assert code == 0 and heavy == [], err
    for argv in (["leases", "list", "--json"], ["qos", "account", "--json"]):
        code, err, heavy = _loaded(argv, env, heavy_too=("rich",))
        assert code == 0 and heavy == [], (argv, err)
    code, err, heavy = _loaded(["leases", "show", "999999"], env, heavy_too=("rich",))  # an error: one line
    assert code == 2 and heavy == [] and "no lease 999999" in err, err
    for argv in (["leases", "list"], ["leases", "list", "--json"], ["leases", "show", str(lease["id"])],
                 ["leases", "queue", "--all"], ["qos", "account"], ["qos", "bots"]):
        code, err, heavy = _loaded(argv, env)
        assert code == 0, (argv, err)
        assert heavy == [], argv
    for argv in (["leases", "hosts"], ["qos", "deposit", "alice", "5"]):  # (administrators only)
        code, err, heavy = _loaded(argv, {**env, "SKYLEASE_TOKEN": tokens["root"]})
        assert code == 0 and heavy == [], (argv, err)
