"""A fuzz test of the whole CLI: every command gets wrong option values and malformed input files.

The commands come from the click tree (``skylease.cli.click_command()``), so a new command or
option is fuzzed without anyone adding it here; ``test_every_command_and_option_is_fuzzed`` fails
when one gets no case (then give it a base invocation, or say in EXEMPT why it cannot run fast).
For each option the wrong values follow from its click type and bounds (not a number, below its
minimum, NaN, infinity, ...) and from DOMAIN, the table of ranges click does not know (seeds are
>= 0, shares are in [0, 1], sizes must be refused before they exhaust the machine). Each argument
or option that reads a file gets that file empty, truncated, binary, with wrong columns or keys,
in UTF-16 or Latin-1, or as a directory. Every case must get what the developers' guide promises:
exit status 2, exactly one line on stderr naming the option or the file, no traceback, nothing
written in the working folder, and an answer within seconds.

How a case runs: a *zygote*, a Python process that has imported all of skylease once, forks one
child per case. The child runs ``skylease.cli.main(argv)`` in the case's own folder under an
address-space limit and is killed at a deadline. So a case costs milliseconds, as an in-process
call does, and a case that would hang or exhaust memory fails alone, fast, instead of taking the
test run (or the machine) down.

Hypothesis draws the values (``derandomize=True``: the same examples on every run, in CI too).
Failures found and not yet fixed go in KNOWN_FAILURES (``xfail(strict=False)`` per case, each
with what happened); it is empty.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import resource
import signal
import string
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
CASE_TIMEOUT_S = 10.0  # "an answer within a few seconds", with room for a loaded 2-core CI machine
CASE_MEMORY = 3 * 2**30  # address space of a case: a case that would exhaust memory fails fast
EXAMPLES = 3  # hypothesis examples per case (cases with one possible value run once)

# Commands that cannot run fast (or touch things outside the test). Only their cases that are
# refused before any work starts (Case.early: by click, or by the command's first check) run; each
# still must be one line and exit 2.
EXEMPT = {
    "demo": "takes 35-40 s (a real run included)",
    "reproduce a2ha": "minutes of work",
    "reproduce spequlos": "minutes of work",
    "reproduce haizea": "minutes of work",
    "reproduce thesis-mapping": "minutes of work",
    "reproduce thesis-placement": "minutes of work",
    "data fetch": "goes to the network (only names are fuzzed: they are checked before it)",
    "serve": "runs until stopped (tests/service/test_serve.py starts and stops it)",
    "serve user add": "any new name is valid, and adds it (tests/service/test_serve.py)",
    "serve user remove": "needs a user in the database (tests/service/test_db.py)",
    "serve calibrate": "boots QEMU guests for a minute (tests/runtime/leases/test_calibrate.py runs it)",
    **{f"leases {c}": "needs a running server (tests/service/test_serve.py runs it against one)"
       for c in ("request", "cancel", "list", "show", "queue", "hosts", "when")},
    "leases extend": "needs a running server (tests/service/test_lease_extend.py runs it against one)",
    "leases logs": "needs a running server (tests/service/test_serve_logs.py runs it against one)",
    **{f"qos {c}": "needs a running server (tests/service/test_qos_cli.py runs it against one)"
       for c in ("account", "deposit", "order", "predict", "bots", "history")},
    "login": "needs a running server and a token (tests/service/test_secrets.py runs it against one)",
}
# Parameters of EXEMPT commands that the command checks before any work (before it calls the
# server): every case of theirs runs, not only those click refuses.
CHECKED_FIRST = {("qos deposit", "credits"), ("qos order", "credits"), ("login", "server"),
                 ("leases request", "duration"), ("leases when", "duration"), ("leases when", "not_before"),
                 ("leases extend", "by"), ("serve", "log_level")}
# The commands that list a server's list route (src/skylease/service/paging.py): each takes --limit
# (click's bounds: the server's page, so its wrong values are fuzzed as any number's) and --all (a
# flag); tests/service/test_serve.py and test_qos_cli.py run them against a server.
LIST_COMMANDS = ("leases list", "leases queue", "qos bots")


# -- the zygote ---------------------------------------------------------------------------------
def _serve() -> None:
    """Import skylease once, then fork one child per request read from stdin (one JSON line each)."""
    import importlib
    import pkgutil

    import skylease

    for m in pkgutil.walk_packages(skylease.__path__, "skylease."):
        if not m.name.endswith("__main__"):
            importlib.import_module(m.name)
    from skylease.cli import main

    replies = os.fdopen(os.dup(1), "w")
    replies.write("ready\n")
    replies.flush()
    for line in sys.stdin:
        replies.write(json.dumps(_fork(main, json.loads(line), replies.fileno())) + "\n")
        replies.flush()


def _fork(main: Callable[[list[str]], int], req: dict, reply_fd: int) -> dict:
    scratch = Path(tempfile.mkdtemp(prefix="skylease-fuzz-"))
    out_path, err_path = scratch / "out", scratch / "err"
    sys.stdout.flush()
    sys.stderr.flush()
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the case: what `skylease ARGV` would do, in its folder, under its limits
        code: object = 1
        try:
            os.setsid()  # its own process group, so a timeout kills what it started too
            os.close(reply_fd)
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            for fd, p in ((1, out_path), (2, err_path)):
                os.dup2(os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
            os.chdir(req["cwd"])
            os.environ.update(req["env"])
            hard = resource.getrlimit(resource.RLIMIT_AS)[1]
            soft = req["memory"] if hard == resource.RLIM_INFINITY else min(req["memory"], hard)
            resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
            code = main(req["argv"])
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        except BaseException:
            traceback.print_exc()  # what the console script would print
            code = 1
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code if isinstance(code, int) else 0)
    timed_out = False
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() - t0 > req["timeout"]:
            timed_out = True
            os.killpg(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
            break
        time.sleep(0.002)
    seconds = time.monotonic() - t0
    with contextlib.suppress(ProcessLookupError, PermissionError):  # whatever the case left running
        os.killpg(pid, signal.SIGKILL)
    texts = [p.read_bytes()[:200_000].decode("utf-8", "replace") if p.exists() else "" for p in
             (out_path, err_path)]
    for p in (out_path, err_path):
        p.unlink(missing_ok=True)
    scratch.rmdir()
    return {"code": os.waitstatus_to_exitcode(status), "timed_out": timed_out, "seconds": seconds,
            "out": texts[0], "err": texts[1]}


@dataclass
class Outcome:
    code: int
    timed_out: bool
    seconds: float
    out: str
    err: str

    def describe(self) -> str:
        what = "timed out" if self.timed_out else f"exit {self.code}"
        if self.code < 0 and not self.timed_out:
            what = f"killed by signal {-self.code}"
        err = self.err.strip().splitlines()
        if "Traceback" in self.err:  # where it was raised, and what
            err = [line for line in err if line.startswith("  File ")][-1:] + err[-1:]
        return f"{what} after {self.seconds:.1f} s; stderr: {chr(10).join(err[-3:])[-600:]!r}; " \
               f"stdout: {self.out[-200:]!r}"


class Zygote:
    def __init__(self, scratch: Path) -> None:
        env = {**os.environ, "MPLBACKEND": "Agg", "MPLCONFIGDIR": str(scratch / "mpl"),
               "XDG_CONFIG_HOME": str(scratch / "config"),  # never the user's token file (`login`, `logout`)
               "PYTHONPATH": os.pathsep.join(sys.path)}
        self.proc = subprocess.Popen([sys.executable, __file__, "--zygote"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env, cwd=scratch)
        ready = self.proc.stdout.readline()
        assert ready == "ready\n", f"the zygote did not start: {ready!r}"

    def run(self, argv: list[str], cwd: Path, env: dict[str, str] | None = None,
            timeout: float = CASE_TIMEOUT_S) -> Outcome:
        req = {"argv": argv, "cwd": str(cwd), "env": env or {}, "timeout": timeout, "memory": CASE_MEMORY}
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        reply = self.proc.stdout.readline()
        assert reply, "the zygote died"
        return Outcome(**json.loads(reply))

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def zygote(tmp_path_factory):
    if not hasattr(os, "fork"):
        pytest.skip("the fuzz test forks its cases (Linux, macOS)")
    z = Zygote(tmp_path_factory.mktemp("zygote"))
    yield z
    z.close()


# -- input files: a valid sample of each kind, and how to spoil it -----------------------------
def _lines(*rows: str) -> bytes:
    return "".join(r + "\n" for r in rows).encode()


FTA_HEAD = ("event_id component_id node_id platform_id node_name event_type event_start_time "
            "event_stop_time event_end_reason")
SPOT = {"SpotPriceHistory": [
    {"Timestamp": f"2016-01-01T00:0{i}:00.000Z", "SpotPrice": str(0.1 + i / 100), "InstanceType": "c1.xlarge",
     "AvailabilityZone": "us-east-1a", "ProductDescription": "Linux/UNIX"} for i in range(4)]}
SWF_JOB = "{n} {submit} 0 {run} 2 0.5 -1 2 100 -1 1 1 1 -1 1 1 -1 -1"
XML_LEASE = ('<lease-request arrival="00:00:00"><lease id="1" preemptible="true"><nodes>'
             '<node-set numnodes="1"><res type="CPU" amount="100"/><res type="Memory" amount="1024"/>'
             '</node-set></nodes><start/><duration time="01:00:00"/></lease></lease-request>')
LWF_LINE = '{req} {start} 60 30 2 1 1024 5120 "img7" 4096'


@dataclass(frozen=True)
class Kind:
    """A kind of input file: its name in the case folder, a small valid sample, and its spoilt forms.

    ``truncate`` gives the range of cut points after which the sample is certainly invalid (a cut
    inside the first line removes every record; one after the header of an ETC file leaves too few
    values); None when a cut file can still be valid (a job file cut after a line). ``shapes`` are
    files of the right syntax but the wrong columns, keys or types; ``huge`` asks for more than the
    machine has. ``latin1`` is the sample with a non-ASCII character, in Latin-1: ``latin1_strict``
    when the character sits where no text is allowed (a number), so the file is wrong whatever the
    reader's encoding. ``empty_ok``: an empty file is a valid input (a config with no overrides).
    """

    name: str
    valid: bytes
    truncate: tuple[int, int] | None
    shapes: tuple[bytes, ...] = ()
    huge: bytes | None = None
    latin1: bytes | None = None
    latin1_strict: bool = True
    empty_ok: bool = False
    directory: bool = False  # the input is a folder (its files are the sample's ``inner`` files)
    inner: str = ""
    huge_may_answer: bool = False  # a fast answer to the huge file is fine too (a plan: "no plan")
    lines: bool = True  # a line-based format: an error in a record names its line (FILE:LINE)


def _first_line(valid: bytes) -> tuple[int, int]:
    return 1, valid.index(b"\n") - 1


def _kind(name: str, valid: bytes, **kw) -> Kind:
    kw.setdefault("truncate", _first_line(valid))
    return Kind(name, valid, **kw)


ETC_VALID = _lines("4 2 0", *(f"{10 + 3 * i}.5" for i in range(8)))
KINDS: dict[str, Kind] = {
    "etc": _kind("inst.etc", ETC_VALID,
                 truncate=(len(b"4 2 0\n1"), ETC_VALID.rindex(b"\n", 0, -1) - 1),
                 shapes=(_lines("4 3 0", *["1.5"] * 8), _lines("4", *["1.5"] * 8), _lines("x y 0", "1")),
                 huge=_lines("1000000000 1000000000 0", "1 2 3"),
                 latin1=ETC_VALID.replace(b"10.5", "1é0".encode("latin-1"))),
    "desktops": _kind("lab.csv", _lines("name,cores,user_minutes", "pc1,8,120", "pc2,4,"),
                      shapes=(_lines("name,cpus", "pc1,8"), _lines("name,cores,user_minutes", "pc1,8,120,7")),
                      huge=_lines("name,cores", "pc1,1000000000"),
                      latin1="name,cores\npc1,8é\n".encode("latin-1")),
    "vms": _kind("vms.csv", _lines("name,cores,minutes", "blast,4,600", "render,2,60"),
                 shapes=(_lines("name,cores", "blast,4"), _lines("name,cores,minutes,colour", "a,1,2,red")),
                 latin1="name,cores,minutes\nblast,4é,600\n".encode("latin-1")),
    "job-txt": _kind("jobs.txt", _lines("true", "true"), truncate=None, lines=False,
                     latin1="echo café\n".encode("latin-1"), latin1_strict=False),
    "job-toml": _kind("job.toml", _lines('command = "true {a}"', "[grid]", "a = [1, 2]"),
                      shapes=(_lines('command = "true {a}"', "retires = 2", "[grid]", "a = [1, 2]"),
                              _lines('command = "true {a}"', 'retries = "many"', "[grid]", "a = [1, 2]"),
                              _lines('command = "true {a}"', "timeout = -5", "[grid]", "a = [1, 2]")),
                      huge=_lines('command = "true"', "[grid]",
                                  *(f"k{i} = [{', '.join(map(str, range(60)))}]" for i in range(7))),
                      latin1='command = "echo café {a}"\n[grid]\na = [1, 2]\n'.encode("latin-1"),
                      latin1_strict=False),
    "args-json": _kind("args.json", b"[1, 2, 3]\n", shapes=(b'{"a": 1}\n', b'"x"\n'), lines=False,
                       latin1='["café"]\n'.encode("latin-1"), latin1_strict=False),
    "pools": _kind("pools.toml", _lines("[pools.local]", "max_count = 2", "price = 0.0"),
                   shapes=(_lines("[pools.local]", "max_cont = 2"),
                           _lines("[pools.local]", 'max_count = "many"'),
                           _lines("[pools.local]", "max_count = -3")),
                   latin1="[pools.local]\n# café\nmax_count = 2\n".encode("latin-1"), latin1_strict=False),
    "plan-hybrid": _kind("plan.toml", _lines("[job]", "n_tasks = 200", "task_minutes = 1.5"), empty_ok=True,
                         shapes=(_lines("[job]", "n_taskz = 200"), _lines("[job]", 'n_tasks = "many"'),
                                 _lines("[job]", "n_tasks = -5")),
                         huge=_lines("[job]", "n_tasks = 1000000000000"), huge_may_answer=True,
                         latin1="[job]\n# café\nn_tasks = 200\n".encode("latin-1"), latin1_strict=False),
    "plan-mapreduce": _kind("plan.toml", _lines("[job]", "map_work = 100.0", "reduce_work = 10.0"),
                            empty_ok=True,
                            shapes=(_lines("[job]", "map_wrk = 100.0"), _lines("[job]", 'map_work = "lots"')),
                            latin1="[job]\n# café\nmap_work = 100.0\n".encode("latin-1"),
                            latin1_strict=False),
    "plan-multi": _kind("plan.toml", _lines('scenario = "B"'), empty_ok=True,
                        shapes=(_lines('scenaro = "B"'), _lines("scenario = 7"), _lines('scenario = "Q"')),
                        latin1='# café\nscenario = "B"\n'.encode("latin-1"), latin1_strict=False),
    "a2ha-csv": _kind("runs.csv", _lines("runtime", "100", "200", "300"),
                      shapes=(_lines("name,host", "a,b", "c,d"), _lines("runtime", "-5"),
                              # ragged rows (issue 36: a cell missing picked the other column)
                              _lines("a,b", "1,2", "3"), _lines("runtime", "10", "20,30")),
                      latin1="runtime\n100\n2é0\n".encode("latin-1")),
    "a2ha-json": _kind("wf.json", lines=False, valid=json.dumps({"workflow": {"tasks": [
        {"name": f"t_ID{i:06d}", "runtimeInSeconds": 10 + i} for i in range(3)]}}).encode() + b"\n",
                       shapes=(b'{"workflow": {}}\n', b'{"workflow": {"tasks": [{"name": "a"}]}}\n', b"[]\n"),
                       latin1='{"workflow": {"tasks": [{"name": "café", "runtimeInSeconds": 1}]}}\n'.encode(
                           "latin-1"), latin1_strict=False),
    "fta": _kind("ev.tab", _lines(FTA_HEAD, "0\t0\t7\t3\t1.0\t0\t1000\t1100\t8000",
                                  "1\t0\t7\t3\t1.0\t1\t1100\t1500\t0"),
                 shapes=(_lines("a b c", "1 2 3"), _lines(FTA_HEAD, "0\t0\t7")),
                 latin1=(FTA_HEAD + "\n0\t0\t7\t3\t1.0\t0\t10é0\t1100\t8000\n").encode("latin-1")),
    "spot": _kind("prices.json", json.dumps(SPOT).encode() + b"\n", lines=False,
                  shapes=(b'{"Prices": []}\n',
                          json.dumps({"SpotPriceHistory": [{"Timestamp": "x"}]}).encode()),
                  latin1=json.dumps(SPOT).replace("0.1", "0.1é").encode("latin-1")),
    "swf": _kind("log.swf", _lines(SWF_JOB.format(n=1, submit=0, run=100),
                                   SWF_JOB.format(n=2, submit=50, run=70)),
                 shapes=(_lines("1 0 0 100 2"),),
                 huge=_lines("; MaxNodes: 1000000000", "; MaxProcs: 1000000000",
                             SWF_JOB.format(n=1, submit=0, run=100)),
                 latin1=(SWF_JOB.format(n=1, submit=0, run="10é") + "\n").encode("latin-1")),
    "tr-dir": Kind("nodes", _lines("0 100 1", "100 250 0", "250 400 1"), truncate=(1, 6), directory=True,
                   inner="n1.tr", shapes=(_lines("0 100"), _lines("100 0 1")), empty_ok=True,
                   latin1="0 10é 1\n".encode("latin-1")),
    "lwf": _kind("ars.lwf", _lines(LWF_LINE.format(req=0, start=100), LWF_LINE.format(req=200, start=400)),
                 shapes=(_lines("0 100 60 30 2"), _lines(LWF_LINE.format(req=0, start="1OO"))),
                 latin1=(LWF_LINE.format(req=0, start="1é0") + "\n").encode("latin-1")),
    "lwf-xml": _kind("leases.xml", (f"<lease-workload name='t'>\n<lease-requests>\n{XML_LEASE}\n"
                                    "</lease-requests>\n</lease-workload>\n").encode(),
                     shapes=(b"<workload/>\n",
                             f"<lease-workload>\n{XML_LEASE}\n</lease-workload>\n".encode()),
                     latin1=(f"<lease-workload name='café'>\n<lease-requests>\n{XML_LEASE}\n"
                             "</lease-requests>\n</lease-workload>\n").encode("latin-1"),
                     latin1_strict=False),
    "serve-toml": _kind("serve.toml", _lines("port = 8642", "time_scale = 60.0"), empty_ok=True,
                        shapes=(_lines("prot = 8642"), _lines('port = "http"'), _lines("time_scale = -1.0")),
                        latin1='# café\nport = 8642\n'.encode("latin-1"), latin1_strict=False),
    # the site file of `serve --site` (runtime/leases/site.py); serve is exempt, so no case runs yet
    "site-toml": _kind("site.toml", _lines("# the default site"), empty_ok=True),
    "pem": _kind("cert.pem", _lines("-----BEGIN CERTIFICATE-----", "MIIB", "-----END CERTIFICATE-----"),
                 lines=False),
    # a database's password file (`serve --db-password-file`): its first line, as is
    "password": _kind("db-password", b"s3cret pass\n", truncate=None, lines=False, shapes=(b"one\ntwo\n",),
                      latin1="caf\u00e9\n".encode("latin-1"), latin1_strict=False),
    "lease-json": _kind("lease.json", b'{"nodes": 1, "duration": 60}\n', lines=False,
                        shapes=(b'{"nodes": 0, "duration": 60}\n', b'{"duraton": 60}\n', b"[]\n")),
    "leases-toml": _kind("sched.toml", _lines('base = "NOVM-SR"', "suspend_rate = 100.0"), empty_ok=True,
                         shapes=(_lines("suspend_rat = 100.0"), _lines('suspend_rate = "fast"'),
                                 _lines("suspend_rate = -1.0")),
                         latin1='# café\nbase = "NOVM-SR"\n'.encode("latin-1"), latin1_strict=False),
}
# The fairness rules of `leases simulate --rules` (a scheduler configuration with an admission policy)
KINDS["rules-toml"] = _kind("rules.toml",
                            _lines("[policies.admission]", 'class = "fairness"', "max_stacked = 2"),
                            shapes=(_lines("[policies.admission]", 'class = "fairness"', "max_stacked = 0"),
                                    _lines("[policies.admission]", 'class = "fairness"', "colour = 2"),
                                    _lines('base = "NOVM-SR"')),
                            latin1='# café\n[policies.admission]\nclass = "fairness"\n'.encode("latin-1"),
                            latin1_strict=False)
# A policy of one's own in a file (`run --policy mine.py:Mine`): the base its --policy-arg cases spoil.
KINDS["policy-py"] = _kind("mine.py", _lines(
    "from skylease.control.fixed import FixedPool", "", "", "class Mine(FixedPool):",
    "    def __init__(self, n: int = 1, pool: str | None = None, factor: float = 1.0) -> None:",
    "        super().__init__(n, pool)", "        self.factor = factor"), truncate=None, lines=False)
# A SpeQuloS strategy of one's own (`simulate spequlos --strategy mine_strategy.py:AtShare`): the base
# its --strategy and --strategy-arg cases spoil.
KINDS["strategy-py"] = _kind("mine_strategy.py", _lines(
    "from skylease.control.qos import CloudStrategy", "", "", "class AtShare(CloudStrategy):",
    "    def __init__(self, at: float = 0.8, workers: int = 2) -> None:",
    "        if not 0 < at <= 1:", "            raise ValueError(f'at must be in (0, 1], got {at}')",
    "        self.at, self.workers = at, workers", "",
    "    def should_use_cloud(self, s):", "        return s.completed >= self.at * s.submitted > 0", "",
    "    def cloud_workers_to_start(self, s, credits):", "        return self.workers", "", "",
    "class NeedsN(AtShare):", "    def __init__(self, n: int) -> None:", "        super().__init__()"),
    truncate=None, lines=False)
# A mapping heuristic and a placement algorithm of one's own (`map --heuristic rr.py:RoundRobin`,
# `place --algorithm roomiest.py:Roomiest`), each beside classes whose answers are wrong.
KINDS["heuristic-py"] = _kind("rr.py", _lines(
    "from skylease.planning.mapping.plugin import MappingHeuristic", "", "",
    "class RoundRobin(MappingHeuristic):", "    def __init__(self, start: int = 0) -> None:",
    "        if start < 0:", "            raise ValueError(f'start must be >= 0, got {start}')",
    "        self.start = start", "", "    def assign(self, etc):",
    "        return [(self.start + i) % etc.shape[1] for i in range(etc.shape[0])]", "", "",
    "class Short(MappingHeuristic):", "    def assign(self, etc):", "        return [0]", "", "",
    "class Boom(MappingHeuristic):", "    def assign(self, etc):", "        return 1 / 0"),
    truncate=None, lines=False)
KINDS["placement-py"] = _kind("roomiest.py", _lines(
    "from skylease.planning.placement.plugin import PlacementAlgorithm", "", "",
    "class Roomiest(PlacementAlgorithm):", "    def __init__(self, min_free: int = 0) -> None:",
    "        if min_free < 0:", "            raise ValueError(f'min_free must be >= 0, got {min_free}')",
    "        self.min_free = min_free", "", "    def assign(self, vms, desktops, free, has_vm):",
    "        out = []", "        for cores in vms.cores:", "            j = int(free.argmax())",
    "            ok = free[j] - cores >= self.min_free", "            free[j] -= cores if ok else 0",
    "            out.append(j if ok else -1)", "        return out", "", "",
    "class AllOnFirst(PlacementAlgorithm):", "    def assign(self, vms, desktops, free, has_vm):",
    "        return [0] * len(vms)", "", "",
    "class Nowhere(PlacementAlgorithm):", "    def assign(self, vms, desktops, free, has_vm):",
    "        return [-2] * len(vms)"), truncate=None, lines=False)
KINDS["swf-leases"] = replace(KINDS["swf"], huge=None)  # lease workloads run on their own cluster size
KINDS["lwf-xml"] = replace(KINDS["lwf-xml"], truncate=(1, len(KINDS["lwf-xml"].valid.rstrip()) - 1))
KINDS["args-json"] = replace(KINDS["args-json"], truncate=(1, len(b"[1, 2, 3]") - 1))
KINDS["a2ha-json"] = replace(KINDS["a2ha-json"], truncate=(1, len(KINDS["a2ha-json"].valid.rstrip()) - 1))
KINDS["spot"] = replace(KINDS["spot"], truncate=(1, len(KINDS["spot"].valid.rstrip()) - 1))
TWO_POOLS = _lines("[pools.volatile]", "max_count = 1", "[pools.reliable]", "max_count = 1", "price = 0.01")


# -- the commands, their parameters and what is wrong for each ---------------------------------
def _commands() -> dict[str, object]:
    """Every command of the tree by its path ("etc generate"); a group that runs by itself too."""
    from skylease.cli import click_command

    found: dict[str, object] = {}

    def walk(cmd, path: tuple[str, ...]) -> None:
        subs = getattr(cmd, "commands", None)
        if subs is None or (path and getattr(cmd, "invoke_without_command", False)):
            found[" ".join(path)] = cmd
        for name, sub in (subs or {}).items():
            walk(sub, (*path, name))

    walk(click_command(), ())
    return found


@dataclass(frozen=True)
class Param:
    command: str
    key: str  # click's name: "voltages", "etc_file"
    label: str  # what the user types or sees: "--voltages", "ETC_FILE"
    type: str  # int, float, str, path, bool
    positional: bool
    lo: float | None
    hi: float | None


def _type_of(p) -> str:
    ann = getattr(getattr(p, "type_descriptor", None), "annotation", None)  # typer's own click
    if ann is not None:
        return {int: "int", float: "float", bool: "bool", Path: "path"}.get(ann, "str")
    name = getattr(getattr(p, "type", None), "name", "text")  # click's types (typer 0.28's own: "int range")
    return {"integer": "int", "integer range": "int", "int range": "int", "float": "float",
            "float range": "float", "boolean": "bool", "path": "path"}.get(name, "str")


def _params() -> list[Param]:
    out = []
    for command, cmd in _commands().items():
        for p in cmd.params:
            if getattr(p, "is_flag", False) or p.name == "help" or _type_of(p) == "bool":
                continue
            positional = not p.name or not getattr(p, "opts", [""])[0].startswith("-")
            bounds = getattr(p, "type", None)
            lo = getattr(p, "min", getattr(bounds, "min", None))
            hi = getattr(p, "max", getattr(bounds, "max", None))
            label = p.name.upper() if positional else p.opts[0]
            out.append(Param(command, p.name, label, _type_of(p), positional, lo, hi))
    return out


@dataclass(frozen=True)
class Range:
    """The valid values of a number option, where click does not know them."""

    lo: float | None = None
    lo_open: bool = False  # lo itself is wrong
    hi: float | None = None
    huge: bool = False  # a size: far beyond what the machine can do must be refused up front
    huge_may_answer: bool = False  # ... or answered within seconds (a plan: the deadline only caps it)
    inf_ok: bool = False  # infinity means "no limit"


SEED = Range(lo=0)
SHARE = Range(lo=0, hi=1)
POSITIVE = Range(lo=0, lo_open=True)
NONNEG = Range(lo=0)
DOMAIN: dict[tuple[str, str], Range] = {
    ("map", "lam"): SHARE, ("map", "voltages"): SEED,
    ("place", "users"): SHARE, ("place", "seed"): SEED,
    ("etc generate", "tasks"): Range(lo=1, huge=True), ("etc generate", "machines"): Range(lo=1, huge=True),
    ("etc generate", "v_task"): POSITIVE, ("etc generate", "v_mach"): POSITIVE,
    ("etc generate", "mu"): POSITIVE, ("etc generate", "r_task"): Range(lo=1),
    ("etc generate", "r_mach"): Range(lo=1), ("etc generate", "seed"): SEED,
    ("traces stats", "seed"): SEED, ("traces stats", "nodes"): Range(lo=1, huge=True),
    ("traces stats", "days"): Range(lo=0.001, huge=True),
    **{(f"plan {m}", "deadline"): Range(lo=0, lo_open=True, huge=True, huge_may_answer=True)
       for m in ("mapreduce", "hybrid", "multi")},
    **{(f"plan {m}", "budget"): Range(lo=0, inf_ok=True) for m in ("mapreduce", "hybrid", "multi")},
    **{(f"plan {m}", "weight"): SHARE for m in ("mapreduce", "hybrid", "multi")},
    ("simulate a2ha", "creation_ratio"): SHARE, ("simulate a2ha", "increase_ratio"): SHARE,
    ("simulate a2ha", "budget"): Range(lo=0, inf_ok=True), ("simulate a2ha", "budget_factor"): Range(lo=1),
    ("simulate a2ha", "initial_hosts"): Range(lo=0, huge=True),
    ("simulate a2ha", "orderings"): Range(lo=1, huge=True),
    ("simulate a2ha", "seed"): SEED, ("simulate a2ha", "boot"): NONNEG, ("simulate a2ha", "unit"): POSITIVE,
    ("simulate a2ha", "price"): NONNEG,
    ("simulate bag", "budget"): Range(lo=0, inf_ok=True),
    ("simulate bag", "orderings"): Range(lo=1, huge=True),
    ("simulate bag", "seed"): SEED, ("simulate bag", "boot"): NONNEG, ("simulate bag", "unit"): POSITIVE,
    ("simulate bag", "price"): NONNEG,
    ("simulate spequlos", "seed"): SEED, ("simulate spequlos", "credits"): Range(lo=0, huge=True),
    ("simulate spequlos", "alpha"): POSITIVE,
    ("simulate spequlos", "random_epsilon"): Range(lo=0, lo_open=True, inf_ok=True),  # inf: no cap
    ("simulate spequlos", "accel_min_frac_done"): SHARE, ("simulate spequlos", "accel_max_not_done"): NONNEG,
    ("simulate spequlos", "accel_period"): POSITIVE,
    ("simulate replay", "seeds"): Range(lo=1, huge=True),
    ("run", "price"): NONNEG, ("run", "billing_unit"): POSITIVE, ("run", "budget"): Range(lo=0, inf_ok=True),
    ("run", "timeout"): POSITIVE, ("run", "tail_credits"): NONNEG, ("run", "trace_scale"): POSITIVE,
    ("run", "trace_start"): NONNEG, ("run", "seed"): SEED,
    ("leases simulate", "image_seed"): SEED,
    ("run", "qos_credits"): Range(lo=0, hi=1e9),  # the ledger's most credits (runtime/qos/ledger.py)
    ("qos deposit", "credits"): Range(lo=0, lo_open=True, hi=1e9),
    ("qos order", "credits"): Range(lo=0, lo_open=True, hi=1e9),
}

# The commands that open the server's database (--config, --db, --data-dir).
SERVE_DB_COMMANDS = ("serve", "serve user add", "serve user list", "serve user remove")
# Parameters that read a file (or folder), and the kinds of file they take.
READS: dict[tuple[str, str], tuple[str, ...]] = {
    ("map", "etc_file"): ("etc",), ("etc stats", "etc_file"): ("etc",),
    ("place", "desktops"): ("desktops",), ("place", "vms"): ("vms",),
    ("run", "job"): ("job-txt", "job-toml"), ("run", "args"): ("args-json",), ("run", "pools"): ("pools",),
    ("run", "volatility"): ("fta", "tr-dir"),
    ("traces stats", "traces"): ("fta", "spot", "swf", "tr-dir"),
    ("plan hybrid", "config"): ("plan-hybrid",), ("plan mapreduce", "config"): ("plan-mapreduce",),
    ("plan multi", "config"): ("plan-multi",), ("plan pareto", "config"): ("plan-hybrid",),
    ("simulate a2ha", "workload"): ("a2ha-csv", "a2ha-json"),
    ("simulate bag", "workload"): ("a2ha-csv", "a2ha-json"),
    ("simulate spequlos", "trace"): ("fta", "spot", "swf", "tr-dir"),
    ("leases simulate", "workload"): ("lwf", "lwf-xml", "swf-leases"),
    ("leases simulate", "inject"): ("lwf",),
    ("leases simulate", "config"): ("leases-toml",),
    ("leases simulate", "rules"): ("rules-toml",),
    ("status", "out_dir"): ("store",), ("simulate replay", "out_dir"): ("store",),
    ("export", "out_dir"): ("store",), ("show", "out_dir"): ("store",), ("failed", "out_dir"): ("store",),
    ("data import", "path"): ("dataset",),
    **{(c, "config"): ("serve-toml",) for c in SERVE_DB_COMMANDS},
    **{(c, "db_password_file"): ("password",) for c in SERVE_DB_COMMANDS},
    ("serve", "site"): ("site-toml",), ("serve", "tls_cert"): ("pem",), ("serve", "tls_key"): ("pem",),
    ("serve calibrate", "site"): ("site-toml",),
    ("leases request", "file"): ("lease-json", "lwf-xml"),
}
# Parameters that name what a command writes: a file, a plot, or a folder.
WRITES: dict[tuple[str, str], str] = {
    ("etc generate", "out_file"): "file", ("plan pareto", "plot"): "plot",
    ("serve calibrate", "output"): "file",
    ("leases simulate", "gantt"): "plot", ("export", "output"): "file",
    ("run", "out_dir"): "folder", ("demo", "out_dir"): "folder",
    **{(f"reproduce {r}", "out_dir"): "folder"
       for r in ("ilp", "a2ha", "spequlos", "haizea", "thesis-mapping", "thesis-placement")},
    **{(c, "data_dir"): "folder" for c in ("data", "data import", "data path", "data fetch")},
    **{(c, "data_dir"): "folder" for c in SERVE_DB_COMMANDS},
}
# Free-form text options: any value may be valid (or reach the network), so no text is "wrong".
# (`run --return`: any relative name may be a file a task makes; its wrong values are in SPECS)
FREE = {("demo", "scheduler"), ("export", "output"), ("run", "qos_token"), ("run", "qos_infrastructure"),
        ("run", "returns"), ("run", "hosts"),
        *((f"reproduce {r}", "scheduler") for r in ("a2ha", "spequlos", "haizea", "thesis-mapping"))}


def _spec(fmt: str, ints: st.SearchStrategy[int]) -> st.SearchStrategy[str]:
    return ints.map(fmt.format)


# Wrong values of options that take a spec (a policy, a strategy, a synthetic workload), beyond
# "" and an unknown word, which every text option gets.
SPECS: dict[tuple[str, str], dict[str, st.SearchStrategy[str]]] = {
    ("place", "vms"): {"bad spec": st.one_of(_spec("synthetic:{}", st.integers(max_value=0)),
                                             st.sampled_from(["synthetic:x", "synthetic:", "synthetic:1.5"])),
                       "huge": _spec("synthetic:{}", st.integers(10**7, 10**15))},
    ("run", "policy"): {"bad spec": st.one_of(
        _spec("fixed:{}", st.integers(max_value=0)), _spec("dask-adaptive:{}", st.integers(max_value=0)),
        st.sampled_from(["fixed:x", "fixed:", "a2ha:x", "dask-adaptive:x", "fixed:1.5", "zz:", ":Mine"])),
        # a plug-in (MODULE:CLASS, FILE.py:CLASS) that cannot be used: one case each
        "missing file": st.just("gone.py:Mine"), "missing module": st.just("zzmodule_nope:Mine"),
        "not python": st.just("jobs.txt:Mine"), "missing class": st.just("skylease.control.fixed:Nope"),
        "not a class": st.just("math:pi"), "not a policy": st.just("json:JSONDecoder"),
        "missing parameter": st.just("skylease.control.fixed:FixedPool")},
    # (with --policy mine.py:Mine: CONTEXT) a parameter the policy does not take, or cannot take
    ("run", "policy_arg"): {
        "bad spec": st.sampled_from(["n", "=1", "1n=2", "n= "]), "unknown parameter": st.just("zz=1"),
        "mistyped": st.sampled_from(["n=x", "n=1.5"]), "nan": st.just("factor=nan"),
        "refused by the class": st.sampled_from(["n=0", "n=-3"])},
    ("run", "tail_qos"): {"bad spec": st.sampled_from(["9X-C-D", "9A-C", "9A-Q-D", "9A-C-D-E"]),
                          "missing file": st.just("gone.py:Mine"),
                          "not a strategy": st.just("json:JSONDecoder")},
    # a heuristic / a placement algorithm that cannot be used, or whose answer is wrong (CONTEXT: the
    # files rr.py and roomiest.py are there)
    ("map", "heuristic"): {
        "missing file": st.just("gone.py:RoundRobin"), "missing module": st.just("zzmodule_nope:X"),
        "missing class": st.just("rr.py:Nope"), "not a class": st.just("math:pi"),
        "not a heuristic": st.just("json:JSONDecoder"), "bad spec": st.sampled_from(["zz:", ":RoundRobin"]),
        "missing parameter": st.just("skylease.planning.mapping.plugin:Builtin"),
        "wrong answer": st.sampled_from(["rr.py:Short", "rr.py:Boom"])},
    ("map", "heuristic_arg"): {
        "bad spec": st.sampled_from(["start", "=1", "1s=2"]), "unknown parameter": st.just("zz=1"),
        "mistyped": st.sampled_from(["start=x", "start=1.5"]), "refused by the class": st.just("start=-1")},
    ("place", "algorithm"): {
        "missing file": st.just("gone.py:Roomiest"), "missing module": st.just("zzmodule_nope:X"),
        "missing class": st.just("roomiest.py:Nope"), "not a class": st.just("math:pi"),
        "not an algorithm": st.just("json:JSONDecoder"), "bad spec": st.sampled_from(["zz:", ":Roomiest"]),
        "missing parameter": st.just("skylease.planning.placement.plugin:Builtin"),
        "wrong answer": st.sampled_from(["roomiest.py:AllOnFirst", "roomiest.py:Nowhere"])},
    ("place", "algorithm_arg"): {
        "bad spec": st.sampled_from(["min_free", "=1"]), "unknown parameter": st.just("zz=1"),
        "mistyped": st.sampled_from(["min_free=x", "min_free=0.5"]),
        "refused by the class": st.just("min_free=-1")},
    # a task's files: out of its folder, a brace alone, a parameter a text job does not have
    ("run", "transfer"): {"bad spec": st.sampled_from(["/etc/hostname", "../x", "a/../../x", "a{b", "{zz}"])},
    ("run", "returns"): {"bad spec": st.sampled_from(["", " ", "/tmp/x", "../x", "a{b", "{zz}", "x}"])},
    ("run", "qos_strategy"): {"bad spec": st.sampled_from(["9X-C-D", "9A-C", "9A-Q-D", "9A-C-D-E", "none"])},
    ("run", "qos"): {"bad spec": st.sampled_from(["ftp://host", "http://", "http://127.0.0.1:99999",
                                                  "127.0.0.1:8642", "http://:8642"])},
    ("run", "qos_token"): {"blank": st.sampled_from([" ", "\t", "  "])},  # any other text may be a token
    ("run", "hosts"): {"bad spec": st.sampled_from(["", ",", "h1,,h2", "root@", "-oProxyCommand=x", "a b",
                                                    "h1:0", "h1:99999", "[::1", "bad user@h1", "h1:22:33"])},
    ("login", "server"): {"bad spec": st.sampled_from(["ftp://host", "http://", "http://127.0.0.1:99999",
                                                       "127.0.0.1:8642", "http://:8642"])},
    ("run", "qos_infrastructure"): {"bad spec": st.sampled_from(["", "my grid", "-grid", "g" * 65, "grid!"])},
    ("simulate a2ha", "workload"): {
        "bad spec": st.one_of(
            _spec("normal:{}:100:10", st.integers(max_value=0)),
            _spec("constant:10:{}", st.integers(max_value=-1)),
            st.sampled_from(["gamma:10:-100:10", "lognormal:10:100:-1", "normal:10:100", "constant:10:nan",
                             "gamma:10:inf:1", "bogus:1:2:3", "normal:x:100:10"])),
        "huge": _spec("gamma:{}:100:10", st.integers(10**8, 10**15))},
    ("simulate spequlos", "strategy"): {
        "bad spec": st.sampled_from(["9X-C-R", "9C-C", "9C-Q-R", "9C-C-R-R", "batch-accel+none",
                                     "batch-accel+batch-accel", "9C-C-R+9A-G-D", ":AtShare"]),
        # a strategy of one's own (MODULE:CLASS, FILE.py:CLASS) that cannot be used: one case each
        "missing file": st.just("gone.py:AtShare"), "missing module": st.just("zzmodule_nope:Mine"),
        "missing class": st.just("mine_strategy.py:Nope"), "not a class": st.just("math:pi"),
        "not a strategy": st.just("json:JSONDecoder"),
        "missing parameter": st.just("mine_strategy.py:NeedsN"),
        "batch-accel on xwhep": st.just("batch-accel+mine_strategy.py:AtShare")},
    # (with --strategy mine_strategy.py:AtShare: CONTEXT) a parameter it does not take, or cannot take
    ("simulate spequlos", "strategy_arg"): {
        "bad spec": st.sampled_from(["at", "=1", "1at=2", "at= "]), "unknown parameter": st.just("zz=1"),
        "mistyped": st.sampled_from(["workers=x", "workers=1.5"]), "nan": st.just("at=nan"),
        "refused by the class": st.sampled_from(["at=0", "at=1.5"])},
    # minutes and seconds past 59 are a typo, not a longer lease (issue 36: 1:99:99 was 9,639 s)
    ("leases request", "duration"): {"minutes past 59": st.just("1:99:00"),
                                     "seconds past 59": st.just("1:00:60"),
                                     "bad spec": st.sampled_from(["-1", "1:2", "nan:00:00", "1:2:3:4:5"])},
    # a suffix that names no format (issue 36: x.xlsx got CSV)
    ("export", "output"): {"suffix of no format": st.sampled_from(["tasks.xlsx", "tasks.tsv", "t.csv.gz"])},
    # (with the base's --bot small) RANDOM's options: only that bag's tasks arrive over time
    ("simulate spequlos", "random_epsilon"): {"not a RANDOM bag": st.just("5")},
    ("simulate spequlos", "random_arrivals"): {"not a RANDOM bag": st.sampled_from(["iid", "quantile",
                                                                                   "epsilon"])},
    ("reproduce thesis-mapping", "sizes"): {"bad spec": st.sampled_from(["512x17", ",", "512x16,zz"])},
    ("reproduce spequlos", "traces"): {"bad spec": st.sampled_from([",", " , "])},
    ("reproduce haizea", "workloads"): {"bad spec": st.just(",")},
    ("reproduce haizea", "configs"): {"bad spec": st.just(",")},
}

# simulate bag loads its policy with run's loader and reads simulate a2ha's workloads
SPECS[("simulate bag", "policy")] = SPECS[("run", "policy")]
SPECS[("simulate bag", "policy_arg")] = SPECS[("run", "policy_arg")]
SPECS[("simulate bag", "workload")] = SPECS[("simulate a2ha", "workload")]
# `leases simulate --users`: any name is a user (FREE); a list with an empty name, or a count out of
# range, is not
FREE.add(("leases simulate", "users"))
SPECS[("leases simulate", "users")] = {"bad users": st.sampled_from([",", "a,,b", "0", "10001", " "])}

# A valid, fast invocation of each command: values by parameter, and the kind of file each
# file-taking parameter is given (written in the case's folder under the kind's name).
Invocation = tuple[dict[str, str | None], dict[str, str]]
BASE: dict[str, Invocation] = {
    "map": ({"etc_file": "inst.etc"}, {"etc_file": "etc"}),
    "place": ({"desktops": "thesis-lab", "vms": "synthetic:10"}, {}),
    "run": ({"job": "jobs.txt", "out_dir": "out", "policy": "fixed:1", "max_workers": "1"},
            {"job": "job-txt"}),
    "status": ({"out_dir": "prev"}, {"out_dir": "store"}),
    "data": ({}, {}),
    "data import": ({"name": "power", "path": "copy"}, {"path": "power-copy"}),
    "data path": ({"name": "power"}, {}),
    "etc generate": ({"out_file": "new.etc", "tasks": "8", "machines": "4"}, {}),
    "etc stats": ({"etc_file": "inst.etc"}, {"etc_file": "etc"}),
    "traces stats": ({"traces": "nd", "nodes": "10", "days": "1"}, {}),
    "plan hybrid": ({}, {}), "plan mapreduce": ({}, {}), "plan multi": ({}, {}),
    "plan pareto": ({"model": "hybrid"}, {}),
    "simulate a2ha": ({"workload": "constant:10:100", "orderings": "2"}, {}),
    "simulate bag": ({"workload": "constant:10:100", "policy": "a2ha", "orderings": "2"}, {}),
    "simulate spequlos": ({"middleware": "xwhep", "trace": "nd", "bot": "small"}, {}),
    "simulate replay": ({"out_dir": "prev"}, {"out_dir": "store"}),
    "export": ({"out_dir": "prev", "output": "tasks.csv"}, {"out_dir": "store"}),
    "show": ({"out_dir": "prev", "task": "0"}, {"out_dir": "store"}),
    "failed": ({"out_dir": "prev"}, {"out_dir": "store"}),
    "leases simulate": ({"workload": "ars.lwf"}, {"workload": "lwf"}),
    # exempt: never run as they are
    "demo": ({}, {}), "data fetch": ({"name": "power"}, {}),
    "reproduce ilp": ({"out_dir": "out"}, {}),  # about 3 s
    **{f"reproduce {r}": ({"out_dir": "out"}, {}) for r in ("a2ha", "spequlos", "haizea", "thesis-mapping",
                                                           "thesis-placement")},

    "serve user list": ({"data_dir": "srv"}, {"data_dir": "serve-data"}),
    "serve": ({}, {}), "serve user add": ({"name": "alice"}, {}),
    "serve user remove": ({"name": "alice"}, {}),
    "serve calibrate": ({"site": "site.toml", "image": "guest"}, {"site": "site-toml"}),
    **{f"leases {c}": ({}, {}) for c in ("list", "queue", "hosts")},
    **{f"leases {c}": ({"lease_id": "1"}, {}) for c in ("cancel", "show", "logs")},
    "leases request": ({"file": "lease.json"}, {"file": "lease-json"}),
    "leases when": ({"duration": "3600"}, {}),
    "leases extend": ({"lease_id": "1", "by": "60"}, {}),
    "qos account": ({}, {}), "qos bots": ({}, {}), "qos history": ({"infrastructure": "local-grid"}, {}),
    "qos deposit": ({"user": "alice", "credits": "10"}, {}), "qos order": ({"bot": "1", "credits": "10"}, {}),
    "qos predict": ({"bot": "1"}, {}),
    "login": ({}, {}), "logout": ({}, {}),
}
# What some parameters need beside them to mean anything: the case's wrong value must be the only
# mistake, and one that is looked at (None: leave the base's value out).
CONTEXT: dict[tuple[str, str], Invocation] = {
    ("run", "args"): ({"job": "math:factorial", "args": "args.json"}, {"args": "args-json"}),
    ("run", "policy_arg"): ({"policy": "mine.py:Mine"}, {"policy": "policy-py"}),
    ("map", "heuristic"): ({"heuristic": "rr.py:RoundRobin"}, {"heuristic": "heuristic-py"}),
    ("map", "heuristic_arg"): ({"heuristic": "rr.py:RoundRobin"}, {"heuristic": "heuristic-py"}),
    ("place", "algorithm"): ({"algorithm": "roomiest.py:Roomiest"}, {"algorithm": "placement-py"}),
    ("place", "algorithm_arg"): ({"algorithm": "roomiest.py:Roomiest"}, {"algorithm": "placement-py"}),
    ("run", "budget"): ({"policy": "a2ha"}, {}),
    ("simulate spequlos", "strategy"): ({}, {"strategy": "strategy-py"}),
    ("simulate spequlos", "strategy_arg"): ({"strategy": "mine_strategy.py:AtShare"},
                                            {"strategy": "strategy-py"}),
    ("simulate bag", "policy_arg"): ({"policy": "mine.py:Mine"}, {"policy": "policy-py"}),
    ("run", "seed"): ({"policy": "a2ha"}, {}),
    **dict.fromkeys((("run", "tail_qos"), ("run", "reliable_pool"), ("run", "tail_credits")), (
        {"pools": "two.toml", "pool": "volatile", "tail_qos": "9A-C-D", "reliable_pool": "reliable"},
        {"pools": "two-pools"})),
    # a service that is not there: the run goes on without QoS (and says so), so these bases work
    **dict.fromkeys((("run", "qos"), ("run", "qos_token"), ("run", "qos_credits"), ("run", "qos_strategy"),
                     ("run", "qos_infrastructure")), (
        {"pools": "two.toml", "pool": "volatile", "qos": "http://127.0.0.1:1", "qos_token": "t",
         "reliable_pool": "reliable"}, {"pools": "two-pools"})),
    ("run", "volatile_pool"): ({"volatility": "nd"}, {}),
    ("run", "trace_scale"): ({"volatility": "nd"}, {}),
    ("run", "trace_start"): ({"volatility": "nd"}, {}),
    ("traces stats", "traces"): ({"nodes": None, "days": None}, {}),  # a file trace's own size
    ("leases request", "duration"): ({"file": None}, {}),  # with a FILE, any option is refused first
    ("etc generate", "r_task"): ({"method": "range"}, {}),  # read by the range method only
    ("etc generate", "r_mach"): ({"method": "range"}, {}),
}
# Commands that look for data sets before their --out: a missing data set is their first answer.
NEEDS_DATA = {"reproduce spequlos", "reproduce haizea"}


@dataclass(frozen=True)
class Case:
    param: Param
    what: str  # "negative", "nan", "file truncated", ...
    values: st.SearchStrategy[str] | None = None  # the wrong value (None: a file case)
    kind: str | None = None  # file cases: the kind of file, and how it is spoilt
    spoil: str = ""
    strict: bool = True  # False: the input may also be accepted (exit 0 or 1), if cleanly
    named: bool = True  # the error line must name the option or file (not when the answer is a result)
    early: bool = False  # refused before any work (by click, or a first check): runs for EXEMPT too
    flags: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        return f"{self.param.command} {self.param.label} {self.what}"


def _text(parses: Callable[[str], object]) -> st.SearchStrategy[str]:
    """Short text that ``parses`` (int or float) refuses."""

    def bad(s: str) -> bool:
        with contextlib.suppress(ValueError):
            return parses(s) is None
        return True

    return st.text(string.ascii_letters + "._ ,", min_size=1, max_size=6).filter(bad)


def _fmt(x: float) -> str:
    return repr(float(x))


def _number_cases(p: Param) -> Iterator[Case]:
    rng = DOMAIN.get((p.command, p.key), Range())
    click_lo = p.lo is not None
    lo = p.lo if click_lo else rng.lo
    hi = p.hi if p.hi is not None else rng.hi
    if p.type == "int":
        yield Case(p, "not an integer", _text(int) | st.floats(0.1, 1e6).filter(lambda x: x % 1).map(_fmt),
                   early=True)
        if lo is not None:
            what = "negative" if lo == 0 else f"below {lo:g}"
            yield Case(p, what, st.integers(max_value=math.ceil(lo) - 1).map(str), early=click_lo)
        if hi is not None:
            yield Case(p, f"above {hi:g}", st.integers(min_value=math.floor(hi) + 1).map(str),
                       early=p.hi is not None)
        if rng.huge:
            yield Case(p, "huge", st.integers(10**9, 10**30).map(str), strict=not rng.huge_may_answer,
                       named=not rng.huge_may_answer)
    else:
        yield Case(p, "not a number", _text(float), early=True)
        yield Case(p, "nan", st.sampled_from(["nan", "NaN", "-nan"]))
        if not rng.inf_ok:
            yield Case(p, "infinite", st.sampled_from(["inf", "-inf", "Infinity", "1e400"]),
                       strict=not rng.huge_may_answer, named=not rng.huge_may_answer)
        if lo is not None:
            if lo == 0 and rng.lo_open and not click_lo:
                yield Case(p, "zero", st.sampled_from(["0", "0.0", "-0.0"]))
            below = st.floats(max_value=lo, exclude_max=not rng.lo_open, allow_nan=False,
                              allow_infinity=False)
            if lo == 0:
                below = st.floats(max_value=-1e-9, allow_nan=False, allow_infinity=False)
            yield Case(p, "negative" if lo == 0 else f"below {lo:g}", below.map(_fmt), early=click_lo)
        if hi is not None:
            yield Case(p, f"above {hi:g}", st.floats(min_value=hi, exclude_min=True, allow_nan=False,
                                                     allow_infinity=False).map(_fmt), early=p.hi is not None)
        if rng.huge:
            yield Case(p, "huge", st.floats(1e7, 1e300).map(_fmt), strict=not rng.huge_may_answer,
                       named=not rng.huge_may_answer)
    yield Case(p, "empty", st.just(""), early=True)


def _file_cases(p: Param, kind_name: str) -> Iterator[Case]:
    tag = f"{kind_name} " if len(READS.get((p.command, p.key), ())) > 1 else ""
    if kind_name == "store":
        for spoil in ("missing", "a file", "empty folder", "empty db", "binary db", "truncated db",
                      "foreign db", "db is a folder"):
            yield Case(p, f"{tag}{spoil}", kind=kind_name, spoil=spoil)
        return
    if kind_name == "dataset":
        for spoil in ("missing", "a file", "empty folder", "wrong files"):
            yield Case(p, f"{tag}{spoil}", kind=kind_name, spoil=spoil)
        return
    k = KINDS[kind_name]
    spoils = ["missing", "a file" if k.directory else "a folder", "binary"]
    if k.directory:
        spoils.append("empty folder")
    if not k.empty_ok:
        spoils.append("empty file")
    if k.truncate is not None:
        spoils.append("truncated")
    spoils += [f"shape {i}" for i in range(len(k.shapes))]
    if k.huge is not None:
        spoils.append("huge")
    spoils.append("utf-16")
    if k.latin1 is not None:
        spoils.append("latin-1")
    for spoil in spoils:
        answer = spoil == "huge" and k.huge_may_answer
        strict = spoil != "utf-16" and not (spoil == "latin-1" and not k.latin1_strict) and not answer
        yield Case(p, f"{tag}{spoil}", kind=kind_name, spoil=spoil, strict=strict, named=not answer)


def _output_cases(p: Param, what: str) -> Iterator[Case]:
    if what == "folder":
        yield Case(p, "is a file", st.just("taken"), early=p.command not in NEEDS_DATA | {"data fetch"})
        if p.command == "run":
            yield Case(p, "holds a run", st.just("prev"))
        if (p.command, p.key) in (("serve user list", "data_dir"), ("serve user remove", "data_dir")):
            # a command that only reads must not create a server there (issue 36)
            yield Case(p, "no server there", st.sampled_from(["no/such", "empty"]), early=True)
        if p.label == "--out":  # "" is the working folder, " " a folder named by a space (issue 36)
            yield Case(p, "empty", st.just(""), early=True)
            yield Case(p, "blank", st.sampled_from([" ", "  ", "\t"]), early=True)
        return
    suffix = ".png" if what == "plot" else ".etc"
    yield Case(p, "is a folder", st.just(f"folder{suffix}"))
    yield Case(p, "in a missing folder", st.just(f"missing/x{suffix}"))
    if what == "plot":
        yield Case(p, "unknown format", st.sampled_from(["plot.xyz", "plot", "plot.png.txt"]))


def _cases_of(p: Param) -> Iterator[Case]:
    key = (p.command, p.key)
    if key == ("run", "out_dir"):  # --resume on what is not a run of skylease's
        for c in _file_cases(p, "store"):
            yield replace(c, what=f"--resume {c.what}", flags=("--resume",))
    if key in WRITES:
        yield from _output_cases(p, WRITES[key])
        if p.type == "path":
            return
    if p.type in ("int", "float"):
        yield from _number_cases(p)
        for what, values in SPECS.get(key, {}).items():  # a number wrong only beside other options
            yield Case(p, what, values)
        return
    for kind_name in READS.get(key, ()):
        yield from _file_cases(p, kind_name)
    if key not in FREE and key not in WRITES:
        yield Case(p, "empty", st.just(""), early=key in SPECS or p.command == "data fetch")
        if p.type == "str" or key in READS:
            unknown = st.from_regex(r"\Azz[a-z0-9_]{0,6}\Z")
            yield Case(p, "unknown", unknown, early=p.command == "data fetch")
    for what, values in SPECS.get(key, {}).items():
        yield Case(p, what, values, early=p.command.startswith("reproduce"))


def _all_cases() -> list[Case]:
    cases = []
    for p in _params():
        for c in _cases_of(p):
            if p.command in EXEMPT and not c.early and (p.command, p.key) not in CHECKED_FIRST:
                continue
            cases.append(c)
    return cases


# -- running a case ----------------------------------------------------------------------------
WRITERS = {"run", "etc generate", "data import", "reproduce ilp"}  # their valid base writes files
Draw = Callable[[st.SearchStrategy], object]


def _argv(command: str, values: dict[str, str]) -> list[str]:
    cmd = _commands()[command]
    argv = command.split()
    labels = {p.key: p for p in _params() if p.command == command}
    argv += [values[k] for k, p in labels.items() if p.positional and k in values]
    for k, p in labels.items():
        if not p.positional and k in values:
            argv += [p.label, values[k]]
    assert all(k in labels for k in values), (command, values, cmd)
    return argv


def _write_base(folder: Path, kind_name: str, store: Path, data: Path | None) -> None:
    if kind_name == "store":
        _copy_store(store, folder / "prev")
    elif kind_name == "serve-data":  # a server's data folder and database, made as `serve` makes them
        from skylease.service.server import load_serve_config, open_database

        open_database(load_serve_config(None, data_dir=folder / "srv")).dispose()
    elif kind_name == "two-pools":
        (folder / "two.toml").write_bytes(TWO_POOLS)
    elif kind_name == "power-copy":  # a real data set: the import checks its files
        if data is None or not (data / "power").is_dir():
            pytest.skip("needs the real data sets (power/ in the data folder: skylease data fetch, "
                        "or SKYLEASE_DATA)")
        _copy_store(data / "power", folder / "copy")
    else:
        k = KINDS[kind_name]
        if k.directory:
            (folder / k.name).mkdir()
            (folder / k.name / k.inner).write_bytes(k.valid)
        else:
            (folder / k.name).write_bytes(k.valid)


def _copy_store(store: Path, dest: Path) -> None:
    dest.mkdir()
    for f in store.iterdir():
        if f.is_file():
            (dest / f.name).write_bytes(f.read_bytes())


def _clear(path: Path) -> None:
    if path.is_dir():
        for p in sorted(path.rglob("*"), reverse=True):
            p.rmdir() if p.is_dir() else p.unlink()
        path.rmdir()
    elif path.exists():
        path.unlink()


def _invocation(command: str, key: str | None) -> tuple[dict[str, str], dict[str, str]]:
    """The base command line's values and files, with the context parameter ``key`` needs."""
    values, files = dict(BASE[command][0]), dict(BASE[command][1])
    extra = CONTEXT.get((command, key)) if key is not None else None
    if extra is not None:
        values.update(extra[0])
        files.update(extra[1])
    return {k: v for k, v in values.items() if v is not None}, files


