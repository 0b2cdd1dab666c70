"""Image transfers of the local enactment, on real files: a copy fills the window the schedule
reserved (never less, hardly more), appears whole or not at all, can be cancelled, and the cache
can be listed and evicted."""

from __future__ import annotations

import os
import secrets
import sys
import threading
import time
from pathlib import Path

import pytest

from skylease.control.leases.lease import ResourceTuple
from skylease.runtime.leases.local import LocalNodes
from skylease.runtime.leases.site import Site, SiteNode

pytestmark = [pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only"),
              pytest.mark.timeout(60)]

#: How late a copy may end after its window: the last chunk's write, the renames and the thread's
#: wake-up; a loaded 2-core machine can delay a thread by a few hundred ms.
MARGIN_S = 0.75


@pytest.fixture
def nodes(tmp_path, payload_sandbox):
    repo = tmp_path / "repo"
    repo.mkdir()
    site = Site(tuple(SiteNode(name, ResourceTuple()) for name in "abc"), repository=repo)
    ln = LocalNodes(site, tmp_path / "data", f"test-{secrets.token_hex(6)}", sandbox=payload_sandbox)
    yield ln
    ln.close(kill=True, grace_s=0.2)


def watch_partial(paths: list[Path], size: int, stop: threading.Event) -> list[str]:
    """Look at the destinations every few ms while the copy runs: any sighting of a file that is
    not whole is recorded."""
    seen: list[str] = []
    while not stop.is_set():
        for p in paths:
            try:
                n = p.stat().st_size
            except FileNotFoundError:
                continue
            if n != size:
                seen.append(f"{p.name}: {n} of {size} bytes")
        time.sleep(0.003)
    return seen


def test_a_copy_fills_its_window_and_appears_whole_or_not_at_all(nodes):
    content = os.urandom(3 * 2**20 + 12345)  # not a whole number of chunks
    (nodes.site.repository / "web.img").write_bytes(content)
    seen: list[str] = []
    stop = threading.Event()
    dests = [nodes.node_dir(k) / "cache" / "web.img" for k in (0, 2)]
    watcher = threading.Thread(target=lambda: seen.extend(watch_partial(dests, len(content), stop)))
    watcher.start()
    t0 = time.monotonic()
    copy = nodes.copy_image("web.img", 999, [2, 0], seconds=1.5)
    time.sleep(0.75)
    assert not copy.done and nodes.cached(0) == [] and not any(p.exists() for p in dests)
    assert copy.wait(10)
    elapsed = time.monotonic() - t0
    stop.set()
    watcher.join()
    assert copy.done and copy.error is None
    assert 1.5 <= elapsed <= 1.5 + MARGIN_S, elapsed
    assert seen == []
    assert all(p.read_bytes() == content for p in dests)  # the repository's file, not a stand-in
    assert nodes.cached(0) == nodes.cached(2) == ["web.img"] and nodes.cached(1) == []
    assert sorted(os.listdir(dests[0].parent)) == ["web.img"]  # no temporary file left


def test_an_image_the_repository_lacks_is_a_sparse_stand_in_of_its_size(nodes):
    t0 = time.monotonic()
    copy = nodes.copy_image("missing.img", 64, [1], seconds=0.5)
    assert copy.wait(10) and copy.done
    assert 0.5 <= time.monotonic() - t0 <= 0.5 + MARGIN_S
    st = (nodes.node_dir(1) / "cache" / "missing.img").stat()
    assert st.st_size == 64 * 2**20 and st.st_blocks * 512 < 2**20  # no disk spent on zeros


def test_a_cancelled_copy_leaves_nothing(nodes):
    (nodes.site.repository / "big.img").write_bytes(os.urandom(2**20))
    copy = nodes.copy_image("big.img", 1, [0, 1], seconds=30)
    time.sleep(0.3)
    t0 = time.monotonic()
    copy.cancel()
    assert time.monotonic() - t0 < 2 and copy.wait(0) and not copy.done and copy.error == "cancelled"
    for k in (0, 1):
        assert os.listdir(nodes.node_dir(k) / "cache") == []


def test_eviction_deletes_the_cached_file(nodes):
    for image in ("one.img", "two.img"):
        assert nodes.copy_image(image, 1, [0], seconds=0).wait(10)
    assert nodes.cached(0) == ["one.img", "two.img"]
    assert nodes.evict(0, "one.img") and not (nodes.node_dir(0) / "cache" / "one.img").exists()
    assert nodes.cached(0) == ["two.img"]
    assert not nodes.evict(0, "one.img") and not nodes.evict(1, "two.img")


@pytest.mark.parametrize("name", ["..", ".hidden", "a/b", "", "x" * 300])
def test_an_image_name_that_is_not_a_file_name_is_refused(nodes, name):
    with pytest.raises(ValueError, match="not an image name"):
        nodes.copy_image(name, 1, [0], seconds=0)
    with pytest.raises(ValueError, match="not an image name"):
        nodes.evict(0, name)
