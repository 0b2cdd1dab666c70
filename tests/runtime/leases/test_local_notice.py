"""A payload's notice of its lease's end on this machine (LocalNodes.notice; docs/decisions/
before-end-warnings.md), on real sandboxed process groups: the file in the lease's folder (written
whole, never through a link the payload put there), SIGUSR1 to a payload that traps it, and none
to one that does not (the default payload goes on: the signal would have ended it)."""

from __future__ import annotations

import secrets
import signal
import time

from tests.waits import until

from skylease.control.leases.lease import ResourceTuple
from skylease.runtime.leases.local import LocalNodes
from skylease.runtime.leases.notices import NOTICE_FILE
from skylease.runtime.leases.site import Site, SiteNode


def test_the_file_for_every_payload_and_sigusr1_only_to_one_that_traps_it(tmp_path, payload_sandbox):
    site = Site((SiteNode("a", ResourceTuple()), SiteNode("b", ResourceTuple())))
    ln = LocalNodes(site, tmp_path / "data", f"test-{secrets.token_hex(6)}", sandbox=payload_sandbox)
    try:
        trapping = ln.spawn(1, 0, 0, command="trap 'touch got_usr1' USR1; while :; do sleep 0.05; done")
        default = ln.spawn(2, 0, 1, duration_s=30.0)  # (the default payload: it traps no SIGUSR1)
        outside = tmp_path / "outside"
        outside.write_text("untouched\n")
        (ln.lease_dir(2) / NOTICE_FILE).symlink_to(outside)  # (as a payload could)
        assert until(lambda: _traps(trapping.pid), 5)
        for p in (trapping, default):
            assert ln.notice(p, NOTICE_FILE, "600 1764483600.000 60\n")
        assert until(lambda: (ln.lease_dir(1) / "got_usr1").exists(), 5)
        for lid in (1, 2):
            assert (ln.lease_dir(lid) / NOTICE_FILE).read_text() == "600 1764483600.000 60\n"
        assert outside.read_text() == "untouched\n" and not (ln.lease_dir(2) / NOTICE_FILE).is_symlink()
        assert not (ln.lease_dir(2) / "got_usr1").exists()
        time.sleep(0.3)  # (a signal that ended the default payload would show by now)
        assert ln.exited() == [] and {p.pid for p in ln.live()} == {trapping.pid, default.pid}
    finally:
        ln.close(kill=True, grace_s=0.2)


def _traps(pgid: int) -> bool:
    """Whether a process of the group (the payload's shell) has set its SIGUSR1 trap."""
    from skylease.runtime.leases.procfs import catches, group_members

    return any(catches(pid, signal.SIGUSR1) for pid in group_members(pgid) if pid != pgid)
