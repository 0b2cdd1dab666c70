"""What a placement planner returns: the desktop of every VM, or why it has none."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Placement"]


# eq=False: a generated __eq__ would compare numpy arrays and raise; compare fields explicitly.
@dataclass(frozen=True, eq=False)
class Placement:
    """VM i runs on desktop ``desktop[i]``; ``-1`` marks a VM that did not fit, with its reason.

    Every VM is either placed or listed in ``unplaced``: a planner never drops a request.
    """

    algorithm: str
    desktop: np.ndarray  # int64 (n_vms,), desktop index per VM, -1 = unplaced
    order: np.ndarray  # int64 (n_vms,), VM indices in the order the planner took them
    unplaced: dict[int, str]  # VM index -> one-line reason

    @property
    def placed(self) -> np.ndarray:
        """Boolean mask of the VMs that got a desktop."""
        return self.desktop >= 0

    @property
    def desktops_used(self) -> int:
        """Desktops given at least one VM by this placement."""
        d = self.desktop[self.desktop >= 0]
        return int(np.unique(d).size)

    def vms_on(self, desktop: int) -> np.ndarray:
        """Indices of the VMs placed on ``desktop``."""
        return np.flatnonzero(self.desktop == desktop)
