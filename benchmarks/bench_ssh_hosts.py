"""``skylease run`` on SSH hosts beside GNU parallel's ``--sshlogin`` on the same hosts (issue 39).

The hosts: a test site of 4 sshd hosts started here (skylease.testing.site, 127.0.0.(BASE+1..4),
each a real OpenSSH server in namespaces of its own on this machine), 2 task slots each, stopped
by PID at the end. The work:

1. 2,000 ``true``;
2. 200 ``sleep 0.05``;

each run by ``skylease run JOBS --pools POOLS --policy fixed:8`` (the whole command: Python, its
imports, the connections to the hosts, the workers' start, the store, the report) and by Debian's
``parallel --sshlogin 2/root@HOST,...`` with its best: a ControlMaster per host that persists
across jobs and runs, opened before the clock (faster here than parallel's ``--controlmaster``),
the site's key, strict host keys, no ssh configuration file read.
Throughput ratio = parallel's seconds / skylease's (issue 39's target: >= 1 on both). Each
repetition runs both, one after the other; the medians of the paired ratios are printed. Also
printed: a worker's start cost on a host (from the run's store: a slot rented to its worker up).

    python benchmarks/bench_ssh_hosts.py [--repeat N] [--base 170] [--quick]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SKYLEASE = [sys.executable, "-m", "skylease"]
HOSTS, SLOTS = 4, 2


def _wall(cmd: list[str], stdin: Path) -> float:
    t = time.perf_counter()
    with open(stdin, "rb") as f:
        subprocess.run(cmd, stdin=f, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return time.perf_counter() - t


def parallel_ssh(site, folder: Path) -> str:
    """parallel's ssh: the site's key, strict host keys, no configuration file, and a ControlMaster
    of its own per host that persists between jobs (and runs: :func:`open_masters` opens them
    before the clock). Measured faster than parallel's own ``--controlmaster`` here: 80 `true` in
    5.5-6.4 s against 13.0 s (and 10.9 s without any master), the machine loaded."""
    return (f"ssh -F /dev/null -i {site.key} -o IdentitiesOnly=yes -o IdentityAgent=none "
            f"-o UserKnownHostsFile={site.known_hosts} -o GlobalKnownHostsFile=/dev/null "
            "-o StrictHostKeyChecking=yes -o BatchMode=yes -o LogLevel=ERROR "
            f"-o ControlMaster=auto -o ControlPath={folder}/cm-%h -o ControlPersist=600")


def open_masters(site, ssh: str) -> None:
    for h in site.hosts:
        subprocess.run([*ssh.split(), f"root@{h.address}", "true"], check=True, stdin=subprocess.DEVNULL)


def close_masters(site, ssh: str) -> None:
    for h in site.hosts:
        subprocess.run([*ssh.split(), "-O", "exit", f"root@{h.address}"], stdin=subprocess.DEVNULL,
                       capture_output=True, check=False)


def parallel_wall(jobs: Path, site, ssh: str) -> float:
    logins = ",".join(f"{SLOTS}/root@{h.address}" for h in site.hosts)
    return _wall(["parallel", "--will-cite", "--sshlogin", logins, "--ssh", ssh], jobs)


def skylease_wall(jobs: Path, pools: Path, out: Path) -> float:
    return _wall([*SKYLEASE, "run", str(jobs), "--pools", str(pools), "--policy", f"fixed:{HOSTS * SLOTS}",
                  "--out", str(out)], Path(os.devnull))


def start_costs(out: Path) -> list[float]:
    """Seconds from each host's rent to its worker up, from the run's store."""
    with sqlite3.connect(out / "results.sqlite") as db:
        rows = db.execute("SELECT requested_s, up_s FROM hosts WHERE up_s IS NOT NULL").fetchall()
    return [up - req for req, up in rows]


def main() -> None:
    from skylease.runtime.slurm import run_token
    from skylease.testing.site import probe, start_site

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="Paired repetitions (medians are printed).")
    ap.add_argument("--shell", type=int, default=2000)
    ap.add_argument("--sleeps", type=int, default=200)
    ap.add_argument("--base", type=int, default=170, help="Host i on 127.0.0.(BASE+i).")
    ap.add_argument("--quick", action="store_true", help="80 true, 16 sleeps, once (a test).")
    a = ap.parse_args()
    if a.quick:
        a.repeat, a.shell, a.sleeps = 1, 80, 16
    if shutil.which("parallel") is None:
        sys.exit("GNU parallel is not installed (Debian's `parallel`): nothing to compare with")
    probe()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"load average at start {os.getloadavg()[0]:.2f}; {HOSTS} hosts x {SLOTS} slots (sshd on this "
          "machine)")
    times: dict[str, list[float]] = {}
    ratios: dict[str, list[float]] = {}
    costs: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        site = start_site(HOSTS, d / "site", base=a.base, die_with_caller=True)
        ssh = parallel_ssh(site, d)
        try:
            open_masters(site, ssh)
            pools = d / "pools.toml"
            hosts = ", ".join(f'"{h.address}"' for h in site.hosts)
            pools.write_text(f'[pools.lab]\nssh = {{ user = "root", identity_file = "{site.key}", '
                             f'known_hosts = "{site.known_hosts}" }}\nhosts = [{hosts}]\nslots = {SLOTS}\n')
            work = {"true": ("true\n", a.shell), "sleep": ("sleep 0.05\n", a.sleeps)}
            for i in range(a.repeat):
                for name, (line, n) in work.items():
                    jobs = d / f"{name}.txt"
                    jobs.write_text(line * n)
                    p = parallel_wall(jobs, site, ssh)
                    s = skylease_wall(jobs, pools, d / f"{name}{i}")
                    costs += start_costs(d / f"{name}{i}")
                    # the run's folder on the hosts (theirs is this machine's home): not left behind
                    shutil.rmtree(Path.home() / ".skylease" / f"run-{run_token(d / f'{name}{i}')}",
                                  ignore_errors=True)
                    times.setdefault(f"{name} parallel", []).append(p)
                    times.setdefault(f"{name} skylease", []).append(s)
                    ratios.setdefault(name, []).append(p / s)
        finally:
            close_masters(site, ssh)
            site.stop()
    m = {k: statistics.median(v) for k, v in times.items()}
    print(f"\nmedians of {a.repeat} paired repetition(s) "
          "(s; throughput ratio = parallel's time / skylease's):\n")
    print("| work | parallel --sshlogin (s) | skylease run (s) | throughput ratio | target |")
    print("|---|---:|---:|---:|---|")
    for name, (_, n) in work.items():
        q = statistics.median(ratios[name])
        what = f"{n:,} `true`" if name == "true" else f"{n:,} `sleep 0.05`"
        print(f"| {what}, {HOSTS} hosts x {SLOTS} slots | {m[f'{name} parallel']:.2f} | "
              f"{m[f'{name} skylease']:.2f} | {q:.2f}x | >= 1.0x: {'MET' if q >= 1.0 else 'MISSED'} |")
    print(f"\nworker start on a host (rented to up, {len(costs)} workers): median "
          f"{statistics.median(costs):.2f} s, max {max(costs):.2f} s")
    print("the ratios: " + "; ".join(f"{name} {statistics.median(ratios[name]):.2f}x" for name in work))


if __name__ == "__main__":
    main()
