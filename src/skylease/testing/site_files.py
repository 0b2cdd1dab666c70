"""The files of a test site (skylease.testing.site) in its folder, and the checks made before any
is written: the number of hosts, the folder, each host's loopback address.

Layout of the folder DIR::

    keys/site_ed25519(.pub)   the one client key pair of the site, authorized on every host
    keys/authorized_keys      its public half: every host's AuthorizedKeysFile
    keys/known_hosts          "ADDRESS KEYTYPE KEY" of each host, for strict host key checking
    keys/ssh_config           `ssh -F DIR/keys/ssh_config host1 hostname` (for people)
    hostN/sshd_config         host N's sshd: its address, host key, pid file
    hostN/ssh_host_ed25519_key(.pub), hostN/sshd.pid, hostN/sshd.log (sshd's stderr)
    site.toml                 the hosts as a site file of `skylease serve` (issue 37, item 2's form)
    site.json                 what `start` started (process ids), read by `stop` and `status`

Nothing here starts a process but ssh-keygen.
"""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from skylease.model.errors import UserError

__all__ = ["BASE", "MAX_HOSTS", "SSH_PORT", "USER", "HostFiles", "SiteError", "SiteFiles", "check_count",
           "check_folder", "check_loopback", "host_address", "keygen", "layout", "tail", "which",
           "write_configs"]

#: The most hosts a test site has (host 50 is 127.0.0.60).
MAX_HOSTS = 50
#: Host i (1-based) listens on 127.0.0.(BASE + i): host1 on 127.0.0.11.
BASE = 10
SSH_PORT = 22
#: The user the site's key logs in as (the tests run as root; sshd permits root by key only).
USER = "root"
LOOPBACK = ipaddress.ip_network("127.0.0.0/8")
#: A folder path that can go unquoted into sshd_config and ssh_config: no white space (it splits
#: their values), no quote, no '%' (AuthorizedKeysFile expands %h, %u, ...), no '#'.
SAFE_PATH = re.compile(r"^[A-Za-z0-9_./+,@=:-]+$")


class SiteError(Exception):
    """The site cannot be started or stopped on this machine (a program missing, namespaces not
    allowed, a host that does not come up): not a mistake in the request, so the command exits 1."""


def which(name: str) -> str | None:
    """A program on PATH or in the system folders (sshd lives in /usr/sbin, off a user's PATH)."""
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin:/sbin:/bin")


def tail(text: str | bytes, lines: int = 3) -> str:
    """The last lines of a program's output, joined on one line (for a one-line error)."""
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    kept = [line.strip() for line in text.strip().splitlines() if line.strip()][-lines:]
    return " | ".join(kept) or "(nothing)"


def check_count(n: int) -> int:
    if not 1 <= n <= MAX_HOSTS:
        raise UserError(f"must be from 1 to {MAX_HOSTS} hosts, got {n}", field="N")
    return n


def check_loopback(address: str) -> str:
    """The address itself, if it is in 127.0.0.0/8 (only loopback traffic is allowed here)."""
    try:
        ok = ipaddress.ip_address(address) in LOOPBACK
    except ValueError:
        ok = False
    if not ok:
        raise UserError(f"{address!r} is not a loopback address (127.0.0.0/8): a test site listens on "
                        "loopback only", field="address")
    return address


def host_address(i: int, base: int = BASE) -> str:
    """Host ``i``'s address (1-based), checked to be loopback."""
    if not 0 <= base + i <= 254:
        raise UserError(f"host {i} would be 127.0.0.{base + i}: out of 127.0.0.0..254", field="base")
    return check_loopback(f"127.0.0.{base + i}")


def check_folder(folder: Path) -> Path:
    """The site's folder, absolute, created if missing and written to once (a probe file), or a
    one-line UserError naming it."""
    folder = Path(os.path.abspath(folder.expanduser()))
    if not SAFE_PATH.match(str(folder)):
        raise UserError("the path may hold only letters, digits and . _ - / + , @ = : (it goes unquoted "
                        "into sshd_config and ssh_config)", file=folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".probe-"):
            pass
    except OSError as e:
        raise UserError(f"not a writable folder: {e.strerror or e}", file=folder) from None
    return folder


@dataclass(frozen=True)
class HostFiles:
    name: str  # host1, host2, ...: also its hostname
    address: str
    folder: Path
    config: Path  # sshd_config
    host_key: Path
    pid_file: Path
    log: Path  # sshd's stderr (-e)


@dataclass(frozen=True)
class SiteFiles:
    folder: Path
    key: Path  # the client's private key
    authorized_keys: Path
    known_hosts: Path
    ssh_config: Path
    site_file: Path
    state: Path  # site.json
    hosts: tuple[HostFiles, ...]


