"""Calibration of the scheduler's VM overheads against the site's machines (issue 38, item 4).

The scheduler reserves time for each suspension and resumption from its overhead model: ``m / rate``
seconds for a VM of ``m`` MB, plus a fixed ``enactment_overhead_s`` per VM, rounded up to whole lease
seconds (docs/decisions/haizea.md, H1 and H2), and ``shutdown_s`` for a shutdown. :func:`measure`
boots a guest of each memory size on one node of each machine of the site (this machine and each
SSH host) through the enactment the server uses (``spawn_vm``, ``suspend_vm``, ``shutdown_vm``), and
times its start, its save to disk, its resume and its ACPI shutdown; :func:`fit` turns the samples
into the model's keys, in lease seconds at the server's time scale (a rate of ``R`` MB/s is ``R / S``
MB per lease second at ``S`` lease seconds a second), from the slowest machine: a reservation must
hold on every node. The decisions are in docs/decisions/vm-calibration.md.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["Sample", "fit", "measure", "to_toml"]

#: Seconds a guest runs between its start and its save (its kernel touches its memory meanwhile: a
#: guest saved at once would have an almost empty state, faster than any real one).
SETTLE_S = 4.0
#: Seconds a resumed guest runs before its shutdown (an ACPI power-down sent within milliseconds of
#: the resume was missed by the test guest about one time in three).
RESUMED_S = 1.0
#: Seconds a guest has to power off at an ACPI shutdown before it counts as not powering off.
SHUTDOWN_GRACE_S = 10.0
#: The fastest rate (MB/s) a fit gives: what a time that does not grow with memory is taken for.
MAX_RATE = 100_000.0
#: The lease ids calibration guests use in the enactment's folders (far from any real lease's).
CALIBRATION_LEASE = 10**9


@dataclass(frozen=True)
class Sample:
    """One guest of ``memory_mb`` on ``machine`` (its node ``node``): seconds to start (QEMU running),
    to save (suspend), to resume from the saved state and to power off (None: it did not, within the
    grace: killed)."""

    machine: str
    node: str
    memory_mb: int
    start_s: float
    suspend_s: float
    resume_s: float
    shutdown_s: float | None


def measure(nodes: Any, targets: Sequence[tuple[str, int]], names: Sequence[str], image: str,
            sizes: Sequence[int], *, settle_s: float = SETTLE_S, grace_s: float = SHUTDOWN_GRACE_S,
            pause_s: float = 0.0, say: Callable[[str], None] = lambda _: None) -> list[Sample]:
    """A :class:`Sample` per (machine, node index) of ``targets`` and memory size: guests booted from
    ``image`` by ``nodes`` (the site's enactment; ``names``: its nodes' names), one at a time, each
    resumed ``pause_s`` seconds after its save (a resumption is slower the longer its guest stayed
    saved: docs/decisions/vm-calibration.md). ``say`` is told of each step (progress)."""
    out = []
    lease = CALIBRATION_LEASE
    for machine, k in targets:
        lease += 1  # a first guest, not timed: the enactment's one-time work (the KVM probe) is not a start
        say(f"{machine} ({names[k]}): a first guest, not timed")
        p = nodes.spawn_vm(lease, 0, k, image=image, memory_mb=min(sizes), cpus=1)
        nodes.shutdown(p, 0.0)
        _wait_exit(nodes, p, 10.0)
        for m in sizes:
            lease += 1
            say(f"{machine} ({names[k]}): a {m} MB guest")
            t0 = time.monotonic()
            p = nodes.spawn_vm(lease, 0, k, image=image, memory_mb=m, cpus=1)
            start = time.monotonic() - t0
            time.sleep(settle_s)
            suspend = nodes.suspend_vm(p)
            _wait_exit(nodes, p, 10.0)  # (its exit is the save's)
            time.sleep(pause_s)
            t0 = time.monotonic()
            p = nodes.spawn_vm(lease, 0, k, image=image, memory_mb=m, cpus=1)
            resume = time.monotonic() - t0
            time.sleep(RESUMED_S)
            t0 = time.monotonic()
            nodes.shutdown_vm(p, grace_s)
            off = _wait_exit(nodes, p, grace_s + 5.0)
            shutdown = time.monotonic() - t0 if off and time.monotonic() - t0 <= grace_s else None
            out.append(Sample(machine, names[k], m, start, suspend, resume, shutdown))
            say(f"  start {start:.2f} s, save {suspend:.2f} s, resume {resume:.2f} s, power-off "
                + (f"{shutdown:.2f} s" if shutdown is not None else f"none within {grace_s:g} s (killed)"))
    return out


def _wait_exit(nodes: Any, p: Any, timeout: float) -> bool:
    """Whether ``p``'s end was reported by the enactment within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(e.pid == p.pid and e.lease == p.lease for e in nodes.exited()):
            return True
        time.sleep(0.05)
    return False