def _spoilt(k: Kind, spoil: str, draw: Draw) -> bytes:
    if spoil == "empty file":
        return b""
    if spoil == "binary":  # never UTF-8 (0x89), with a NUL, whatever follows
        return b"\x89\x00" + draw(st.binary(max_size=200))
    if spoil == "truncated":
        assert k.truncate is not None
        return k.valid[: draw(st.integers(*k.truncate))]
    if spoil.startswith("shape "):
        return k.shapes[int(spoil.split()[1])]
    if spoil == "huge":
        assert k.huge is not None
        return k.huge
    if spoil == "utf-16":
        return k.valid.decode().encode("utf-16")
    assert spoil == "latin-1" and k.latin1 is not None
    return k.latin1


def _spoil_file(folder: Path, case: Case, draw: Draw, store: Path, taken: set[str]) -> str:
    """Write the case's malformed input in ``folder`` (not over a file of the base, ``taken``); the
    value naming it."""
    spoil = case.spoil
    if spoil == "missing":
        return "gone"
    if case.kind == "store":
        path = folder / "prev"
        _clear(path)
        if spoil == "a file":
            path.write_text("not a run\n")
            return "prev"
        path.mkdir()
        db = path / "results.sqlite"
        if spoil == "empty db":
            db.write_bytes(b"")
        elif spoil == "binary db":
            db.write_bytes(b"\x89\x00" + draw(st.binary(min_size=1, max_size=4096)))
        elif spoil == "truncated db":
            real = (store / "results.sqlite").read_bytes()
            db.write_bytes(real[: draw(st.integers(1, len(real) - 1))])
        elif spoil == "foreign db":
            import sqlite3

            con = sqlite3.connect(db)
            con.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
            con.execute("INSERT INTO notes (text) VALUES ('mine')")
            con.commit()
            con.close()
        elif spoil == "db is a folder":
            db.mkdir()
        return "prev"
    if case.kind == "dataset":
        path = folder / "copy"
        if spoil == "a file":
            path.write_text("not a folder\n")
        else:
            path.mkdir()
            if spoil == "wrong files":
                (path / "readme.txt").write_text("hello\n")
        return "copy"
    k = KINDS[case.kind]
    if k.name in taken:
        k = replace(k, name=f"{case.param.key}-{k.name}")
    path = folder / k.name
    _clear(path)
    if k.directory:
        if spoil == "a file":
            path.write_bytes(k.valid)
            return k.name
        path.mkdir()
        if spoil != "empty folder":
            (path / k.inner).write_bytes(_spoilt(k, spoil, draw))
        return k.name
    if spoil == "a folder":
        path.mkdir()
        return k.name
    path.write_bytes(_spoilt(k, spoil, draw))
    return k.name


