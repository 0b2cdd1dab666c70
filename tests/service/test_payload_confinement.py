"""A lease's payload reaches its own lease folder and nothing of the server (issue 33).

A real ``skylease serve`` (a process of its own, SQLite in its data folder) runs an ordinary user's
lease whose payload is an attacker: it tries to make its user an administrator through the
database (the relative path ``../../skylease.sqlite`` that worked before payloads were confined, and
the absolute one), to read the database, its WAL and the data folder, another user's lease folder
(by path, and through any process's ``/proc/PID/cwd``), the server's environment (a canary
``SKYLEASE_DB_PASSWORD`` in it) and its ``/proc`` entries, to write into the data folder and to
stop the server. Every attempt must fail, the user must still not be an administrator, and the
payload's own work must still run: its result file lands in its lease folder and its exit code
(3) is reported by the API.

Twice: with the server as root (payloads run as the payload user, in a sandbox), and as an
unprivileged user (payloads in a user namespace). The unprivileged server runs through a harness
(a root-made mount namespace in which the Python installation under a private folder such as
/root is reachable) and then as UID 61234 with no capabilities: a real non-root server.
"""

from __future__ import annotations

import base64
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from tests.waits import until

import skylease
from skylease.cli import main
from skylease.service.auth import add_user
from skylease.service.db import create_schema, engine_for
from skylease.service.demo import _START

pytestmark = [pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only"),
              pytest.mark.timeout(180)]

#: The unprivileged server's user (no passwd entry is needed).
SERVER_UID = 61234

# The attacker: every attempt is recorded as "denied <error>" or "DONE <what it got>"; an attempt
# that finds nothing to act on raises LookupError (denied). Then the payload's own work.
ATTACK = r"""
import glob, json, os, signal, sqlite3, sys
data, server_pid, other_lease, canary = sys.argv[1:5]
res = {}

def attempt(name, fn):
    try:
        res[name] = "DONE " + repr(fn())[:120]
    except Exception as exc:
        res[name] = "denied " + type(exc).__name__

def need(found):
    if not found:
        raise LookupError("nothing")
    return found

def escalate(path):
    con = sqlite3.connect(f"file:{path}?mode=rw", uri=True)  # (mode=rw: never create one)
    con.execute("UPDATE users SET admin = 1 WHERE name = 'alice'")
    con.commit()
    return need(con.total_changes)

def proc_files(name):
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/{name}", "rb") as fh:
                    out.append(fh.read())
            except OSError:
                pass
    return out

attempt("escalate through ../../skylease.sqlite", lambda: escalate("../../skylease.sqlite"))
attempt("escalate through the absolute path", lambda: escalate(data + "/skylease.sqlite"))
attempt("read the database", lambda: open(data + "/skylease.sqlite", "rb").read(16))
attempt("read the WAL", lambda: open(data + "/skylease.sqlite-wal", "rb").read(16))
attempt("list the data folder", lambda: os.listdir(data))
attempt("read a payload log", lambda: need(glob.glob(data + "/payloads/*.log")))
attempt("read another lease's folder", lambda: open(f"{data}/leases/{other_lease}/secret.txt").read())
attempt("read another lease's folder from ours", lambda: open(f"../leases/{other_lease}/secret.txt").read())
attempt("read another lease's folder through /proc/*/cwd",
        lambda: need([f for f in glob.glob("/proc/[0-9]*/cwd/secret.txt")]))
attempt("find the canary in our environment", lambda: need([v for v in os.environ.values() if canary in v]))
attempt("read the server's environment", lambda: open(f"/proc/{server_pid}/environ", "rb").read())
attempt("find the canary in any environment in /proc",
        lambda: need([e for e in proc_files("environ") if canary.encode() in e]))
attempt("write into the data folder", lambda: open(data + "/pwned", "w").write("x"))
attempt("stop the server", lambda: os.kill(int(server_pid), signal.SIGSTOP))
with open("result.txt", "w") as fh:  # the payload's own work: its lease folder is its own
    fh.write("alice's work")
print("ATTACK " + json.dumps(res), flush=True)
sys.exit(3)
"""


@dataclass
class Served:
    url: str
    data: Path
    proc: subprocess.Popen
    pid: int  # the server's own (under the harness when it runs unprivileged)
    tokens: dict[str, str]
    canary: str

    def call(self, method: str, path: str, user: str, **kw) -> httpx.Response:
        auth = {"Authorization": f"Bearer {self.tokens[user]}"}
        return httpx.request(method, self.url + path, headers=auth, timeout=30, **kw)


def server_pid(pid: int) -> int:
    """The server's process at or under ``pid`` (the unprivileged harness is bwrap, whose child
    execs setpriv, which execs the server)."""
    while b"serve" not in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:6]:
        pid = int(Path(f"/proc/{pid}/task/{pid}/children").read_text().split()[0])
    return pid


def schema_of_the_server():
    from skylease.runtime.leases.journal import metadata
    from skylease.runtime.qos.service import METADATA as QOS_METADATA
    from skylease.runtime.runs.registry import METADATA as RUNS_METADATA

    return metadata, *QOS_METADATA, RUNS_METADATA


