"""The on-disk cache of generated and SWF-derived traces (skylease.traces.cache): built once, read
back equal, keyed by generator, parameters, seed and version, written atomically, never trusted."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import skylease
from skylease.model.availability import Availability, AvailabilityTrace
from skylease.sim.dg.flat import FlatTrace
from skylease.traces import cache, dg, swf
from skylease.traces.avail import load_trace

DAY = 86400.0
SMALL = {"n_nodes": 40, "duration_s": 3 * DAY}


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache of this test's own."""
    monkeypatch.setenv("SKYLEASE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Counts the calls of the two generators (the cache calls them only on a miss)."""
    calls: list[str] = []
    for name in ("seti_like", "nd_like"):
        real = getattr(dg, name)

        def counted(*a, _real=real, _name=name, **k):
            calls.append(_name)
            return _real(*a, **k)

        counted.__name__ = name
        monkeypatch.setattr(dg, name, counted)
    return calls


def entries(root: Path) -> list[Path]:
    return sorted((root / "traces").glob("*")) if (root / "traces").is_dir() else []


def test_built_once_then_read_back_equal(root, builds):
    a = load_trace("seti", seed=7, **SMALL)
    assert builds == ["seti_like"] and len(entries(root)) == 1
    b = load_trace("seti", seed=7, **SMALL)
    assert builds == ["seti_like"]  # the second call read the cache
    assert a == b and b == dg.seti_like(seed=7, **SMALL)
    assert (b.name, b.start, b.end, b.origin) == ("seti", 0.0, 3 * DAY, None)
    assert b.meta["kappa"] == dg.SETI_KAPPA
    # the simulators' flat form of the cached trace is the generated one's, array for array
    fa, fb = FlatTrace(a), FlatTrace(b)
    for f in ("starts", "ends", "lo", "hi"):
        assert np.array_equal(getattr(fa, f), getattr(fb, f))


def test_key_is_generator_parameters_seed_and_version(root, builds, monkeypatch):
    load_trace("nd", seed=1, **SMALL)
    load_trace("nd", seed=2, **SMALL)
    load_trace("nd", seed=1, n_nodes=41, duration_s=3 * DAY)
    load_trace("nd", seed=1, n_nodes=40, duration_s=4 * DAY)
    load_trace("seti", seed=1, **SMALL)
    assert len(builds) == 5 and len(entries(root)) == 5
    monkeypatch.setattr(skylease, "__version__", "99.0", raising=False)
    load_trace("nd", seed=1, **SMALL)
    assert len(builds) == 6 and len(entries(root)) == 6


def test_unseeded_and_generator_seeds_are_not_cached(root, builds):
    load_trace("nd", seed=None, **SMALL)
    load_trace("nd", seed=np.random.default_rng(3), **SMALL)
    assert len(builds) == 2 and entries(root) == []


def _corrupt_truncate(entry: Path) -> None:
    p = entry / "starts.npy"
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])


def _corrupt_flip(entry: Path) -> None:  # one bit of one end: still a valid-looking .npy
    p = entry / "ends.npy"
    data = bytearray(p.read_bytes())
    data[-3] ^= 0x10
    p.write_bytes(bytes(data))


def _corrupt_head(entry: Path) -> None:
    (entry / "head.json").write_text("{not json")


def _corrupt_missing(entry: Path) -> None:
    (entry / "bounds.npy").unlink()


def _corrupt_consistent(entry: Path) -> None:
    """Overlapping intervals with matching checksums: only the interval rules can catch it."""
    e = np.load(entry / "ends.npy")
    e[0] = e[1] + 10.0  # interval 0 now overlaps interval 1 of the same node
    np.save(entry / "ends.npy", e)
    head = json.loads((entry / "head.json").read_text())
    head["crc32c"]["ends"] = cache._crc(e)
    (entry / "head.json").write_text(json.dumps(head))


def _corrupt_foreign(entry: Path) -> None:
    head = json.loads((entry / "head.json").read_text())
    head["key"] = "0" * 64
    (entry / "head.json").write_text(json.dumps(head))


@pytest.mark.parametrize("corrupt", [_corrupt_truncate, _corrupt_flip, _corrupt_head, _corrupt_missing,
                                     _corrupt_consistent, _corrupt_foreign])
def test_a_corrupt_entry_is_rebuilt_never_trusted(root, builds, corrupt):
    good = load_trace("nd", seed=4, **SMALL)
    (entry,) = entries(root)
    corrupt(entry)
    again = load_trace("nd", seed=4, **SMALL)
    assert builds == ["nd_like", "nd_like"]  # rebuilt, not read
    assert again == good
    assert entries(root) == [entry]  # replaced in place, no leftovers
    assert load_trace("nd", seed=4, **SMALL) == good and len(builds) == 2  # and readable again


def test_write_is_atomic_a_failed_write_leaves_nothing(root, builds, monkeypatch):
    real_save = np.save
    calls = []

    def failing_save(f, a, **k):
        calls.append(1)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        real_save(f, a, **k)

    monkeypatch.setattr(cache.np, "save", failing_save)
    tr = load_trace("nd", seed=9, **SMALL)
    assert tr == dg.nd_like(seed=9, **SMALL)  # the caller still gets its trace
    assert entries(root) == []  # no entry, no half-written temporary folder
    assert list((root / "traces").iterdir()) == []