def _prepare(case: Case, folder: Path, draw: Draw, store: Path, data: Path | None) -> tuple[list[str], str]:
    """Write the case's files in ``folder``; its command line and the value it gives."""
    p = case.param
    values, files = _invocation(p.command, p.key)
    for key, kind_name in files.items():
        if key != p.key or case.kind is None:
            _write_base(folder, kind_name, store, data)
    if case.kind is not None:
        taken = {KINDS[kn].name for key, kn in files.items() if key != p.key and kn in KINDS}
        value = _spoil_file(folder, case, draw, store, taken)
    else:
        value = str(draw(case.values))
        if case.what == "is a folder" or (case.what == "no server there" and value == "empty"):
            (folder / value).mkdir()
        elif case.what == "is a file":
            (folder / value).write_text("not a folder\n")
        elif case.what == "holds a run":
            _clear(folder / value)
            _copy_store(store, folder / value)
    values[p.key] = value
    return _argv(p.command, values) + list(case.flags), value


def _snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): "folder" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
            for p in folder.rglob("*")}


def _names(case: Case, line: str, value: str) -> bool:
    """Whether the error line names what was wrong: the option, or the file or value given. (An
    empty value is a path to the working folder for some options, so "." may stand for it.)"""
    p = case.param
    if not case.named or value == "" or p.label.lstrip("-").lower() in line.lower().replace("_", "-"):
        return True
    if p.positional or case.kind is not None or (p.command, p.key) in READS | WRITES.keys():
        return value in line or value.split("/")[0] in line
    return False