def unprivileged(argv: list[str], uid: int, home: Path) -> list[str]:
    """``argv`` as ``uid`` with no capabilities and no groups, in a mount namespace where the Python
    installation and skylease are reachable even when they lie under a private folder (/root)."""
    needed = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, os.path.dirname(
        os.path.realpath(sys.executable)), Path(skylease.__file__).parent)}
    covers: set[str] = set()
    for path in needed:
        parts = Path(path).parts
        for i in range(2, len(parts) + 1):
            above = str(Path(*parts[:i]))
            if not os.stat(above).st_mode & 0o001:  # not searchable by others
                covers.add(above)
                break
    out = [shutil.which("bwrap") or "bwrap", "--dev-bind", "/", "/", "--die-with-parent"]
    for cover in sorted(covers):
        out += ["--perms", "0755", "--tmpfs", cover]
    made = set(covers)
    for path in sorted(needed):
        cover = next((c for c in covers if path.startswith(c + "/")), None)
        if cover is None:
            continue
        for i in range(len(Path(cover).parts) + 1, len(Path(path).parts)):
            above = str(Path(*Path(path).parts[:i]))
            if above not in made:  # (bwrap would copy a private folder's mode onto it)
                out += ["--perms", "0755", "--dir", above]
                made.add(above)
        out += ["--ro-bind", path, path]
    out += ["--setenv", "HOME", str(home), "--setenv", "TMPDIR", str(home), "--",
            shutil.which("setpriv") or "setpriv", "--reuid", str(uid), "--regid", str(uid), "--clear-groups",
            "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]
    return out + argv


@pytest.fixture(params=["root", "unprivileged"])
def served(request, payload_sandbox) -> Iterator[Served]:
    """A real server, run as root or as an unprivileged user, with alice, bob and root (admin)."""
    as_root = request.param == "root"
    if os.geteuid() != 0 and as_root:
        pytest.skip("the tests do not run as root: the root server cannot be tried")
    folder = Path(tempfile.mkdtemp(prefix="skylease-confine-"))  # (not under pytest's private /tmp folder)
    try:
        data, site = folder / "data", folder / "site.toml"
        site.write_text("[[nodes]]\ncount = 2\ncpu = 1\nmemory = 1024\n")
        engine = engine_for(None, data)
        create_schema(engine, *schema_of_the_server())
        tokens = {name: add_user(engine, name, admin) for name, admin in (("alice", False), ("bob", False),
                                                                          ("root", True))}
        engine.dispose()
        os.chmod(folder, 0o755)
        argv = [sys.executable, "-m", "skylease", "serve", "--port", "0", "--data-dir", str(data), "--site",
                str(site), "--time-scale", "10", "--grace", "1"]
        env = {**os.environ, "SKYLEASE_DB_PASSWORD": f"canary-{secrets.token_hex(8)}"}
        if not as_root and os.geteuid() == 0:
            subprocess.run(["chown", "-R", f"{SERVER_UID}:{SERVER_UID}", str(folder)], check=True)
            argv = unprivileged(argv, SERVER_UID, folder)
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
        line = proc.stdout.readline().strip()
        m = _START.match(line)
        if m is None:
            proc.kill()
            pytest.fail(f"the server did not start: {line} {proc.communicate()[1][-2000:]}")
        yield Served(m.group(1), data, proc, server_pid(proc.pid), tokens, env["SKYLEASE_DB_PASSWORD"])
    finally:
        if "proc" in locals() and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
        kill_payloads_under(folder)
        shutil.rmtree(folder, ignore_errors=True)


def kill_payloads_under(folder: Path) -> None:
    """Payloads outlive their server by design: end those of this test (their sandbox names the folder)."""
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if str(folder).encode() in Path(f"/proc/{name}/cmdline").read_bytes():
                    os.killpg(int(name), signal.SIGKILL)
            except (OSError, ProcessLookupError):
                pass


def ended_payloads(srv: Served, user: str, lease: int) -> list[dict]:
    view = srv.call("GET", f"/leases/{lease}", user).json()
    return view["ended_payloads"]


def test_a_payload_reaches_nothing_of_the_server_and_its_own_work_runs(served, capsys, monkeypatch):
    srv = served
    bob_secret = f"bob-{secrets.token_hex(8)}"
    bob = srv.call("POST", "/leases", "bob", json={
        "type": "immediate", "nodes": 1, "duration": 3600,
        "command": f"printf %s {bob_secret} > \"$SKYLEASE_LEASE_DIR/secret.txt\"; sleep 600"})
    assert bob.status_code == 201, bob.text
    bob_id = bob.json()["id"]
    bob_file = srv.data / "leases" / str(bob_id) / "secret.txt"
    assert until(lambda: bob_file.exists() and bob_file.read_text() == bob_secret, 30, 0.1)

    interpreter = os.path.realpath(sys.executable)  # (bound read-only in every sandbox)
    packed = base64.b64encode(zlib.compress(ATTACK.encode(), 9)).decode()  # (a command: at most 4,096 bytes)
    code = f"import base64, zlib; exec(zlib.decompress(base64.b64decode('{packed}')))"
    command = f"{interpreter} -I -S -c {shlex.quote(code)} {srv.data} {srv.pid} {bob_id} {srv.canary}"
    alice = srv.call("POST", "/leases", "alice", json={"type": "immediate", "nodes": 1, "duration": 3600,
                                                       "command": command})
    assert alice.status_code == 201, alice.text
    lid = alice.json()["id"]

    ended = until(lambda: ended_payloads(srv, "alice", lid), 60, 0.2)
    assert ended and ended[0]["exit_code"] == 3 and ended[0]["state"] == "exited", ended
    # its lease says that its payload failed, in the API and in `leases show` (issue 36, item 4)
    assert srv.call("GET", f"/leases/{lid}", "alice").json()["failed_payloads"] == 1
    monkeypatch.setenv("COLUMNS", "200")  # (rich's tables: no column cut short)
    capsys.readouterr()
    assert main(["leases", "show", str(lid), "--server", srv.url, "--token", srv.tokens["alice"]]) == 0
    out = capsys.readouterr().out
    assert re.search(r"failed payloads\s*│\s*1\b", out), out
    ended_table = out.split("payloads that ended")[1]
    assert re.search(r"exit_code[\s\S]*│ exited +│ 3 +│ exited by itself", ended_table), out
    log = (srv.data / "payloads" / f"{lid}-0.log").read_text()
    (line,) = [x for x in log.splitlines() if x.startswith("ATTACK ")]
    results = json.loads(line.removeprefix("ATTACK "))
    assert len(results) == 14
    assert {name: r for name, r in results.items() if not r.startswith("denied")} == {}, log
    assert srv.canary not in log

    # what the attempts would have changed, seen from outside
    assert (srv.data / "leases" / str(lid) / "result.txt").read_text() == "alice's work"
    assert not (srv.data / "pwned").exists() and bob_file.read_text() == bob_secret
    assert srv.call("GET", "/hosts", "alice").status_code == 403  # still not an administrator
    with sqlite3.connect(f"file:{srv.data / 'skylease.sqlite'}?mode=ro", uri=True) as con:
        assert con.execute("SELECT admin FROM users WHERE name = 'alice'").fetchone() == (0,)
    assert srv.call("GET", "/health", "alice").status_code == 200  # the server was never stopped
    assert srv.call("DELETE", f"/leases/{bob_id}", "bob").status_code == 200


def test_the_data_folder_and_its_files_are_private(served):
    srv = served
    made = srv.call("POST", "/leases", "alice", json={"type": "immediate", "nodes": 1, "duration": 60,
                                                       "command": "echo hello; exit 0"})
    assert made.status_code == 201
    assert until(lambda: ended_payloads(srv, "alice", made.json()["id"]), 30, 0.2)
    seen = []
    for top, dirs, files in os.walk(srv.data):
        for name in dirs:
            path = Path(top) / name
            seen.append(path)
            assert path.stat().st_mode & 0o777 == 0o700, path
        for name in files:
            path = Path(top) / name
            if path.parent.parent == srv.data / "leases":
                continue  # what the payload wrote in its own folder is the payload's business
            seen.append(path)
            assert path.stat().st_mode & 0o777 == 0o600, path
    assert srv.data.stat().st_mode & 0o777 == 0o700
    names = {p.name for p in seen}
    log = f"{made.json()['id']}-0.log"
    assert {"skylease.sqlite", "skylease.sqlite-wal", "payloads", "leases", log} <= names


@pytest.mark.parametrize(("value", "said"), [
    ("root", "'root' is root (uid or gid 0): payloads must run as an unprivileged user"),
    ("0", "'0' is root (uid or gid 0)"),
    ("no-such-user-here", "no user 'no-such-user-here' on this machine"),
    ("bad name!", "payload_user"),
])
def test_a_payload_user_that_cannot_be_is_one_line_and_nothing_starts(tmp_path, capsys, value, said):
    from skylease.cli import main

    if os.geteuid() != 0 and value != "bad name!":
        said = "payloads can run as"  # (only a root server runs payloads as another user)
    config = tmp_path / "serve.toml"
    config.write_text(f'payload_user = "{value}"\nport = 0\n')
    code = main(["serve", "--config", str(config), "--data-dir", str(tmp_path / "data")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert "payload_user" in err and said in err, err
    assert not (tmp_path / "data").exists()  # refused before anything is made


def test_without_bubblewrap_the_server_says_how_to_get_it_and_does_not_start(tmp_path, capsys, monkeypatch):
    from skylease.cli import main

    bare = tmp_path / "bin"  # a PATH with setpriv and useradd but no bwrap
    bare.mkdir()
    for tool in ("setpriv", "useradd"):
        if shutil.which(tool):
            (bare / tool).symlink_to(shutil.which(tool))
    monkeypatch.setenv("PATH", str(bare))
    code = main(["serve", "--port", "0", "--data-dir", str(tmp_path / "data")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "bwrap (bubblewrap) is not installed" in err and "apt-get install bubblewrap" in err, err
    assert not (tmp_path / "data").exists()
