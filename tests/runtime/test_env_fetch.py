"""A worker that dies between finishing a call and our fetch of its result must not hang the driver
(Dask would wait forever to rerun the call on that worker, the only one it may use)."""

from __future__ import annotations

import pytest

from skylease.control.fixed import FixedPool
from skylease.model.catalog import InstanceType
from skylease.runtime.env import WorkerEnvironment, _WorkerGone
from skylease.runtime.store import ResultStore


class _Backend:
    claimed = False

    def __init__(self, alive: bool) -> None:
        self.itype = InstanceType("local")
        self._alive = alive

    def start(self, name: str) -> None:
        pass

    def alive(self, name: str) -> bool:
        return self._alive

    def workers(self) -> dict[str, str]:
        return {"local-0": "tcp://w0"} if self._alive else {}


class _Future:
    """A finished call whose result comes after ``waits`` timeouts (never, if None)."""

    def __init__(self, waits: int | None) -> None:
        self.waits, self.asked = waits, 0

    def result(self, timeout: float | None = None) -> dict:
        self.asked += 1
        if self.waits is None or self.asked <= self.waits:
            raise TimeoutError
        return {"exit_code": 0}


@pytest.fixture
def make_env(tmp_path):
    """An environment with one host at a fake worker address; its store is closed afterwards (an
    open store holds three files, which other tests count)."""
    stores: list[ResultStore] = []

    def make(alive: bool) -> WorkerEnvironment:
        stores.append(ResultStore(tmp_path / f"r{len(stores)}.sqlite"))
        env = WorkerEnvironment({"local": _Backend(alive)}, [{"id": 0, "kind": "shell", "command": "true"}],
                              stores[-1], FixedPool(1))
        (hid,) = env.acquire("local")
        env._addr[hid] = "tcp://w0"
        return env

    yield make
    for store in stores:
        store.close()


def test_the_fetch_gives_up_when_the_worker_is_gone(make_env):
    env = make_env(alive=False)
    fut = _Future(waits=None)
    with pytest.raises(_WorkerGone):
        env._fetch(env.host(0), fut)
    assert fut.asked == 1


def test_the_fetch_waits_on_while_the_worker_lives(make_env):
    env = make_env(alive=True)
    fut = _Future(waits=2)
    assert env._fetch(env.host(0), fut) == {"exit_code": 0}
    assert fut.asked == 3
