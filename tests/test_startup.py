"""The CLI starts fast: nothing heavy is imported before a command needs it (issue 25).

``skylease --help`` and argument errors must answer well under 0.3 s. Measured against the floor
every numpy program pays, in the same test: ``skylease --help`` as a whole process takes at most
:data:`HELP_BOUND` times ``python -c "import numpy"`` (medians of :data:`RUNS` paired runs; with
numpy, pandas and pydantic imported at start, as before, it took about 3 times). The list of
modules is the deterministic half of the check.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

#: Bound on median(skylease --help) / median(python -c "import numpy"). The issue's target is an answer
#: "well under 0.3 s"; `import numpy` takes 0.07-0.12 s here, so 2x keeps `--help` under about 0.25 s.
#: Measured 1.0-1.6x (0.115 s against 0.075 s at load 2); with numpy, pandas and pydantic imported at
#: start, as before issue 25, it was about 3x.
HELP_BOUND = 2.0
RUNS = 5
#: Never imported by the CLI module, `--help` or a usage error (pydantic is: typer coerces every
#: option of a command through it, from `skylease CMD --help` on).
HEAVY = ("numpy", "pandas", "matplotlib", "dask", "distributed", "numba", "highspy", "scipy", "fastapi",
         "sqlalchemy", "uvicorn", "httpx", "psycopg", "rich.traceback", "skylease.experiments",
         "skylease.sim", "skylease.planning", "skylease.runtime", "skylease.service")

PROBE = """
import sys
from skylease.cli import main
code = main(sys.argv[1:])
print("MODULES", __import__("json").dumps(sorted(sys.modules)), file=sys.stderr)
"""


def _heavy_loaded(args: list[str]) -> list[str]:
    p = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=60)
    line = next(x for x in p.stderr.splitlines() if x.startswith("MODULES "))
    mods = json.loads(line.removeprefix("MODULES "))
    return sorted(m for m in mods if m.split(".")[0] in HEAVY or m.startswith(HEAVY))


def test_cli_imports_nothing_heavy_for_help_and_usage_errors():
    assert _heavy_loaded(["--help"]) == []
    assert _heavy_loaded(["simulate", "spequlos", "--help"]) == []
    assert _heavy_loaded(["simulate", "spequlos", "--trace", "seti"]) == []  # missing options
    assert _heavy_loaded(["no-such-command"]) == []


def _wall(argv: list[str], env: dict[str, str]) -> float:
    t = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True,
                   timeout=60)
    return time.perf_counter() - t


def test_help_costs_about_what_importing_numpy_costs():
    # as an installed skylease runs: with its bytecode cached (the first, untimed, run writes it)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    numpy = [sys.executable, "-c", "import numpy"]
    help_ = [sys.executable, "-m", "skylease", "--help"]
    _wall(numpy, env), _wall(help_, env)
    pairs = [(_wall(numpy, env), _wall(help_, env)) for _ in range(RUNS)]
    base = statistics.median(a for a, _ in pairs)
    ours = statistics.median(b for _, b in pairs)
    assert ours <= HELP_BOUND * base, (
        f"skylease --help took {ours:.3f} s, {ours / base:.2f}x `python -c 'import numpy'` ({base:.3f} s); "
        f"bound {HELP_BOUND}x (medians of {RUNS} paired runs)")


def test_a_call_under_a_group_converts_only_that_group():
    """``skylease simulate spequlos ...`` builds the click commands of ``simulate`` alone (the whole
    tree costs 0.03 s of every call), with the same commands, options and prog names."""
    p = subprocess.run([sys.executable, "-c", PROBE, "simulate", "spequlos", "--trace", "seti"],
                       capture_output=True, text=True, timeout=60)
    line = next(x for x in p.stderr.splitlines() if x.startswith("MODULES "))
    mods = json.loads(line.removeprefix("MODULES "))
    assert "click" not in mods  # typer vendors click: the package itself is not needed
    assert "skylease simulate spequlos: error: --middleware: missing" in p.stderr
    from skylease.cli import click_command

    full, pruned = click_command(), click_command("simulate")
    assert list(pruned.commands) == ["simulate"]
    a, b = full.commands["simulate"], pruned.commands["simulate"]
    assert sorted(a.commands) == sorted(b.commands)
    for name, cmd in a.commands.items():
        assert [p.opts for p in cmd.params] == [p.opts for p in b.commands[name].params]


def test_leases_simulate_on_an_swf_log_imports_no_pandas(tmp_path):
    """0.2 s of the 30-day Blue Horizon run was importing pandas to read the log."""
    log = tmp_path / "w.swf"
    log.write_text("".join(f"{n} {10 * n} 0 50 1 -1 -1 2 100 -1 1 1 1 -1 1 1 -1 -1\n" for n in range(1, 6)))
    p = subprocess.run([sys.executable, "-c", PROBE, "leases", "simulate", "--workload", str(log)],
                       capture_output=True, text=True, timeout=60)
    assert "5 leases" in p.stdout, p.stderr
    line = next(x for x in p.stderr.splitlines() if x.startswith("MODULES "))
    assert [m for m in json.loads(line.removeprefix("MODULES ")) if m.split(".")[0] == "pandas"] == []


def test_the_spequlos_library_loads_no_file_schemas():
    """Instance types live apart from the catalogs' pydantic file models (skylease.model.instance),
    and a generated trace needs no file reader: the SpeQuloS library imports neither."""
    code = ("import sys, skylease.experiments.spequlos, skylease.sim.dg.env; "
            "print(sorted(m for m in sys.modules "
            "if m == 'skylease.model.files' or m.split('.')[0] == 'pydantic'))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.stdout.strip() == "[]", p.stderr
    from skylease.model import InstanceType
    from skylease.model.catalog import InstanceType as FromCatalog
    from skylease.traces.avail import read_text

    assert InstanceType is FromCatalog and callable(read_text)
