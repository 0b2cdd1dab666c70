"""``skylease leases simulate``: one lease workload through the lease scheduler, lease by lease.

The workload is a file in one of three formats, told apart by name and content:

* **SWF** (``.swf``, ``.swf.gz``, or 18 numbers a line): best-effort leases, one per job, as the
  Haizea experiments read the Blue Horizon log (decision H15 in docs/decisions/haizea.md,
  :func:`best_effort_requests`);
* **XML LWF** (the content starts with ``<``): Haizea 1.0's lease workloads, with their
  ``<site>`` (node count and per-node resources);
* **plain LWF** (anything else): one advance reservation per line (the ``lwf/injected`` files).

``inject`` adds the ARs of a plain LWF file, as the paper injects them into the Blue Horizon
trace (ids after the workload's). A workload without a site runs on the paper's cluster: 144
nodes of 1 CPU and 1,024 MB. Leases without a VM image get one drawn (uniform or skewed, decision
H17) when the configuration moves images; XML leases keep their own.

The configuration is one of the paper's six or Haizea 1.0's three by name
(:data:`NAMED_CONFIGURATIONS`) or a TOML file: :class:`SchedulerConfig` fields, plus ``base`` (a
configuration to start from), ``images`` and ``seed`` (the image draw), and a ``[policies.KIND]``
table per pluggable policy (``admission``, ``preemption``, ``host_selection``): ``class`` (a
built-in name or ``"module:Class"``) and the class's keyword parameters, resolved when the file is
read (:func:`skylease.control.leases.policies.load_policy`). Every accepted lease is
simulated to its end (not only until the best-effort work is done, as the paper's metrics do; the
metrics are the same).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, field_validator

from skylease.control.leases import (
    BLUE_HORIZON_NODE,
    NAMED_CONFIGURATIONS,
    Lease,
    LeaseState,
    ResourceTuple,
    SchedulerConfig,
)
from skylease.control.leases.config import POLICY_KEYS, configuration_key
from skylease.control.leases.policies import PolicyError, load_policy
from skylease.control.leases.records import KIND_NAMES, lease_events, lease_record
from skylease.control.plugins import resolve_file_spec
from skylease.model.errors import UserError
from skylease.model.schema import FileModel, load_toml
from skylease.sim.leases import (
    BLUE_HORIZON_NODES,
    LeaseRun,
    ar_leases,
    assign_images,
    be_leases,
    simulate_leases,
    site_capacity,
    xml_leases,
)
from skylease.traces.lwf import read_plain_lwf, read_xml_lwf
from skylease.traces.swf import SWF_FIELDS, best_effort_columns, read_swf_columns
from skylease.traces.textio import read_text

__all__ = ["IMAGE_DRAWS", "KIND_NAMES", "LeaseConfig", "LeaseSimulation", "Workload", "clock",
           "detect_format", "finite", "lease_events", "lease_timeline", "load_config", "load_workload",
           "simulate_workload"]

#: The image draws a TOML configuration may ask for ("none": leases keep no image).
IMAGE_DRAWS = ("uniform", "skewed", "single", "none")
DEFAULT_CONFIG = "NOVM-NOSR"


# -- configuration ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class LeaseConfig:
    """A scheduler configuration, the image draw for leases without an image, and its seed."""

    name: str
    scheduler: SchedulerConfig
    images: str | None = None
    seed: int | None = None


def load_config(spec: str | Path | None = None) -> LeaseConfig:
    """One of the paper's six or Haizea 1.0's three configurations by name (case-insensitive), or a
    TOML file."""
    if spec is None:
        spec = DEFAULT_CONFIG
    key = configuration_key(str(spec))
    if key in NAMED_CONFIGURATIONS:
        cfg, images = NAMED_CONFIGURATIONS[key]
        return LeaseConfig(key.lower() if key.startswith("HAIZEA") else key, cfg, images)
    path = Path(spec)
    if path.suffix.lower() == ".toml" or path.exists():
        return _load_toml(path)
    raise UserError(f"unknown configuration {str(spec)!r}: one of {', '.join(NAMED_CONFIGURATIONS)}, "
                    "or a .toml file", field="--config")


_NonNegInt = Annotated[int, Field(ge=0)]
_NonNeg = Annotated[float, Field(ge=0)]


class PolicySpec(FileModel):
    """``[policies.KIND]``: ``class`` (a built-in name or ``"module:Class"``) and the keyword
    parameters the class is built with (any other key)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    class_: Annotated[str, Field(alias="class", min_length=1)]


