"""Warnings before a lease's end (issue 40, item 4; docs/decisions/before-end-warnings.md) from a real
`skylease serve` with the real local lease manager (1 node of this machine, --time-scale 10):

* a lease asking for a warning 30 lease seconds before its end, whose payload traps SIGUSR1: the
  payload gets the signal and finds ``BEFORE_END`` (its planned end) in its folder; the lease's event
  stream (``GET /leases/{id}/events``) says ``before-end`` with that end, before the lease's end;
  its webhook (a receiver started here on a loopback port, answering 500 then 200) gets the
  delivery twice, signed with the site's secret, and the lease's view shows both attempts;
  a webhook URL the site does not allow is 422, another user's stream 404, no token 401;
* crash safety: a warning that fell due while the server was down (kill -9) is given at its restart,
  once: a second restart gives nothing again;
* on a test site of one SSH host (127.0.0.211): the payload there gets the file and the signal.

All mostly wait on the lease clock."""

from __future__ import annotations

import json
import time

import httpx
import pytest
from tests.waits import waited

from skylease.runtime.leases.webhooks import SIGNATURE, TIMESTAMP, verify

from .hooks import Receiver
from .payloads import cancel_unfinished

pytestmark = [pytest.mark.usefixtures("payload_sandbox"), pytest.mark.timeout(180), pytest.mark.integration]

SCALE = 10
SECRET = "0123456789abcdef-secret"
#: Traps SIGUSR1: notes it, and copies the notice file it finds then (the shell runs a trap between
#: two commands: each sleep is short).
TRAPPING = "trap 'cp BEFORE_END seen; touch got_usr1' USR1; while :; do sleep 0.1; done"


@pytest.fixture
def receiver():
    rx = Receiver((500,))  # the first delivery fails (a 5xx): the sender tries again
    yield rx
    rx.stop()


@pytest.fixture
def serve(serve_process, tmp_path, capsys, receiver):
    """A real server on 1 node with webhooks allowed under the receiver's /hooks/; alice, bob, root."""
    (tmp_path / "site.toml").write_text("[[nodes]]\ncount = 1\n")
    secret = tmp_path / "webhook.secret"
    secret.write_text(SECRET + "\n")
    secret.chmod(0o600)
    config = tmp_path / "serve.toml"
    config.write_text(f'webhook_prefixes = ["{receiver.url}hooks/"]\n'
                      'webhook_secret_file = "webhook.secret"\n')
    proc = serve_process(site=tmp_path / "site.toml", time_scale=SCALE, grace=1, config=config)
    proc.add_users(capsys)
    proc.start()
    yield proc
    cancel_unfinished(proc)


def _events(serve, lid: int, user: str = "alice") -> list[tuple[str, dict]]:
    """The lease's event stream, read until it ends (the lease is over)."""
    out = []
    with httpx.stream("GET", f"{serve.url}/leases/{lid}/events", timeout=60,
                      headers={"Authorization": f"Bearer {serve.tokens[user]}"}) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        name = None
        for line in r.iter_lines():
            if line.startswith("event: "):
                name = line[len("event: "):]
            elif line.startswith("data: "):
                out.append((name, json.loads(line[len("data: "):])))
    return out


def _planned_end(view: dict) -> int:
    """The end of the lease's run under way (its start event's ``until``): it has started at once."""
    (until,) = [ev["until"] for ev in view["events"] if ev["event"] == "start"]
    return until


def _check_delivery(got, secret: str, lid: int, end: int) -> dict:
    assert got.path == "/hooks/alice" and got.headers["x-skylease-event"] == "before-end"
    assert verify(secret.encode(), got.headers[TIMESTAMP.lower()], got.body, got.headers[SIGNATURE.lower()])
    assert not verify(b"not-the-site-secret", got.headers[TIMESTAMP.lower()], got.body,
                      got.headers[SIGNATURE.lower()])
    body = json.loads(got.body)
    assert body["lease"] == lid and body["owner"] == "alice" and body["planned_end"] == end, body
    assert body["seconds_left"] == end - body["given_at"]
    assert got.headers["x-skylease-delivery"] == f"{lid}-{end}"
    return body


