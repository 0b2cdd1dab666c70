"""Hosts in the site file (issue 37, item 2): [ssh] defaults and [[hosts]] tables give scheduler nodes
on other machines, each saying where it is; every mistake is one line naming file, line and key;
check_hosts runs OpenSSH on each host and refuses an unreachable host, a refused key or an unknown
host key in one line; `skylease serve` refuses such a site before anything is made.

The SSH tests run against a real OpenSSH server this module starts (on 127.0.0.37, a free port,
in a mount namespace of its own for sshd's /run/sshd) and against loopback addresses where
nothing or something silent listens; nothing outside 127.0.0.0/8 is contacted. Without sshd, ssh,
ssh-keygen, unshare or root they skip (fail under SKYLEASE_REQUIRE_SSH=1)."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from skylease.control.leases.lease import ResourceTuple
from skylease.model.errors import UserError
from skylease.runtime.leases.local import LocalNodes
from skylease.runtime.leases.site import UNBOUNDED_NET, Site, SiteHost, SiteNode, load_site
from skylease.runtime.leases.ssh_check import check_hosts, ssh_argv

ROOT = Path(__file__).resolve().parents[3]
ADDRESS = "127.0.0.37"  # (this module's sshd; the test site of issue 37 takes 127.0.0.11 and up)
NOBODY = "127.0.0.254"  # nothing listens there


def write(folder: Path, text: str, name: str = "site.toml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


def touch(path: Path, mode: int = 0o600) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("")
    path.chmod(mode)
    return path


# -- parsing ----------------------------------------------------------------------------------------
def test_a_host_with_the_defaults_is_one_node_named_after_its_address(tmp_path):
    known = touch(tmp_path / "keys" / "known_hosts")
    site = load_site(write(tmp_path, """\
        [ssh]
        known_hosts = "keys/known_hosts"
        [[hosts]]
        address = "127.0.0.11"
        """), machine=[0, 1])
    (node,) = site.nodes
    assert node.name == "127.0.0.11-0" and site.names == ["127.0.0.11-0"]
    assert node.capacity == ResourceTuple(1.0, 1024, 0, UNBOUNDED_NET) and node.cache_mb is None
    assert node.host == SiteHost("127.0.0.11", "127.0.0.11", 22, "root", None, known, 10, 0)
    assert site.hosts == [node.host] and site.cpus(0) == (0,)
    assert site.source == tmp_path / "site.toml"


MIXED = """\
cache_mb = 5000
[ssh]
user = "lease"
identity_file = "keys/site_ed25519"
known_hosts = "keys/known_hosts"
port = 2222
connect_timeout = 3

[[nodes]]
name = "local"
count = 2

[[hosts]]
address = "127.0.0.11"
name = "host1"
nodes = 2
cpu = 2
memory = 4096
disk = 1000
net = 50.0

[[hosts]]
address = "Host2.Example.ORG."
port = 22
user = "root"
identity_file = "OTHER"
cache_mb = 100

