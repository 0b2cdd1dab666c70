"""Lease workload files (LWF) of Haizea's experiments (decision H16 in docs/decisions/haizea.md).

* The plain-text format of ``lwf/injected/``: one advance reservation per line,
  ``reqTime startTime duration realDuration numNodes CPU mem disk vmImage vmImageSize`` (seconds,
  MB; the image name may be quoted). :func:`read_plain_lwf` returns the rows as a DataFrame.
* The XML format of Haizea 1.0 (``lwf/scenarios/``, ``lwf/multi/``): a ``<lease-workload>`` with
  an optional ``<site>`` (node count and per-node resources) and ``<lease-request arrival=...>``
  elements, each holding one ``<lease>`` (nodes, ``<start/>`` empty for best-effort, ``<exact>``
  for an advance reservation, ``<now/>`` for an immediate lease; duration; disk image) and
  optionally a ``<realduration>``; ours: a ``<lease-request user="...">`` names who asks (the
  fairness rules count per user), ``idle-after="HH:MM:SS"`` the work after which it idles (the
  ``idle_reclaim`` rule). :func:`read_xml_lwf` returns an :class:`XmlWorkload`;
  :func:`parse_lease_xml` reads one ``<lease>`` element given as text (a request to the service).

Malformed input gives a one-line :class:`~skylease.model.errors.UserError` naming the file, the
line and the field.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from xml.parsers import expat

from skylease.model.errors import UserError
from skylease.model.lease_types import LWF_TYPES, preemptible_refusal
from skylease.traces.textio import read_text

if TYPE_CHECKING:  # pandas (0.2 s to import) only once a reader makes its DataFrame
    import pandas as pd

__all__ = ["LWF_FIELDS", "MAX_LEASE_XML_CHARS", "XML_FIELDS", "XmlWorkload", "clock_seconds",
           "parse_lease_xml", "read_plain_lwf", "read_xml_lwf"]

LWF_FIELDS = ("submit", "start", "duration", "real_duration", "nodes", "cpu", "memory", "disk", "image",
              "image_size")
_INT_FIELDS = tuple(f for f in LWF_FIELDS if f != "image")


def read_plain_lwf(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read a plain-text LWF file (``#`` starts a comment)."""
    path = Path(path)
    rows = []
    for no, raw in enumerate(read_text(path).splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != len(LWF_FIELDS):
            raise UserError(f"expected {len(LWF_FIELDS)} fields ({' '.join(LWF_FIELDS)}), got {len(parts)}",
                            file=path, line=no)
        row: dict[str, object] = {}
        for name, text in zip(LWF_FIELDS, parts, strict=True):
            if name == "image":
                row[name] = text.strip("'\"")
                continue
            try:
                row[name] = int(text)
            except ValueError:
                raise UserError(f"{text!r} is not a whole number", file=path, line=no, field=name) from None
        if row["nodes"] < 1 or row["duration"] < 1:  # type: ignore[operator]
            bad = "nodes" if row["nodes"] < 1 else "duration"  # type: ignore[operator]
            raise UserError(f"must be >= 1, got {row[bad]}", file=path, line=no, field=bad)
        if not 0 < row["real_duration"] <= row["duration"]:  # type: ignore[operator]
            raise UserError(f"must be in 1..duration, got {row['real_duration']}", file=path, line=no,
                            field="real_duration")
        rows.append(row)
    if not rows:  # as every other reader: an empty workload is a mistake, not zero leases
        raise UserError(f"no lease request: expected one a line ({' '.join(LWF_FIELDS)})", file=path, line=1)
    import pandas as pd

    return pd.DataFrame(rows, columns=list(LWF_FIELDS)).astype({f: "int64" for f in _INT_FIELDS})


# -- the XML format of Haizea 1.0 -----------------------------------------------------------------------
XML_FIELDS = ("id", "kind", "submit", "start", "duration", "real_duration", "nodes", "cpu", "memory", "disk",
              "net", "image", "image_size", "preemptible", "user", "idle_after")


@dataclass
class XmlWorkload:
    """An XML lease workload: the site (``None`` when the file has none) and the requests.

    ``requests`` has one row per lease request, columns :data:`XML_FIELDS`: ``kind`` is "BE", "AR"
    or "IM"; ``start`` (the AR's exact start) is ``<NA>`` otherwise; times in seconds; ``cpu`` in
    CPUs (the file's amount / 100); ``image`` is ``None`` without a disk image; ``user`` is
    ``None`` where the request names nobody; ``idle_after`` (``idle-after="HH:MM:SS"``, ours) is the
    lease seconds of work after which the lease holds its nodes idle (the ``idle_reclaim`` fairness
    rule's simulated idleness), ``None`` where it works to its end.
    """

    name: str
    n_nodes: int | None
    node_resources: dict[str, float] = field(default_factory=dict)  # e.g. {"CPU": 1.0, "Memory": 1024}
    requests: pd.DataFrame = field(default_factory=lambda: _frame([]))


def _frame(rows: list[dict[str, Any]], **kwargs: Any) -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame(rows, **kwargs)


@dataclass
class _El:
    tag: str
    attrs: dict[str, str]
    line: int
    children: list[_El] = field(default_factory=list)

    def find(self, tag: str) -> _El | None:
        return next((c for c in self.children if c.tag == tag), None)

    def all(self, tag: str) -> list[_El]:
        return [c for c in self.children if c.tag == tag]


def _parse_xml(path: Path) -> _El:
    return _parse_xml_text(read_text(path), path)


def _parse_xml_text(data: str, path: Path | str, *, no_dtd: bool = False) -> _El:
    """The element tree of ``data`` (``path`` names it in errors). ``no_dtd``: refuse a document
    type declaration (text from the network needs no entities)."""
    parser = expat.ParserCreate()
    stack: list[_El] = []
    root: list[_El] = []

    def start(tag: str, attrs: dict[str, str]) -> None:
        el = _El(tag, attrs, parser.CurrentLineNumber)
        (stack[-1].children if stack else root).append(el)
        stack.append(el)

    def end(tag: str) -> None:
        stack.pop()

    def doctype(*_: object) -> None:
        raise UserError("a DOCTYPE is not accepted here", file=path, line=parser.CurrentLineNumber)

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    if no_dtd:
        parser.StartDoctypeDeclHandler = doctype
        parser.EntityDeclHandler = doctype
    try:
        parser.Parse(data, True)
    except expat.ExpatError as e:
        raise UserError(f"not well-formed XML: {expat.ErrorString(e.code)}", file=path,
                        line=e.lineno) from None
    return root[0]


def clock_seconds(text: str) -> int:
    """``[D:]HH:MM:SS[.ss]`` (Haizea's times) as whole seconds, rounded up; ValueError otherwise."""
    parts = text.strip().split(":")
    if len(parts) not in (3, 4):
        raise ValueError(f"{text!r} is not a time [D:]HH:MM:SS[.ss]")
    nums = [float(p) for p in parts]
    if any(not 0 <= n < 1e12 for n in nums):  # nan and inf too
        raise ValueError(f"{text!r} is not a time [D:]HH:MM:SS[.ss]")
    if nums[-1] >= 60 or nums[-2] >= 60:  # "1:99:99" is a typo, not 9,639 s
        raise ValueError(f"{text!r} is not a time [D:]HH:MM:SS[.ss]: minutes and seconds must be below 60")
    secs = nums[-1] + 60 * nums[-2] + 3600 * nums[-3] + (86400 * nums[0] if len(nums) == 4 else 0)
    return int(-(-secs // 1))


def _seconds(text: str, path: Path | str, el: _El, what: str) -> int:
    try:
        return clock_seconds(text)
    except ValueError as exc:
        raise UserError(str(exc), file=path, line=el.line, field=what) from None


def _attr(el: _El | None, name: str, path: Path | str, parent: _El, what: str) -> str:
    if el is None:
        raise UserError(f"<{parent.tag}> has no <{what.split('.')[0]}>", file=path, line=parent.line,
                        field=what)
    if name not in el.attrs:
        raise UserError(f"<{el.tag}> has no {name!r} attribute", file=path, line=el.line, field=what)
    return el.attrs[name]


def _number(text: str, path: Path | str, el: _El, what: str, *, minimum: float = 0) -> float:
    try:
        x = float(text)
    except ValueError:
        raise UserError(f"{text!r} is not a number", file=path, line=el.line, field=what) from None
    if not x >= minimum:
        raise UserError(f"must be >= {minimum:g}, got {text}", file=path, line=el.line, field=what)
    if not math.isfinite(x):
        raise UserError(f"must be a finite number, got {text}", file=path, line=el.line, field=what)
    return x


def _resources(node_set: _El, path: Path | str) -> dict[str, float]:
    out = {}
    for res in node_set.all("res"):
        kind = _attr(res, "type", path, node_set, "res.type")
        out[kind] = _number(_attr(res, "amount", path, node_set, "res.amount"), path, res, f"res {kind}")
    return out


def _lease_row(lease: _El, req: _El | None, path: Path | str, default_id: int) -> dict[str, Any]:
    """One ``<lease>`` element (in its ``<lease-request>``, when there is one) as a request row:
    :data:`XML_FIELDS` but ``submit``."""
    lid = int(_number(lease.attrs.get("id", str(default_id)), path, lease, "id"))
    nodes_el = lease.find("nodes")
    node_set = nodes_el.find("node-set") if nodes_el is not None else None
    numnodes = int(_number(_attr(node_set, "numnodes", path, lease, "node-set.numnodes"), path, lease,
                           "numnodes", minimum=1))
    assert node_set is not None
    res = _resources(node_set, path)
    start_el = lease.find("start")
    if start_el is None:
        raise UserError("<lease> has no <start>", file=path, line=lease.line, field="start")
    exact, now = start_el.find("exact"), start_el.find("now")
    if exact is not None:
        at = _attr(exact, "time", path, start_el, "exact.time")
        kind, start = "AR", _seconds(at, path, exact, "start")
    elif now is not None:
        kind, start = "IM", None
    else:
        kind, start = "BE", None
    duration = _seconds(_attr(lease.find("duration"), "time", path, lease, "duration.time"), path, lease,
                        "duration")
    if duration < 1:
        raise UserError("must be > 0", file=path, line=lease.line, field="duration")
    real_el = req.find("realduration") if req is not None else None
    if real_el is None:
        real_el = lease.find("realduration")
    real = duration
    if real_el is not None:
        real = _seconds(_attr(real_el, "time", path, real_el, "realduration.time"), path, real_el,
                        "realduration")
    if not 0 < real <= duration:
        raise UserError(f"must be in 1..{duration} s (the duration), got {real}", file=path,
                        line=real_el.line if real_el is not None else lease.line, field="realduration")
    image, image_size = None, 0
    sw = lease.find("software")
    disk = sw.find("disk-image") if sw is not None else None
    if disk is not None:
        image = _attr(disk, "id", path, sw, "disk-image.id").strip("'\"")  # type: ignore[arg-type]
        image_size = int(_number(_attr(disk, "size", path, sw, "disk-image.size"), path, disk, "size"))
    pre = lease.attrs.get("preemptible", "true" if kind == "BE" else "false").strip().lower()
    if pre not in ("true", "false"):
        raise UserError(f"must be true or false, got {pre!r}", file=path, line=lease.line,
                        field="preemptible")
    if (refused := preemptible_refusal(LWF_TYPES[kind], pre == "true")) is not None:
        raise UserError(refused, file=path, line=lease.line, field="preemptible")
    return {"id": lid, "kind": kind, "start": start, "duration": duration, "real_duration": real,
            "nodes": numnodes, "cpu": res.get("CPU", 100.0) / 100, "memory": int(res.get("Memory", 0)),
            "disk": int(res.get("Disk", 0)), "net": res.get("Net-in", 0.0), "image": image,
            "image_size": image_size, "preemptible": pre == "true"}


#: The largest ``<lease>`` text :func:`parse_lease_xml` reads (as the service's body limit).
MAX_LEASE_XML_CHARS = 64 * 1024


def parse_lease_xml(text: str, source: str = "request body") -> dict[str, Any]:
    """One Haizea ``<lease>`` element, or a ``<lease-request>`` holding one (and maybe its
    ``<realduration>``), given as text: the request row (:data:`XML_FIELDS` but ``submit``; the
    arrival, if any, is ignored). ``source`` names the text in errors. A DOCTYPE is refused."""
    if len(text) > MAX_LEASE_XML_CHARS:
        raise UserError(f"longer than {MAX_LEASE_XML_CHARS:,} characters", file=source)
    root = _parse_xml_text(text, source, no_dtd=True)
    if root.tag == "lease-request":
        req, lease = root, root.find("lease")
        if lease is None:
            raise UserError("<lease-request> has no <lease>", file=source, line=root.line, field="lease")
    elif root.tag == "lease":
        req, lease = None, root
    else:
        raise UserError(f"the root element is <{root.tag}>, not <lease> or <lease-request>", file=source,
                        line=root.line)
    return _lease_row(lease, req, source, 1)


def read_xml_lwf(path: str | os.PathLike[str]) -> XmlWorkload:
    """Read an XML lease workload file of Haizea 1.0."""
    path = Path(path)
    root = _parse_xml(path)
    if root.tag != "lease-workload":
        raise UserError(f"the root element is <{root.tag}>, not <lease-workload>", file=path,
                        line=root.line)
    n_nodes: int | None = None
    node_res: dict[str, float] = {}
    site = root.find("site")
    if site is not None:
        nodes = site.find("nodes")
        sets = nodes.all("node-set") if nodes is not None else []
        if not sets:
            raise UserError("<site> has no <nodes><node-set>", file=path, line=site.line, field="site")
        n_nodes = 0
        for ns in sets:
            count = _attr(ns, "numnodes", path, site, "node-set.numnodes")
            n_nodes += int(_number(count, path, ns, "numnodes", minimum=1))
            res = _resources(ns, path)
            if node_res and res != node_res:
                raise UserError("node sets of different resources are not supported", file=path, line=ns.line,
                                field="node-set")
            node_res = res
        if "CPU" in node_res:
            node_res["CPU"] /= 100
    requests = root.find("lease-requests")
    rows: list[dict[str, Any]] = []
    seen: dict[int, int] = {}
    for i, req in enumerate(requests.all("lease-request") if requests is not None else []):
        submit = _seconds(_attr(req, "arrival", path, req, "arrival"), path, req, "arrival")
        lease = req.find("lease")
        if lease is None:
            raise UserError("<lease-request> has no <lease>", file=path, line=req.line, field="lease")
        row = _lease_row(lease, req, path, i + 1)
        lid = row["id"]
        if lid in seen:
            raise UserError(f"lease id {lid} is already used on line {seen[lid]}", file=path, line=lease.line,
                            field="id")
        seen[lid] = lease.line
        user = req.attrs.get("user")  # (ours: who asks, for the fairness rules; None: nobody named)
        if user is not None and not user.strip():
            raise UserError("an empty user name", file=path, line=req.line, field="user")
        idle = req.attrs.get("idle-after")  # (ours: the work after which it holds its nodes idle)
        idle_after = None if idle is None else _seconds(idle, path, req, "idle-after")
        rows.append({**row, "submit": submit, "user": None if user is None else user.strip(),
                     "idle_after": idle_after})
    df = _frame(rows, columns=list(XML_FIELDS))
    df["start"] = df["start"].astype("Int64")
    return XmlWorkload(root.attrs.get("name", path.stem), n_nodes, node_res, df)