class PoliciesSection(FileModel):
    """``[policies]``: one table per pluggable policy (:mod:`skylease.control.leases.policies`)."""

    admission: PolicySpec | None = None
    preemption: PolicySpec | None = None
    host_selection: PolicySpec | None = None


class LeaseConfigFile(FileModel):
    """A scheduler configuration file: ``base``, ``images``, ``seed``, and any
    :class:`SchedulerConfig` field (tests/experiments check that the two agree)."""

    base: str = DEFAULT_CONFIG
    images: Literal["uniform", "skewed", "single", "none"] | None = None
    seed: _NonNegInt | None = None
    max_reservations: Annotated[float, Field(ge=0, allow_inf_nan=True)] | None = None  # inf: conservative
    backfilling: bool | None = None
    suspension: bool | None = None
    suspend_rate: Annotated[float, Field(gt=0)] | None = None
    bandwidth: Annotated[float, Field(gt=0)] | None = None
    migrate: Literal["mem", "mem+vm"] | None = None
    boot_s: _NonNegInt | None = None
    runtime_overhead_pct: _NonNegInt | None = None
    image_size_mb: _NonNegInt | None = None
    threshold_factor: _NonNeg | None = None
    preempt_future_resumptions: bool | None = None
    transfers: bool | None = None
    piggyback: bool | None = None
    reuse: bool | None = None
    pool_mb: _NonNegInt | None = None
    enactment_overhead_s: _NonNegInt | None = None
    override_suspend_s: _NonNegInt | None = None
    override_resume_s: _NonNegInt | None = None
    resume_rate: Annotated[float, Field(gt=0)] | None = None
    suspendresume_exclusion: Literal["none", "local", "global"] | None = None
    shutdown_s: _NonNegInt | None = None
    threshold: Literal["2008", "1.0"] | None = None
    backfill_release: Literal["end", "start"] | None = None
    transfer_link: Literal["two-channels", "one-link"] | None = None
    premature_end: Literal["slide", "reschedule"] | None = None
    migration_reservations: bool | None = None
    migration: bool | None = None
    stop_when: Literal["besteffort", "all"] | None = None
    policies: PoliciesSection | None = None

    @field_validator("threshold", mode="before")
    @classmethod
    def _threshold_as_text(cls, v: object) -> object:
        # `threshold = 1.0` or `2008` unquoted means the same as the quoted names
        if isinstance(v, int | float) and not isinstance(v, bool):
            return {2008: "2008", 1.0: "1.0"}.get(v, v)
        return v

    @field_validator("base")
    @classmethod
    def _named_configuration(cls, base: str) -> str:
        if configuration_key(base) not in NAMED_CONFIGURATIONS:
            raise ValueError(f"must be one of {', '.join(NAMED_CONFIGURATIONS)}, got {base!r}")
        return configuration_key(base)


#: The keys of a configuration file that are not :class:`SchedulerConfig` fields.
EXTRA_KEYS = ("base", "images", "seed", "policies")


def _load_toml(path: Path) -> LeaseConfig:
    spec, keys = load_toml(path, LeaseConfigFile)
    cfg, images = NAMED_CONFIGURATIONS[spec.base]
    if spec.images is not None:
        images = None if spec.images == "none" else spec.images
    changes: dict[str, Any] = spec.model_dump(exclude_none=True, exclude=set(EXTRA_KEYS))
    for kind in POLICY_KEYS:  # imported and built now: a mistake is said before any simulation
        p = getattr(spec.policies, kind, None) if spec.policies is not None else None
        if p is None:
            continue
        try:
            # a FILE.py:Class is found beside the configuration file, from whatever folder it is read
            name = resolve_file_spec(p.class_, base=path.parent)
            changes[kind] = load_policy(kind, name, p.model_extra)
        except PolicyError as e:
            raise keys.error(str(e), "policies", kind, e.param or "class") from None
    try:
        cfg = cfg.with_(**changes)
    except ValueError as e:  # the config's own checks
        raise UserError(str(e), file=path) from None
    return LeaseConfig(path.name, cfg, images, spec.seed)


