"""VM requests: the VMs file of ``skylease place`` and the synthetic UnaCloud-like trace.

The thesis's year of UnaCloud requests (up to 9,800 VMs; 1, 2, 3, 4, 6 or 8 cores; 45 to 43,200
minutes) is not published and its distributions are not given. Following decision B5 in
docs/decisions/thesis.md, the stand-in trace draws cores from a categorical law over (1, 2, 3, 4, 6,
8) with weights (0.35, 0.25, 0.05, 0.20, 0.05, 0.10), durations log-uniform on [45, 43,200] minutes,
and memory (not packed) from the same six sizes in GB. An instance is a random subset of the trace,
kept in trace (request) order, redrawn until every VM can be placed somewhere on the lab (§6.1.3.2:
"the maximum number of cores on each size is up to the total available physical cores"; see
:func:`fits_lab`).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from skylease.model.desktop import VMs
from skylease.model.errors import UserError
from skylease.traces.textio import parse_number, read_csv_records

__all__ = ["TRACE_SEED", "TRACE_SIZE", "VM_CORES", "VM_CORE_WEIGHTS", "VM_MINUTES", "fits_lab", "read_vms",
           "sample_vms", "vm_arrivals", "vm_trace"]

VM_CORES = (1, 2, 3, 4, 6, 8)
VM_CORE_WEIGHTS = (0.35, 0.25, 0.05, 0.20, 0.05, 0.10)
VM_MINUTES = (45.0, 43200.0)
TRACE_SIZE = 9800
#: Seed of the stand-in trace: every study and ``synthetic:N`` draw from this one trace.
TRACE_SEED = 2014
MAX_DRAWS = 1000
#: The most cores a VM in a file may ask for (bigger than any desktop: it is reported unplaced).
MAX_VM_CORES = 1 << 20


def vm_trace(n: int = TRACE_SIZE, seed: int | np.random.Generator = TRACE_SEED) -> VMs:
    """The synthetic stand-in for the UnaCloud trace (decision B5)."""
    g = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    cores = g.choice(np.array(VM_CORES), size=n, p=VM_CORE_WEIGHTS)
    lo, hi = np.log(VM_MINUTES[0]), np.log(VM_MINUTES[1])
    minutes = np.exp(g.uniform(lo, hi, size=n))
    memory = g.choice(np.array(VM_CORES, dtype=np.float64), size=n)
    return VMs(cores=cores, minutes=minutes, memory_gb=memory, names=tuple(f"r{i + 1:04d}" for i in range(n)))


def fits_lab(vm_cores: np.ndarray, desktop_cores: np.ndarray) -> bool:
    """The feasibility filter of decision B5 for an instance, generalised to any lab.

    The VMs' cores sum to at most the lab's, and for every desktop size s no more VMs need more
    than s cores than there are desktops bigger than s (on the thesis's lab: at most 39 VMs of 6
    or 8 cores, as two never share an 8-core desktop). These are necessary conditions: a heuristic
    can still strand a VM by fragmenting the free cores, and then reports it unplaced.
    """
    vc = np.asarray(vm_cores)
    dc = np.asarray(desktop_cores)
    if vc.sum() > dc.sum():
        return False
    return all((vc > s).sum() <= (dc > s).sum() for s in np.unique(dc))


def sample_vms(trace: VMs, n: int, rng: int | np.random.Generator, desktop_cores: np.ndarray) -> VMs:
    """``n`` VMs drawn from ``trace`` without replacement, in trace order, that fit the lab."""
    if not 1 <= n <= len(trace):
        raise UserError(f"between 1 and {len(trace)} VMs can be drawn from the trace, not {n}", field="vms")
    g = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    for _ in range(MAX_DRAWS):
        pick = np.sort(g.choice(len(trace), size=n, replace=False))
        if fits_lab(trace.cores[pick], desktop_cores):
            return VMs(cores=trace.cores[pick], minutes=trace.minutes[pick], memory_gb=trace.memory_gb[pick],
                       disk_gb=trace.disk_gb[pick], names=tuple(trace.names[i] for i in pick))
    raise UserError(f"{MAX_DRAWS} draws of {n} VMs from the trace never fit these desktops "
                    f"({int(np.sum(desktop_cores))} cores); ask for fewer VMs", field="vms")


def vm_arrivals(trace: VMs, days: float, per_day: float, rng: int | np.random.Generator,
                max_cores: int) -> tuple[VMs, np.ndarray]:
    """Requests arriving over ``days`` as a Poisson process of ``per_day`` a day (the online variant).

    The VMs are drawn from ``trace`` without replacement, in trace order, leaving out requests
    bigger than ``max_cores`` (the largest desktop). Returns the VMs and their arrival minutes.
    """
    g = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    n = int(g.poisson(per_day * days))
    ok = np.flatnonzero(trace.cores <= max_cores)
    if n > len(ok):
        raise UserError(f"{n} arrivals but only {len(ok)} requests in the trace fit", field="per_day")
    pick = np.sort(g.choice(ok, size=n, replace=False))
    arrivals = np.sort(g.uniform(0.0, 1440.0 * days, size=n))
    vms = VMs(cores=trace.cores[pick], minutes=trace.minutes[pick], memory_gb=trace.memory_gb[pick],
              disk_gb=trace.disk_gb[pick], names=tuple(trace.names[i] for i in pick))
    return vms, arrivals


def read_vms(path: str | os.PathLike[str]) -> VMs:
    """A VMs file: CSV with a header; ``cores`` and ``minutes`` (requested duration) are required.

    Optional columns: ``name``, ``memory_gb`` (default 1) and ``disk_gb`` (default 20), carried but
    not packed (the thesis packs by cores only).
    """
    path = Path(path)
    records = read_csv_records(path, ("cores", "minutes"), ("name", "memory_gb", "disk_gb"))
    cores, minutes, memory, disk, names = [], [], [], [], []
    seen: dict[str, int] = {}
    for line, rec in records:
        name = rec.get("name") or f"vm{len(names) + 1:03d}"
        if name in seen:
            raise UserError(f"VM name also used on line {seen[name]}", file=path, line=line, field="name")
        seen[name] = line
        names.append(name)
        cores.append(int(parse_number(path, line, "cores", rec["cores"], integer=True, minimum=1,
                                      maximum=MAX_VM_CORES)))
        minutes.append(parse_number(path, line, "minutes", rec["minutes"], above=0.0))
        memory.append(parse_number(path, line, "memory_gb", rec["memory_gb"], minimum=0.0)
                      if rec.get("memory_gb") else 1.0)
        disk.append(parse_number(path, line, "disk_gb", rec["disk_gb"], minimum=0.0)
                    if rec.get("disk_gb") else 20.0)
    return VMs(cores=cores, minutes=minutes, memory_gb=memory, disk_gb=disk, names=tuple(names))
