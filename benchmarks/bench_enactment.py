"""The time of each enactment command over SSH against the local enactment, in the same run.

Two enactments of the same one-node site, one command sequence, in one run:

* **local**: :class:`LocalNodes` on this machine, each payload confined (bwrap, as ``skylease serve``
  runs them: its spawn includes the sandbox's start);
* **ssh**: :class:`HostNodes` on host1 of a test site started here (skylease.testing.site: a real
  sshd in namespaces of its own on a loopback address; the same machine, so the figures are the
  cost of SSH and the helper, not of a network), through one multiplexed connection
  (ControlMaster) and the helper's watch session, which carries every command; payloads unconfined
  there (not yet done on hosts).

Each round, for each enactment in turn (paired: the machine's load is about the same for both),
times ``spawn`` of ``sleep 60`` (until the call returns with the process's id), ``suspend``,
``resume``, ``shutdown`` (the call: SIGCONT + SIGTERM), and ``end`` (from the shutdown call until
:meth:`exited` reports the end: the exit noticed by the watcher). The table gives medians over the
rounds in milliseconds and the ratio ssh / local; then, paired the same way, an unpaced image copy
(``copy_image`` with ``seconds=0``, until it is in the node's cache) of a ``--image-mb`` MB file of
random bytes from the site's repository, in milliseconds per MB: locally a file copy into the
node's cache folder, over SSH the bytes sent through a session of its own on the master to the
helper's ``receive``, which writes them into the node's cache on the host (the same machine's disk
here); then what a command would cost in a session of
its own (which is why commands go through the watch session): a session through the master running
``true`` (the host's sshd and the SSH user's login shell, which runs its rc files: bash reads
``~/.bashrc`` for a command from sshd) and running the host's Python with nothing to do
(``--python``: the interpreter the helper runs with). Kind of comparison: local enactment is the
floor (no network, no helper); the ratio is what reaching a host over SSH costs per command.

    python benchmarks/bench_enactment.py [--rounds 10] [--image-mb 50]   # as root (the test site needs it)
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path

from skylease.control.leases.lease import ResourceTuple
from skylease.runtime.leases.host_nodes import HostNodes
from skylease.runtime.leases.local import LocalNodes
from skylease.runtime.leases.sandbox import probe
from skylease.runtime.leases.site import Site, SiteNode
from skylease.runtime.leases.ssh import SshConnection, SshTarget
from skylease.testing.site import start_site

OPS = ("spawn", "suspend", "resume", "shutdown", "end")
#: The test site's first address (127.0.0.(BASE+1)): apart from the tests' sites.
BASE = 60


def one_round(nodes, lease: int, timeout: float = 20.0) -> dict[str, float]:
    out = {}
    t = time.perf_counter()
    p = nodes.spawn(lease, 0, 0, command="exec sleep 60")
    out["spawn"] = time.perf_counter() - t
    t = time.perf_counter()
    assert nodes.suspend(p)
    out["suspend"] = time.perf_counter() - t
    t = time.perf_counter()
    assert nodes.resume(p)
    out["resume"] = time.perf_counter() - t
    t = time.perf_counter()
    assert nodes.shutdown(p, grace_s=5.0)
    out["shutdown"] = time.perf_counter() - t
    deadline = time.monotonic() + timeout
    while not any(e.pid == p.pid for e in nodes.exited()):
        if time.monotonic() > deadline:
            raise RuntimeError(f"the end of payload {p.pid} was not reported within {timeout:g} s")
        time.sleep(0.001)
    out["end"] = time.perf_counter() - t
    return out


def copy_round(nodes, size_mb: int, timeout: float = 120.0) -> float:
    """Seconds of one unpaced copy of ``disk.img`` into node 0's cache (evicted after, untimed)."""
    t = time.perf_counter()
    copy = nodes.copy_image("disk.img", size_mb, [0], 0.0)
    if not copy.wait(timeout) or not copy.done:
        raise RuntimeError(f"the image copy did not complete: {copy.error or 'timed out'}")
    took = time.perf_counter() - t
    nodes.evict(0, "disk.img")
    return took


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=10, help="rounds of each enactment (1 to 100)")
    ap.add_argument("--python", default="python3", help="the host's python3 (a name looked up in the "
                    "login shell's PATH, or an absolute path)")
    ap.add_argument("--image-mb", type=int, default=50, help="the image's size, MB (1 to 1000)")
    args = ap.parse_args(argv)
    rounds = max(1, min(100, args.rounds))
    image_mb = max(1, min(1000, args.image_mb))
    serve_id = f"bench-{secrets.token_hex(6)}"
    with tempfile.TemporaryDirectory(prefix="bench-enact-") as tmp:
        folder = Path(tmp)
        data = folder / "data"
        repo = folder / "repo"
        repo.mkdir()
        with open(repo / "disk.img", "wb") as fh:  # random: neither side can skip or compress it
            for _ in range(image_mb):
                fh.write(os.urandom(2**20))
        site = Site((SiteNode("a", ResourceTuple()),), repository=repo)
        with start_site(1, folder / "site", base=BASE) as ts:
            h = ts.hosts[0]
            conn = SshConnection(SshTarget(h.address, 22, "root", ts.key, ts.known_hosts), data / "ssh")
            local = LocalNodes(site, data, serve_id, sandbox=probe(data))
            remote = HostNodes(site, data, serve_id, connection=conn, remote_dir=str(folder / "remote"),
                               python=args.python)
            times: dict[str, dict[str, list[float]]] = {"local": {o: [] for o in OPS},
                                                         "ssh": {o: [] for o in OPS}}
            floors: dict[str, list[float]] = {"true": [], f"{args.python} -I -S -c pass": []}
            copies: dict[str, list[float]] = {"local": [], "ssh": []}
            try:
                for _ in range(rounds):  # what any command pays: a session, the login shell, python
                    for label, argv in (("true", ["true"]), (f"{args.python} -I -S -c pass",
                                                             [args.python, "-I", "-S", "-c", "pass"])):
                        t = time.perf_counter()
                        conn.run(argv)
                        floors[label].append(time.perf_counter() - t)
                for i in range(rounds + 1):  # the first round warms up (not counted)
                    for name, nodes in (("local", local), ("ssh", remote)):
                        got = one_round(nodes, i + 1)
                        took = copy_round(nodes, image_mb)
                        if i:
                            for o in OPS:
                                times[name][o].append(got[o])
                            copies[name].append(took)
            finally:
                for nodes in (remote, local):
                    with contextlib.suppress(Exception):
                        nodes.close(kill=True, grace_s=0.5)
    print(f"enactment commands, median of {rounds} rounds (ms); ssh: host1 of a test site on this "
          f"machine, one multiplexed connection")
    print(f"{'command':<10} {'local':>9} {'ssh':>9} {'ssh/local':>10}")
    for o in OPS:
        lo, ss = statistics.median(times["local"][o]) * 1e3, statistics.median(times["ssh"][o]) * 1e3
        print(f"{o:<10} {lo:>9.1f} {ss:>9.1f} {ss / lo:>9.1f}x")
    lo, ss = (statistics.median(copies[k]) * 1e3 / image_mb for k in ("local", "ssh"))
    print(f"{'image/MB':<10} {lo:>9.2f} {ss:>9.2f} {ss / lo:>9.1f}x   (unpaced copy of {image_mb} MB, "
          f"ms per MB; ssh: {image_mb / (ss * image_mb / 1e3):.0f} MB/s)")
    for label, ts in floors.items():
        print(f"floor: one session through the master running `{label}`: "
              f"{statistics.median(ts) * 1e3:.1f} ms (median)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
