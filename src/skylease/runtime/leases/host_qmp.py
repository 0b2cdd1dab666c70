"""QMP to a guest on a host: a :class:`~skylease.runtime.leases.qemu.Monitor` over a bridge session
on the host's SSH connection (:mod:`skylease.runtime.leases.ssh_bridge`), closed together."""

from __future__ import annotations

from typing import Any

from qemu.qmp.error import QMPError

from skylease.runtime.leases.qemu import COMMAND_TIMEOUT_S, Monitor
from skylease.runtime.leases.qemu_spec import GuestError
from skylease.runtime.leases.ssh import SshConnection
from skylease.runtime.leases.ssh_bridge import RemoteSocket

__all__ = ["HostMonitor"]


class HostMonitor:
    """QMP on the socket ``path`` of ``conn``'s host (waited for there up to ``wait_s`` seconds).
    GuestError, with the bridge's reason (no such socket, say) or ssh's, when it cannot be reached."""

    def __init__(self, conn: SshConnection, path: str, *, python: str = "python3",
                 timeout: float = COMMAND_TIMEOUT_S, wait_s: float = 0.0) -> None:
        self.bridge = RemoteSocket(conn, path, python=python, wait_s=wait_s)
        try:
            self.monitor = Monitor(self.bridge.sock, timeout)
        except (QMPError, OSError, TimeoutError) as e:
            why = self.bridge.failure(wait_s=2.0) or str(e) or type(e).__name__
            self.bridge.close()
            raise GuestError(f"{conn.target.label}: QMP at {path}: {why}") from None

    def cmd(self, name: str, arguments: dict[str, Any] | None = None,
            timeout: float = COMMAND_TIMEOUT_S) -> Any:
        return self.monitor.cmd(name, arguments, timeout)

    def close(self) -> None:
        self.monitor.close()
        self.bridge.close()

    def __enter__(self) -> HostMonitor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
