"""Disk images to hosts reached over SSH (HostNodes.copy_image, cached, evict, spawn with an image)
against real sshd hosts of a test site on this machine (skylease.testing.site): a 50 MB image crosses
the network to each of two hosts in the time the site's bandwidth gives, whole (its SHA-256 read on
the host equals the repository file's) and absent until then; a node's cache lists it and an
eviction removes it; a cancelled copy leaves nothing; a payload finds it at $SKYLEASE_IMAGE. What
the tests see on a host they read over SSH (the site's own ssh, not the connection under test), but
for the moments that must be seen on time (a copy half-way, under way): the test hosts share this
machine's files, and a login of the site's own ssh takes about a second here."""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import threading
import time

import pytest
from tests import hostnodes as hosts
from tests import waits

from skylease.control.leases.lease import ResourceTuple
from skylease.runtime.leases.host_nodes import HostNodes
from skylease.runtime.leases.site import Site, SiteNode

pytestmark = [pytest.mark.timeout(120), pytest.mark.integration]  # real sshd hosts: CI's second level

#: The test site's first address (127.0.0.(BASE+1)): apart from other test modules' sites.
BASE = 70
MB = 2**20
#: The image's size and the site's bandwidth: 50 MB at 20 MB/s is a 2.5 s window.
SIZE_MB = 50
BANDWIDTH = 20.0


@pytest.fixture(scope="module")
def site(ssh_site):
    return ssh_site(2, base=BASE)


@pytest.fixture(scope="module")
def repository(tmp_path_factory):
    """The image repository: ``disk.img``, 50 MB of random bytes (nothing a sparse file or a stand-in
    of zeros could pass for), and its SHA-256."""
    repo = tmp_path_factory.mktemp("repo")
    digest = hashlib.sha256()
    with open(repo / "disk.img", "wb") as fh:
        for _ in range(SIZE_MB):
            block = os.urandom(MB)
            digest.update(block)
            fh.write(block)
    return repo, digest.hexdigest()


@pytest.fixture
def make(site, repository, tmp_path):
    """``make(host=0)``: a HostNodes on that host of the site, for a site of two nodes with the
    repository and a 20 MB/s bandwidth; all closed at the end."""
    made: list[HostNodes] = []
    sites = Site((SiteNode("a", ResourceTuple()), SiteNode("b", ResourceTuple())), repository=repository[0],
                 bandwidth=BANDWIDTH)

    def factory(host: int = 0) -> HostNodes:
        h = site.hosts[host]
        conn = hosts.connection(site, host, tmp_path / f"ssh{len(made)}")
        hn = HostNodes(sites, tmp_path / "data", f"test-{secrets.token_hex(6)}", connection=conn,
                       remote_dir=f"{tmp_path}/on-{h.name}")  # (the hosts share this machine's files)
        made.append(hn)
        return hn

    yield factory
    hosts.close_all(made)


def on_host(site, host: int, command: str) -> str:
    r = site.ssh(site.hosts[host].name, command)
    assert r.returncode == 0, r.stderr
    return r.stdout


def cache_listing(site, host: int, hn: HostNodes, *nodes: int) -> list[list[str]]:
    """Every file in each node's cache folder, temporary ones included (one login to the host)."""
    out = on_host(site, host, "; ".join(f"echo $(ls -A {hn.cache_dir(k)} 2>/dev/null)" for k in nodes))
    return [line.split() for line in out.splitlines()]


def files_in(hn: HostNodes, node: int) -> list[str]:
    """The same, seen from this machine (no login: at once)."""
    with contextlib.suppress(FileNotFoundError):
        return sorted(os.listdir(hn.cache_dir(node)))
    return []


def test_an_image_reaches_each_host_in_its_window_whole_and_absent_until_then(make, site, repository):
    hosts = [make(0), make(1)]
    seconds = SIZE_MB / BANDWIDTH
    t0 = time.monotonic()
    copies = [hn.copy_image("disk.img", SIZE_MB, [0, 1] if i == 0 else [1], seconds)
              for i, hn in enumerate(hosts)]
    ended: dict[int, float] = {}

    def wait(i: int) -> None:
        copies[i].wait(3 * seconds)
        ended[i] = time.monotonic() - t0

    waiters = [threading.Thread(target=wait, args=(i,)) for i in range(2)]
    for w in waiters:
        w.start()
    time.sleep(seconds / 2)  # half-way: on its way (a temporary file), not in the cache
    for i, hn in enumerate(hosts):
        assert not copies[i].done
        assert hn.cached(1) == []
        files = files_in(hn, 1)
        assert len(files) == 1 and files[0].startswith(".disk.img.") and files[0].endswith(".part"), files
        assert 0 < os.stat(f"{hn.cache_dir(1)}/{files[0]}").st_size < SIZE_MB * MB
    for w in waiters:
        w.join()
    for i in range(2):
        assert copies[i].done, copies[i].error
        assert seconds * 0.99 <= ended[i] <= seconds * 1.2, (i, ended[i], seconds)  # never faster
    want = repository[1]
    assert copies[0].sha256 == want
    for i, hn in enumerate(hosts):
        nodes = [0, 1] if i == 0 else [1]
        for k in nodes:
            assert hn.cached(k) == ["disk.img"]
        paths = " ".join(f"{hn.cache_dir(k)}/disk.img" for k in nodes)
        lines = on_host(site, i, "; ".join([*(f"echo $(ls -A {hn.cache_dir(k)})" for k in nodes),
                                            f"sha256sum {paths}", f"stat -c %i {paths}"])).splitlines()
        n = len(nodes)
        assert lines[:n] == ["disk.img"] * n  # no temporary file left
        assert [line.split()[0] for line in lines[n:2 * n]] == [want] * n
        assert len(set(lines[2 * n:])) == n  # each node its own file (no hard link)
    assert hosts[1].cached(0) == []  # host2's node a was not a destination
    assert hosts[0].evict(0, "disk.img") is True
    assert hosts[0].cached(0) == [] and hosts[0].cached(1) == ["disk.img"]
    assert hosts[0].evict(0, "disk.img") is False


