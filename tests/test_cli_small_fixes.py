"""The smaller mistakes of issue 18, item 7, as a user meets them on the command line."""

from __future__ import annotations

import re
import shutil
import socket
import threading
from pathlib import Path

import click
import pytest

from skylease.cli import click_command
from skylease.traces import datasets

from .cli_helpers import one_line, run

ROOT = Path(__file__).resolve().parents[1]


# -- an unreachable scheduler leaves nothing behind -------------------------------------------------
@pytest.fixture
def garbage_server():
    """Something listening that is not a Dask scheduler: it answers every connection with junk."""
    srv = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            with conn:
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n" * 4)
    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield f"tcp://127.0.0.1:{srv.getsockname()[1]}"
    stop.set()
    t.join()
    srv.close()


@pytest.mark.parametrize("command", [
    ["reproduce", "a2ha", "--quick"], ["reproduce", "haizea", "--quick"],
    ["reproduce", "spequlos", "--quick"], ["reproduce", "thesis-mapping", "--quick"],
    ["demo", "--seeds", "1"],
])
def test_a_bad_scheduler_or_too_many_workers_is_one_line_and_creates_nothing(
        command, tmp_path, capsys, monkeypatch, shared_data, garbage_server):
    monkeypatch.setenv("SKYLEASE_DATA", str(shared_data))
    for address in ("tcp://127.0.0.1:1", garbage_server):
        out_dir = tmp_path / "X"
        one_line(capsys, [*command, "--scheduler", address, "--out", out_dir], "--scheduler",
                 "cannot reach the Dask scheduler")
        assert not out_dir.exists()
    # more local worker processes than cores cannot run the cells sooner: refused, nothing created
    one_line(capsys, [*command, "--processes", "100000", "--out", tmp_path / "W"], "--processes", "from 1 to")
    assert not (tmp_path / "W").exists()


# -- help that reads -------------------------------------------------------------------------------
def _commands(cmd: click.Command, ctx: click.Context, path: tuple[str, ...] = ()):
    if hasattr(cmd, "list_commands"):  # a group (typer's, or click's)
        for name in cmd.list_commands(ctx):
            yield from _commands(cmd.get_command(ctx, name), ctx, (*path, name))
    yield path, cmd


def test_no_short_help_is_cut_at_an_abbreviation(capsys):
    root = click_command()
    listed = list(_commands(root, click.Context(root)))
    assert len(listed) > 30
    for path, cmd in listed:
        short = cmd.get_short_help_str(limit=1000)
        assert not re.search(r"\b(Figs?|Tabs?|ch|chap|Eqs?|eqs?|e\.g|i\.e|cf|vs|al|Sec|sec)\.$", short), (
            path, short)
    code, out, _ = run(capsys, "reproduce", "--help")
    assert code == 0 and "Figs." not in out and "A2HA paper: Figures 9-12" in " ".join(out.split())


# -- the data sets: copyable URLs, checked files ----------------------------------------------------
def test_data_lists_every_source_url_whole(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "60")  # a narrow terminal used to cut them to "https://raw.githubu…"
    code, out, _ = run(capsys, "data", "--dir", tmp_path)
    assert code == 0
    lines = out.splitlines()
    for ds in datasets.DATASETS:
        url = ds.homepage or ds.urls[0]
        assert any(line.split() == [ds.name, url] for line in lines), (ds.name, url)
    assert "…" not in out.split("Where each comes from:")[1]


def test_data_import_refuses_a_file_that_is_not_the_data_set(capsys, tmp_path, shared_data):
    ds = datasets.get("power")
    src = tmp_path / "copy"
    shutil.copytree(shared_data / ds.folder, src)
    wrong = ds.files[2]
    (src / wrong).write_text("0 1 2 3 4 5 6 7 8 9 10\n")
    dest = tmp_path / "data"
    one_line(capsys, ["data", "import", "power", src, "--dir", dest], wrong, ds.digest(wrong),
                      datasets.content_sha256(src / wrong), "nothing was imported")
    assert not dest.exists()
    (src / wrong).write_bytes((shared_data / ds.folder / wrong).read_bytes())
    code, _, err = run(capsys, "data", "import", "power", src, "--dir", dest)
    assert code == 0, err
    assert datasets.locate("power", dest) == dest / ds.folder


# -- lease workloads ------------------------------------------------------------------------------
@pytest.mark.parametrize("name, text", [
    ("empty.txt", ""), ("blank.lwf", "\n# only a comment\n\n"), ("empty.swf", "; header only\n"),
    ("none.lwf", '<lease-workload name="x"><lease-requests></lease-requests></lease-workload>\n'),
])
def test_an_empty_lease_workload_is_refused(capsys, tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    one_line(capsys, ["leases", "simulate", "--workload", path], f"{path}:1:", "no lease request")


def test_an_empty_injection_is_refused(capsys, tmp_path, shared_data):
    empty = tmp_path / "none.lwf"
    empty.write_text("")
    one_line(capsys, ["leases", "simulate", "--workload", shared_data / "lwf/scenarios/preemption.lwf",
                      "--inject", empty], f"{empty}:1:", "no lease request")


def test_an_error_prints_the_user_s_text_as_typed_without_emoji_codes(capsys):
    # rich turns ':smile:'-like text into emoji unless told not to; a workload spec is the user's text
    _, err = one_line(capsys, ["simulate", "a2ha", "--workload", "nonsense:smile:"], "nonsense:smile:")
    assert "\N{SMILING FACE WITH OPEN MOUTH AND SMILING EYES}" not in err
