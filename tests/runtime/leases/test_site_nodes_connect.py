"""A site's hosts are connected all at once when its enactment starts (``SiteNodes``), each by the
host factory (the seam: here a stand-in that records what it was asked; the real one, over SSH, is
covered by the serve tests on sshd hosts): a start, and a restart, take one host's time, not the
sum of them; a host that fails closes the others and names itself."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from skylease.runtime.leases.site import load_site
from skylease.runtime.leases.site_nodes import SiteNodes
from skylease.runtime.leases.ssh import SshError


def hosts_site(tmp_path: Path, n: int):
    (tmp_path / "known_hosts").write_text("")
    (tmp_path / "known_hosts").chmod(0o600)
    text = '[ssh]\nknown_hosts = "known_hosts"\n'
    for i in range(n):
        text += f'[[hosts]]\naddress = "127.0.0.{201 + i}"\nnodes = {1 + i % 2}\n'
    path = tmp_path / "site.toml"
    path.write_text(text)
    return load_site(path)


class Part:
    """What the factory made for one host: its nodes, and whether it was closed."""

    def __init__(self, host: str, nodes: list[int]) -> None:
        self.host, self.nodes, self.closed = host, nodes, False

    def close(self, kill: bool = False) -> None:
        self.closed = True

    def failure(self) -> None:
        return None


def test_every_host_is_connected_at_once_and_each_gets_its_own_nodes(tmp_path):
    site = hosts_site(tmp_path, 4)
    # (one at a time, the first host would wait here for the others until the timeout)
    barrier = threading.Barrier(4, timeout=10)
    made: list[Part] = []

    def factory(site, data, serve_id, host, nodes, **_):
        barrier.wait()
        part = Part(host.name, list(nodes))
        made.append(part)
        return part

    nodes = SiteNodes(site, tmp_path / "data", "s1", sandbox=None, host_factory=factory)
    assert sorted(nodes.hosts) == [h.name for h in site.hosts]
    for k, node in enumerate(site.nodes):
        part = nodes.part(k)
        assert part.host == node.host.name and k in part.nodes
    assert [len(nodes.hosts[h.name].nodes) for h in site.hosts] == [1, 2, 1, 2]
    assert not any(p.closed for p in made)


def test_a_host_that_fails_closes_the_others_and_the_first_failure_in_host_order_is_raised(tmp_path):
    site = hosts_site(tmp_path, 5)
    names = [h.name for h in site.hosts]
    made: list[Part] = []
    lock = threading.Lock()

    def factory(site, data, serve_id, host, nodes, **_):
        if host.name in (names[1], names[3]):
            raise SshError("connection refused", field=host.name)
        part = Part(host.name, list(nodes))
        with lock:
            made.append(part)
        return part

    with pytest.raises(SshError) as err:
        SiteNodes(site, tmp_path / "data", "s1", sandbox=None, host_factory=factory)
    assert err.value.field == names[1]
    assert sorted(p.host for p in made) == sorted([names[0], names[2], names[4]])
    assert all(p.closed for p in made)
