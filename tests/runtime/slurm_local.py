"""A real one-node Slurm for the tests: Debian's slurm-wlm and munge, installed beforehand (.ci/run
provisions them; nothing installs from inside pytest); ``munged``, ``slurmctld`` and ``slurmd``
started with their configuration, state and sockets in a temporary folder, on ports nobody uses,
and stopped afterwards.

``SLURM_CONF`` points the clients (sbatch, squeue, scancel, sinfo) at it while it runs. Without the
packages the tests are skipped with the reason, or fail with ``SKYLEASE_REQUIRE_SLURM=1`` (CI).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

DAEMONS = ("munged", "slurmctld", "slurmd")
PARTITION = "debug"


def _which(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin:/usr/bin")


def _give_up(why: str) -> None:
    if os.environ.get("SKYLEASE_REQUIRE_SLURM") == "1":
        pytest.fail(f"SKYLEASE_REQUIRE_SLURM=1 but {why}")
    pytest.skip(why)


def _require() -> None:
    """Debian's slurm-wlm and munge must be installed already: nothing installs from inside pytest
    (.ci/run provisions them). Without them the tests skip with the reason (fail under CI's switch)."""
    missing = [d for d in (*DAEMONS, "sbatch", "squeue", "scancel", "sinfo", "mungekey") if not _which(d)]
    if missing:
        _give_up(f"slurm-wlm and munge are not installed ({', '.join(missing)} missing): "
                 "apt-get install slurm-wlm munge (.ci/run does)")


def _free_port() -> int:
    with contextlib.closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class LocalSlurm:
    folder: Path
    conf: Path
    procs: list[subprocess.Popen]
    partition: str = PARTITION

    def squeue(self) -> list[tuple[str, str, str]]:
        """(id, name, state) of every job the controller remembers."""
        out = subprocess.run(["squeue", "-h", "--states=all", "-o", "%i|%j|%T"], capture_output=True,
                             text=True, check=True).stdout
        return [tuple(line.split("|")) for line in out.splitlines() if line.strip()]  # type: ignore[misc]

    def log(self) -> str:
        return "".join((self.folder / f"{d}.log").read_text(errors="replace")[-3000:]
                       for d in ("slurmctld", "slurmd") if (self.folder / f"{d}.log").exists())


def _config(folder: Path, munge_socket: Path) -> Path:
    host = socket.gethostname()
    cores = os.cpu_count() or 1
    memory_mb = min(8000, psutil.virtual_memory().total // 2**20 // 2)
    conf = folder / "slurm.conf"
    conf.write_text(f"""\
ClusterName=skylease-test
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={munge_socket}
CredType=cred/munge
StateSaveLocation={folder}/state
SlurmdSpoolDir={folder}/spool
SlurmctldPidFile={folder}/slurmctld.pid
SlurmdPidFile={folder}/slurmd.pid
SlurmctldLogFile={folder}/slurmctld.log
SlurmdLogFile={folder}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
MinJobAge=3600
KillWait=2
NodeName={host} NodeAddr=127.0.0.1 CPUs={cores} RealMemory={memory_mb} State=UNKNOWN
PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP
""")
    return conf


def start(folder: Path) -> LocalSlurm:
    """Configure and start (the packages installed already); returns once the node takes jobs."""
    _require()
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o755)  # munged wants the path to its socket open to all (execute)
    for sub in ("state", "spool", "munge"):
        (folder / sub).mkdir(exist_ok=True)
    munge = folder / "munge"
    munge.chmod(0o700)
    key = munge / "munge.key"
    subprocess.run([_which("mungekey") or "mungekey", "--create", f"--keyfile={key}"], check=True,
                   capture_output=True)
    key.chmod(0o600)
    sock = munge / "munge.socket"
    procs: list[subprocess.Popen] = []
    logs = []

    def daemon(args: list[str], log: str) -> None:
        f = open(folder / log, "ab")  # noqa: SIM115 (closed with the fixture)
        logs.append(f)
        procs.append(subprocess.Popen(args, stdout=f, stderr=subprocess.STDOUT, start_new_session=True))

    daemon([_which("munged") or "munged", "-F", "-f", f"--socket={sock}", f"--key-file={key}",
            f"--log-file={munge}/munged.log", f"--pid-file={munge}/munged.pid",
            f"--seed-file={munge}/munged.seed"], "munged.out")
    deadline = time.monotonic() + 20
    while not sock.exists():
        if time.monotonic() > deadline or procs[0].poll() is not None:
            stop(LocalSlurm(folder, folder / "slurm.conf", procs))
            _give_up(f"munged did not start: {(munge / 'munged.log').read_text(errors='replace')[-500:]}")
        time.sleep(0.05)
    conf = _config(folder, sock)
    os.environ["SLURM_CONF"] = str(conf)
    daemon([_which("slurmctld") or "slurmctld", "-D", "-c", "-f", str(conf)], "slurmctld.out")
    daemon([_which("slurmd") or "slurmd", "-D", "-f", str(conf)], "slurmd.out")
    cluster = LocalSlurm(folder, conf, procs)
    deadline = time.monotonic() + 60
    while True:
        res = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True)
        if res.returncode == 0 and res.stdout.strip() in ("idle", "mixed", "allocated"):
            break
        if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
            log = cluster.log()
            stop(cluster)
            pytest.fail(f"the local Slurm did not come up: {res.stdout.strip()} {res.stderr.strip()}\n{log}")
        time.sleep(0.1)
    for f in logs:
        f.close()
    return cluster


def stop(cluster: LocalSlurm) -> None:
    """Cancel every job, stop the daemons (ours only, by pid), forget SLURM_CONF."""
    with contextlib.suppress(Exception):
        subprocess.run(["scancel", "--full", "--user", str(os.getuid())], capture_output=True, timeout=10)
    for p in reversed(cluster.procs):  # slurmd, slurmctld, then munged
        with contextlib.suppress(OSError):
            p.terminate()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    if os.environ.get("SLURM_CONF") == str(cluster.conf):
        del os.environ["SLURM_CONF"]
