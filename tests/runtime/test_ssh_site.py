"""The test site (skylease.testing.site, docs/howto/site.md): real OpenSSH sshd hosts on this
machine, each on its own loopback address in UTS, PID and mount namespaces of its own, reached with
the site's key and strict host key checking, and stopped by the PIDs it started."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from skylease.runtime.leases.procfs import pids, proc_stat
from skylease.testing.site import TestSite

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "skylease.testing.site"]
NAMES = [("host1", "127.0.0.11"), ("host2", "127.0.0.12"), ("host3", "127.0.0.13")]


def cli(*args: object, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def listens(address: str) -> bool:
    try:
        with socket.create_connection((address, 22), timeout=1.0):
            return True
    except OSError:
        return False


def in_namespace(ns: str) -> list[int]:
    """The live processes of this machine whose PID namespace is ``ns`` (a readlink of /proc/PID/ns/pid)."""
    found = []
    for pid in pids():
        try:
            if os.readlink(f"/proc/{pid}/ns/pid") == ns and (st := proc_stat(pid)) and st.state != "Z":
                found.append(pid)
        except OSError:
            pass
    return found


@pytest.fixture(scope="module")
def site3(ssh_site) -> TestSite:
    return ssh_site(3)


def test_each_host_answers_its_own_hostname_with_strict_host_key_checking(site3: TestSite):
    assert [(h.name, h.address) for h in site3.hosts] == NAMES
    for h in site3.hosts:
        r = site3.ssh(h.name, "hostname")
        assert (r.returncode, r.stdout.strip()) == (0, h.name), r.stderr
    # the how-to's way: the site's ssh_config names the hosts
    r = subprocess.run(["ssh", "-F", str(site3.ssh_config), "host2", "hostname"], capture_output=True,
                       text=True, timeout=15, stdin=subprocess.DEVNULL)
    assert (r.returncode, r.stdout.strip()) == (0, "host2"), r.stderr
    known = site3.known_hosts.read_text().splitlines()
    assert [line.split()[:2] for line in known] == [[a, "ssh-ed25519"] for _, a in NAMES]
    # the site file, in the form of issue 37's item 2, its paths relative to itself
    doc = tomllib.loads(site3.site_file.read_text())
    assert doc["ssh"] == {"user": "root", "identity_file": "keys/site_ed25519",
                          "known_hosts": "keys/known_hosts"}
    assert doc["hosts"] == [{"address": a, "nodes": 1, "cpu": 1, "memory": 1024} for _, a in NAMES]
    assert (site3.site_file.parent / doc["ssh"]["identity_file"]).resolve() == site3.key.resolve()
    for h in site3.hosts:
        config = (site3.folder / h.name / "sshd_config").read_text()
        assert f"\nListenAddress {h.address}\n" in config and "0.0.0.0" not in config
        assert "\nPasswordAuthentication no\n" in config and "\nUsePAM no\n" in config


def test_each_host_has_its_own_pid_uts_and_mount_namespaces(site3: TestSite):
    ours = [os.readlink(f"/proc/self/ns/{k}") for k in ("pid", "uts", "mnt")]
    with open("/proc/1/cmdline", "rb") as fh:
        our_init = fh.read().replace(b"\0", b" ").decode().strip()
    seen = []
    for h in site3.hosts:
        r = site3.ssh(h.name, "readlink /proc/self/ns/pid /proc/self/ns/uts /proc/self/ns/mnt; "
                              "tr '\\0' ' ' < /proc/1/cmdline; echo; cat /proc/[0-9]*/comm")
        assert r.returncode == 0, r.stderr
        pid_ns, uts_ns, mnt_ns, init, *comms = r.stdout.splitlines()
        assert all(a != b for a, b in zip([pid_ns, uts_ns, mnt_ns], ours, strict=True))
        # its process 1 is its own sshd (on this machine: sshd's pid, in that namespace)
        assert init.startswith("sshd") or init.startswith("/usr/sbin/sshd"), init
        assert init != our_init and f"{h.name}/sshd_config" in init
        assert os.readlink(f"/proc/{h.pid}/ns/pid") == pid_ns
        # its /proc shows its own processes only: sshd's and the shell's, a handful
        assert 2 <= len(comms) < 20, comms
        assert set(comms) <= {"sshd", "bash", "sh", "dash", "cat", "tr", "readlink"}, comms
        seen.append((pid_ns, uts_ns, mnt_ns))
    for kind in range(3):
        assert len({s[kind] for s in seen}) == 3  # each host its own


def test_a_wrong_client_key_and_a_wrong_host_key_are_refused(site3: TestSite, tmp_path: Path):
    other = tmp_path / "other_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True,
                   capture_output=True, stdin=subprocess.DEVNULL)
    r = site3.ssh("host1", "hostname", key=other)
    assert r.returncode == 255 and "Permission denied" in r.stderr and not r.stdout
    # host1's address listed with host2's key: the host is not who known_hosts says
    by_address = dict(line.split(" ", 1) for line in site3.known_hosts.read_text().splitlines())
    wrong = tmp_path / "known_hosts"
    wrong.write_text(f"127.0.0.11 {by_address['127.0.0.12']}\n")
    r = site3.ssh("host1", "hostname", known_hosts=wrong)
    assert r.returncode == 255 and "Host key verification failed" in r.stderr and not r.stdout
    # a host missing from known_hosts: refused too, no prompt (strict checking, batch mode)
    wrong.write_text(f"127.0.0.12 {by_address['127.0.0.12']}\n")
    r = site3.ssh("host1", "hostname", known_hosts=wrong)
    assert r.returncode == 255 and "Host key verification failed" in r.stderr and not r.stdout


def test_status_shows_every_host_up(site3: TestSite):
    assert [(h.name, up) for h, up in site3.status()] == [(n, True) for n, _ in NAMES]
    r = cli("status", site3.folder)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [f"{h.name} {h.address} up (sshd pid {h.pid})" for h in site3.hosts]


def test_stop_ends_every_process_it_started_and_frees_the_addresses(site3: TestSite):
    started = list(site3.processes)
    assert len(started) == 6 and all(p.alive() for p in started)  # each host's unshare and sshd
    namespaces = [os.readlink(f"/proc/{h.pid}/ns/pid") for h in site3.hosts]
    # a process started over SSH and left behind: it ends with its host
    r = site3.ssh("host1", "setsid sleep 300 </dev/null >/dev/null 2>&1 & echo started")
    assert r.stdout.strip() == "started", r.stderr
    assert len(in_namespace(namespaces[0])) >= 2  # sshd and the sleep (maybe a session ending)
    site3.stop()
    for p in started:
        st = proc_stat(p.pid)
        assert not p.alive() and (st is None or st.state == "Z" or st.start_ticks != p.start_ticks), p
    assert all(in_namespace(ns) == [] for ns in namespaces)
    assert not any(listens(a) for _, a in NAMES)
    assert not (site3.folder / "site.json").exists()
    site3.stop()  # a stopped site: nothing to do


def test_the_command_line_starts_reports_and_stops_a_site(ssh_site, tmp_path: Path):
    ssh_site.stop_all()  # the addresses are fixed: one site at a time
    folder = tmp_path / "site"
    r = cli("start", 2, folder)
    try:
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        assert [line.split()[:3] for line in lines[:2]] == [["host1", "127.0.0.11", "up"],
                                                           ["host2", "127.0.0.12", "up"]]
        assert lines[2].startswith(f"site file {folder}/site.toml")
        again = cli("start", 2, folder)
        assert again.returncode == 2 and "runs here already" in again.stderr
        assert len(again.stderr.splitlines()) == 1
        r = cli("status", folder)
        assert r.returncode == 0 and [line.split()[2] for line in r.stdout.splitlines()] == ["up", "up"]
        # host2's sshd ended (by its pid, which `start` printed): status says so, and exits 1
        os.kill(int(lines[1].split()[-1].rstrip(")")), signal.SIGTERM)
        deadline = time.monotonic() + 10
        while listens("127.0.0.12") and time.monotonic() < deadline:
            time.sleep(0.05)
        r = cli("status", folder)
        assert r.returncode == 1 and [line.split()[2] for line in r.stdout.splitlines()] == ["up", "down"]
    finally:
        r = cli("stop", folder)
    assert r.returncode == 0 and r.stdout.strip() == "stopped 2 hosts", r.stderr
    assert not listens("127.0.0.11") and not listens("127.0.0.12")
    r = cli("status", folder)
    assert r.returncode == 2 and "no test site here" in r.stderr


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys):
    from skylease.testing.site import main

    a_file = tmp_path / "a_file"
    a_file.write_text("")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "site.json").write_text("{")
    cases = [
        (["start", 0, tmp_path / "s"], "N: must be from 1 to 50 hosts, got 0"),
        (["start", 51, tmp_path / "s"], "got 51"),
        (["start", "two", tmp_path / "s"], "N: must be a whole number of hosts, got 'two'"),
        (["start", 2, a_file / "sub"], "not a writable folder"),
        (["start", 2, "/proc/skylease-site"], "not a writable folder"),
        (["start", 2, tmp_path / "with space"], "may hold only letters"),
        (["start", 2], "expected `start N DIR`"),
        (["stop", tmp_path], "no test site here"),
        (["status", tmp_path / "nothing"], "no test site here"),
        (["stop", tmp_path / "broken"], "not a site.json"),
        (["stop"], "expected"),
        ([], "got 'nothing'"),
        (["restart", tmp_path], "expected"),
    ]
    for args, why in cases:  # in this process: main() returns the exit code, raises nothing
        assert main([str(a) for a in args]) == 2, args
        out, err = capsys.readouterr()
        assert len(err.splitlines()) == 1 and why in err, (args, err)
        assert err.startswith("skylease.testing.site"), err
        assert not out
    # and through `python -m`, as a user types it: the exit code and the one line, no traceback
    r = cli("start", 51, tmp_path / "s")
    assert r.returncode == 2
    assert r.stderr == "skylease.testing.site start: error: N: must be from 1 to 50 hosts, got 51\n"
    assert not (tmp_path / "s").exists()  # nothing made for a request refused
    r = cli("--help")
    assert r.returncode == 0 and r.stdout.startswith("usage: python -m skylease.testing.site start N DIR")


def _howto_blocks() -> tuple[str, str]:
    """The shell block and the Python block of docs/howto/site.md's "A test site on one machine"."""
    text = (ROOT / "docs" / "howto" / "site.md").read_text()
    section = text.split("## A test site on one machine", 1)[1].split("\n## ", 1)[0]
    shell = re.search(r"```bash\n(.*?)```", section, re.S)
    python = re.search(r"```python\n(.*?)```", section, re.S)
    assert shell and python
    return shell.group(1), python.group(1)


