"""How long the client commands take to answer against a local `skylease serve`, beside curl making
the same HTTP call (the peer: no interpreter, no imports).

Starts a real ``skylease serve`` on a free loopback port with its data in a temporary folder, adds a
user (alice) and an administrator (root), logs alice in with ``skylease login`` (a token file in a
temporary XDG_CONFIG_HOME, as a user's would be), puts a few leases and credits on the server, then
runs each client command ``--runs`` times as a whole process (the ``skylease`` console script of
this interpreter), each run paired with curl's call of the same route with the same token, in
rounds (every command once a round, so a machine that slows down for a while slows them alike). Prints
the median wall time per command, curl's, their ratio and the median CPU time of our process (less
sensitive than wall time to a busy machine); exits 1 if a median passes ``--bound`` (0.25 s).

    python benchmarks/client_latency.py [--runs 10] [--bound 0.25] [--json]

Needs curl and a machine where `skylease serve` starts (its payloads confined: bubblewrap).
Figures: docs/performance.md, "Client commands".
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

START_RE = re.compile(r"^skylease serve: (https?://\S+) \(OpenAPI at /docs\)")
#: (label, skylease's arguments, the HTTP route curl asks for, whose token: alice's or root's)
COMMANDS = [
    ("leases list", ["leases", "list"], "/leases", "alice"),
    ("leases show 1", ["leases", "show", "1"], "/leases/1", "alice"),
    ("leases queue", ["leases", "queue"], "/queue", "alice"),
    ("leases hosts (admin)", ["leases", "hosts"], "/hosts", "root"),
    ("qos account", ["qos", "account"], "/qos/account", "alice"),
    ("qos bots", ["qos", "bots"], "/qos/bots", "alice"),
    ("leases list --json", ["leases", "list", "--json"], "/leases", "alice"),
]


def _skylease() -> list[str]:
    """The console script installed beside this interpreter (as a user runs it), else ``-m``."""
    script = Path(sys.executable).with_name("skylease")
    return [str(script)] if script.exists() else [sys.executable, "-m", "skylease"]


def _timed(argv: list[str], env: dict[str, str], stdin: str | None = None) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds (user + system) and exit status of one process."""
    t = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)
    if stdin is not None:
        proc.stdin.write(stdin)
        proc.stdin.close()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_utime + usage.ru_stime, proc.returncode