def test_a_cancelled_copy_leaves_nothing_on_the_host(make, site):
    hn = make(0)
    copy = hn.copy_image("disk.img", SIZE_MB, [0, 1], 2.0)
    assert waits.until(lambda: len(files_in(hn, 1)) == 1, 1.0)  # under way
    time.sleep(0.5)
    assert len(files_in(hn, 0)) == 1 and not copy.done
    t = time.monotonic()
    copy.cancel()
    assert time.monotonic() - t < 1.0
    assert copy.wait(0) and not copy.done and copy.error == "cancelled"
    assert cache_listing(site, 0, hn, 0, 1) == [[], []]
    assert hn.cached(0) == hn.cached(1) == []


def test_a_stand_in_is_made_on_the_host_paced_and_sparse(make, site):
    hn = make(1)
    t0 = time.monotonic()
    copy = hn.copy_image("blank.img", 8, [0], 1.0)  # not in the repository: 8 MB of zeros
    assert copy.wait(5.0) and copy.done, copy.error
    assert 0.99 <= time.monotonic() - t0 <= 1.2
    assert copy.sha256 is None  # (nothing was sent: the host made it)
    size, blocks = on_host(site, 1, f"stat -c '%s %b' {hn.cache_dir(0)}/blank.img").split()
    assert int(size) == 8 * MB and int(blocks) * 512 < MB  # holes, not 8 MB of written zeros


def test_a_payload_finds_its_image_at_skylease_image(make, site, repository):
    hn = make(1)
    copy = hn.copy_image("disk.img", SIZE_MB, [1], 0.0)  # unpaced
    assert copy.wait(20.0) and copy.done, copy.error
    p = hn.spawn(7, 0, 1, command='echo "$SKYLEASE_IMAGE"; sha256sum < "$SKYLEASE_IMAGE"; hostname',
                 image="disk.img")
    [ended] = waits.collect(hn, 1, 10.0)
    assert ended.pid == p.pid and ended.exit_code == 0
    said = hn.output(p).split()
    assert len(said) == 4, said
    path, digest, _, host = said
    assert path == "/images/disk.img"  # (in its sandbox: the node's cached copy, read-only)
    assert (digest, host) == (repository[1], "host2")
    with pytest.raises(ValueError, match="not an image name"):
        hn.spawn(7, 1, 1, command="true", image="../disk.img")
    with pytest.raises(ValueError, match="not an image name"):
        hn.copy_image(".hidden", 1, [0], 0.0)


def test_a_failed_copy_says_why_and_leaves_nothing(make, site, tmp_path):
    hn = make(0)
    # node a's cache folder cannot be made on the host (a file holds its name): the helper fails
    nodes = tmp_path / "on-host1" / "nodes"
    nodes.mkdir(parents=True)
    (nodes / "a").write_text("in the way")
    copy = hn.copy_image("disk.img", SIZE_MB, [0, 1], 0.5)
    assert copy.wait(10.0) and not copy.done
    assert (copy.error or "").startswith("root@127.0.0.71:22: NotADirectoryError"), copy.error
    assert cache_listing(site, 0, hn, 1) == [[]]


def test_a_copy_whose_connection_drops_leaves_nothing(make, site):
    hn = make(1)
    copy = hn.copy_image("disk.img", SIZE_MB, [0, 1], 2.0)
    assert waits.until(lambda: len(files_in(hn, 0)) == 1, 1.0)  # under way
    hn.conn.close(force=True)  # the master ends (SIGTERM), and every session on it: the copy's too
    assert copy.wait(10.0) and not copy.done
    assert (copy.error or "").startswith("root@127.0.0.72:22: "), copy.error
    assert waits.until(lambda: files_in(hn, 0) == files_in(hn, 1) == [], 5.0)  # the helper cleaned up
    assert cache_listing(site, 1, hn, 0, 1) == [[], []]
    assert waits.until(lambda: not hn.host_state().up, 5.0)  # (its watch session ended with the master)
    refused = hn.copy_image("disk.img", SIZE_MB, [0], 2.0)  # (it tries again in 5 s: down_after_s)
    assert refused.wait(0) and not refused.done
    assert (refused.error or "").startswith("not answering: "), refused.error
