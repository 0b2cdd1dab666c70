"""VM lease requests and VM images, without a guest: the request's ``vm`` rules (the JSON schema's,
the same, are fuzzed by tests/service/test_api_schemathesis.py), the image forms a VM boots from,
the command line's ``--vm``, and a folder image staged into node caches whole or not at all, paced
as a file is."""

from __future__ import annotations

import os
import secrets
import sys
import threading
import time

import pytest
from pydantic import ValidationError

from skylease.control.leases.lease import ResourceTuple
from skylease.model.errors import UserError
from skylease.runtime.leases.api import LeaseRequest
from skylease.runtime.leases.local import LocalNodes
from skylease.runtime.leases.local_vms import vm_image_problem
from skylease.runtime.leases.site import Site, SiteNode
from skylease.service.client import request_from_options

pytestmark = [pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only"),
              pytest.mark.timeout(60)]

VM = {"duration": 60, "vm": True}


@pytest.mark.parametrize(("body", "error"), [
    (VM, "a VM lease needs an image"),
    ({**VM, "image": "g", "command": "true"}, "a VM lease takes no command"),
    ({**VM, "image": "g", "real_duration": 30}, "a VM lease takes no real_duration"),
    ({**VM, "image": "g"}, None),
    ({"duration": 60, "vm": False, "command": "true"}, None),
    ({"duration": 60, "vm": "yes", "image": "g"}, "Input should be a valid boolean"),
])
def test_a_vm_request_needs_an_image_and_takes_no_command(body, error):
    if error is None:
        assert LeaseRequest.model_validate(body).vm is body["vm"]
        return
    with pytest.raises(ValidationError) as info:
        LeaseRequest.model_validate(body)
    first = info.value.errors()[0]
    assert first["loc"] == ("vm",) and error in first["msg"]


def test_the_command_line_names_vm_in_its_mistake():
    with pytest.raises(UserError) as info:
        request_from_options(duration=60, vm=True)
    assert info.value.field == "--vm"
    assert info.value.message == "a VM lease needs an image (its guest boots from it)"
    assert request_from_options(duration=60, vm=True, image="g").vm is True


def test_the_image_forms_a_vm_boots_from(tmp_path):
    repo = tmp_path / "repo"
    (repo / "guest").mkdir(parents=True)
    for name in ("vmlinuz", "initrd.img"):
        (repo / "guest" / name).write_bytes(b"x")
    (repo / "half").mkdir()
    (repo / "half" / "vmlinuz").write_bytes(b"x")
    for name in ("d.qcow2", "d.raw", "d.img"):
        (repo / name).write_bytes(b"x")
    assert vm_image_problem(repo, "guest") is None
    assert vm_image_problem(repo, "d.qcow2") is None and vm_image_problem(repo, "d.raw") is None
    assert vm_image_problem(repo, "half") == ("image 'half' is a folder without initrd.img (a VM's image "
                                              "folder holds vmlinuz and initrd.img)")
    assert vm_image_problem(repo, "d.img") == ("image 'd.img' is neither a folder (vmlinuz, initrd.img) nor "
                                               "a .qcow2 or .raw disk")
    assert vm_image_problem(repo, "none") == "image 'none' is not in the site's repository"
    assert vm_image_problem(None, "guest").startswith("the site has no image repository")


@pytest.fixture
def nodes(tmp_path, payload_sandbox):
    repo = tmp_path / "repo"
    repo.mkdir()
    site = Site(tuple(SiteNode(name, ResourceTuple()) for name in "ab"), repository=repo)
    ln = LocalNodes(site, tmp_path / "data", f"test-{secrets.token_hex(6)}", sandbox=payload_sandbox)
    yield ln
    ln.close(kill=True, grace_s=0.2)


def test_a_folder_image_is_staged_whole_or_not_at_all(nodes):
    folder = nodes.site.repository / "guest"
    folder.mkdir()
    files = {"vmlinuz": os.urandom(3 << 20), "initrd.img": os.urandom(1 << 20), "cmdline": b"quiet\n"}
    for name, data in files.items():
        (folder / name).write_bytes(data)
    dests = [nodes.node_dir(k) / "cache" / "guest" for k in (0, 1)]
    seen_partial: list[str] = []
    stop = threading.Event()

    def watch() -> None:  # a cached folder never shows a part of the image
        while not stop.is_set():
            for d in dests:
                if d.exists() and sorted(p.name for p in d.iterdir()) != sorted(files):
                    seen_partial.append(str(d))
            time.sleep(0.005)

    watcher = threading.Thread(target=watch)
    watcher.start()
    t0 = time.monotonic()
    copy = nodes.copy_image("guest", 0, [0, 1], 1.0)
    assert copy.size_bytes == sum(map(len, files.values()))
    assert copy.wait(10) and copy.done and copy.error is None
    took = time.monotonic() - t0
    stop.set()
    watcher.join()
    assert took >= 1.0 and not seen_partial
    for d in dests:
        assert {p.name: p.read_bytes() for p in d.iterdir()} == files
        assert not [p for p in d.parent.iterdir() if p.name.startswith(".")]  # no part folder left
    assert nodes.cached(0) == ["guest"]
    assert nodes.evict(0, "guest") and nodes.cached(0) == [] and not nodes.evict(0, "guest")


def test_a_cancelled_folder_copy_leaves_nothing(nodes):
    folder = nodes.site.repository / "guest"
    folder.mkdir()
    (folder / "vmlinuz").write_bytes(os.urandom(2 << 20))
    copy = nodes.copy_image("guest", 0, [0], 30.0)
    time.sleep(0.2)
    copy.cancel()
    assert copy.error == "cancelled" and not copy.done
    cache = nodes.node_dir(0) / "cache"
    assert not cache.exists() or list(cache.iterdir()) == []