# -- docs/cli.md's rules -------------------------------------------------------------------------
#: Click's and pydantic's wording, which docs/cli.md's error style replaces with our own.
FOREIGN_WORDING = ("Invalid value for", "Input should be", "Possible options", "No such option:",
                   "Missing option", "Missing argument", "(see --help)", "Usage:", "Try '")


def _style(line: str, command: str) -> str | None:
    """What is wrong with an error line, by docs/cli.md: ``skylease CMD: error: WHAT: reason``."""
    if not line.startswith(f"skylease {command}: error: ".replace("skylease : ", "skylease: ")):
        return f"not in the documented style 'skylease {command}: error: ...': {line!r}"
    foreign = [w for w in FOREIGN_WORDING if w in line]
    if foreign:
        return f"click's or pydantic's wording {foreign[0]!r}, not ours: {line!r}"
    return None


def _changes(before: dict, after: dict) -> list[str]:
    return sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))


def _verdict(case: Case, o: Outcome, before: dict, after: dict, value: str) -> str | None:
    """What is wrong with how the command answered the case (None: nothing)."""
    if o.timed_out:
        return f"no answer within {CASE_TIMEOUT_S:g} s"
    if "Traceback" in o.out + o.err:
        return "a traceback"
    wrote = _changes(before, after)
    if o.code == 2:
        lines = o.err.splitlines()
        if len(lines) != 1 or not lines[0].startswith("skylease"):
            return f"{len(lines)} lines on stderr, not one 'skylease...: error: ...' line"
        why = _style(lines[0], case.param.command)
        if why is not None:
            return why
        if not _names(case, lines[0], value):
            return f"the line names neither {case.param.label} nor {value!r}"
        if case.spoil.startswith("shape") and KINDS[case.kind].lines:
            name = KINDS[case.kind].inner or value
            if not re.search(rf"(^|[\s/]){re.escape(name)}:\d+", lines[0]):
                return f"the line does not say which line of {name} is wrong ({name}:LINE)"
        if wrote:
            return f"changed {wrote[:5]}"
        return None
    if not case.strict and o.code in (0, 1):  # accepted, cleanly
        if wrote and case.param.command not in WRITERS:
            return f"changed {wrote[:5]}"
        return None
    return f"exit status {o.code}, not 2"