def test_the_payload_the_event_stream_and_the_webhook_are_warned_before_the_end(serve, receiver):
    hook = receiver.url + "hooks/alice"
    r = serve.call("POST", "/leases", "alice", json={"duration": 60, "before_end": 30, "webhook": receiver.url
                                                     + "elsewhere", "command": "true"})
    assert r.status_code == 422 and "not under a URL this server allows" in r.json()["detail"], r.text
    r = serve.call("POST", "/leases", "alice", json={"duration": 60, "cpu": 0.1, "memory": 64,
                                                     "before_end": 30, "webhook": hook, "command": TRAPPING})
    assert r.status_code == 201, r.text
    lid, end = r.json()["id"], _planned_end(r.json())
    assert serve.call("GET", f"/leases/{lid}/events", "bob").status_code == 404
    assert httpx.get(f"{serve.url}/leases/{lid}/events", timeout=30).status_code == 401

    events = _events(serve, lid)  # (live: it ends with the lease, about 6 s from now)
    warned = [ev for name, ev in events if name == "before-end"]
    assert len(warned) == 1 and warned[0]["end"] == end, events
    given = warned[0]["time"]
    # (given at the manager loop's first turn at or after end - 30: within 0.5 s on a busy machine)
    assert end - 30 <= given <= end - 25 and warned[0]["seconds_left"] == end - given, warned
    assert [name for name, _ in events][-1] != "before-end" and events[-1][1]["time"] >= end, events

    folder = serve.data / "leases" / str(lid)
    assert (folder / "got_usr1").exists(), sorted(p.name for p in folder.iterdir())
    assert (folder / "seen").read_text().split()[0] == str(end)  # what the payload read when signalled
    assert (folder / "BEFORE_END").read_text().split()[0] == str(end)

    view = waited("the webhook delivered", lambda: (v := serve.call("GET", f"/leases/{lid}", "alice").json())
                 ["warnings"] and v["warnings"][0]["webhook"]["state"] == "delivered" and v)
    hook_view = view["warnings"][0]["webhook"]
    assert hook_view["url"] == hook and [a.get("status") for a in hook_view["attempts"]] == [500, 200]
    assert [ev for ev in view["events"] if ev["event"] == "before-end"] == [
        {k: v for k, v in view["warnings"][0].items() if k != "webhook"}] == warned
    got = receiver.received()
    assert [g.status for g in got] == [500, 200], got
    assert _check_delivery(got[0], SECRET, lid, end) == _check_delivery(got[1], SECRET, lid, end)
    assert serve.call("GET", f"/leases/{lid}", "bob").status_code == 404
    serve.assert_quiet()


def test_a_warning_due_while_the_server_was_down_is_given_at_its_restart_once(serve, receiver):
    receiver.statuses.clear()
    r = serve.call("POST", "/leases", "alice", json={"duration": 200, "cpu": 0.1, "memory": 64,
                                                     "before_end": 150, "command": TRAPPING,
                                                     "webhook": receiver.url + "hooks/alice"})
    assert r.status_code == 201, r.text
    lid, end = r.json()["id"], _planned_end(r.json())
    due = end - 150
    waited("its payload runs", lambda: serve.call("GET", f"/leases/{lid}", "alice").json()["payloads"])
    now, at = serve.now(), time.monotonic()
    assert now < due - 10, (now, due)
    serve.kill9()
    time.sleep(max(0.0, at + (due + 5 - now) / SCALE - time.monotonic()))  # its warning falls due meanwhile
    serve.start()
    view = waited("its warning given", lambda: (v := serve.call("GET", f"/leases/{lid}", "alice").json())
                 ["warnings"] and v["warnings"][0]["webhook"]["state"] == "delivered" and v)
    assert len(view["warnings"]) == 1 and view["warnings"][0]["time"] >= due + 5, view["warnings"]
    folder = serve.data / "leases" / str(lid)
    waited("the adopted payload signalled", lambda: (folder / "got_usr1").exists(), timeout=10)
    serve.restart()
    again = serve.call("GET", f"/leases/{lid}", "alice").json()
    assert again["warnings"] == view["warnings"] and again["state"] == "active"
    time.sleep(0.5)  # (a second warning or delivery would be given at the restart's first turn)
    assert len(receiver.received()) == 1
    assert len([ev for ev in again["events"] if ev["event"] == "before-end"]) == 1


#: The SSH test site's first address is 127.0.0.(SSH_BASE+1): its own range (127.0.0.211).
SSH_BASE = 210


def test_a_payload_on_an_ssh_host_gets_the_notice_there(ssh_site, serve_process, tmp_path, capsys):
    site = ssh_site(1, base=SSH_BASE)
    h = site.hosts[0]
    text = f'[ssh]\nuser = "root"\nidentity_file = "{site.key}"\nknown_hosts = "{site.known_hosts}"\n'
    text += f'[[hosts]]\naddress = "{h.address}"\nname = "{h.name}"\nnodes = 1\ncpu = 1\nmemory = 1024\n'
    (tmp_path / "hosts.toml").write_text(text)
    serve = serve_process(name="hosts", site=tmp_path / "hosts.toml", time_scale=SCALE, grace=1)
    serve.add_users(capsys)
    serve.start()
    r = serve.call("POST", "/leases", "alice", json={"duration": 60, "cpu": 0.1, "memory": 64,
                                                     "before_end": 30, "command": TRAPPING})
    assert r.status_code == 201, r.text
    lid, end = r.json()["id"], _planned_end(r.json())
    view = waited("warned", lambda: (v := serve.call("GET", f"/leases/{lid}", "alice").json())["warnings"]
                 and v)
    assert view["warnings"][0]["end"] == end and "webhook" not in view["warnings"][0]
    folder = f".skylease/{serve.setting('serve_id')}/{h.address}/leases/{lid}"  # (on the host, as root)
    seen = waited("the payload signalled on its host", lambda: site.ssh(h.name, f"cat {folder}/seen").stdout,
                 timeout=10)
    assert seen.split()[0] == str(end), seen
    assert site.ssh(h.name, f"cut -d' ' -f1 {folder}/BEFORE_END").stdout.strip() == str(end)
    assert site.ssh(h.name, f"test -e {folder}/got_usr1").returncode == 0
    serve.call("DELETE", f"/leases/{lid}")