def test_off_switch_and_unwritable_folder(tmp_path, builds, monkeypatch):
    monkeypatch.setenv("SKYLEASE_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.setenv("SKYLEASE_NO_CACHE", "1")
    assert cache.cache_dir() is None
    load_trace("nd", seed=1, **SMALL)
    load_trace("nd", seed=1, **SMALL)
    assert len(builds) == 2 and not (tmp_path / "c").exists()
    monkeypatch.delenv("SKYLEASE_NO_CACHE")
    (tmp_path / "file").write_text("not a folder")
    monkeypatch.setenv("SKYLEASE_CACHE_DIR", str(tmp_path / "file"))
    assert load_trace("nd", seed=1, **SMALL) == dg.nd_like(seed=1, **SMALL)  # no error, no cache


def test_cache_folder_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv("SKYLEASE_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_dir() == tmp_path / "xdg" / "skylease"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache.cache_dir() == tmp_path / "home" / ".cache" / "skylease"
    monkeypatch.setenv("SKYLEASE_CACHE_DIR", str(tmp_path / "mine"))
    assert cache.cache_dir() == tmp_path / "mine"
    monkeypatch.setenv("SKYLEASE_NO_CACHE", "0")  # 0 is "not off"
    assert cache.cache_dir() == tmp_path / "mine"


def test_swf_availability_is_cached_under_the_file_content(root, shared_data, monkeypatch, tmp_path):
    a = load_trace("g5klyo", data_dir=shared_data)
    calls = []
    real = swf.read_swf
    monkeypatch.setattr(swf, "read_swf", lambda p: calls.append(p) or real(p))
    b = load_trace("g5klyo", data_dir=shared_data)
    assert calls == [] and a == b and b.meta["procs_per_node"] == 8
    # a changed log is another entry, even under the same name
    log = tmp_path / "blue.swf"
    text = (shared_data / "swf" / "blue_30days.swf").read_text()
    log.write_text(text)
    c = load_trace(str(log))
    log.write_text(text.replace("\n1 ", "\n1  ", 1) + "\n")
    load_trace(str(log))
    assert len(calls) == 2 and c.n_nodes > 0


def test_from_flat_checks_every_node_at_once():
    b = np.array([0, 2, 2, 3])
    t = AvailabilityTrace.from_flat("x", np.array([0.0, 5, 1]), np.array([2.0, 6, np.inf]), b, 0.0, 10.0)
    assert [len(a) for a in t.nodes] == [2, 0, 1]
    assert t == AvailabilityTrace("x", (Availability(np.array([0.0, 5]), np.array([2.0, 6])),
                                        Availability(np.empty(0), np.empty(0)),
                                        Availability(np.array([1.0]), np.array([np.inf]))), 0.0, 10.0)
    starts, _ends, bounds = t.flat_intervals()
    assert starts is t.flat_intervals()[0] and list(bounds) == [0, 2, 2, 3]
    bad = [
        (np.array([0.0, 1, 1]), np.array([2.0, 6, 3]), b),  # overlap inside node 0
        (np.array([0.0, 5, 1]), np.array([0.0, 6, 3]), b),  # empty interval
        (np.array([0.0, 5, 1]), np.array([np.inf, 6, 3]), b),  # inf before a node's last end
        (np.array([0.0, 5, 1]), np.array([2.0, 6, 3]), np.array([0, 2, 4])),  # bounds past the end
        (np.array([0.0, 5, 1]), np.array([2.0, 6, 3]), np.array([0, 3, 2, 3])),  # falling bounds
        (np.array([np.nan, 5, 1]), np.array([2.0, 6, 3]), b),
        (np.array([0.0, 5, 1]), np.array([2.0, 6, np.nan]), b),  # a NaN last end (let through before)
        (np.array([0.0, 5, -np.inf]), np.array([2.0, 6, 3]), b),
    ]
    for s, e, bb in bad:
        with pytest.raises(ValueError):
            AvailabilityTrace.from_flat("x", s, e, bb, 0.0, 10.0)
    # touching nodes are not overlapping: node 1 may start before node 0 ends
    AvailabilityTrace.from_flat("x", np.array([5.0, 0]), np.array([9.0, 1]), np.array([0, 1, 2]), 0.0, 10.0)


def test_from_flat_makes_node_objects_only_when_asked():
    """A simulation on the flat arrays never uses the nodes: 30,300 objects on seti are not made."""
    import copy
    import pickle

    from skylease.sim.dg.flat import flatten

    b = np.array([0, 2, 2, 3])
    t = AvailabilityTrace.from_flat("x", np.array([0.0, 5, 1]), np.array([2.0, 6, np.inf]), b, 0.0, 10.0)
    flat = flatten(t)
    assert t.n_nodes == 3 and flat.n_nodes == 3 and "nodes" not in vars(t)
    for other in (pickle.loads(pickle.dumps(t)), copy.deepcopy(t)):
        assert other == t
    assert [len(a) for a in t.nodes] == [2, 0, 1] and "nodes" in vars(t) and t.nodes is t.nodes
    with pytest.raises(AttributeError):
        t.missing  # noqa: B018
    with pytest.raises(ValueError):
        AvailabilityTrace.from_flat("x", np.array([0.0]), np.array([1.0]), np.array([0, 1]), 5.0, 1.0)
