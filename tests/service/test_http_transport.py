"""The client's transport (service/http_transport.py) against real loopback servers: the standard
library's ThreadingHTTPServer on 127.0.0.1, port 0, in a daemon thread, shut down in ``finally``.

What it promises: one kept-alive connection for a client's calls; a GET that meets a connection the
server closed in between is sent again on a new one, a POST never (it goes on a new connection once
the kept one has been idle for FRESH_AFTER_S); the environment's proxies as urllib reads them;
TransportTimeout when the server does not answer in time; one TLS context per client.
"""

from __future__ import annotations

import base64
import json
import re
import select
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from skylease.model.errors import UserError
from skylease.service import client as client_module
from skylease.service import http_transport
from skylease.service.client import Client, ServiceError
from skylease.service.http_transport import Transport, TransportTimeout

PROXY_VARIABLES = ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy",
                   "NO_PROXY", "no_proxy")
HEADERS = {"Accept": "application/json"}
WAIT_S = 5.0  # the longest any server here holds an answer back (released earlier by each test)


@pytest.fixture(autouse=True)
def no_proxies(monkeypatch):
    """The machine's own proxy settings must not decide where these requests go."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@dataclass(frozen=True)
class Seen:
    """A request as a server received it."""

    method: str
    target: str
    port: int  # the client's end of the connection
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True)
class Answer:
    status: int = 200
    body: bytes = b"[]"
    content_type: str = "application/json"
    close: bool = False  # close the connection after answering, without a "Connection: close"
    wait: threading.Event | None = None  # answer only once it is set (or after WAIT_S)


class QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        pass  # (a client that went away before its answer: what several tests do on purpose)


class Server:
    """A loopback HTTP(S) server that records each request and answers what ``answer`` says."""

    def __init__(self, answer: Callable[[Seen], Answer], tls: ssl.SSLContext | None = None) -> None:
        self.seen: list[Seen] = []
        lock = threading.Lock()
        seen = self.seen

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                request = Seen(self.command, self.path, self.client_address[1],
                               {k.lower(): v for k, v in self.headers.items()},
                               self.rfile.read(length) if length else b"")
                with lock:
                    seen.append(request)
                a = answer(request)
                if a.wait is not None:
                    a.wait.wait(WAIT_S)
                self.send_response(a.status)
                self.send_header("Content-Type", a.content_type)
                self.send_header("Content-Length", str(len(a.body)))
                self.end_headers()
                self.wfile.write(a.body)
                if a.close:  # as a keep-alive timeout does: the client is not told
                    self.close_connection = True

            do_GET = do_POST = do_DELETE = do_any

            def log_message(self, *args: object) -> None:
                pass

        self.http = QuietServer(("127.0.0.1", 0), Handler)
        if tls is not None:  # (the handshake in the request's thread, not the accepting one)
            self.http.socket = tls.wrap_socket(self.http.socket, server_side=True,
                                               do_handshake_on_connect=False)
        self.port = self.http.server_address[1]
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"

    def targets(self, method: str | None = None) -> list[str]:
        return [s.target for s in self.seen if method is None or s.method == method]


@contextmanager
def serving(answer: Callable[[Seen], Answer] = lambda _: Answer(), tls: ssl.SSLContext | None = None,
            releases: tuple[threading.Event, ...] = ()) -> Iterator[Server]:
    server = Server(answer, tls)
    thread = threading.Thread(target=server.http.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        for event in releases:
            event.set()
        server.http.shutdown()
        server.http.server_close()
        thread.join(WAIT_S)


def says(text: str) -> str:
    return f"^{re.escape(text)}$"


def starts(text: str) -> str:
    return f"^{re.escape(text)}"


def get(t: Transport, path: str, **params: object) -> object:
    r = t.request("GET", path, headers=HEADERS, params=params or None)
    assert r.status_code == 200, (r.status_code, r.text)
    return r.json()


# -- one connection ------------------------------------------------------------------------------
def test_several_gets_share_one_connection():
    with serving() as server:
        t = Transport(server.url, timeout=5)
        try:
            assert [get(t, "/leases", limit=i) for i in range(4)] == [[]] * 4
        finally:
            t.close()
        with Client(server.url, "token") as client:
            assert [client.leases() for _ in range(3)] == [[]] * 3
    assert server.targets() == [f"/leases?limit={i}" for i in range(4)] + ["/leases"] * 3
    ports = [s.port for s in server.seen]
    assert len(set(ports[:4])) == 1 and len(set(ports[4:])) == 1 and ports[0] != ports[4], ports


def test_a_closed_answer_closes_the_connection_and_the_next_request_opens_one():
    """A server that says "Connection: close" (here: an HTTP/1.0 answer) is believed."""
    with serving() as server:
        server.http.RequestHandlerClass.protocol_version = "HTTP/1.0"
        t = Transport(server.url, timeout=5)
        try:
            assert get(t, "/a") == []
            assert t.request("POST", "/b", headers=HEADERS, body=b"{}").status_code == 200
        finally:
            t.close()
    assert server.targets() == ["/a", "/b"] and server.seen[0].port != server.seen[1].port


# -- a connection the server closed in between -----------------------------------------------------
def closes_after_each(_: Seen) -> Answer:
    return Answer(close=True)


def test_a_get_on_a_connection_the_server_closed_is_sent_again_on_a_new_one():
    with serving(closes_after_each) as server:
        t = Transport(server.url, timeout=5)
        try:
            assert [get(t, "/first"), get(t, "/second"), get(t, "/third")] == [[]] * 3
        finally:
            t.close()
    # each received (and answered) exactly once, each on its own connection
    assert server.targets() == ["/first", "/second", "/third"]
    assert len({s.port for s in server.seen}) == 3


def test_a_post_on_a_connection_the_server_closed_is_never_sent_twice(monkeypatch):
    monkeypatch.setattr(http_transport, "FRESH_AFTER_S", 60.0)  # the kept connection counts as fresh
    with serving(closes_after_each) as server, Client(server.url, "token") as client:
        assert client.leases() == []
        with pytest.raises(ServiceError, match=starts(f"cannot reach the server at {server.url}: ")):
            client.call("POST", "/leases", body=b"{}", content_type="application/json")
        assert client.leases() == []  # and the client goes on with a new connection
    assert len(server.targets("POST")) <= 1
    assert server.targets("GET") == ["/leases", "/leases"]


def test_a_post_after_the_connection_idled_goes_on_a_new_connection(monkeypatch):
    monkeypatch.setattr(http_transport, "FRESH_AFTER_S", 0.05)
    with serving(closes_after_each) as server, Client(server.url, "token") as client:
        assert client.leases() == []
        time.sleep(0.15)
        body = b'{"duration": 60}'
        assert client.call("POST", "/leases", body=body, content_type="application/json") == []
        time.sleep(0.15)
        assert client.call("DELETE", "/leases/7") == []
    assert [(s.method, s.target) for s in server.seen] == \
        [("GET", "/leases"), ("POST", "/leases"), ("DELETE", "/leases/7")]
    assert server.seen[1].body == b'{"duration": 60}' and len({s.port for s in server.seen}) == 3


def test_a_resent_get_that_times_out_is_a_timeout_and_leaves_no_broken_connection():
    """The resend's own failure: TransportTimeout as for any other request, and the next
    request on a new connection (not on one left waiting for an answer)."""
    slow = threading.Event()

    def answer(seen: Seen) -> Answer:
        return Answer(close=seen.target == "/first", wait=slow if seen.target == "/slow" else None)

    with serving(answer, releases=(slow,)) as server:
        t = Transport(server.url, timeout=0.3)
        try:
            assert get(t, "/first") == []
            with pytest.raises(TransportTimeout):
                get(t, "/slow")  # stale connection, then resent: the server holds it back
            assert get(t, "/after") == []
        finally:
            t.close()
    assert server.targets() == ["/first", "/slow", "/after"]


# -- proxies -----------------------------------------------------------------------------------------
def test_linux_urllib_sends_loopback_through_a_proxy_when_no_proxy_is_unset(monkeypatch):
    """What the tests below rely on: urllib (whose reading of the environment the transport
    follows) bypasses a proxy only for what NO_PROXY names, loopback included."""
    import urllib.request

    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    assert urllib.request.proxy_bypass("127.0.0.1") is False
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    assert urllib.request.proxy_bypass("127.0.0.1")


def test_with_http_proxy_set_a_request_goes_to_the_proxy_with_the_whole_url(monkeypatch):
    with serving() as server, serving() as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.setenv("NO_PROXY", "example.org,.example.com,127.0.0.1:1")  # (another port)
        with Client(server.url, "token") as client:
            assert client.listing("/leases", limit=5) == []
            assert client.call("POST", "/leases", body=b"{}", content_type="application/json") == []
    assert server.seen == []
    assert proxy.targets() == [f"http://127.0.0.1:{server.port}/leases?limit=5",
                               f"http://127.0.0.1:{server.port}/leases"]
    first = proxy.seen[0].headers
    assert first["host"] == f"127.0.0.1:{server.port}" and first["authorization"] == "Bearer token"
    assert "proxy-authorization" not in first
    assert len({s.port for s in proxy.seen}) == 1  # the connection to the proxy is kept too


def test_the_lower_case_http_proxy_with_credentials_sends_them_to_the_proxy(monkeypatch):
    with serving() as server, serving() as proxy:
        monkeypatch.setenv("http_proxy", f"http://al%40ice:s%3Acret@127.0.0.1:{proxy.port}")
        t = Transport(server.url, timeout=5)
        try:
            assert get(t, "/hosts") == []
        finally:
            t.close()
    assert server.seen == [] and proxy.targets() == [f"http://127.0.0.1:{server.port}/hosts"]
    assert proxy.seen[0].headers["proxy-authorization"] == \
        "Basic " + base64.b64encode(b"al@ice:s:cret").decode()


@pytest.mark.parametrize("no_proxy", ["127.0.0.1", "example.org, 127.0.0.1", "*", "PORT"])
def test_no_proxy_naming_the_server_sends_requests_straight_to_it(monkeypatch, no_proxy):
    with serving() as server, serving() as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        # a host and port, as urllib (which is given the URL's host:port) and httpx read it
        monkeypatch.setenv("no_proxy", no_proxy.replace("PORT", f"127.0.0.1:{server.port}"))
        with Client(server.url, "token") as client:
            assert client.leases() == []
    assert proxy.seen == [] and server.targets() == ["/leases"]


def test_https_proxy_is_only_for_https_servers(monkeypatch):
    with serving() as server, serving() as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        with Client(server.url, "token") as client:
            assert client.leases() == []
    assert proxy.seen == [] and server.targets() == ["/leases"]


def test_through_a_proxy_an_ipv6_server_is_named_in_brackets(monkeypatch):
    """(No IPv6 is used: the proxy on 127.0.0.1 is given the URL and answers itself.)"""
    with serving() as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        t = Transport("http://[::1]:8642", timeout=5)
        try:
            assert get(t, "/leases", limit=1) == []
        finally:
            t.close()
    assert proxy.targets() == ["http://[::1]:8642/leases?limit=1"]
    assert proxy.seen[0].headers["host"] == "[::1]:8642"


# -- timeouts and answers ------------------------------------------------------------------------------
def test_a_server_that_answers_too_late_is_a_timeout():
    late = threading.Event()
    with serving(lambda _: Answer(wait=late), releases=(late,)) as server:
        t = Transport(server.url, timeout=0.3)
        start = time.monotonic()
        try:
            with pytest.raises(TransportTimeout, match=says("no answer within 0.3 s")):
                t.request("GET", "/leases", headers=HEADERS)
        finally:
            t.close()
        assert 0.25 < time.monotonic() - start < 2.0


def test_through_the_client_a_late_answer_says_how_long_it_waited(monkeypatch):
    monkeypatch.setattr(client_module, "TIMEOUT_S", 0.3)
    late = threading.Event()
    with serving(lambda _: Answer(wait=late), releases=(late,)) as server:
        start = time.monotonic()
        late_answer = says(f"the server at {server.url} did not answer within 0.3 s")
        with Client(server.url, "token") as client, pytest.raises(ServiceError, match=late_answer):
            client.leases()
        assert time.monotonic() - start < 2.0


def test_a_server_that_is_not_there_cannot_be_reached():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        nobody = starts(f"cannot reach the server at http://127.0.0.1:{port}: ")
        with Client(f"http://127.0.0.1:{port}", "token") as client, pytest.raises(ServiceError, match=nobody):
            client.leases()


def by_path(seen: Seen) -> Answer:
    if seen.target == "/leases/7":
        return Answer(404, json.dumps({"detail": "no lease 7 of yours"}).encode())
    if seen.target == "/me":
        return Answer(401, b'{"detail": "unknown token"}')
    if seen.target == "/hosts":
        return Answer(500, b"Internal Server Error", "text/plain")
    if seen.target == "/queue":
        return Answer(200, b"<html>a login page</html>", "text/html")
    return Answer(200, b'{"ok": true}')


def test_answers_reach_the_caller_as_the_client_promises():
    with serving(by_path) as server, Client(server.url, "token") as client:
        at = f"the server at {server.url}"
        with pytest.raises(UserError) as refused:
            client.call("GET", "/leases/7")
        assert not isinstance(refused.value, ServiceError)
        assert str(refused.value) == "no lease 7 of yours (404 Not Found)"
        unknown = says(f"--token: unknown token: {at} does not know this token")
        with pytest.raises(client_module.TokenRefused, match=unknown):
            client.call("GET", "/me")
        failed = says(f"{at} answered 500 Internal Server Error: Internal Server Error")
        with pytest.raises(ServiceError, match=failed):
            client.call("GET", "/hosts")
        with pytest.raises(ServiceError, match=says(f"{at} answered something else than JSON")):
            client.call("GET", "/queue")
        assert client.call("GET", "/other") == {"ok": True}
    assert server.targets() == ["/leases/7", "/me", "/hosts", "/queue", "/other"]
    assert len({s.port for s in server.seen}) == 1  # an error answer does not cost the connection


# -- HTTPS ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    """A self-signed certificate for 127.0.0.1 (as tests/service/test_serve.py makes one) and a
    server context with it."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed: no certificate to serve HTTPS with")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "1", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True, timeout=60)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return cert, context


