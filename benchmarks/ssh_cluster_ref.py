"""The measurement behind docs/decisions/ssh-pool.md: Dask's ``distributed.SSHCluster`` (over
asyncssh) against skylease's SshPool (the local worker's pipe over an OpenSSH channel), on the
same test site of 4 sshd hosts, 2 slots each.

Measured for each: the start (8 workers up, from nothing), the round trip of one ``true`` task
(200 one after the other on one worker: run_task, as skylease sends it) and 2,000 ``true`` tasks
spread over the 8 workers (one call each: no batching, the per-call cost).

asyncssh is not a dependency of skylease: install it beside this script's interpreter first
(``pip install asyncssh``, or ``pip install --target DIR asyncssh`` and ``PYTHONPATH=DIR``). The
hosts run this interpreter (they share this machine's files), so Dask is there for SSHCluster.

    python benchmarks/ssh_cluster_ref.py [--base 170]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from skylease.model.instance import InstanceType
from skylease.runtime.execute import run_task
from skylease.runtime.leases.ssh import SshTarget
from skylease.runtime.ssh_pool import PoolHost, SshPool
from skylease.testing.site import start_site

TRUE = {"id": 0, "kind": "shell", "command": "true"}
HOSTS, SLOTS, SEQ, MANY = 4, 2, 200, 2000


def ours(site) -> dict[str, float]:
    hosts = [PoolHost(SshTarget(h.address, identity_file=site.key, known_hosts=site.known_hosts), SLOTS)
             for h in site.hosts]
    pool = SshPool(InstanceType("lab"), hosts, "ref")
    t = time.perf_counter()
    pool.connect()
    names = [f"lab-{i}" for i in range(HOSTS * SLOTS)]
    for n in names:
        pool.start(n)
    while len(pool.workers()) < len(names):
        time.sleep(0.005)
    up = time.perf_counter() - t
    try:
        t = time.perf_counter()
        for _ in range(SEQ):
            pool.submit(names[0], run_task, TRUE, 1, None).result(30)
        seq = (time.perf_counter() - t) / SEQ
        t = time.perf_counter()
        calls = [pool.submit(names[i % len(names)], run_task, TRUE, 1, None) for i in range(MANY)]
        for c in calls:
            c.result(60)
        many = time.perf_counter() - t
    finally:
        pool.close()
    return {"start": up, "round trip": seq, "many": many}


def dask(site) -> dict[str, float]:
    import logging

    from distributed import Client, SSHCluster

    logging.getLogger("distributed").setLevel(logging.ERROR)
    addresses = [site.hosts[0].address] + [h.address for h in site.hosts for _ in range(SLOTS)]
    t = time.perf_counter()
    cluster = SSHCluster(addresses, connect_options={"known_hosts": str(site.known_hosts),
                                                     "client_keys": [str(site.key)], "username": "root"},
                         worker_options={"nthreads": 1, "nanny": False},
                         scheduler_options={"port": 0, "dashboard_address": None},
                         remote_python=sys.executable)
    client = Client(cluster)
    client.wait_for_workers(HOSTS * SLOTS)
    up = time.perf_counter() - t
    try:
        workers = sorted(client.scheduler_info(n_workers=-1)["workers"])
        t = time.perf_counter()
        for _ in range(SEQ):
            client.submit(run_task, TRUE, 1, None, workers=[workers[0]], pure=False).result()
        seq = (time.perf_counter() - t) / SEQ
        t = time.perf_counter()
        futures = [client.submit(run_task, TRUE, 1, None, workers=[workers[i % len(workers)]], pure=False)
                   for i in range(MANY)]
        client.gather(futures)
        many = time.perf_counter() - t
    finally:
        client.close()
        cluster.close()
    return {"start": up, "round trip": seq, "many": many}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", type=int, default=170, help="Host i on 127.0.0.(BASE+i).")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        site = start_site(HOSTS, Path(tmp) / "site", base=a.base, die_with_caller=True)
        try:
            rows = {"SshPool (OpenSSH channel, JSON lines)": ours(site)}
            try:
                rows["distributed.SSHCluster (asyncssh)"] = dask(site)
            except ImportError as e:
                print(f"SSHCluster: cannot run here ({e})")
        finally:
            site.stop()
    print(f"\n{HOSTS} hosts x {SLOTS} slots on this machine; {SEQ} round trips of `true` on one worker; "
          f"{MANY:,} `true`, one call each, over all\n")
    print("| pool | 8 workers up (s) | one task's round trip (ms) | 2,000 `true` (s) |")
    print("|---|---:|---:|---:|")
    for name, r in rows.items():
        print(f"| {name} | {r['start']:.2f} | {1000 * r['round trip']:.2f} | {r['many']:.2f} |")


if __name__ == "__main__":
    main()