# -- workload --------------------------------------------------------------------------------------
@dataclass
class Workload:
    """Leases and the site they run on."""

    name: str
    format: str  # "swf", "lwf" (plain) or "xml"
    leases: list[Lease]
    n_nodes: int = BLUE_HORIZON_NODES
    capacity: ResourceTuple = BLUE_HORIZON_NODE
    injected: int = 0  # ARs added from an injected plain LWF file


def detect_format(path: Path) -> str:
    """``swf``, ``xml`` or ``lwf`` (plain), from the name and the first line with data."""
    name = path.name.lower()
    if name.endswith((".swf", ".swf.gz")):
        return "swf"
    text = read_text(path)
    if text.lstrip().startswith("<"):
        return "xml"
    for line in text.splitlines():
        data = line.split(";", 1)[0].split("#", 1)[0].strip()
        if data:
            return "swf" if len(data.split()) == len(SWF_FIELDS) else "lwf"
    return "lwf"


def load_workload(path: str | Path, inject: str | Path | None = None) -> Workload:
    """The leases of a workload file (SWF, plain or XML LWF), plus the ARs of ``inject`` (plain LWF)."""
    path = Path(path)
    fmt = detect_format(path)
    if fmt == "swf":
        columns, attrs = read_swf_columns(path)  # not read_swf: no pandas (0.2 s) on this path
        requests = best_effort_columns(columns, attrs["source"])
        w = Workload(path.name, fmt, be_leases(requests))
        for le, user in zip(w.leases, requests["user"].tolist(), strict=True):  # (the fairness rules')
            le.owner = f"user{user}" if user >= 0 else None
    elif fmt == "lwf":
        w = Workload(path.name, fmt, ar_leases(read_plain_lwf(path)))
    else:
        xml = read_xml_lwf(path)
        w = Workload(xml.name, fmt, xml_leases(xml.requests))
        if xml.n_nodes is not None:
            w.n_nodes, w.capacity = xml.n_nodes, site_capacity(xml.node_resources)
    if not w.leases:  # simulating nothing would print a table of zeros as if it meant something
        why = " (a job makes a lease when it ran for > 0 s on > 0 processors)" if fmt == "swf" else ""
        raise UserError(f"no lease request in this {fmt.upper()} workload{why}", file=path, line=1)
    if inject is not None:
        inject = Path(inject)
        if detect_format(inject) != "lwf":
            raise UserError("--inject takes a plain LWF file (one advance reservation a line)", file=inject)
        first = max((le.id for le in w.leases), default=-1) + 1
        ars = ar_leases(read_plain_lwf(inject), first)
        w.leases += ars
        w.injected = len(ars)
        w.name += f" + {inject.name}"
    return w


# -- the run ---------------------------------------------------------------------------------------
@dataclass
class LeaseSimulation:
    """A workload simulated under a configuration: :meth:`records` (one per lease), :meth:`summary`."""

    workload: Workload
    config: LeaseConfig
    image_seed: int | None
    run: LeaseRun

    def records(self) -> list[dict[str, Any]]:
        """One record per lease, in workload order: its request, what happened and its events."""
        events = lease_events(self.run.log, self.run.runs, self.run.transfers)
        return [lease_record(le, events.get(le.id, [])) for le in self.workload.leases]

    def summary(self) -> dict[str, Any]:
        s = self.run.summary()
        states = Counter(le.state for le in self.workload.leases)
        return {"workload": self.workload.name, "format": self.workload.format,
                "configuration": self.config.name, "nodes": self.workload.n_nodes,
                "leases": len(self.workload.leases), "injected_ars": self.workload.injected,
                **s, "states": {st.value: states[st] for st in LeaseState if states[st]},
                "transfers": len(self.run.transfers), "image_seed": self.image_seed}

    def rejected(self) -> list[tuple[int, str]]:
        return [(le.id, le.reason or "") for le in self.workload.leases if le.state is LeaseState.REJECTED]

    def gantt(self, path: str | Path) -> Path:
        """The run's Gantt chart (:func:`skylease.experiments.gantt.gantt_chart`), titled with the
        workload, the configuration and the main results."""
        from skylease.experiments.gantt import gantt_chart

        s = self.summary()
        title = (f"{s['workload']} under {s['configuration']}: {s['leases']:,} leases on {s['nodes']} nodes; "
                 f"best-effort done at {clock(s['all_best_effort_s'])}; {len(self.rejected())} rejected")
        return gantt_chart(self.run, self.workload.n_nodes, path, title=title, leases=self.workload.leases)

    def timeline(self, limit: int | None = None) -> list[str]:
        """One line per lease (the first ``limit``): what happened to it, and when."""
        return lease_timeline(self.records()[:limit])

    def to_json(self) -> dict[str, Any]:
        """``{"leases": [...], "summary": {...}}`` with NaN and infinities as ``None``."""
        return finite({"leases": self.records(), "summary": self.summary()})