def test_the_howto_commands_run_as_written(ssh_site, tmp_path: Path, monkeypatch, capsys):
    ssh_site.stop_all()
    shell, python = _howto_blocks()
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])}
    try:
        r = subprocess.run(["bash", "-euo", "pipefail", "-c", shell], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    finally:
        if (tmp_path / "site" / "site.json").exists():
            cli("stop", tmp_path / "site")
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    want = [[f"host{i}", f"127.0.0.{10 + i}", "up"] for i in range(1, 5)]
    assert [line.split()[:3] for line in out[:4]] == want
    assert "host3" in out and out[-1] == "stopped 4 hosts"
    monkeypatch.chdir(tmp_path)
    exec(compile(python, "docs/howto/site.md", "exec"), {"__name__": "docs_example"})
    assert capsys.readouterr().out.splitlines() == ["host1 127.0.0.11 host1", "host2 127.0.0.12 host2"]
    assert not listens("127.0.0.11") and not (tmp_path / "site2" / "site.json").exists()


def test_a_host_that_cannot_start_is_one_error_naming_it_and_nothing_is_left(ssh_site, tmp_path: Path):
    from skylease.testing.site import SiteError, start_site

    # 127.0.0.21:22 bound (not listening) by this test: the check for a listener passes, sshd's bind fails
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.21", 22))
        with pytest.raises(SiteError) as err:
            start_site(1, tmp_path / "s", base=20, timeout=20)
    message = str(err.value)
    assert message.startswith("host1 (127.0.0.21): ") and "\n" not in message
    assert "Address already in use" in message or "Cannot bind any address" in message, message
    mark = str(tmp_path / "s" / "host1" / "sshd_config")
    left = []
    for pid in pids():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if mark.encode() in fh.read() and (st := proc_stat(pid)) and st.state != "Z":
                    left.append(pid)
        except OSError:
            pass
    assert left == [] and not (tmp_path / "s" / "site.json").exists()


def test_hosts_tied_to_their_caller_end_when_it_is_killed(ssh_site, tmp_path: Path):
    folder = tmp_path / "tied"
    code = ("import sys, time\nfrom pathlib import Path\nfrom skylease.testing.site import start_site\n"
            f"site = start_site(1, Path({str(folder)!r}), base=30, die_with_caller=True)\n"
            "print(site.hosts[0].pid, flush=True)\ntime.sleep(60)\n")
    caller = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        sshd_pid = int(caller.stdout.readline())
        assert listens("127.0.0.31") and "sshd_config" in Path(f"/proc/{sshd_pid}/cmdline").read_text()
    finally:
        caller.kill()  # SIGKILL: no stop(), no clean-up of its own
        caller.wait()
    deadline = time.monotonic() + 10
    while (listens("127.0.0.31") or proc_stat(sshd_pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not listens("127.0.0.31") and proc_stat(sshd_pid) is None
