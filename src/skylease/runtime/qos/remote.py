"""A real run's link to SpeQuloS as a service: register the bag, send its reports over HTTP.

:class:`RemoteBag` is the ``send`` of a :class:`~skylease.control.qos.relay.QoSRelay` in
``skylease run --qos URL``. It registers the bag (and orders its credits) when the run starts;
a refusal (a bad token, a balance too short for the order) is a :class:`UserError` then, before
any work. A service that cannot be reached is not an error: the run goes on without QoS
(:class:`ServiceUnavailable` tells the relay), and the next report registers the bag first if it
never was. Calls wait at most ``timeout`` seconds: a report must not hold the run up for long.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from skylease.control.qos.relay import Instructions, Report, ServiceUnavailable
from skylease.model.errors import UserError

__all__ = ["RemoteBag", "refusal"]

_FIELDS = set(Instructions.__dataclass_fields__)


def refusal(r: Any, who: str, option: str) -> UserError:
    """A 4xx answer of a service as one line naming the option: who refused, and its reason."""
    try:
        detail = r.json().get("detail", r.text)
    except (ValueError, AttributeError):
        detail = r.text
    return UserError(f"{who} refused: {' '.join(str(detail).split())[:300]}", field=option)


class RemoteBag:
    """One bag of tasks on a QoS service at ``url`` (``/qos/...`` routes), as user ``token``."""

    def __init__(self, url: str, token: str, registration: dict[str, Any], *, timeout: float = 5.0,
                 option: str = "--qos") -> None:
        import httpx

        self.url, self.registration, self.option = url.rstrip("/"), dict(registration), option
        self.bot: int | None = None
        self._http = httpx.Client(timeout=timeout, headers={"Authorization": f"Bearer {token}"})

    def close(self) -> None:
        self._http.close()

    def _post(self, path: str, body: dict[str, Any]) -> Any:
        import httpx

        try:
            r = self._http.post(self.url + path, json=body)
        except (httpx.HTTPError, OSError) as exc:
            raise ServiceUnavailable(f"{self.url}: {type(exc).__name__}") from None
        if r.status_code >= 500:
            raise ServiceUnavailable(f"{self.url} answered {r.status_code}")
        if r.status_code >= 400:
            raise refusal(r, f"the QoS service at {self.url}", self.option)
        return r.json()

    def register(self) -> int:
        """Register the bag (ordering its credits); its id. UserError when refused."""
        if self.bot is None:
            self.bot = int(self._post("/qos/bots", self.registration)["id"])
        return self.bot

    def send(self, report: Report) -> Instructions:
        """The service's answer to ``report`` (registering the bag first if it never was)."""
        body = asdict(report)
        body["workers"] = {str(k): v for k, v in report.workers.items()}
        try:
            answer = self._post(f"/qos/bots/{self.register()}/reports", body)
        except UserError as exc:  # refused mid-run (e.g. the bag is gone): the run goes on without QoS
            raise ServiceUnavailable(getattr(exc, "message", str(exc))) from None
        kw = {k: v for k, v in answer.items() if k in _FIELDS}
        for k in ("start", "stop"):
            kw[k] = tuple(int(x) for x in kw.get(k) or ())
        return Instructions(**kw)
