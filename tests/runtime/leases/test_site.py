"""Site files: nodes, capacities, CPU pinning, the repository; every mistake one line naming the
file, the line and the key; the default site matches this machine."""

from __future__ import annotations

import os
import re
import shutil
import textwrap
from pathlib import Path

import pytest

from skylease.control.leases.lease import ResourceTuple
from skylease.model.errors import UserError
from skylease.runtime.leases.site import UNBOUNDED_NET, Site, SiteNode, default_site, load_site

GOOD = """\
repository = "images"
bandwidth = 12.5
cache_mb = 20000

[[nodes]]
name = "big"
cpu = 2
memory = 8192
disk = 100000
cache_mb = 50000

[[nodes]]
name = "small"
count = 3
memory = 2048
net = 10.0

[[nodes]]
"""


def write(tmp_path, text: str):
    path = tmp_path / "site.toml"
    path.write_text(textwrap.dedent(text))
    return path


def test_a_site_file_gives_the_nodes_in_order_with_their_capacities(tmp_path):
    (tmp_path / "images").mkdir()
    site = load_site(write(tmp_path, GOOD), machine=[0, 1, 2, 3])
    assert site.names == ["big", "small0", "small1", "small2", "node4"]
    assert site.n_nodes == 5 and site.bandwidth == 12.5 and site.repository == tmp_path / "images"
    assert site.capacity == [ResourceTuple(2.0, 8192, 100000, UNBOUNDED_NET)] + [
        ResourceTuple(1.0, 2048, 0, 10.0)] * 3 + [ResourceTuple(1.0, 1024, 0, UNBOUNDED_NET)]
    assert [n.cache_mb for n in site.nodes] == [50000, 20000, 20000, 20000, 20000]
    # consecutive CPUs, as many as the node's, wrapping around the machine
    assert [site.cpus(k) for k in range(5)] == [(0, 1), (2,), (3,), (0,), (1,)]
    assert site.index("small1") == 2


def test_the_site_file_of_the_docs_loads_as_it_says(tmp_path):
    doc = Path(__file__).resolve().parents[3] / "docs" / "howto" / "serve.md"
    blocks = re.findall(r"```toml\n(.*?)```", doc.read_text(), flags=re.S)
    (example,) = [b for b in blocks if "[[nodes]]" in b]  # (the site file's, among the page's TOML)
    (tmp_path / "images").mkdir()
    site = load_site(write(tmp_path, example))
    assert site.names == ["big", *(f"small{i}" for i in range(6))]
    assert site.capacity[0][:3] == (2.0, 8192, 100000) and site.capacity[1][:3] == (1.0, 2048, 0)
    assert site.bandwidth == 100 and [n.cache_mb for n in site.nodes] == [20000] * 7


def test_nodes_map_to_cpu_i_mod_cores_and_a_node_takes_its_cpus_when_there_are_enough():
    def site(cpus: list[float], machine: tuple[int, ...]) -> Site:
        return Site(tuple(SiteNode(f"n{i}", ResourceTuple(c)) for i, c in enumerate(cpus)), machine=machine)

    assert [site([1] * 5, (0, 1)).cpus(k) for k in range(5)] == [(0,), (1,), (0,), (1,), (0,)]
    assert [site([1] * 3, (4, 6)).cpus(k) for k in range(3)] == [(4,), (6,), (4,)]  # the allowed CPUs
    assert [site([2, 2, 2], (0, 1, 2, 3)).cpus(k) for k in range(3)] == [(0, 1), (2, 3), (0, 1)]
    assert site([8], (0, 1, 2, 3)).cpus(0) == (0, 1, 2, 3)  # no more than the machine has
    assert site([0.5, 1.5], (0, 1, 2)).cpus(1) == (1, 2)  # rounded up, at least one


@pytest.mark.parametrize(("text", "line", "field", "message"), [
    ('[[nodes]]\nname = "a"\n\n[[nodes]]\ncpu = "two"\n', 5, "nodes[1].cpu", "must be a finite number > 0"),
    ('[[nodes]]\nmemroy = 1024\n', 2, "nodes[0].memroy", "did you mean 'memory'?"),
    ('[[nodes]]\nmemory = 1024.5\n', 2, "nodes[0].memory", "must be a whole number >= 0"),
    ('bandwidth = 0\n[[nodes]]\n', 1, "bandwidth", "must be a finite number > 0"),
    ('nodes = []\n', 1, "nodes", "non-empty list"),
    ('bandwidth = 5\n', None, "nodes", "required"),
    ('[[nodes]]\nname = "../x"\n', 2, "nodes[0].name", "it names the node's folder), got '../x'"),
    ('[[nodes]]\nname = "a"\n[[nodes]]\nname = "a"\n', 4, "nodes[1].name", "'a' is already the name of"),
    ('[[nodes]]\ncount = 2\n[[nodes]]\nname = "node1"\n', 4, "nodes[1].name", "already the name of node 1"),
    ('[[nodes]]\ncount = 60000\n[[nodes]]\ncount = 50000\n', 4, "nodes[1].count", "more than 100,000 nodes"),
    ('repository = "nowhere"\n[[nodes]]\n', 1, "repository", "folder not found"),
    ('[[nodes]\n', 1, None, "not valid TOML"),
])
def test_a_mistake_in_a_site_file_is_one_line_naming_file_line_and_key(tmp_path, text, line, field, message):
    path = write(tmp_path, text)
    with pytest.raises(UserError) as exc:
        load_site(path)
    err = exc.value
    assert (err.file, err.line, err.field) == (str(path), line, field)
    assert message in err.message and "\n" not in str(err)
    if line is not None:
        assert str(err).startswith(f"{path}:{line}: {field + ': ' if field else ''}")


def test_the_default_site_is_one_node_per_core_with_memory_and_disk_split_evenly(tmp_path):
    cores = sorted(os.sched_getaffinity(0))
    with open("/proc/meminfo") as fh:
        mem_mb = next(int(line.split()[1]) for line in fh if line.startswith("MemTotal:")) // 1024
    data = tmp_path / "not" / "made" / "yet"
    site = default_site(data)
    free_mb = shutil.disk_usage(tmp_path).free // 2**20
    assert site.n_nodes == len(cores) and site.names == [f"node{i}" for i in range(len(cores))]
    assert [site.cpus(k) for k in range(site.n_nodes)] == [(c,) for c in cores]
    for cap in site.capacity:
        assert cap.cpu == 1.0 and cap.memory == mem_mb // len(cores)
        assert abs(cap.disk - free_mb // len(cores)) <= 64  # other helpers write meanwhile
    assert site.repository == data / "images" and site.bandwidth is None  # (the scheduler's)
    assert not data.exists()  # nothing made


def test_a_site_needs_unique_names_and_a_node():
    with pytest.raises(ValueError, match="at least one node"):
        Site(())
    with pytest.raises(ValueError, match="unique"):
        Site((SiteNode("a", ResourceTuple()), SiteNode("a", ResourceTuple())))
