"""What the lease manager offers the service and the CLI (issue 19): requests in, views out.

The HTTP layer (:mod:`skylease.service`) and the command-line client hold no logic: they turn a
request body into a :class:`LeaseRequest`, call a :class:`LeaseManager` method, and print or send
the view it returns. A refused request is a :class:`LeaseRefused` (a :class:`UserError` with the
reason), which the service answers with 409; a lease that does not exist, or that belongs to
another user, is :class:`LeaseNotFound` (404).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from skylease.model.errors import UserError
from skylease.model.wire import text, whole

#: The longest lease one request may ask for, in lease seconds (ten years).
MAX_DURATION_S = 10 * 365 * 86400
#: The longest payload command line, in characters.
MAX_COMMAND_BYTES = 4096
#: A webhook URL: http or https, a host and port (no user name), a path of printable ASCII (non-ASCII
#: percent-encoded); the site's prefixes decide the rest.
WEBHOOK_URL = r"^https?://[A-Za-z0-9._:\[\]-]+(/[!-~]*)?$"
#: An image name is a file name in the node caches: no slash, no leading dot.
IMAGE_NAME = r"^[A-Za-z0-9_+-][A-Za-z0-9._+-]*$"


class LeaseRefused(UserError):
    """A request the lease manager cannot grant (too big for the site, an AR in the past or that
    does not fit, an immediate lease that cannot start now): the reason is the message;
    ``earliest_start``: for a refused AR or IM request, the earliest lease time an AR of it would
    fit (docs/decisions/lease-offers.md), else None."""

    def __init__(self, message: str, *, earliest_start: int | None = None, latest_end: int | None = None,
                 **where: Any) -> None:
        super().__init__(message, **where)
        self.earliest_start = earliest_start
        #: for a refused extension: the latest end that fits now (docs/decisions/lease-extensions.md)
        self.latest_end = latest_end


class LeaseNotFound(UserError):
    """No lease with that id is visible to the caller."""


class LeaseRequest(BaseModel):
    """One lease request, as JSON bodies and Haizea's XML ``<lease>`` element both give it.

    ``type``: ``best-effort`` (queued, backfilled, preemptible by default), ``advance-reservation``
    (exactly at ``start``, not preemptible by default) or ``immediate`` (now or refused).
    ``start`` is in lease seconds since the server's epoch (``GET /health`` tells ``now``), or
    relative to now when ``start_in`` is given instead. Per-node resources: ``cpu`` (CPUs),
    ``memory``/``disk`` (MB). ``command``: the payload of each VM (a shell line; default: a loop
    that lasts the lease's duration, or ``real_duration`` when given: a lease whose work ends
    before its requested time, as Haizea's ``<realduration>``, which the scheduler sees as a
    premature end). ``vm``: each VM of the lease is a QEMU guest booted from ``image`` (an image of
    the site's repository: a folder holding ``vmlinuz`` and ``initrd.img``, or a ``.qcow2``/``.raw``
    disk) with the lease's ``memory`` and ``cpu`` (rounded up); it takes no ``command`` nor
    ``real_duration`` (docs/decisions/vm-payloads.md). ``before_end``: a warning that many lease
    seconds before its planned end (0: none; absent: the site's), to its event stream, its payloads
    and its ``webhook`` (a URL the site allows) when it names one
    (docs/decisions/before-end-warnings.md).
    """

    # strict: in JSON (a body, a request file) a string or a boolean is not a number; the dashboard's
    # form, whose fields are text, is validated with strict=False (skylease.service.bodies)
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True,
                              json_schema_extra=lambda schema: schema.update(allOf=_RULES))

    type: Literal["best-effort", "advance-reservation", "immediate"] = "best-effort"
    nodes: whole(1, 100_000) = 1
    duration: whole(1, MAX_DURATION_S)
    start: whole(0, 2**53) | None = None
    start_in: whole(0, MAX_DURATION_S) | None = None
    cpu: Annotated[float, Field(gt=0, le=1024, allow_inf_nan=False)] = 1.0
    memory: whole(0, 2**40) = 1024
    disk: whole(0, 2**40) = 0
    image: Annotated[str, Field(min_length=1, max_length=255, pattern=IMAGE_NAME)] | None = None
    image_size: whole(0, 2**40) = 0
    preemptible: bool | None = None
    command: text(MAX_COMMAND_BYTES, 1) | None = None  # (a shell line may span lines: tab, LF, CR)
    #: How long the default payload works; one of the lease's duration or more works all of it.
    real_duration: whole(1, MAX_DURATION_S) | None = None
    #: Each VM a QEMU guest booted from ``image`` (validated after the fields it depends on).
    vm: bool = False
    #: Lease seconds before its planned end that it is warned (0: never; None: the site's default).
    before_end: whole(0, MAX_DURATION_S) | None = None
    #: Where the warning is also POSTed, signed (a URL under a prefix the site allows, else 422).
    webhook: Annotated[str, Field(min_length=8, max_length=2048, pattern=WEBHOOK_URL)] | None = None

    @field_validator("vm")
    @classmethod
    def _vm_needs_image(cls, vm: bool, info: ValidationInfo) -> bool:
        # (a field validator, not the model's: a mistake is said to be the vm field's; the same rules
        # are in the JSON schema, _RULES)
        if vm and info.data.get("image") is None:
            raise ValueError("a VM lease needs an image (its guest boots from it)")
        if vm and info.data.get("command") is not None:
            raise ValueError("a VM lease takes no command (its guest is its payload)")
        if vm and info.data.get("real_duration") is not None:
            raise ValueError("a VM lease takes no real_duration (its guest ends by powering off)")
        return vm

    @model_validator(mode="after")
    def _start_matches_type(self) -> LeaseRequest:
        # (the same rules are in the JSON schema, _RULES: the OpenAPI document says them)
        ar = self.type == "advance-reservation"
        if ar and (self.start is None) == (self.start_in is None):
            raise ValueError("an advance reservation needs exactly one of 'start' and 'start_in'")
        if not ar and (self.start is not None or self.start_in is not None):
            raise ValueError(f"a {self.type} lease takes no start")
        if self.image is None and self.image_size:
            raise ValueError("image_size without an image")
        if self.real_duration is not None and self.command is not None:
            raise ValueError("real_duration sets how long the default payload works; a command decides "
                             "that itself")
        return self


def _given(key: str) -> dict[str, Any]:
    return {"required": [key], "properties": {key: {"not": {"type": "null"}}}}


#: LeaseRequest's rules across fields, in JSON Schema: an advance reservation has exactly one of
#: start and start_in, another type neither; an image_size other than 0 needs an image; a
#: real_duration is for the default payload, so not with a command; a VM lease needs an image and
#: takes neither a command nor a real_duration.
_RULES: list[Any] = [
    {"if": {"required": ["type"], "properties": {"type": {"const": "advance-reservation"}}},
     "then": {"oneOf": [_given("start"), _given("start_in")]},
     "else": {"not": {"anyOf": [_given("start"), _given("start_in")]}}},
    {"if": {"required": ["image_size"], "properties": {"image_size": {"not": {"const": 0}}}},
     "then": _given("image")},
    {"not": {"allOf": [_given("real_duration"), _given("command")]}},
    {"if": {"required": ["vm"], "properties": {"vm": {"const": True}}},
     "then": {"allOf": [_given("image"), {"not": _given("command")}, {"not": _given("real_duration")}]}},
]


class OfferQuery(BaseModel):
    """A dry run of a request (``GET /leases/offers``; skylease.runtime.leases.offering answers it):
    ``nodes`` nodes of ``cpu`` CPUs, ``memory`` and ``disk`` MB each, for ``duration`` lease seconds,
    starting no earlier than ``not_before`` (lease seconds since the server's epoch; default: now).
    The same bounds and defaults as a lease request's keys."""

    # (not strict: a query string's values are text; "2.5" or "true" is still no whole number)
    model_config = ConfigDict(extra="forbid", frozen=True)

    nodes: whole(1, 100_000) = 1
    duration: whole(1, MAX_DURATION_S)
    not_before: whole(0, 2**53) | None = None
    cpu: Annotated[float, Field(gt=0, le=1024, allow_inf_nan=False)] = 1.0
    memory: whole(0, 2**40) = 1024
    disk: whole(0, 2**40) = 0


class LeaseChange(BaseModel):
    """A change to a lease (``PATCH /leases/{id}``; docs/decisions/lease-extensions.md): a later end,
    either ``by`` that many lease seconds, or at the lease time ``end`` (lease seconds since the
    server's epoch, as an advance reservation's ``start``); exactly one of them."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True,
                              json_schema_extra=lambda schema: schema.update(
                                  oneOf=[_given("by"), _given("end")]))

    by: whole(1, MAX_DURATION_S) | None = None
    end: whole(0, 2**53) | None = None

    @model_validator(mode="after")
    def _one_of(self) -> LeaseChange:
        if (self.by is None) == (self.end is None):
            raise ValueError("give exactly one of 'by' (seconds) and 'end' (lease time)")
        return self


class NodesFree(BaseModel):
    """At ``at``, for the whole duration: nodes ``free``, and nodes an advance reservation could
    have by preempting best-effort leases (``with_preemption``, the free ones included)."""

    at: int
    free: int
    with_preemption: int


class OfferView(BaseModel):
    """The answer: ``earliest_start`` (lease seconds; null with ``reason`` when no start fits), the
    ``now`` it was computed at, ``nodes_free_at`` the not-before time, and whether an ``immediate``
    lease of it would start now."""

    now: int
    earliest_start: int | None
    nodes_free_at: NodesFree
    immediate: bool
    reason: str | None = None


class LeaseView(BaseModel):
    """A lease as the API shows it: the record `skylease leases simulate --json` prints per lease
    (``id``, ``type``, ``submit``, ``requested_start``, ``requested_duration``, ``nodes``, ``image``,
    ``start``, ``end``, ``state``, ``reason``, ``events``) plus its owner, where it runs now and its
    payloads."""

    model_config = ConfigDict(extra="allow")

    id: int
    owner: str
    type: str
    submit: int
    requested_start: int | None
    requested_duration: int
    nodes: int
    image: str | None
    start: int | None
    end: int | None
    state: str
    reason: str | None
    events: list[dict[str, Any]] = []
    running_on: list[str] = []  # node names of the VM reservation active now
    payloads: list[dict[str, Any]] = []  # per VM now: node, pid, state (running/stopped)
    #: The payloads that ended, in order: vnode, node, pid, state (exited, killed, lost; failed: a
    #: VM that could not start, resume or be saved, with the reason), exit_code
    #: (the payload's own; 128 + N when signal N ended it) and reason.
    ended_payloads: list[dict[str, Any]] = []
    #: How many of those exited by themselves with a non-zero exit code, or failed (a VM that could
    #: not start, resume or be saved): the lease's ``state`` is the
    #: scheduler's (``done``: its time is over), not whether its work succeeded.
    failed_payloads: int = 0
    #: The scheduler's plan not begun yet: ``kind`` (vm, suspend, resume, shutdown), ``nodes`` (indices),
    #: ``start``, ``end`` in lease time; it may still move (a preemption, a premature end).
    planned: list[dict[str, Any]] = []
    #: Its VMs' suspensions and resumptions (``vm`` leases) and the image transfers it waited for,
    #: each beside the window the schedule reserved for it: ``vnode`` (-1: the lease's, a transfer),
    #: ``kind`` (suspend, resume, transfer), ``reserved_start``, ``reserved_end``
    #: and ``reserved_s`` (lease time), ``started``, ``ended`` and ``measured_s`` (lease time, when
    #: it really ran), ``seconds`` (real seconds) and ``overran`` (it took longer than reserved).
    overheads: list[dict[str, Any]] = []
    #: Each time its VMs began working after their VM reservation had begun (a resumption or a
    #: migration that overran its window): ``at`` (lease time), ``seconds`` lost, and ``given_back``:
    #: whether the scheduler gave them back (a longer reservation, or more left to run after its next
    #: resumption) or could not (its nodes are taken after it, or an advance reservation's window).
    late_starts: list[dict[str, Any]] = []
    #: Each extension it was given (docs/decisions/lease-extensions.md): ``at`` (lease time it was
    #: asked), ``seconds``, ``old_end`` and ``new_end`` (None for a best-effort lease with no end
    #: planned then: queued, or to be suspended and resumed).
    extensions: list[dict[str, Any]] = []
    #: Why the lease lost part of what it holds (an advance reservation or an immediate lease whose
    #: node's host stopped answering; Blazar's "degraded"), or None: it has all its nodes.
    degraded: str | None = None
    #: Why the site ended it before its end (the fairness rule ``idle_reclaim``: its payloads used
    #: almost no CPU for that long; docs/decisions/fairness-rules.md), or None: it was not.
    reclaimed: str | None = None
    #: Its warnings before its end (docs/decisions/before-end-warnings.md), each also a
    #: ``before-end`` event: ``time`` given (lease time), ``end`` (the planned end it warned of),
    #: ``seconds_left``, and its ``webhook`` when the lease named one: ``url``, ``state`` (pending,
    #: delivered, failed) and each attempt (``n``, ``at`` Unix time, ``status`` or ``error``).
    warnings: list[dict[str, Any]] = []


class HostView(BaseModel):
    """A node of the site: its capacity, what runs there now and its image cache; where it is
    (``host``: None for this machine) and whether it answers (``state`` up or down, with the
    ``reason``; ``last_contact``: the Unix time its host last answered, None for this machine)."""

    name: str
    index: int
    cpu: float
    memory: int
    disk: int
    cpus: list[int]  # the machine's CPUs its payloads are pinned to
    leases: list[int]  # leases with an active reservation on it now
    cache: list[str]  # images in its cache
    host: str | None = None
    state: str = "up"
    last_contact: float | None = None
    reason: str | None = None
    #: How VM leases' guests run on it ("TCG: why", "KVM: why"), once one has started on its
    #: machine since the server started; None before.
    vms: str | None = None


#: The most of a VM's log one answer carries: a payload's log keeps 64 KiB at least, 128 KiB at most
#: (:data:`~skylease.runtime.leases.local.PAYLOAD_LOG_BYTES`, twice).
MAX_LOG_BYTES = 128 * 1024
#: What ``GET /leases/{id}/vms/{vnode}/log`` answers when ``bytes`` is not given.
DEFAULT_LOG_BYTES = 8 * 1024


class PayloadLog(BaseModel):
    """One VM of a lease: how its payload stands or ended, and the tail of its log
    (docs/decisions/payload-logs.md). ``state``: ``running`` or ``stopped`` (its payload runs now),
    ``exited``, ``killed``, ``lost``, ``failed`` (as in :attr:`LeaseView.ended_payloads`: its last
    run's end), or ``not started``; ``exit_code`` (the payload's own, 128 + N when signal N ended
    it) and ``reason`` as there. ``log``: ``payload`` (what the process wrote to its standard output
    and error) or ``serial`` (a VM lease's guest: its serial console); ``text``: its last ``bytes``
    bytes at most, decoded (a character cut at the start is replaced); ``log_error``: why the log
    could not be read (its host does not answer), else None."""

    lease: int
    vnode: int
    node: str | None
    state: str
    exit_code: int | None = None
    reason: str | None = None
    log: Literal["payload", "serial"]
    text: str
    log_error: str | None = None


class LeaseManager(Protocol):
    """The lease manager as the service sees it. ``owner`` is the caller's user name; ``None``
    means an administrator (sees and may cancel every lease). Once :meth:`failure` says it cannot
    serve, the calls on leases raise :class:`~skylease.runtime.health.Unavailable` with that reason
    (a request is refused before it is recorded).

    ``leases`` and ``queue`` answer in id order (the queue's order too: it is kept in submission
    order) the leases whose id is above ``after`` (None: from the first), at most ``limit`` of them
    (None: all): a page of the list (docs/decisions/serve-fair-sharing.md). ``wait_change_async``
    is ``wait_change`` awaited on an event loop, holding no thread."""

    def now(self) -> int: ...

    def request(self, owner: str, req: LeaseRequest) -> LeaseView: ...

    def offers(self, owner: str, query: OfferQuery) -> OfferView:
        """The counter-offer for a dry run of a request (docs/decisions/lease-offers.md)."""
        ...

    def cancel(self, owner: str | None, lease_id: int) -> LeaseView: ...

    def extend(self, owner: str | None, lease_id: int, change: LeaseChange) -> LeaseView:
        """A later end for the lease (LeaseRefused with the reason, ``latest_end`` and
        ``earliest_start`` when it does not fit or a site rule forbids it)."""
        ...

    def lease(self, owner: str | None, lease_id: int) -> LeaseView: ...

    def leases(self, owner: str | None, after: int | None = None, limit: int | None = None
               ) -> list[LeaseView]: ...

    def queue(self, owner: str | None, after: int | None = None, limit: int | None = None
              ) -> list[LeaseView]: ...

    def hosts(self) -> list[HostView]: ...

    def log(self, owner: str | None, lease_id: int, vnode: int, limit: int = DEFAULT_LOG_BYTES
            ) -> PayloadLog:
        """VM ``vnode`` of the lease: its payload's state or end, and its log's last ``limit``
        bytes (LeaseNotFound: no such lease visible to ``owner``, or no such VM of it)."""
        ...

    def version(self) -> int: ...

    def wait_change(self, since: int, timeout: float) -> int: ...

    async def wait_change_async(self, since: int, timeout: float) -> int: ...

    def failure(self) -> str | None:
        """Why it cannot serve (a part of it stopped: which, when, on what), or None while it works."""
        ...

    def close(self) -> None: ...
