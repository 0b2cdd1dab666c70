"""Pools of SSH hosts for ``skylease run``: a pools file's ``hosts`` (with its ``ssh`` and ``slots``)
and the ``--hosts`` shorthand, made into :class:`~skylease.runtime.ssh_pool.SshPool` backends.

::

    [pools.lab]
    ssh = { user = "root", identity_file = "keys/id_ed25519", known_hosts = "keys/known_hosts" }
    hosts = ["127.0.0.11", "127.0.0.12:22"]   # or [[pools.lab.hosts]] tables:
                                              # address, port, user, slots, price
    slots = 2                                 # per host (default: the host's cores)
    price = 0.10                              # per slot and billing unit

Decisions of ours (docs/decisions/ssh-pool.md):

* ``ssh`` is the site file's ``[ssh]`` table (user, identity_file, known_hosts, port,
  connect_timeout; paths relative to the pools file): with it, ssh reads no configuration file and
  checks host keys strictly, as ``skylease serve`` does with a site's hosts. Without it (and with
  ``--hosts``) the user's own ssh configuration reaches the hosts, with ``BatchMode=yes``.
* A pool's price is per slot (a rented host is one slot). A host table with a price of its own
  is a pool of its own, ``NAME.ADDRESS`` (dots kept): a pool has one price, as every pool has, so
  the policies need nothing new; ``--pool`` picks it.
* ``--hosts`` makes the pool ``hosts``, priced by ``--price``/``--billing-unit`` as the local pool.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, field_validator, model_validator

from skylease.model.errors import UserError
from skylease.model.files import KeyLines
from skylease.model.schema import FileModel
from skylease.runtime.leases.site import USER_PATTERN, SshFile, check_user, host_address

#: The pool ``--hosts`` makes.
HOSTS_POOL = "hosts"
_SLOTS = Annotated[int, Field(ge=1, le=1024)]


def parse_host(text: str) -> dict[str, Any]:
    """``[user@]address[:port]`` (an IPv6 address in brackets when a port follows) as
    ``{"address", "port", "user"}`` (None where not given); ValueError saying what is wrong."""
    user, _, rest = text.strip().rpartition("@")
    port: str | None = None
    if rest.startswith("["):
        address, bracket, tail = rest[1:].partition("]")
        if not bracket or (tail and not tail.startswith(":")):
            raise ValueError(f"expected [ADDRESS]:PORT, got {text!r}")
        port = tail[1:] or None
    elif rest.count(":") == 1:
        address, port = rest.split(":")
    else:
        address = rest
    if user and not USER_PATTERN.match(user):
        raise ValueError(f"must be [USER@]ADDRESS[:PORT] with a user name of letters, digits, '.', '_' "
                         f"or '-', got {text!r}")
    if port is not None and not (port.isdigit() and 1 <= int(port) <= 65535):
        raise ValueError(f"the port must be a number from 1 to 65535, got {port!r} in {text!r}")
    return {"address": host_address(address), "port": None if port is None else int(port),
            "user": user or None}


class PoolHostSpec(FileModel):
    """A host of a pool: ``"[user@]address[:port]"`` or a table (its own slots and price)."""

    address: str
    port: Annotated[int, Field(ge=1, le=65535)] | None = None
    user: str | None = None
    slots: _SLOTS | None = None
    price: Annotated[float, Field(ge=0)] | None = None

    @model_validator(mode="before")
    @classmethod
    def _from_text(cls, value: Any) -> Any:
        return parse_host(value) if isinstance(value, str) else value

    @field_validator("address")
    @classmethod
    def _address(cls, address: str) -> str:
        return host_address(address)

    @field_validator("user")
    @classmethod
    def _user(cls, user: str | None) -> str | None:
        return check_user(user)


HostList = Annotated[list[PoolHostSpec], Field(min_length=1, max_length=10_000)]


def check_host_keys(spec: Any, keys: KeyLines, name: str, folder: Path) -> dict[str, dict[str, Any]]:
    """A pool of hosts' descriptions (itself, and one per host with a price of its own), its
    paths made absolute (relative to ``folder``, the pools file's) and checked to exist."""
    if spec.hosts is None:
        for key in ("ssh", "slots"):
            if getattr(spec, key) is not None:
                raise keys.error("goes with 'hosts' (a pool of SSH hosts)", "pools", name, key)
        return {}
    for key in ("cluster", "address"):
        if getattr(spec, key) is not None:
            raise keys.error(f"a pool is of SSH hosts ('hosts') or from '{key}', not both",
                             "pools", name, key)
    ssh: dict[str, Any] | None = None
    if spec.ssh is not None:
        ssh = spec.ssh.model_dump(exclude_none=True)
        for key in ("identity_file", "known_hosts"):
            if key in ssh:
                path = (folder / ssh[key]).resolve()
                if not path.is_file():
                    raise keys.error(f"no such file: {path}", "pools", name, "ssh", key)
                ssh[key] = str(path)
    base = spec.model_dump(exclude_none=True, exclude={"hosts", "ssh"})
    shared, own = [], {}
    for i, h in enumerate(spec.hosts):
        host = h.model_dump(exclude_none=True, exclude={"price"})
        if h.price is not None and h.price != spec.price:
            pool = f"{name}.{h.address}" + (f":{h.port}" if h.port not in (None, 22) else "")
            if pool in own:
                raise keys.error(f"host {pool[len(name) + 1:]} is listed twice", "pools", name, "hosts", i)
            own[pool] = {**base, "price": h.price, "hosts": [host]}
        else:
            shared.append(host)
    pools = {name: {**base, "hosts": shared}} if shared else {}
    pools.update(own)
    for p in pools.values():
        if ssh is not None:
            p["ssh"] = ssh
        slots = [h.get("slots", spec.slots) for h in p["hosts"]]
        if None not in slots:  # every host's slots known: the pool's most workers (else: at connect)
            total = sum(slots)
            p["max_count"] = min(total, p.get("max_count", total))
    return pools


def hosts_option(text: str, slots: int | None) -> list[dict[str, Any]]:
    """``--hosts user@h1,user@h2[:port]`` as host descriptions; UserError naming the option."""
    hosts = []
    for item in text.split(","):
        if not item.strip():
            raise UserError(f"an empty host in {text!r}", field="--hosts")
        try:
            hosts.append({k: v for k, v in parse_host(item).items() if v is not None})
        except ValueError as e:
            raise UserError(str(e), field="--hosts") from None
        if slots is not None:
            hosts[-1]["slots"] = slots
    return hosts


def make_ssh_pool(name: str, itype: Any, spec: Mapping[str, Any], token: str, where: str) -> Any:
    """The :class:`~skylease.runtime.ssh_pool.SshPool` of a pool description (not yet connected;
    ``where``: the option or key its errors name)."""
    from skylease.runtime.leases.ssh import SshTarget
    from skylease.runtime.ssh_pool import OwnSshTarget, PoolHost, SshPool

    ssh = spec.get("ssh")
    hosts = []
    for h in spec["hosts"]:
        slots = h.get("slots", spec.get("slots"))
        if ssh is None:  # the user's own ssh configuration
            target: SshTarget = OwnSshTarget(h["address"], port=h.get("port", 0), user=h.get("user", ""))
        else:
            target = SshTarget(h["address"], port=h.get("port", ssh.get("port", 22)),
                               user=h.get("user", ssh.get("user", "root")),
                               identity_file=Path(ssh["identity_file"]) if "identity_file" in ssh else None,
                               known_hosts=Path(ssh["known_hosts"]) if "known_hosts" in ssh else None,
                               connect_timeout=float(ssh.get("connect_timeout", 10)))
        hosts.append(PoolHost(target, slots))
    return SshPool(itype, hosts, token, where=where)


__all__ = ["HOSTS_POOL", "HostList", "PoolHostSpec", "SshFile", "check_host_keys", "hosts_option",
           "make_ssh_pool", "parse_host"]