# -- the tests ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def finished_run(zygote, tmp_path_factory) -> Path:
    """The output folder of a small finished run: a valid store that cases spoil."""
    folder = tmp_path_factory.mktemp("finished-run")
    (folder / "jobs.txt").write_bytes(KINDS["job-txt"].valid)
    o = zygote.run(["run", "jobs.txt", "--out", "prev", "--max-workers", "1", "--policy", "fixed:1"], folder,
                   timeout=120)
    assert o.code == 0, o.describe()
    return folder / "prev"


CASES = _all_cases()

# Failures this test finds that cannot be fixed at once: (case id -> what happened), run as
# xfail(strict=False) so an XPASS says when to drop the entry. Those in HANGS time out or grow for
# seconds before failing, so they do not run while listed (the test stays under two minutes).
# Empty: every failure found when the test was written (issue 18) is fixed.
KNOWN_FAILURES: dict[str, str] = {}
HANGS: set[str] = set()


def _case_param(c: Case):
    marks = []
    if c.id in KNOWN_FAILURES:
        marks.append(pytest.mark.xfail(strict=False, run=c.id not in HANGS, reason=KNOWN_FAILURES[c.id]))
    return pytest.param(c, id=c.id, marks=marks)


@pytest.mark.parametrize("case", [_case_param(c) for c in CASES])
def test_a_wrong_input_is_one_line_and_exit_2(case: Case, zygote: Zygote, finished_run: Path, tmp_path):
    data = _shared_data()
    failures: list[str] = []

    # Hypothesis does not see a failure (so it neither shrinks nor replays it: a case that hangs
    # costs one timeout, not ten); the first one fails the test.
    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(st.data())
    def check(draws):
        folder = Path(tempfile.mkdtemp(dir=tmp_path))
        argv, value = _prepare(case, folder, draws.draw, finished_run, data)
        if failures:  # drawn all the same: hypothesis wants each example to draw alike
            return
        before = _snapshot(folder)
        o = zygote.run(argv, folder, env={"SKYLEASE_DATA": str(folder / "skylease-data")})
        why = _verdict(case, o, before, _snapshot(folder), value)
        if why is not None:
            failures.append(f"skylease {subprocess.list2cmdline(argv)}: {why}; {o.describe()}")

    check()
    assert not failures, failures[0]