def layout(n: int, folder: Path, base: int = BASE) -> SiteFiles:
    """Where each file of an n-host site in ``folder`` goes (``folder`` checked already)."""
    keys = folder / "keys"
    hosts = []
    for i in range(1, n + 1):
        name, d = f"host{i}", folder / f"host{i}"
        hosts.append(HostFiles(name, host_address(i, base), d, d / "sshd_config", d / "ssh_host_ed25519_key",
                               d / "sshd.pid", d / "sshd.log"))
    return SiteFiles(folder, keys / "site_ed25519", keys / "authorized_keys", keys / "known_hosts",
                     keys / "ssh_config", folder / "site.toml", folder / "site.json", tuple(hosts))


def keygen(path: Path, comment: str, ssh_keygen: str) -> str:
    """A fresh ed25519 key pair at ``path`` (no passphrase; an old one replaced); its public line."""
    pub = path.with_name(path.name + ".pub")
    path.unlink(missing_ok=True)
    pub.unlink(missing_ok=True)
    r = subprocess.run([ssh_keygen, "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
                       capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    if r.returncode != 0 or not pub.is_file():
        raise SiteError(f"ssh-keygen could not make {path}: {tail(r.stderr)}")
    return pub.read_text().strip()


def sshd_config(host: HostFiles, files: SiteFiles) -> str:
    # StrictModes no: sshd would refuse an AuthorizedKeysFile under a world-writable folder such as
    # /tmp (where tests keep their sites); the key files are ours and 0600 anyway.
    # No forwarding of any kind: a host reaches nothing through its SSH connections.
    return f"""\
# {host.name} of the test site in {files.folder} (skylease.testing.site; thrown away with the site)
Port {SSH_PORT}
AddressFamily inet
ListenAddress {host.address}
HostKey {host.host_key}
PidFile {host.pid_file}
AuthorizedKeysFile {files.authorized_keys}
AuthenticationMethods publickey
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
HostbasedAuthentication no
UsePAM no
PermitRootLogin prohibit-password
StrictModes no
PermitUserEnvironment no
AllowTcpForwarding no
AllowStreamLocalForwarding no
AllowAgentForwarding no
GatewayPorts no
PermitTunnel no
X11Forwarding no
UseDNS no
PrintMotd no
PrintLastLog no
LoginGraceTime 30
MaxStartups 100
MaxSessions 100
LogLevel INFO
Subsystem sftp internal-sftp
"""


def ssh_config(files: SiteFiles) -> str:
    entries = "".join(f"Host {h.name}\n    HostName {h.address}\n" for h in files.hosts)
    return f"""\
# The test site in {files.folder}: ssh -F {files.ssh_config} host1 hostname
{entries}Host *
    User {USER}
    Port {SSH_PORT}
    IdentityFile {files.key}
    IdentitiesOnly yes
    IdentityAgent none
    UserKnownHostsFile {files.known_hosts}
    GlobalKnownHostsFile /dev/null
    StrictHostKeyChecking yes
    BatchMode yes
    ConnectTimeout 5
    LogLevel ERROR
"""


def site_toml(files: SiteFiles) -> str:
    """The hosts as a site file of `skylease serve` (the form of issue 37's item 2; paths relative
    to the site file, which sits in the site's folder)."""
    rel = lambda p: p.relative_to(files.folder).as_posix()  # noqa: E731
    hosts = "".join(f'\n[[hosts]]                     # {h.name}\naddress = "{h.address}"\nnodes = 1\n'
                    "cpu = 1\nmemory = 1024\n" for h in files.hosts)
    return f"""\
# The test site's hosts (written by python -m skylease.testing.site start; see docs/howto/site.md)
[ssh]
user = "{USER}"
identity_file = "{rel(files.key)}"
known_hosts = "{rel(files.known_hosts)}"
{hosts}"""


def write_configs(files: SiteFiles, ssh_keygen: str) -> None:
    """Fresh keys (the client's, each host's) and every configuration file of the site."""
    (files.key.parent).mkdir(parents=True, exist_ok=True)
    files.key.parent.chmod(0o700)
    client = keygen(files.key, f"skylease-test-site@{files.folder}", ssh_keygen)
    files.authorized_keys.write_text(client + "\n")
    known = []
    for h in files.hosts:
        h.folder.mkdir(exist_ok=True)
        h.pid_file.unlink(missing_ok=True)
        kind, key, *_ = keygen(h.host_key, h.name, ssh_keygen).split()
        known.append(f"{h.address} {kind} {key}\n")
        h.config.write_text(sshd_config(h, files))
    files.known_hosts.write_text("".join(known))
    files.ssh_config.write_text(ssh_config(files))
    files.site_file.write_text(site_toml(files))