def _line(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Least squares ``y = a + b x`` (``b`` 0 for a single size)."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx if sxx else 0.0
    return my - b * mx, b


def fit(samples: Sequence[Sample], time_scale: float) -> dict[str, Any]:
    """The scheduler's overhead keys from ``samples``, in lease seconds at ``time_scale`` lease
    seconds a second. The model is ``seconds = a + m / rate`` with one fixed part ``a`` shared by
    suspensions and resumptions (the scheduler's ``enactment_overhead_s``): ``a`` is the smaller
    intercept of the two straight lines fitted over the memory sizes (at least 0: on the fastest
    machine, so that no operation is over-reserved by it), and no more than the fastest operation
    measured; each rate is then the least-squares fit of
    ``m / rate`` to what is left, on each machine, and the slowest machine's is kept (a reservation
    must hold on every node). A time that does not grow with memory (an idle guest's unused memory
    is not written: QEMU skips zero pages) leaves a rate so fast that the reservation is the fixed
    part and one lease second."""
    if not samples:
        raise ValueError("no samples")
    machines = sorted({s.machine for s in samples})
    by = {m: [s for s in samples if s.machine == m] for m in machines}
    ops = ("suspend", "resume")
    intercepts = []
    for mine in by.values():
        xs = [float(s.memory_mb) for s in mine]
        for op in ops:
            intercepts.append(_line(xs, [getattr(s, f"{op}_s") for s in mine])[0])
    # no more than the fastest operation measured: a line that falls with memory (a slow moment of the
    # machine during the smaller guest) has an intercept above every sample, which would over-reserve
    # each operation by the difference
    fastest = min(getattr(s, f"{op}_s") for s in samples for op in ops)
    a = max(0.0, min(*intercepts, fastest))
    rates: dict[str, float] = {}
    for op in ops:
        slowest = MAX_RATE
        for mine in by.values():
            num = sum(s.memory_mb * (getattr(s, f"{op}_s") - a) for s in mine)
            den = sum(s.memory_mb ** 2 for s in mine)
            slowest = min(slowest, den / num if num > 0 else MAX_RATE)
        rates[op] = slowest
    overhead = round(a * time_scale)
    offs = [s.shutdown_s for s in samples if s.shutdown_s is not None]
    shutdown = math.ceil(max(offs) * time_scale) if offs else None
    return {
        "suspend_rate": round(rates["suspend"] / time_scale, 3),
        "resume_rate": round(rates["resume"] / time_scale, 3),
        "enactment_overhead_s": overhead,
        "shutdown_s": None if shutdown is None else max(0, shutdown - overhead),
    }


def reserved_s(memory_mb: int, rate: float, overhead_s: int) -> int:
    """The lease seconds the scheduler reserves for one VM's suspension (or resumption) of
    ``memory_mb`` (``ceil(m / rate)`` + the fixed part: the scheduler's model)."""
    return math.ceil(memory_mb / rate) + overhead_s


def to_toml(keys: dict[str, Any], samples: Sequence[Sample], time_scale: float, base: str) -> str:
    """A scheduler configuration file (``skylease serve --scheduler FILE``): ``base`` with the
    calibrated keys, the samples as comments."""
    lines = [f"# skylease serve calibrate: {len(samples)} guests, at {time_scale:g} lease seconds a second",
             "# (rates in MB per lease second; times in lease seconds; see docs/howto/vm-leases.md)",
             f'base = "{base}"']
    for key, value in keys.items():
        if value is not None:
            lines.append(f"{key} = {value}")
    lines.append("")
    lines.append("# machine, node, memory MB: start, save, resume, power-off (real seconds)")
    for s in samples:
        d = asdict(s)
        off = "killed" if d["shutdown_s"] is None else f"{d['shutdown_s']:.2f}"
        lines.append(f"# {s.machine}, {s.node}, {s.memory_mb}: {s.start_s:.2f}, {s.suspend_s:.2f}, "
                     f"{s.resume_s:.2f}, {off}")
    return "\n".join(lines) + "\n"


def calibrate_site(site: Any, image: str, sizes: Sequence[int], time_scale: float, *,
                   say: Callable[[str], None] = lambda _: None,
                   settle_s: float = SETTLE_S, pause_s: float = 0.0) -> tuple[dict[str, Any], list[Sample]]:
    """Measure the first node of each machine of ``site`` (this machine's nodes, each host) with
    guests of ``sizes`` MB booted from the repository's ``image``, through the enactment the server
    uses, in a folder of its own (removed after); the fitted keys (:func:`fit`) and the samples.
    UserError for an image that cannot boot a VM or a size no node of a machine holds."""
    import tempfile
    import uuid
    from pathlib import Path

    from skylease.model.errors import UserError
    from skylease.runtime.leases.local_vms import vm_image_problem
    from skylease.runtime.leases.qemu_spec import GuestError
    from skylease.runtime.leases.site_nodes import SiteNodes

    if (problem := vm_image_problem(site.repository, image)) is not None:
        raise UserError(problem, field="--image")
    if not sizes or any(m < 16 for m in sizes):
        raise UserError(f"memory sizes are whole MB from 16, got {list(sizes)}", field="--sizes")
    targets: list[tuple[str, int]] = []
    seen: set[str] = set()
    for k, node in enumerate(site.nodes):
        machine = "this machine" if node.host is None else node.host.name
        if machine not in seen:
            seen.add(machine)
            targets.append((machine, k))
            if max(sizes) > node.capacity.memory:
                raise UserError(f"{max(sizes)} MB is beyond node {node.name}'s {node.capacity.memory} MB",
                                field="--sizes")
    with tempfile.TemporaryDirectory(prefix="skylease-calibrate-") as tmp:
        sandbox = None
        if any(n.host is None for n in site.nodes):
            from skylease.runtime.leases.sandbox import probe

            sandbox = probe(Path(tmp))
        nodes = SiteNodes(site, Path(tmp), f"calibrate-{uuid.uuid4().hex[:8]}", sandbox=sandbox)
        try:
            samples = measure(nodes, targets, site.names, image, sizes, settle_s=settle_s, pause_s=pause_s,
                              say=say)
        except GuestError as exc:  # (QEMU missing, a guest that does not start: one line)
            raise UserError(f"a calibration guest failed: {exc}", field="--image") from None
        finally:
            nodes.close(kill=True)
    return fit(samples, time_scale), samples
