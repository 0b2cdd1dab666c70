"""Lease request bodies (issue 19): JSON or one Haizea XML ``<lease>`` element to a
:class:`LeaseRequest`. The server parses what it receives with these, and ``skylease leases
request FILE`` checks the file with them before sending it (a mistake is one line naming the file,
its line and the field, with no server needed). Light: no web framework imported."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from skylease.model.errors import UserError
from skylease.model.files import KeyLines, parse_json
from skylease.model.lease_types import LWF_TYPES
from skylease.model.schema import validate
from skylease.runtime.leases.api import LeaseRequest
from skylease.traces.lwf import parse_lease_xml

__all__ = ["BODY", "FORM", "FORM_FIELDS", "BadBody", "is_xml", "lease_request_from_form",
           "lease_request_from_json", "lease_request_from_xml"]

#: Where the mistakes of a body received by the server are said to be.
BODY = "request body"
#: Where the mistakes of the dashboard's request form are said to be.
FORM = "request form"
#: The request form's fields: a lease request's keys (a blank field is the key's default).
FORM_FIELDS = ("type", "nodes", "duration", "start_in", "start", "cpu", "memory", "disk", "image",
               "image_size", "preemptible", "command", "before_end")
_PREEMPTIBLE = {"": None, "default": None, "yes": True, "no": False}


class BadBody(UserError):
    """A text that is not a valid lease request (the server answers 422)."""


def is_xml(text: str | bytes) -> bool:
    """Whether a request text is XML (else JSON): its first non-blank character is ``<``."""
    head = text.lstrip()[:1]
    return head in ("<", b"<")


def lease_request_from_json(text: str, source: str | Path = BODY) -> LeaseRequest:
    """A JSON lease request, or a one-line :class:`BadBody` naming the line and the field: held to
    the limits of a client's JSON before it is parsed (nesting, number length), and strict (a
    string or a boolean is not a number)."""
    try:
        doc = parse_json(text, source, bounded=True)
        if not isinstance(doc, dict):
            raise UserError("must be a JSON object (a lease request)", file=source, line=1)
        return validate(LeaseRequest, doc, KeyLines(text, source, is_json=True))
    except UserError as exc:
        raise BadBody(exc.message, file=exc.file, line=exc.line, field=exc.field) from None


_XML_TYPES = LWF_TYPES


def lease_request_from_xml(text: str, source: str | Path = BODY) -> LeaseRequest:
    """A Haizea ``<lease>`` (or ``<lease-request>``) element as a lease request: its nodes, per-node
    CPU (amount / 100), memory and disk, duration, exact start (an advance reservation at that lease
    time, since the server's epoch), ``<now/>`` (immediate), disk image and ``preemptible``. A
    ``<realduration>`` shorter than the duration is passed on as ``real_duration``; the arrival and
    the lease's id are the server's to choose."""
    try:
        row = parse_lease_xml(text, str(source))
        doc: dict[str, Any] = {"type": _XML_TYPES[row["kind"]], "nodes": row["nodes"],
                               "duration": row["duration"], "cpu": row["cpu"], "memory": row["memory"],
                               "disk": row["disk"], "preemptible": row["preemptible"]}
        if row["start"] is not None:
            doc["start"] = row["start"]
        if row["image"] is not None:
            doc.update(image=row["image"], image_size=row["image_size"])
        if row["real_duration"] != row["duration"]:
            doc["real_duration"] = row["real_duration"]
        return validate(LeaseRequest, doc, KeyLines("", source))
    except UserError as exc:
        raise BadBody(exc.message, file=exc.file, line=exc.line, field=exc.field) from None


def lease_request_from_form(fields: dict[str, str]) -> LeaseRequest:
    """The dashboard's request form (text fields, :data:`FORM_FIELDS`) as a lease request, or a
    :class:`BadBody` naming the field: the same checks as a JSON body, but not strict (pydantic
    converts the numbers' text); a blank field is left out, so it takes the key's default."""
    doc: dict[str, Any] = {}
    for key, value in fields.items():
        if key not in FORM_FIELDS:
            continue  # (the CSRF token, the submit button)
        text = value.strip() if key != "command" else value
        if key == "preemptible":
            if text.lower() not in _PREEMPTIBLE:
                raise BadBody("must be yes, no or blank (the type's default)", file=FORM, field=key)
            if (flag := _PREEMPTIBLE[text.lower()]) is not None:
                doc[key] = flag
        elif text.strip():
            doc[key] = text
    try:
        return validate(LeaseRequest, doc, KeyLines("", FORM), strict=False)
    except UserError as exc:
        raise BadBody(exc.message, file=exc.file, line=exc.line, field=exc.field) from None
