"""A Gantt chart of a lease simulation: nodes up, time across, one bar per run on its nodes.

Every reservation carried out (:attr:`LeaseRun.runs`: a VM run, a suspension, a resumption) is a
bar on each of its nodes (adjacent nodes merged into one block), colored by lease (a categorical
colormap, cycling); advance reservations are hatched; suspensions and resumptions are dark with
a black edge. All bars of one style are one :class:`PolyCollection`, so a 30-day trace (tens of
thousands of bars) draws in about a second. The file is written atomically.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from skylease.control.leases import Lease, LeaseKind
from skylease.experiments.report import FIGURE_FORMATS, check_output
from skylease.model.errors import UserError
from skylease.sim.leases import LeaseRun, Run

__all__ = ["FORMATS", "check_output", "gantt_chart", "hhmm"]

FORMATS = FIGURE_FORMATS
#: Up to this many leases, each bar is labelled with its lease id.
LABEL_LEASES = 40
_DAY = 86400


def hhmm(t: float) -> str:
    """Seconds as ``hh:mm``."""
    return f"{int(t) // 3600:02d}:{int(t) % 3600 // 60:02d}"


def _blocks(nodes: Sequence[int]) -> list[tuple[int, int]]:
    """Runs of adjacent node ids: (first, last)."""
    out: list[tuple[int, int]] = []
    for k in sorted(nodes):
        if out and k == out[-1][1] + 1:
            out[-1] = (out[-1][0], k)
        else:
            out.append((k, k))
    return out


def _rects(runs: Sequence[Run], pad: float) -> tuple[np.ndarray, list[int]]:
    """Corner arrays (n, 4, 2) of one rectangle per block of adjacent nodes, and each one's lease."""
    boxes: list[tuple[float, float, float, float]] = []
    owners: list[int] = []
    for r in runs:
        for a, b in _blocks(r.nodes):
            boxes.append((r.start, r.stop, a - 0.5 + pad, b + 0.5 - pad))
            owners.append(r.lease)
    if not boxes:
        return np.zeros((0, 4, 2)), owners
    x0, x1, y0, y1 = np.array(boxes, dtype=float).T
    verts = np.stack([np.stack([x0, y0], 1), np.stack([x0, y1], 1), np.stack([x1, y1], 1),
                      np.stack([x1, y0], 1)], 1)
    return verts, owners


def gantt_chart(run: LeaseRun, n_nodes: int, path: str | Path, *, title: str = "",
                leases: Sequence[Lease] | None = None) -> Path:
    """Draw ``run`` on ``n_nodes`` nodes to ``path`` (PNG, PDF or SVG, by its suffix)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.collections import PolyCollection
    from matplotlib.patches import Patch
    from matplotlib.ticker import FuncFormatter, MaxNLocator, MultipleLocator

    from skylease.experiments.store import atomic_write_bytes_via

    path = check_output(path, "--gantt")
    leases = run.leases if leases is None else leases
    kind = {le.id: le.kind for le in leases}
    order = {lid: i for i, lid in enumerate(sorted(kind))}
    tab20 = plt.get_cmap("tab20")
    palette = [tab20(i) for i in (*range(0, 20, 2), *range(1, 20, 2))]  # neighbours in different hues
    small = len(kind) <= LABEL_LEASES and n_nodes <= 64
    pad = 0.08 if n_nodes <= 64 else 0.0
    t_end = max((r.stop for r in run.runs), default=1) or 1

    def colors(owners: list[int], shade: float = 1.0) -> np.ndarray:
        c = np.array([palette[order.get(lid, lid) % len(palette)] for lid in owners]).reshape(-1, 4)
        c[:, :3] *= shade
        return c

    vm = [r for r in run.runs if r.kind == "vm"]
    be = [r for r in vm if kind.get(r.lease) is not LeaseKind.ADVANCE_RESERVATION]
    ar = [r for r in vm if kind.get(r.lease) is LeaseKind.ADVANCE_RESERVATION]
    sr = [r for r in run.runs if r.kind in ("suspend", "resume", "shutdown")]  # (a migration holds no node)
    height = min(9.0, 1.6 + 0.45 * n_nodes) if n_nodes <= 16 else 9.0
    fig, ax = plt.subplots(figsize=(12 if small else 16, height), layout="constrained")
    edge = "white" if small else "none"
    for group, style in ((be, {}), (ar, {"hatch": "////" if small else "///"}), (sr, {})):
        verts, owners = _rects(group, pad)
        if not owners:
            continue
        if group is sr:
            pc = PolyCollection(verts, facecolors=colors(owners, 0.35), edgecolors="black",
                                linewidths=0.8 if small else 0.3, zorder=3)
        elif group is ar:
            pc = PolyCollection(verts, facecolors=colors(owners), edgecolors="0.15",
                                linewidths=0.6 if small else 0.0, zorder=2, **style)
        else:
            pc = PolyCollection(verts, facecolors=colors(owners), edgecolors=edge,
                                linewidths=0.8 if small else 0.0, zorder=2)
        ax.add_collection(pc)
    if small:  # the lease id in the middle of each VM run's first block
        for r in vm:
            a, b = _blocks(r.nodes)[0]
            if (r.stop - r.start) / t_end > 0.02:
                ax.text((r.start + r.stop) / 2, (a + b) / 2, str(r.lease), ha="center", va="center",
                        fontsize=9, zorder=4, bbox={"boxstyle": "round,pad=0.15", "fc": "white",
                                                     "ec": "none", "alpha": 0.8})
    ax.set_xlim(0, t_end * 1.01)
    ax.set_ylim(n_nodes - 0.5, -0.5)  # node 0 on top
    ax.yaxis.set_major_locator(MaxNLocator(integer=True, nbins=min(n_nodes, 12)))
    ax.set_ylabel("node")
    hours = t_end <= 2 * _DAY
    unit = 60 if hours else _DAY  # ticks in minutes or days
    steps = (1, 5, 10, 15, 30, 60, 120, 180, 360) if hours else (0.25, 0.5, 1, 2, 5, 7, 10, 14, 30, 60, 90)
    step = next((st for st in steps if t_end / (st * unit) <= 16), steps[-1])
    ax.xaxis.set_major_locator(MultipleLocator(step * unit))
    if hours:
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: hhmm(x)))
        ax.set_xlabel("time (hh:mm from the start)")
    else:
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x / _DAY:g}"))
        ax.set_xlabel("time (days from the start)")
    ax.grid(axis="x", color="0.85", lw=0.6, zorder=0)
    ax.set_title(title or "lease Gantt chart", loc="left", fontsize=11)
    handles = [Patch(fc=palette[0], ec="none", label="VM run (one color per lease, cycling)"),
               Patch(fc="0.85", ec="0.15", hatch="////", label="advance reservation (hatched)"),
               Patch(fc=tuple(c * 0.35 for c in palette[0][:3]), ec="black",
                     label="suspension / resumption / shutdown"),
               *([Patch(fc="none", ec="none", label="numbers: lease ids")] if small else [])]
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles), frameon=False, fontsize=9)

    def save(tmp: Path) -> None:
        fig.savefig(tmp, dpi=110, format=path.suffix.lower().lstrip("."))

    try:
        atomic_write_bytes_via(path, save)
    except OSError as e:
        raise UserError(f"cannot write the chart: {e.strerror or e}", file=path, field="--gantt") from None
    finally:
        plt.close(fig)
    return path