def _shared_data() -> Path | None:
    """The real data sets, found as the ``shared_data`` fixture finds them (``$SKYLEASE_DATA``, else the
    project's copy beside this checkout), or None: only the one case that needs them skips."""
    env = os.environ.get("SKYLEASE_DATA", "").strip()
    path = Path(env).expanduser() if env else ROOT.parent / "shared" / "data"
    return path if path.is_dir() else None


def _bases() -> list:
    out = []
    for command in BASE:
        if command in EXEMPT or command == "data path":
            continue
        out.append(pytest.param(command, None, id=command))
        out += [pytest.param(command, key, id=f"{command} with {key}")
                for (c, key) in CONTEXT if c == command]
    return out


@pytest.mark.parametrize(("command", "context"), _bases())
def test_bases_are_valid(command: str, context: str | None, zygote: Zygote, finished_run: Path, tmp_path):
    """Each case changes one value of a command line that works (`data path` answers 2 when the
    data set is not in the data folder, which is empty here)."""
    values, files = _invocation(command, context)
    for kind_name in files.values():
        _write_base(tmp_path, kind_name, finished_run, _shared_data())
    argv = _argv(command, values)
    o = zygote.run(argv, tmp_path, env={"SKYLEASE_DATA": str(tmp_path / "skylease-data")}, timeout=60)
    assert o.code == 0 and "Traceback" not in o.err, \
        f"skylease {subprocess.list2cmdline(argv)}: {o.describe()}"


