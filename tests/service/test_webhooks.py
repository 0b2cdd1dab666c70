"""Signed webhook deliveries (skylease.runtime.leases.webhooks; docs/decisions/before-end-warnings.md):
the signature against a value computed by OpenSSL, its check (a wrong secret, an altered body, an old
timestamp fail), the URLs a site allows, and the sender against a real local receiver: a 500 then a
200 is delivered at the second attempt, a 4xx is a refusal not retried, a receiver that is not there
is tried the bounded number of times and given up."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from skylease.runtime.leases.webhooks import (
    DELIVERY,
    SIGNATURE,
    TIMESTAMP,
    Deliveries,
    Delivery,
    WebhookNotAllowed,
    check_prefix,
    check_url,
    sign,
    verify,
)

from .hooks import Receiver

SECRET = b"a-secret-of-sixteen+"


def test_the_signature_is_hmac_sha256_of_timestamp_dot_body():
    # printf '1700000000.{"a":1}' | openssl dgst -sha256 -hmac 'a-secret-of-sixteen+'
    want = "sha256=1e4b66943a4ed53bd207dad381b8a660b7af52b56018ade30fba542cd2ed4995"
    assert sign(SECRET, 1700000000, b'{"a":1}') == want
    assert verify(SECRET, "1700000000", b'{"a":1}', want, now=1700000100)
    assert not verify(b"another-secret-of-16", "1700000000", b'{"a":1}', want, now=1700000100)
    assert not verify(SECRET, "1700000000", b'{"a":2}', want, now=1700000100)
    assert not verify(SECRET, "1700000001", b'{"a":1}', want, now=1700000100)  # (the timestamp is signed)
    assert not verify(SECRET, "1700000000", b'{"a":1}', want, now=1700000301)  # too old: a replay
    assert not verify(SECRET, "soon", b'{"a":1}', want, now=1700000100)


def test_the_urls_a_site_allows():
    prefixes = ("http://127.0.0.1:9000/hooks/",)
    assert check_url("http://127.0.0.1:9000/hooks/lease-7", prefixes)
    for bad in ("http://127.0.0.1:90000/hooks/x", "http://127.0.0.1:9000/other", "https://127.0.0.1:9000/hooks/x",
                "http://127.0.0.1:9000/hooks/../admin"):
        with pytest.raises(WebhookNotAllowed, match="not under a URL this server allows"):
            check_url(bad, prefixes)
    with pytest.raises(WebhookNotAllowed, match="allows no webhook"):
        check_url("http://127.0.0.1:9000/hooks/x", ())
    assert check_prefix("https://hooks.example.org/skylease/")
    for bad in ("http://127.0.0.1:9000", "ftp://a/", "http://user@a/", "not a url/"):
        with pytest.raises(ValueError):
            check_prefix(bad)


class _Outcomes:
    """What the sender records, and a wait for a delivery's final state."""

    def __init__(self) -> None:
        self.attempts: list[tuple[int, dict, str]] = []
        self.done = threading.Event()

    def record(self, row: int, attempt: dict, state: str) -> None:
        self.attempts.append((row, attempt, state))
        if state != "pending":
            self.done.set()


def _send(url: str, attempts: int = 5) -> _Outcomes:
    out = _Outcomes()
    sender = Deliveries(SECRET, out.record, attempts=attempts, backoff_s=(0.01, 0.02, 0.04, 0.08))
    try:
        sender.put(Delivery(time.time(), 7, url, b'{"lease":7}', "7-100"))
        assert out.done.wait(10), out.attempts
    finally:
        sender.close()
    return out


def test_a_500_is_tried_again_and_the_200_delivers_it_signed():
    rx = Receiver((500,))
    try:
        out = _send(rx.url + "hooks/7")
    finally:
        rx.stop()
    assert [(a["n"], a.get("status"), s) for _r, a, s in out.attempts] == [(1, 500, "pending"),
                                                                          (2, 200, "delivered")]
    got = rx.received()
    assert [g.status for g in got] == [500, 200] and {g.path for g in got} == {"/hooks/7"}
    for g in got:
        assert g.body == b'{"lease":7}' and g.headers[DELIVERY.lower()] == "7-100"
        assert verify(SECRET, g.headers[TIMESTAMP.lower()], g.body, g.headers[SIGNATURE.lower()])


def test_a_refusal_is_not_retried():
    rx = Receiver((403,))
    try:
        out = _send(rx.url)
    finally:
        rx.stop()
    assert [(a.get("status"), s) for _r, a, s in out.attempts] == [(403, "failed")]
    assert len(rx.received()) == 1


def test_no_receiver_is_tried_the_bounded_number_of_times():
    with socket.socket() as s:  # a free port with nothing listening (closed before the attempts)
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = _send(f"http://127.0.0.1:{port}/", attempts=3)
    assert [(a["n"], s) for _r, a, s in out.attempts] == [(1, "pending"), (2, "pending"), (3, "failed")]
    assert all("ConnectError" in a["error"] for _r, a, _s in out.attempts), out.attempts
