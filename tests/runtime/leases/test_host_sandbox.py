"""The sandbox of a host's payload is built from the host's file system as its probe found it
(sandbox.FileFacts), not from this machine's: what is bound, linked and covered follows the facts;
and a host whose facts lack something (bubblewrap, setpriv, a CPU) is one line naming the host and
the fix. The facts are this machine's, gathered by host_probe as on a host, with the field under
test changed. (The real thing on a real sshd host: test_host_confinement.py.)"""

from __future__ import annotations

import os
import shutil

import pytest

from skylease.control.leases.lease import ResourceTuple
from skylease.runtime.leases import host_probe
from skylease.runtime.leases.host_sandbox import from_facts
from skylease.runtime.leases.sandbox import FileFacts, PayloadUser, Sandbox, SandboxUnavailable, wrap_paths
from skylease.runtime.leases.site import Site, SiteNode


def pairs(argv: list[str], option: str) -> list[tuple[str, ...]]:
    """The arguments of each ``option`` in ``argv`` (before the payload's own ``--``)."""
    n = {"--ro-bind": 2, "--bind": 2, "--symlink": 2, "--tmpfs": 1}[option]
    argv = argv[:len(argv) - argv[::-1].index("--") - 1]
    return [tuple(argv[i + 1:i + 1 + n]) for i, a in enumerate(argv) if a == option]


def test_wrap_follows_the_hosts_file_system_not_this_machines():
    # a host without merged /usr (/bin a folder, /lib64 a link elsewhere, no /opt), its remote
    # folder under /etc (a bound system tree: covered) and its Python under the SSH user's home
    facts = FileFacts((
        ("/usr", False, True, True, ""), ("/etc", False, True, True, ""),
        ("/bin", False, True, True, ""), ("/sbin", False, True, True, ""),
        ("/lib", False, True, True, ""), ("/lib64", True, True, True, "/lib/x86_64"),
        ("/home/ops", False, True, True, ""), ("/etc/skylease/sl", False, True, True, ""),
        ("/etc/skylease/token", False, False, True, "")))
    box = Sandbox("/usr/bin/bwrap", PayloadUser("skylease-payload", 990, 990), "/usr/bin/setpriv",
                  ("/home/ops/py",), ("/etc/skylease/sl", "/etc/skylease/token", "/home/ops"),
                  "/home/ops/py/bin/python3", facts)
    argv = box.wrap(box.default_payload("pass"), lease_dir="/etc/skylease/sl/leases/7", hostname="h1",
                    env={"SKYLEASE_LEASE": "7"})
    assert pairs(argv, "--ro-bind")[:5] == [("/usr", "/usr"), ("/etc", "/etc"), ("/bin", "/bin"),
                                            ("/sbin", "/sbin"), ("/lib", "/lib")]
    assert ("/opt", "/opt") not in pairs(argv, "--ro-bind")  # (this machine's /opt is no matter)
    assert pairs(argv, "--symlink") == [("/lib/x86_64", "/lib64")]
    assert ("/home/ops/py", "/home/ops/py") in pairs(argv, "--ro-bind")  # its Python, read-only
    # the remote folder under /etc is covered (a folder: an empty tmpfs; a file: /dev/null); the
    # home is not bound at all, so nothing covers it
    assert pairs(argv, "--tmpfs") == [("/etc/skylease/sl",), ("/tmp",)]
    assert ("/dev/null", "/etc/skylease/token") in pairs(argv, "--ro-bind")
    assert ("/home/ops", "/home/ops") not in pairs(argv, "--ro-bind")
    assert pairs(argv, "--bind") == [("/etc/skylease/sl/leases/7", "/lease")]
    assert argv[argv.index("--hostname") + 1] == "h1"
    assert argv[argv.index("--reuid") + 1] == "990" and argv[0] == "/usr/bin/bwrap"
    assert argv[-5:] == ["/home/ops/py/bin/python3", "-I", "-S", "-c", "pass"]


def test_a_path_not_in_the_facts_does_not_exist():
    facts = FileFacts((("/usr", False, True, True, ""),))
    assert (facts.isdir("/usr"), facts.islink("/usr"), facts.lexists("/usr")) == (True, False, True)
    assert (facts.isdir("/opt"), facts.islink("/opt"), facts.lexists("/opt"), facts.readlink("/opt")) == \
        (False, False, False, "")


# -- what the probe's facts say is missing: one line naming the host and what to install -------------
LABEL = "root@10.0.0.5:22"


def real_facts(tmp_path) -> dict:
    """This machine's facts as host_probe gathers them on a host (as root here: the payload user is
    looked up, and created if missing, as the server's own probe does)."""
    return host_probe.facts({"dir": str(tmp_path / "remote"), "payload_user": "auto", "paths": wrap_paths()})


def one_node() -> Site:
    return Site((SiteNode("a", ResourceTuple()),), machine=(0,))


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("bwrap"), reason="as root, with bwrap")
def test_the_facts_of_a_host_that_has_everything_make_its_sandbox(tmp_path):
    f = real_facts(tmp_path)
    host = from_facts(LABEL, f, one_node(), [0])
    assert host.remote_dir == str(tmp_path / "remote") and host.home == os.path.expanduser("~")
    assert host.sandbox.user is not None and host.sandbox.user.uid != 0
    assert set(host.sandbox.hidden) == {host.remote_dir, host.home}
    assert host.owner() == [host.sandbox.user.uid, host.sandbox.user.gid]


@pytest.mark.skipif(os.geteuid() != 0, reason="as root: a root SSH user's facts")
@pytest.mark.parametrize(("change", "kw", "said"), [
    ({"bwrap": None}, {},
     "cannot confine lease payloads: bwrap (bubblewrap) is not installed there; install bubblewrap "
     "(Debian, Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap)"),
    ({"bwrap": "/usr/bin/bwrap", "setpriv": None}, {},
     "cannot confine lease payloads: setpriv is missing there (Debian: apt-get install util-linux)"),
    ({"bwrap": "/usr/bin/bwrap", "euid": 1000, "user": None}, {"payload_user": "nobody"},
     "cannot confine lease payloads: payloads can run as 'nobody' only when the SSH user is root; leave "
     "payload_user unset (payloads then run in a user namespace)"),
    ({"bwrap": "/usr/bin/bwrap", "cpus": [0]}, {"nodes": 2},
     "cannot pin lease payloads: node b is pinned to CPUs 1-2, but the host has 0 (missing 1-2): give its "
     "nodes fewer CPUs"),
])
def test_a_host_that_lacks_something_is_one_line_naming_it_and_the_fix(tmp_path, change, kw, said):
    f = {**real_facts(tmp_path), **change}
    site = one_node()
    if kw.pop("nodes", None):
        site = Site((SiteNode("a", ResourceTuple()), SiteNode("b", ResourceTuple(cpu=2))), machine=(0, 1, 2))
    with pytest.raises(SandboxUnavailable) as caught:
        from_facts(LABEL, f, site, range(site.n_nodes), **kw)
    assert str(caught.value) == f"{LABEL}: {said}"