def test_every_command_and_option_is_fuzzed():
    commands = _commands()
    assert set(commands) == set(BASE), "give each new command a BASE invocation (or say in EXEMPT why not)"
    params = {(p.command, p.key): p for p in _params()}
    covered = {(c.param.command, c.param.key) for c in CASES}
    for key, p in params.items():
        if p.command not in EXEMPT:
            assert key in covered, f"no case for {p.command} {p.label}"
        if p.type == "path":
            assert key in READS or key in WRITES, f"{p.command} {p.label} is a path: say in READS or WRITES"
    for table in (DOMAIN, READS, WRITES, SPECS, CONTEXT, dict.fromkeys(FREE), dict.fromkeys(CHECKED_FIRST)):
        assert set(table) <= set(params), set(table) - set(params)
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids))
    assert set(KNOWN_FAILURES) <= set(ids), set(KNOWN_FAILURES) - set(ids)
    assert set(KNOWN_FAILURES) >= HANGS


def test_every_list_command_pages_within_the_servers_bounds():
    """--limit's bounds are the server's (1 to paging.MAX_LIMIT), so a wrong one is refused before a
    request is sent; --all is there too; and its cases are among the fuzz cases."""
    from skylease.service.paging import MAX_LIMIT

    commands = _commands()
    numbers = {(p.command, p.key): p for p in _params()}
    covered = {(c.param.command, c.param.key) for c in CASES}
    for name in LIST_COMMANDS:
        limit = numbers[(name, "limit")]
        assert (limit.label, limit.lo, limit.hi) == ("--limit", 1, MAX_LIMIT), name
        every = next(p for p in commands[name].params if p.name == "every")
        assert every.opts == ["--all"] and every.is_flag, name
        assert (name, "limit") in covered, name