def _start_server(data: Path, env: dict[str, str]) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([*_skylease(), "serve", "--port", "0", "--data-dir", str(data)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline().strip()
    m = START_RE.match(line)
    if m is None:
        proc.kill()
        raise SystemExit(f"client_latency: the server did not start: {line!r} {proc.stderr.read()[-1500:]}")
    url = m.group(1)
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as r:
                if json.load(r).get("ok"):
                    return proc, url
        except OSError:
            pass
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            raise SystemExit("client_latency: the server did not answer /health")
        time.sleep(0.05)


def _call(url: str, token: str, method: str, path: str, body: dict | None = None) -> None:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url + path, method=method, data=data, headers={
        "Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        r.read()


def measure(runs: int, bound: float) -> dict:
    curl = shutil.which("curl")
    if curl is None:
        raise SystemExit("client_latency: curl is not installed (the peer)")
    with tempfile.TemporaryDirectory(prefix="skylease-client-latency-") as tmp:
        root = Path(tmp)
        # as an installed skylease runs: with its bytecode cached (the first, untimed, run writes it)
        env = {k: v for k, v in os.environ.items()
               if k not in ("SKYLEASE_TOKEN", "SKYLEASE_SERVER", "PYTHONDONTWRITEBYTECODE")}
        env.update(XDG_CONFIG_HOME=str(root / "config"), COLUMNS="120")
        data = root / "serve"
        tokens = {}
        for user, flags in (("alice", []), ("root", ["--admin"])):
            p = subprocess.run([*_skylease(), "serve", "user", "add", user, "--data-dir", str(data), *flags],
                               env=env, capture_output=True, text=True, check=True)
            tokens[user] = p.stdout.strip()
        server, url = _start_server(data, env)
        try:
            env["SKYLEASE_SERVER"] = url
            subprocess.run([*_skylease(), "login"], env=env, input=tokens["alice"] + "\n", check=True,
                           capture_output=True, text=True)
            for start_in in (3600, 7200, 10800):  # advance reservations: on the server, no payload yet
                _call(url, tokens["alice"], "POST", "/leases",
                      {"type": "advance-reservation", "nodes": 1, "duration": 600, "start_in": start_in})
            _call(url, tokens["root"], "POST", "/qos/accounts/alice/deposits", {"credits": 100})
            rows = []
            cases = [*COMMANDS, ("login (token on stdin)", ["login"], "/me", "alice")]
            plans = []
            for label, args, route, who in cases:
                ours_env = env if who == "alice" else {**env, "SKYLEASE_TOKEN": tokens[who]}
                stdin = tokens["alice"] + "\n" if args == ["login"] else None
                peer = [curl, "-sf", "-o", "/dev/null", "-H", f"Authorization: Bearer {tokens[who]}",
                        url + route]
                _timed([*_skylease(), *args], ours_env, stdin)  # the first run writes bytecode caches
                plans.append((label, args, route, ours_env, stdin, peer, ([], [], [])))
            # round by round, every command once a round: a machine that slows down for a while
            # slows every command alike, not the one measured then
            bare: list[float] = []
            for _ in range(runs):
                bare.append(_timed([sys.executable, "-c", "pass"], env)[0])
                for _label, args, route, ours_env, stdin, peer, (walls, cpus, peers) in plans:
                    w, c, code = _timed([*_skylease(), *args], ours_env, stdin)
                    if code != 0:
                        raise SystemExit(f"client_latency: `skylease {' '.join(args)}` exited {code}")
                    pw, _, pcode = _timed(peer, env)
                    if pcode != 0:
                        raise SystemExit(f"client_latency: curl {route} exited {pcode}")
                    walls.append(w)
                    cpus.append(c)
                    peers.append(pw)
            for label, args, _route, _env, _stdin, _peer, (walls, cpus, peers) in plans:
                ours, theirs = statistics.median(walls), statistics.median(peers)
                rows.append({"command": f"skylease {' '.join(args)}", "label": label, "median_s": ours,
                             "cpu_s": statistics.median(cpus), "curl_s": theirs, "ratio": ours / theirs,
                             "over": ours > bound})
        finally:
            server.send_signal(signal.SIGTERM)
            try:
                server.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.communicate()
    return {"runs": runs, "bound_s": bound, "load": os.getloadavg()[0], "python_s": statistics.median(bare),
            "rows": rows}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10, help="runs per command (default 10)")
    ap.add_argument("--bound", type=float, default=0.25, help="the most a median may take, s (default 0.25)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args(argv)
    if not 1 <= args.runs <= 1000:
        ap.error("--runs: 1 to 1000")
    res = measure(args.runs, args.bound)
    if args.json:
        print(json.dumps(res))
    else:
        print(f"{res['runs']} runs per command, load {res['load']:.1f}, bound {res['bound_s']:g} s "
              f"(median wall time); the interpreter alone (python -c pass): {res['python_s']:.3f} s")
        print(f"{'command':<34} {'median s':>9} {'CPU s':>7} {'curl s':>7} {'ratio':>6}")
        for r in res["rows"]:
            flag = "  over the bound" if r["over"] else ""
            print(f"{r['command']:<34} {r['median_s']:>9.3f} {r['cpu_s']:>7.3f} {r['curl_s']:>7.3f} "
                  f"{r['ratio']:>6.1f}{flag}")
    return 1 if any(r["over"] for r in res["rows"]) else 0


if __name__ == "__main__":
    sys.exit(main())
