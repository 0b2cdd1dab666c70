"""The Python examples in the how-tos run as written (docs stay true)."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs" / "howto"


def python_blocks(name):
    return re.findall(r"```python\n(.*?)```", (DOCS / name).read_text(), flags=re.S)


@pytest.mark.parametrize("name", ["simulate.md", "map.md", "a2ha.md", "traces.md",
                                  "spequlos.md", "leases.md", "place.md"])
def test_howto_examples_run(name, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    blocks = python_blocks(name)
    assert blocks
    for code in blocks:
        exec(compile(code, f"{name}", "exec"), {"__name__": "docs_example"})
    out = capsys.readouterr().out
    if name == "simulate.md":
        assert out.splitlines()[0] == "900.0 1.0 10"
    if name in ("leases.md", "place.md"):  # the output pasted under the example
        text = (DOCS / name).read_text()
        assert out.strip() and all(line in text for line in out.splitlines())
        if name == "leases.md":
            assert (tmp_path / "mine.png").is_file()


def test_the_campaign_example_runs_saved_as_a_script(tmp_path):
    """campaigns.md says: save it as campaign.py and run `python campaign.py`. Its workers are
    spawned processes that import the script, so this is how the example must be checked."""
    (code,) = python_blocks("campaigns.md")
    (tmp_path / "campaign.py").write_text(code)
    r = subprocess.run([sys.executable, "campaign.py"], cwd=tmp_path, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "makespan_s" in r.stdout and (tmp_path / "runs" / "pools" / "results.csv").is_file()