def _long_options(cmd) -> list[str]:
    return sorted({o for p in cmd.params if not getattr(p, "hidden", False)
                   for o in (*p.opts, *getattr(p, "secondary_opts", ()))
                   if o.startswith("--") and o != "--help"})


def _usage_error(capsys, argv: list[str]) -> str:
    """``skylease ARGV`` in this process, refused while parsing (nothing runs): its one error line."""
    from skylease.cli import main

    code = main(argv)
    cap = capsys.readouterr()
    assert code == 2 and cap.out == "" and cap.err.count("\n") == 1 and "Traceback" not in cap.err, \
        (argv, code, cap.err)
    return cap.err.strip()


@pytest.mark.parametrize("command", sorted(BASE))
def test_a_typo_gets_a_suggestion_only_when_one_is_close(command, capsys):
    """docs/cli.md: an unknown option is one line, exit 2; "did you mean" names the closest option
    only when it is close (difflib ratio >= 0.75: a letter short is); a word like --frobnicate gets
    no suggestion. The command's own valid arguments come first, so the typo is the only mistake."""
    import difflib

    from skylease.cli.errors import SUGGEST_CUTOFF

    cmd = _commands()[command]
    options = _long_options(cmd)
    values = dict(BASE[command][0])
    positional = [p for p in _params() if p.command == command and p.positional and p.key in values]
    base = [*command.split(), *(values[p.key] for p in positional)]
    ratio = difflib.SequenceMatcher
    for opt in options:
        typo = opt[:-1]  # a letter short
        if typo in options or len(typo) <= 3:
            continue
        line = _usage_error(capsys, [*base, typo])
        assert _style(line, command) is None, line
        said = re.search(r"did you mean (--[\w-]+)\?$", line)
        assert said is not None and said.group(1) in options, line
        close = ratio(None, typo, said.group(1)).ratio()
        assert close >= max(SUGGEST_CUTOFF, ratio(None, typo, opt).ratio()), line
    line = _usage_error(capsys, [*base, "--frobnicate"])
    assert _style(line, command) is None and "did you mean" not in line, line
    assert line.startswith(f"skylease {command}: error: --frobnicate: no such option"), line


def test_an_unknown_command_gets_a_suggestion_only_when_one_is_close(capsys):
    assert _usage_error(capsys, ["simulat"]) == \
        "skylease: error: simulat: no such command; did you mean simulate?"
    assert _usage_error(capsys, ["leases", "lst"]) == \
        "skylease leases: error: lst: no such command; did you mean list?"
    line = _usage_error(capsys, ["frobnicate"])
    assert line.startswith("skylease: error: frobnicate: no such command") and "did you mean" not in line


def test_skylease_alone_prints_its_help_and_exits_0(capsys):
    """docs/cli.md: `skylease` (or a group) alone is a request for help, as `docker` alone is."""
    from skylease.cli import main

    for argv in ([], ["simulate"], ["serve", "user"]):
        assert main(argv) == 0
        cap = capsys.readouterr()
        assert cap.err == "" and "Commands:" in cap.out and "Example" in cap.out, (argv, cap)
        assert cap.out.startswith(f"Usage: skylease {' '.join(argv)}".rstrip()), cap.out[:80]


def _all_paths() -> list[str]:
    from skylease.cli import click_command

    found = [""]

    def walk(cmd, path):
        for name, sub in (getattr(cmd, "commands", None) or {}).items():
            found.append(" ".join((*path, name)))
            walk(sub, (*path, name))

    walk(click_command(), ())
    return found


@pytest.mark.parametrize("path", _all_paths())
def test_every_help_shows_an_example_that_parses(path, capsys):
    """docs/cli.md: every --help ends with an example, a command line that the CLI parses."""
    import shlex

    from skylease.cli import click_command, main

    assert main([*path.split(), "--help"]) == 0
    out = capsys.readouterr().out
    examples = re.findall(r"^  (?:Example|Examples):\n((?:    \S.*\n?)+)", out, re.M)
    assert examples, f"skylease {path} --help has no example:\n{out[-400:]}"
    calls = [part.strip() for line in examples[0].splitlines() for part in re.split(r"\||;|&&", line)
             if part.strip().startswith("skylease ")]
    assert any(f"{c} ".startswith(f"skylease {path} ".replace("  ", " ")) for c in calls), calls  # its own
    for call in calls:
        args = [a if "$(" not in a else "x.lwf" for a in shlex.split(call.partition(" > ")[0])[1:]]
        ctx = click_command().make_context("skylease", list(args))  # click raises if it does not parse
        while hasattr(ctx.command, "resolve_command"):
            rest = [*getattr(ctx, "_protected_args", getattr(ctx, "protected_args", [])), *ctx.args]
            if not rest:
                break
            name, sub, rest = ctx.command.resolve_command(ctx, rest)
            ctx = sub.make_context(name, rest, parent=ctx)


if __name__ == "__main__" and sys.argv[1:] == ["--zygote"]:
    _serve()