def count_tls_contexts(monkeypatch) -> list[int]:
    made: list[int] = []
    real = ssl.create_default_context
    monkeypatch.setattr(ssl, "create_default_context", lambda *a, **k: made.append(1) or real(*a, **k))
    return made


def test_an_https_client_makes_one_tls_context_and_one_connection(certificate, monkeypatch):
    cert, context = certificate
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    with serving(tls=context) as server:
        made = count_tls_contexts(monkeypatch)
        with Client(server.url, "token") as client:
            assert [client.leases() for _ in range(5)] == [[]] * 5
    assert len(made) == 1 and len(server.seen) == 5 and len({s.port for s in server.seen}) == 1, \
        (made, server.seen)


def test_an_https_get_on_a_connection_the_server_closed_is_sent_again(certificate, monkeypatch):
    cert, context = certificate
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    with serving(closes_after_each, tls=context) as server:
        made = count_tls_contexts(monkeypatch)
        with Client(server.url, "token") as client:
            assert [client.leases(), client.queue(), client.hosts()] == [[]] * 3
    assert server.targets() == ["/leases", "/queue", "/hosts"] and len({s.port for s in server.seen}) == 3
    assert len(made) == 1  # a new connection, not a new context


def test_an_https_server_nobody_vouches_for_is_refused(certificate):
    _, context = certificate
    with serving(tls=context) as server, Client(server.url, "token") as client, \
            pytest.raises(ServiceError, match="CERTIFICATE_VERIFY_FAILED"):
        client.leases()


