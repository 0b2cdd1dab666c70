"""The start-time check of a site's hosts: each one answers OpenSSH, with the key and host key of
the site file, before the server starts.

For each distinct host, concurrently, :func:`check_hosts` runs OpenSSH's own client::

    ssh -o BatchMode=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile=KNOWN_HOSTS
        -o ConnectTimeout=SECONDS [-o IdentityFile=KEY -o IdentitiesOnly=yes] -p PORT -l USER -- ADDRESS true

and refuses the site, in one line naming the host and ssh's own last word on it (its last line on
stderr: ``Permission denied (publickey).``, ``Connection refused``, ``Host key verification
failed.``, ``Connection timed out``), when a host does not answer, refuses the key, or shows a
host key that ``known_hosts`` does not hold. Why OpenSSH and not a Python SSH library:
docs/decisions/ssh-enactment.md. ``BatchMode`` keeps ssh from asking anything (no password or
passphrase prompt: a key the agent or the file gives, or a refusal); the user's own ssh
configuration applies otherwise (a ``ProxyJump``, for instance), but not a connection master it may
name: the check makes a connection of its own (``ControlPath=none``), so that a master left over
from earlier cannot answer for a host that no longer does.

:func:`ssh_argv` is the command line every SSH command of the site's enactment starts with.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from skylease.model.errors import UserError
from skylease.runtime.leases.site import Site, SiteHost

__all__ = ["HANDSHAKE_S", "MAX_PARALLEL", "check_hosts", "ssh_argv"]

#: What a check may take past the host's ``connect_timeout`` (which bounds the TCP connection
#: only): the key exchange, the authentication and the command. A host past it is "not answering".
HANDSHAKE_S = 20.0
#: At most this many hosts are checked at once (an ssh process each).
MAX_PARALLEL = 32


def _option_path(path: Path) -> str:
    """A path as an ssh option's value: ``%`` doubled (ssh expands ``%h`` and the like in it) and
    quoted (ssh splits the value at spaces)."""
    text = str(path).replace("%", "%%").replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


def ssh_argv(host: SiteHost, *command: str, program: str = "ssh",
             options: Sequence[str] = ()) -> list[str]:
    """The OpenSSH command line that runs ``command`` on ``host``: no prompt, the host key checked
    strictly against the site's ``known_hosts``, the site's key only when it names one (without
    ``IdentitiesOnly``, ssh would offer the agent's keys first, and a host allowing few attempts
    would refuse before the right one), and ``options`` (``-o`` pairs) before the destination."""
    argv = [program, "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
            "-o", f"UserKnownHostsFile={_option_path(host.known_hosts)}",
            "-o", f"ConnectTimeout={host.connect_timeout}"]
    if host.identity_file is not None:
        # (as an option, not -i: ssh looks for the file named by -i before it expands its '%')
        argv += ["-o", f"IdentityFile={_option_path(host.identity_file)}", "-o", "IdentitiesOnly=yes"]
    return [*argv, *options, "-p", str(host.port), "-l", host.user, "--", host.address, *command]


def _check(host: SiteHost, program: str, handshake_s: float) -> str | None:
    """Why ``host`` cannot be reached, in ssh's words, or None if ``true`` ran there."""
    argv = ssh_argv(host, "true", program=program, options=("-o", "ControlPath=none", "-T"))
    limit = host.connect_timeout + handshake_s
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, timeout=limit, check=False)
    except subprocess.TimeoutExpired:  # (subprocess.run has killed our ssh by then)
        return f"no answer within {limit:g} s"
    except FileNotFoundError:
        return f"OpenSSH's client {program!r} is not installed (the site's hosts are reached with it)"
    if done.returncode == 0:
        return None
    lines = [" ".join(line.split()) for line in done.stderr.decode("utf-8", "replace").splitlines()]
    last = next((line for line in reversed(lines) if line), "")
    return last[:300] if last else f"ssh ended with exit code {done.returncode} and said nothing"


def check_hosts(site: Site, *, program: str = "ssh", handshake_s: float = HANDSHAKE_S) -> None:
    """Run ``true`` on each of the site's hosts over SSH (``program``: the OpenSSH client), at most
    :data:`MAX_PARALLEL` at once, each within its ``connect_timeout`` + ``handshake_s`` seconds;
    a UserError naming the site file, the first host (in file order) that failed, its
    address and ssh's error, if any did."""
    hosts = site.hosts
    if not hosts:
        return
    workers = min(MAX_PARALLEL, len(hosts))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ssh-check") as pool:
        reasons = list(pool.map(lambda h: _check(h, program, handshake_s), hosts))
    failed = [(h, r) for h, r in zip(hosts, reasons, strict=True) if r is not None]
    if not failed:
        return
    host, reason = failed[0]
    more = f" (and {len(failed) - 1} more host{'s' if len(failed) > 2 else ''})" if len(failed) > 1 else ""
    raise UserError(f"host {host.name} ({host.user}@{host.address} port {host.port}) cannot be reached over "
                    f"SSH: {reason}{more}", file=site.source, field="hosts")