def simulate_workload(workload: str | Path | Workload, inject: str | Path | None = None,
                      config: str | Path | LeaseConfig | None = None,
                      image_seed: int | None = None) -> LeaseSimulation:
    """Simulate a workload file (or a loaded :class:`Workload`) under a configuration (a name, a
    TOML file, or a :class:`LeaseConfig`); ``image_seed`` overrides the configuration's seed."""
    if image_seed is not None and image_seed < 0:
        raise UserError(f"must be >= 0, got {image_seed}", field="--image-seed")
    cfg = config if isinstance(config, LeaseConfig) else load_config(config)
    w = workload if isinstance(workload, Workload) else load_workload(workload, inject)
    seed = None
    imageless = [le for le in w.leases if le.image is None]
    if cfg.images is not None and imageless:
        seed = image_seed if image_seed is not None else cfg.seed if cfg.seed is not None else 0
        assign_images(imageless, cfg.images, seed=seed)
    run = simulate_leases(w.leases, w.n_nodes, capacity=w.capacity, config=cfg.scheduler, until="all")
    return LeaseSimulation(w, cfg, seed, run)


def lease_timeline(records: list[dict[str, Any]]) -> list[str]:
    """One line per lease record (as ``leases simulate --json`` and the lease service give them):
    what happened to it, and when."""
    lines = []
    for rec in records:
        head = f"lease {rec['id']} ({rec['type']}, {rec['nodes']} node{'s' * (rec['nodes'] > 1)})"
        if rec["state"] == "rejected":
            lines.append(f"{head}: rejected at {clock(rec['submit'])}: {rec['reason']}")
            continue
        steps = [_step(ev) for ev in rec["events"] if ev["event"] in _TIMELINE]
        if rec.get("reclaimed"):
            steps.append(f"reclaimed ({rec['reclaimed']})")
        if rec["state"] != "done":
            steps.append(f"still {rec['state']}")
        lines.append(f"{head}: " + ", ".join(steps))
    return lines


_TIMELINE = {"start": "runs", "preempt": "preempted", "suspend": "suspends", "resume": "resumes",
             "migrate": "migrates", "transfer": "image", "reject": "rejected", "shutdown": "shuts down",
             "requeue": "requeued (a node went down)", "degraded": "degraded (a node went down)"}


def _step(ev: dict[str, Any]) -> str:
    what, t = ev["event"], clock(ev["time"])
    if what == "start" and "nodes" in ev:
        return f"runs {t}-{clock(ev['until'])} on {_nodes(ev['nodes'])}"
    if what == "migrate":
        return f"migrates {t} from {_nodes(ev['from'])} to {_nodes(ev['to'])}"
    if what == "transfer":
        return f"image {t}-{clock(ev['until'])}"
    return f"{_TIMELINE[what]} {t}"


def _nodes(nodes: list[int]) -> str:
    return f"node {nodes[0]}" if len(nodes) == 1 else f"nodes {','.join(map(str, nodes))}"


def clock(t: float | None) -> str:
    """Seconds from the start as ``hh:mm:ss`` (``Nd hh:mm:ss`` from one day on): the lease clock's
    format, one for every command (:func:`skylease.model.units.clock`)."""
    from skylease.model.units import clock as lease_clock

    return lease_clock(t)


def finite(x: Any) -> Any:
    """``x`` (numbers, dicts, lists) with every infinite or NaN float as None, for JSON."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: finite(v) for k, v in x.items()}
    if isinstance(x, list):
        return [finite(v) for v in x]
    return x