class Tunnel(BaseHTTPRequestHandler):
    """A proxy that only tunnels (CONNECT), as an HTTPS proxy does; records what it was asked."""

    protocol_version = "HTTP/1.1"
    asked: ClassVar[list[tuple[str, dict[str, str]]]] = []

    def do_CONNECT(self) -> None:
        self.asked.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
        host, _, port = self.path.rpartition(":")
        with socket.create_connection((host, int(port)), timeout=WAIT_S) as upstream:
            self.send_response(200, "Connection established")
            self.end_headers()
            ends = [self.connection, upstream]
            deadline = time.monotonic() + WAIT_S
            while time.monotonic() < deadline:
                ready, _, _ = select.select(ends, [], [], 0.1)
                for end in ready:
                    data = end.recv(65536)
                    if not data:
                        self.close_connection = True
                        return
                    (upstream if end is self.connection else self.connection).sendall(data)
        self.close_connection = True

    def log_message(self, *args: object) -> None:
        pass


def test_https_through_a_proxy_tunnels_to_the_server_with_the_proxys_credentials(certificate, monkeypatch):
    cert, context = certificate
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    Tunnel.asked = []
    proxy = ThreadingHTTPServer(("127.0.0.1", 0), Tunnel)
    thread = threading.Thread(target=proxy.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        with serving(tls=context) as server:
            monkeypatch.setenv("HTTPS_PROXY", f"http://u:p@127.0.0.1:{proxy.server_address[1]}")
            with Client(server.url, "token") as client:
                assert [client.leases(), client.hosts()] == [[], []]
    finally:
        proxy.shutdown()
        proxy.server_close()
        thread.join(WAIT_S)
    # one tunnel, to the server itself (TLS end to end: the certificate checked is the server's)
    assert [path for path, _ in Tunnel.asked] == [f"127.0.0.1:{server.port}"]
    assert Tunnel.asked[0][1]["proxy-authorization"] == "Basic " + base64.b64encode(b"u:p").decode()
    assert server.targets() == ["/leases", "/hosts"]
    assert server.seen[0].headers["host"] == f"127.0.0.1:{server.port}"
