"""One policy, two clocks: each scripted policy makes the same decisions with the same outcomes on
the simulated cloud and on real local workers (task times are real sleeps there).

A new kind of pool joins by adding a runner to ``RUNNERS``: it runs a scenario's script on that
pool and returns the script's record, which must equal the simulator's.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.conformance.scripts import SCENARIOS, Entry, Scenario

from skylease.runtime.env import WorkerEnvironment
from skylease.runtime.leases.ssh import SshTarget
from skylease.runtime.pools import LocalPool
from skylease.runtime.ssh_pool import PoolHost, SshPool
from skylease.runtime.store import ResultStore
from skylease.sim.env import simulate

#: Seconds a real scenario may take (its tasks sleep about 1-2 s in all).
REAL_LIMIT_S = 10.0


def run_sim(sc: Scenario, tmp_path: Path) -> tuple[list[Entry], list[int]]:
    script = sc.script()
    simulate(script, sc.tasks(), sc.pools)
    return script.log, script.done


def _sleep(work: float) -> str:
    # a host of speed s sleeps work / s, as the simulator runs it (the pool's speed is in the env)
    return f'sleep "$(awk "BEGIN {{print {work} / $SKYLEASE_SPEED}}")"'


def run_local(sc: Scenario, tmp_path: Path, backends: dict[str, Any] | None = None,
              ) -> tuple[list[Entry], list[int]]:
    script = sc.script()
    backends = backends if backends is not None else {p.name: LocalPool(p) for p in sc.pools}
    specs = [{"id": t.id, "kind": "shell", "command": _sleep(t.work)} for t in sc.tasks()]
    store = ResultStore(tmp_path / "results.sqlite")
    try:
        env = WorkerEnvironment(backends, specs, store, script)
        res = env.run(sc.tasks())
    finally:
        for b in backends.values():
            b.close()
        store.close()
    assert res.elapsed_s < REAL_LIMIT_S, res
    return script.log, script.done


def run_ssh(sc: Scenario, tmp_path: Path, site: Any) -> tuple[list[Entry], list[int]]:
    """The scenario on SSH hosts: each pool a SshPool of the test site's 4 hosts, 4 slots each."""
    hosts = [PoolHost(SshTarget(h.address, identity_file=site.key, known_hosts=site.known_hosts), 4)
             for h in site.hosts]
    backends: dict[str, Any] = {p.name: SshPool(p, hosts, "conformance") for p in sc.pools}
    try:
        for b in backends.values():
            b.connect()
    except BaseException:
        for b in backends.values():
            b.close()
        raise
    return run_local(sc, tmp_path, backends)


RUNNERS: dict[str, Callable[..., tuple[list[Entry], list[int]]]] = {"local": run_local, "ssh": run_ssh}


@pytest.fixture(scope="module")
def conformance_site(ssh_site: Any) -> Any:
    return ssh_site(4, base=180)  # 127.0.0.181-184


@pytest.mark.timeout(60)
@pytest.mark.parametrize("runner", [pytest.param(r, marks=[pytest.mark.integration] if r == "ssh" else [])
                                    for r in RUNNERS])  # (ssh: real sshd hosts, CI's second level)
@pytest.mark.parametrize("sc", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_the_same_decisions_and_outcomes_on_both_clocks(sc: Scenario, runner: str, tmp_path: Path,
                                                        request: pytest.FixtureRequest) -> None:
    sim_log, sim_done = run_sim(sc, tmp_path)
    site = (request.getfixturevalue("conformance_site"),) if runner == "ssh" else ()
    real_log, real_done = RUNNERS[runner](sc, tmp_path, *site)
    assert real_done == sim_done
    side_by_side = (f"{'=' if a == b else '!'} sim  {a}\n  {runner:5s}{b}"
                    for a, b in zip(sim_log, real_log, strict=False))
    assert real_log == sim_log, "\n".join(side_by_side)


def test_the_simulator_gives_a_second_copy_in_the_same_pool() -> None:
    """The decision the suite checks (docs/decisions/dispatch-core.md): a copy duplicated to the pool
    where the task runs takes another idle host of that pool; the first result wins."""
    sc = next(s for s in SCENARIOS if s.name == "duplicate-same-pool")
    log, done = run_sim(sc, Path())
    dup = log.index(("duplicate", 0, "a"))
    assert log[dup + 1] == ("after duplicate", ((0, "task 0"), (1, "task 0")))
    assert done == [0] and ("done", 0, 0, ((0, "idle"), (1, "idle"))) in log