[[nodes]]
name = "late"
cpu = 3
"""


def test_local_nodes_come_first_then_each_hosts_nodes_with_overrides_and_capacities(tmp_path):
    key, known = touch(tmp_path / "keys" / "site_ed25519"), touch(tmp_path / "keys" / "known_hosts")
    other = touch(tmp_path / "elsewhere" / "other key")
    site = load_site(write(tmp_path, MIXED.replace("OTHER", str(other))), machine=[0, 1, 2, 3])
    assert site.names == ["local0", "local1", "late", "host1-0", "host1-1", "host2.example.org-0"]
    assert [n.host is None for n in site.nodes] == [True] * 3 + [False] * 3
    assert site.capacity[3:] == [ResourceTuple(2.0, 4096, 1000, 50.0)] * 2 + [
        ResourceTuple(1.0, 1024, 0, UNBOUNDED_NET)]
    assert [n.cache_mb for n in site.nodes] == [5000] * 5 + [100]
    h1 = SiteHost("host1", "127.0.0.11", 2222, "lease", key, known, 3, 0)
    h2 = SiteHost("host2.example.org", "host2.example.org", 22, "root", other, known, 3, 0)
    assert [n.host for n in site.nodes[3:]] == [h1, replace(h1, index=1), h2]
    assert site.hosts == [h1, h2]
    # local nodes on this machine's CPUs (the 3-CPU node wraps); a host's nodes on its own CPUs from 0
    assert [site.cpus(k) for k in range(6)] == [(0,), (1,), (0, 2, 3), (0, 1), (2, 3), (0,)]
    assert site.index("host1-1") == 4


@pytest.mark.parametrize(("address", "spelled", "name"), [
    ("10.1.2.3", "10.1.2.3", "10.1.2.3"),
    ("::1", "::1", "0--1"),
    ("2001:DB8:0::1", "2001:db8::1", "2001-db8--1"),
    ("fe80::1%eth0", "fe80::1%eth0", "fe80--1-eth0"),
    ("localhost", "localhost", "localhost"),
    ("Node-7.Rack2.example", "node-7.rack2.example", "node-7.rack2.example"),
    ("a" * 63 + "." + "b" * 63, "a" * 63 + "." + "b" * 63, "a" * 58),
])
def test_an_address_is_an_ip_literal_or_an_rfc1123_name_and_names_its_host(tmp_path, address, spelled, name):
    touch(tmp_path / "kh")
    site = load_site(write(tmp_path, f'[ssh]\nknown_hosts = "kh"\n[[hosts]]\naddress = "{address}"\n'))
    assert site.nodes[0].host.address == spelled and site.nodes[0].host.name == name
    assert site.names == [f"{name}-0"]


def test_paths_are_relative_to_the_site_file_not_the_working_folder(tmp_path, monkeypatch):
    conf, home = tmp_path / "conf", tmp_path / "home"
    key, known = touch(conf / "keys" / "id"), touch(home / ".ssh" / "known_hosts")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(home))
    site = load_site(write(conf, """\
        [ssh]
        identity_file = "keys/../keys/id"
        known_hosts = "~/.ssh/known_hosts"
        [[hosts]]
        address = "h1"
        """))
    host = site.nodes[0].host
    assert host.identity_file == key and host.known_hosts == known and key.is_absolute()


def test_the_hosts_site_file_of_the_docs_loads_as_it_says(tmp_path):
    doc = (ROOT / "docs" / "howto" / "serve.md").read_text()
    blocks = re.findall(r"```toml\n(.*?)```", doc, flags=re.S)
    (example,) = [b for b in blocks if "[[hosts]]" in b]
    for name in re.findall(r'(?:identity_file|known_hosts) = "([^"]+)"', example):
        touch(tmp_path / name)
    site = load_site(write(tmp_path, example))
    assert site.names == ["host1-0", "host1-1", "host2-0"]
    assert [(h.address, h.port, h.user, h.connect_timeout) for h in site.hosts] == [
        ("127.0.0.11", 22, "root", 10), ("127.0.0.12", 22, "root", 10)]
    assert site.capacity[0][:3] == (1.0, 1024, 0) and site.capacity[2][:3] == (2.0, 2048, 0)
    # the mistake the page shows, as it shows it
    (said,) = re.findall(r"`(hosts-site\.toml:\d+: hosts\[1\]\.name: [^`]*)`", " ".join(doc.split()))
    twice = write(tmp_path, example.replace('name = "host2"', 'name = "host1"'), "hosts-site.toml")
    with pytest.raises(UserError) as exc:
        load_site(twice)
    assert str(exc.value) == said.replace("hosts-site.toml", str(twice))


KH = '[ssh]\nknown_hosts = "kh"\n'  # lines 1 and 2


@pytest.mark.parametrize(("text", "line", "field", "message"), [
    # a host's address: an option, a number or a name that is none of them
    (KH + '[[hosts]]\naddress = "-oProxyCommand=sh"\n', 4, "hosts[0].address",
     "must be an IPv4 or IPv6 address or a host name"),
    (KH + '[[hosts]]\naddress = "1.2.3.256"\n', 4, "hosts[0].address", "got '1.2.3.256'"),
    (KH + '[[hosts]]\naddress = "[::1]"\n', 4, "hosts[0].address", "host name (RFC 1123"),
    (KH + '[[hosts]]\naddress = "under_score.org"\n', 4, "hosts[0].address", "host name"),
    (KH + '[[hosts]]\naddress = "a..b"\n', 4, "hosts[0].address", "host name"),
    (KH + '[[hosts]]\naddress = 17\n', 4, "hosts[0].address", "must be a string, got 17"),
    # a host's other keys
    (KH + '[[hosts]]\nnodes = 2\n', 3, "hosts[0].address", "required"),
    (KH + '[[hosts]]\naddress = "h"\nnode = 2\n', 5, "hosts[0].node", "did you mean 'nodes'?"),
    (KH + '[[hosts]]\naddress = "h"\nnodes = 0\n', 5, "hosts[0].nodes", "must be a whole number >= 1"),
    (KH + '[[hosts]]\naddress = "h"\ncpu = 0\n', 5, "hosts[0].cpu", "must be a finite number > 0"),
    (KH + '[[hosts]]\naddress = "h"\nport = 65536\n', 5, "hosts[0].port", "<= 65535"),
    (KH + '[[hosts]]\naddress = "h"\nuser = "-oX"\n', 5, "hosts[0].user", "must be a user name"),
    (KH + '[[hosts]]\naddress = "h"\nname = "../x"\n', 5, "hosts[0].name", "its nodes are <name>-<i>"),
    (KH + f'[[hosts]]\naddress = "h"\nname = "{"n" * 59}"\n', 5, "hosts[0].name", "1 to 58 letters"),
    # a name or an address twice, too many nodes
    (KH + '[[hosts]]\naddress = "h1"\nname = "a"\n[[hosts]]\naddress = "h2"\nname = "a"\n', 8,
     "hosts[1].name", "host name 'a' is already the name of hosts[0]"),
    (KH + '[[hosts]]\naddress = "h1"\n[[hosts]]\naddress = "h1"\nport = 2222\n', 6, "hosts[1].address",
     "host name 'h1' is already the name of hosts[0]"),
    (KH + '[[hosts]]\naddress = "::1"\nname = "a"\n[[hosts]]\naddress = "0::1"\nname = "b"\n', 7,
     "hosts[1].address", "::1 port 22 is already hosts[0]"),
    ('[ssh]\nknown_hosts = "kh"\nport = 2222\n[[hosts]]\naddress = "h"\nname = "a"\n[[hosts]]\n'
     'address = "h"\nport = 2222\nname = "b"\n', 8, "hosts[1].address", "h port 2222 is already hosts[0]"),
    (KH + '[[nodes]]\nname = "h-0"\n[[hosts]]\naddress = "x"\nname = "h"\n', 7, "hosts[0].name",
     "node name 'h-0' is already the name of node 0"),
    (KH + '[[nodes]]\ncount = 60000\n[[hosts]]\naddress = "h"\nnodes = 50000\n', 7, "hosts[0].nodes",
     "more than 100,000 nodes"),
    # the files ssh is given
    ('[[hosts]]\naddress = "h"\n', 1, "ssh.known_hosts", "required with [[hosts]]"),
    ('[ssh]\nuser = "u"\n[[hosts]]\naddress = "h"\n', 1, "ssh.known_hosts", "required with [[hosts]]"),
    ('[ssh]\nknown_hosts = "missing"\n[[hosts]]\naddress = "h"\n', 2, "ssh.known_hosts", "file not found: "),
    ('[ssh]\nknown_hosts = "kh"\nidentity_file = "keys"\n[[hosts]]\naddress = "h"\n', 3,
     "ssh.identity_file", "not a file: "),
    ('[ssh]\nknown_hosts = "kh"\nidentity_file = "open_key"\n[[hosts]]\naddress = "h"\n', 3,
     "ssh.identity_file", "(mode 644); ssh ignores such a key: chmod 600 it"),
    (KH + '[[hosts]]\naddress = "h"\nidentity_file = "nope"\n', 5, "hosts[0].identity_file",
     "file not found"),
    ('[ssh]\nknown_hosts = "kh"\nidentity_file = "~nosuchuser_x/k"\n[[nodes]]\n', 3, "ssh.identity_file",
     "cannot use '~nosuchuser_x/k'"),
    # the [ssh] table and the file as a whole
    ('[ssh]\nknown_hosts = "kh"\nconnect_timeout = 1.5\n', 3, "ssh.connect_timeout",
     "must be a whole number"),
    ('[ssh]\nknown_hosts = "kh"\nconnect_timeout = 0\n[[nodes]]\n', 3, "ssh.connect_timeout", ">= 1"),
    ('[ssh]\nknown_hosts = "kh"\nusr = "x"\n[[nodes]]\n', 3, "ssh.usr", "did you mean 'user'?"),
    ('[ssh]\nuser = ""\n[[nodes]]\n', 2, "ssh.user", "must be a user name"),
    ('ssh = 5\n[[nodes]]\n', 1, "ssh", "must be a table, got 5"),
    ('hosts = []\n', 1, "hosts", "must be a non-empty list of tables, got []"),
    ('bandwidth = 5\n', None, "nodes", "a site has [[nodes]], [[hosts]] or both"),
])
def test_a_mistake_about_hosts_is_one_line_naming_file_line_and_key(tmp_path, text, line, field, message):
    touch(tmp_path / "kh")
    touch(tmp_path / "open_key", 0o644)
    (tmp_path / "keys").mkdir()
    path = write(tmp_path, text)
    with pytest.raises(UserError) as exc:
        load_site(path)
    err = exc.value
    assert (err.file, err.line, err.field) == (str(path), line, field), str(err)
    assert message in err.message and "\n" not in str(err)
    if line is not None:
        assert str(err).startswith(f"{path}:{line}: {field}: ")


def test_the_local_enactment_never_runs_a_hosts_node_on_this_machine(tmp_path):
    touch(tmp_path / "kh")
    path = write(tmp_path, KH + '[[nodes]]\n[[hosts]]\naddress = "h1"\n')
    site = load_site(path)
    nodes = LocalNodes(site, tmp_path / "data", "sid", sandbox=None)  # type: ignore[arg-type]
    try:
        with pytest.raises(ValueError, match=r"node 1 \(h1-0\) is on host h1, not this machine"):
            nodes.spawn(1, 0, 1, command="true")
        with pytest.raises(ValueError, match="is on host h1"):
            nodes.copy_image("a.img", 1, [0, 1], 0.0)
        assert nodes.host_states() == {}
    finally:
        nodes.close()


# -- check_hosts ------------------------------------------------------------------------------------
def _need_ssh() -> None:
    missing = [p for p in ("ssh", "ssh-keygen", "unshare") if shutil.which(p) is None]
    missing += [] if Path("/usr/sbin/sshd").exists() else ["/usr/sbin/sshd"]
    reason = (f"needs OpenSSH ({', '.join(missing)} missing)" if missing else
              "needs root (sshd in a mount namespace)" if os.geteuid() != 0 else None)
    if reason is not None:
        if os.environ.get("SKYLEASE_REQUIRE_SSH") == "1":
            pytest.fail(f"SKYLEASE_REQUIRE_SSH=1 but this test {reason}")
        pytest.skip(reason)


def _keygen(path: Path) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", str(path)], check=True)
    return path.with_suffix(".pub").read_text().split()[1]  # (ssh-keygen appends .pub to the name)


def _free_port(address: str) -> int:
    with socket.socket() as s:
        s.bind((address, 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class Sshd:
    """A real OpenSSH server on ADDRESS:port that lets root in with ``key``, showing ``host_key``."""

    port: int
    key: Path
    known_hosts: Path  # the server's host key, as ssh wants it for ADDRESS:port

    def host(self, **kw: object) -> SiteHost:
        base = SiteHost("s1", ADDRESS, self.port, "root", self.key, self.known_hosts, 5, 0)
        return replace(base, **kw)


@pytest.fixture(scope="module")
def sshd(tmp_path_factory) -> Iterator[Sshd]:
    _need_ssh()
    base = tmp_path_factory.mktemp("sshd")
    srv = base / "server"
    # (the client's files in a folder with a '%' and a space in its name: the ssh options that name
    # them must keep them whole and unexpanded)
    d = base / "keys %h dir"
    srv.mkdir()
    d.mkdir()
    host_pub = _keygen(srv / "host_ed25519")
    client_pub = _keygen(d / "client_ed25519")
    (srv / "authorized_keys").write_text(f"ssh-ed25519 {client_pub}\n")
    port = _free_port(ADDRESS)
    (d / "known_hosts").write_text(f"[{ADDRESS}]:{port} ssh-ed25519 {host_pub}\n")
    (srv / "sshd_config").write_text(textwrap.dedent(f"""\
        ListenAddress {ADDRESS}:{port}
        HostKey {srv}/host_ed25519
        PidFile none
        AuthorizedKeysFile {srv}/authorized_keys
        AuthenticationMethods publickey
        PasswordAuthentication no
        KbdInteractiveAuthentication no
        PermitRootLogin prohibit-password
        UsePAM no
        StrictModes no
        """))
    log = (srv / "sshd.log").open("wb")
    # sshd wants /run/sshd: a tmpfs /run in a mount namespace of its own gives it one, touching nothing here
    proc = subprocess.Popen(["unshare", "--mount", "--", "sh", "-c",
                             'mount -t tmpfs none /run && mkdir -m 755 /run/sshd && exec /usr/sbin/sshd '
                             '-D -e -f "$1"', "sh", str(srv / "sshd_config")],
                            stdout=subprocess.DEVNULL, stderr=log)
    log.close()  # (sshd holds it: its log, read if it fails to start)
    try:
        deadline = time.monotonic() + 10
        while True:
            with socket.socket() as s:
                if s.connect_ex((ADDRESS, port)) == 0:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"sshd did not start within 10 s: {(srv / 'sshd.log').read_text()[-2000:]}")
            time.sleep(0.05)
        yield Sshd(port, d / "client_ed25519", d / "known_hosts")
    finally:
        proc.terminate()  # (our own sshd, by its pid: unshare and sh exec'd it)
        proc.wait(10)


def _site(*hosts: SiteHost) -> Site:
    nodes = [SiteNode(f"{h.name}-{h.index}", ResourceTuple(), None, h) for h in hosts]
    return Site(tuple(nodes), source=Path("site.toml"))


@pytest.mark.integration  # (a real sshd: CI's second level)
def test_a_host_that_answers_with_the_key_and_a_known_host_key_passes(sshd):
    assert " " in str(sshd.known_hosts) and "%" in str(sshd.known_hosts)
    check_hosts(_site(sshd.host()))
    # the same argv as the enactment's: `true` ran there, and it runs other commands too
    done = subprocess.run(ssh_argv(sshd.host(), "echo", "hello"), capture_output=True, timeout=30)
    assert (done.returncode, done.stdout) == (0, b"hello\n"), done.stderr


def _refusal(site: Site, **kw: object) -> str:
    with pytest.raises(UserError) as exc:
        check_hosts(site, **kw)
    err = exc.value
    assert (err.file, err.line, err.field) == ("site.toml", None, "hosts") and "\n" not in str(err)
    return err.message


@pytest.mark.integration  # (a real sshd: CI's second level)
def test_an_unknown_host_key_a_changed_one_and_a_refused_key_are_one_line_each(sshd, tmp_path):
    empty = touch(tmp_path / "empty_known_hosts")
    msg = _refusal(_site(sshd.host(known_hosts=empty)))
    assert msg == (f"host s1 (root@{ADDRESS} port {sshd.port}) cannot be reached over SSH: "
                   "Host key verification failed.")
    other = _keygen(tmp_path / "other_host")
    changed = tmp_path / "changed_known_hosts"
    changed.write_text(f"[{ADDRESS}]:{sshd.port} ssh-ed25519 {other}\n")
    assert _refusal(_site(sshd.host(known_hosts=changed))).endswith("Host key verification failed.")
    _keygen(tmp_path / "stranger")
    msg = _refusal(_site(sshd.host(identity_file=tmp_path / "stranger")))
    assert msg.endswith("Permission denied (publickey).") and "root@127.0.0.37" in msg


@pytest.mark.integration  # (a real sshd: CI's second level)
def test_a_closed_port_is_connection_refused_naming_the_first_host_that_failed(sshd):
    closed = _free_port(NOBODY)
    bad = sshd.host(name="gone", address=NOBODY, port=closed)
    msg = _refusal(_site(sshd.host(), bad, replace(bad, name="gone2", port=_free_port(NOBODY))))
    assert msg == (f"host gone (root@{NOBODY} port {closed}) cannot be reached over SSH: ssh: connect to "
                   f"host {NOBODY} port {closed}: Connection refused (and 1 more host)")


@pytest.mark.integration  # (a real sshd: CI's second level)
def test_silent_hosts_time_out_together_within_their_connect_timeout(sshd):
    listeners = [socket.create_server((NOBODY, 0)) for _ in range(4)]  # (never accepted: no banner)
    try:
        hosts = [sshd.host(name=f"quiet{i}", address=NOBODY, port=s.getsockname()[1], connect_timeout=2)
                 for i, s in enumerate(listeners)]
        start = time.monotonic()
        msg = _refusal(_site(*hosts))
        took = time.monotonic() - start
    finally:
        for s in listeners:
            s.close()
    assert msg.startswith("host quiet0 (") and "timed out" in msg and msg.endswith("(and 3 more hosts)"), msg
    assert 2.0 <= took < 6.0, took  # concurrently: one by one would take 8 s at least


@pytest.mark.integration  # (a real sshd: CI's second level)
def test_a_host_that_stalls_after_its_banner_is_cut_off_after_the_handshake_bound(sshd):
    server = socket.create_server((NOBODY, 0))
    held: list[socket.socket] = []

    def banner() -> None:
        with server:
            conn, _ = server.accept()
            conn.sendall(b"SSH-2.0-Stalled\r\n")
            held.append(conn)  # (then says nothing more)

    thread = threading.Thread(target=banner, daemon=True)
    thread.start()
    try:
        start = time.monotonic()
        msg = _refusal(_site(sshd.host(address=NOBODY, port=server.getsockname()[1], connect_timeout=1)),
                       handshake_s=1.0)
        took = time.monotonic() - start
    finally:
        thread.join(5)
        for c in held:
            c.close()
    assert msg.endswith("cannot be reached over SSH: no answer within 2 s"), msg
    assert took < 5.0, took


# -- skylease serve ---------------------------------------------------------------------------------
def _serve(tmp_path: Path, site: Path) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "skylease", "serve", "--port", "0", "--data-dir", str(tmp_path / "data"),
            "--site", str(site)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=tmp_path)


@pytest.mark.integration  # (a real `skylease serve`: CI's second level)
def test_serve_refuses_a_site_whose_host_does_not_answer_in_one_line_before_anything_is_made(tmp_path):
    if shutil.which("ssh") is None:
        if os.environ.get("SKYLEASE_REQUIRE_SSH") == "1":
            pytest.fail("SKYLEASE_REQUIRE_SSH=1 but OpenSSH's ssh is missing")
        pytest.skip("needs OpenSSH's ssh")
    touch(tmp_path / "kh")
    port = _free_port(NOBODY)
    site = write(tmp_path, f'[ssh]\nknown_hosts = "kh"\n[[hosts]]\naddress = "{NOBODY}"\nport = {port}\n')
    done = _serve(tmp_path, site)
    assert done.returncode == 2 and done.stdout == "", done
    assert done.stderr.strip() == (f"skylease serve: error: {site}: hosts: host {NOBODY} (root@{NOBODY} "
                                   f"port {port}) cannot be reached over SSH: ssh: connect to host {NOBODY} "
                                   f"port {port}: Connection refused"), done.stderr
    assert not (tmp_path / "data").exists()
