"""A host that stops answering, and answers again, in the lease manager (issue 37; the rules are in
docs/decisions/host-failures.md).

The enactment says whether each host answers (``nodes.host_states()``: its watch's heartbeats). The
manager's loop compares that with what it journaled last; a change is an input of the scheduler,
journaled like a request (``host-down`` / ``host-up``, with the host's nodes and the reason) so that a
replay after a crash makes the same schedule:

* **down**: the scheduler takes the host's nodes out (``LeaseScheduler.nodes_down``: best-effort
  leases whose work was there go back to the queue, advance reservations there are degraded). Once
  that is journaled, the payloads on the host are recorded *lost* ("host ... not answering") and
  forgotten by the manager: they may still run on the host (a network that failed, not the host),
  and are ended when it answers again;
* **up**: the host's nodes are given back (``nodes_up``), and every payload of ours still alive on
  it is shut down (it was recorded lost; a best-effort lease that ran there has run again elsewhere
  or waits in the queue: nothing runs twice).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from skylease.runtime.leases.journal import InputKind
from skylease.runtime.leases.ssh import SshError

__all__ = ["HostFailures"]

log = logging.getLogger("skylease.leases")


class HostFailures:
    """The host-failure part of :class:`~skylease.runtime.leases.manager.LocalLeaseManager` (a mixin:
    it uses the manager's scheduler, journal, batch and payloads; called with its lock held)."""

    site: Any
    sched: Any
    nodes: Any
    journal: Any
    _batch: Any
    _live: dict
    _down_hosts: dict[str, str]
    _now: int
    grace_s: float
    if TYPE_CHECKING:  # the manager's
        def _advance(self, now: int) -> None: ...
        def _step(self, t: int) -> None: ...
        def _ended_payload(self, lid: int, vnode: int, node: int, pid: int, state: str,
                           exit_code: int | None, reason: str | None) -> None: ...

    def _host_nodes(self, host: str) -> list[int]:
        return [k for k, n in enumerate(self.site.nodes) if n.host is not None and n.host.name == host]

    def _host_of(self, node: int) -> str | None:
        """The host of ``node`` (None: this machine, or no node: -1)."""
        if node < 0:
            return None
        host = self.site.nodes[node].host
        return None if host is None else host.name

    def _host_input(self, kind: InputKind, body: dict[str, Any], t: int) -> None:
        """Apply a journaled (or replayed) host change to the scheduler at lease time ``t``."""
        host, nodes = str(body["host"]), [int(k) for k in body["nodes"]]
        if kind is InputKind.HOST_DOWN:
            self._down_hosts[host] = str(body["reason"])
            self.sched.nodes_down(nodes, t, str(body["reason"]))
        else:
            self._down_hosts.pop(host, None)
            self.sched.nodes_up(nodes, t)

    def _host_changes(self, now: int) -> list[str]:
        """Journal each host whose answering changed since the last look, as an input at ``now`` (the
        caller steps and commits); the hosts that answer again (their strays are shut down after
        the commit: :meth:`_after_host_changes`)."""
        came_back = []
        for host, state in sorted(self.nodes.host_states().items()):
            down = host in self._down_hosts
            if state.up != down:
                continue
            self._advance(now)  # what fell due before it, first
            self._now = now
            body: dict[str, Any] = {"host": host, "nodes": self._host_nodes(host)}
            if not state.up:
                body["reason"] = f"host {host} not answering: {state.reason or 'no reason given'}"
                kind = InputKind.HOST_DOWN
                log.warning("%s: its leases are requeued or degraded", body["reason"])
            else:
                kind = InputKind.HOST_UP
                came_back.append(host)
                log.warning("host %s answers again: its nodes are used again", host)
            self._batch.inputs.append((now, kind, None, body))
            self._host_input(kind, body, now)
            self._step(now)
        return came_back

    def _lose_payloads_on_down_hosts(self) -> None:
        """The payloads on a host that does not answer are recorded lost (after the host's change is
        journaled: a replay must see the change before the loss). Called at every step of the loop:
        nothing to look at while every host answers."""
        if not self._down_hosts:
            return
        for key, live in sorted(self._live.items()):
            host = self._host_of(live.payload.node)
            if host is None or host not in self._down_hosts:
                continue
            reason = self._down_hosts[host]
            self.journal.update_payload(live.row, state="lost", reason=reason)
            self._ended_payload(key[0], key[1], live.payload.node, live.payload.pid, "lost", None, reason)
            del self._live[key]

    def _end_strays(self, hosts: list[str]) -> None:
        """Shut down our payloads still alive on ``hosts`` that the manager does not run (they were
        recorded lost while their host did not answer)."""
        wanted = {(live.payload.node, live.payload.pid, live.payload.start_ticks)
                  for live in self._live.values()}
        for host in hosts:
            try:
                found = self.nodes.find_own_on(host)
            except SshError as exc:
                log.warning("host %s: its payloads cannot be looked for: %s", host, exc.message)
                continue
            for p in found:
                if (p.node, p.pid, p.start_ticks) in wanted:
                    continue
                if self.nodes.adopt(p):
                    log.warning("host %s: lease %d VM %d's payload (recorded lost) still ran: shut down",
                                host, p.lease, p.vnode)
                    self.nodes.shutdown(p, grace_s=self.grace_s)
