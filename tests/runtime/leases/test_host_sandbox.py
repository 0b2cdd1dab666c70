"""The sandbox of a host's payload is built from the host's file system as its probe found it
(sandbox.FileFacts), not from this machine's: what is bound, linked and covered follows the facts.
(The real thing on a real sshd host: test_host_confinement.py.)"""

from __future__ import annotations

from skylease.runtime.leases.sandbox import FileFacts, PayloadUser, Sandbox


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
