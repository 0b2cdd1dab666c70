"""Every command in the docs runs as written (docs/CONTRIBUTING.md says how blocks are marked).

A fenced shell block (``bash``, ``sh``, ``console``) marked ``<!-- runnable -->`` on the line
before it runs, in a fresh folder holding a copy of examples/ and the doc's ``<!-- file: NAME -->``
blocks, with ``skylease`` on PATH from this interpreter's environment; a ``console`` (or ``text``)
block of ``$ command`` lines and pasted output is a transcript: each command runs and the pasted
lines must appear in its output, in order. Every other shell line that calls ``skylease`` is
parsed by click without running: its command and options exist and its values convert.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
BLOCK_TIMEOUT_S = 120
SHELL = {"bash", "sh", "shell", "console"}
FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)
MARK = re.compile(r"<!--\s*(runnable|file:)\s*(.*?)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    doc: Path
    line: int  # of the opening fence
    lang: str
    text: str
    mark: str | None  # "runnable" or "file:", from the comment on the line before the fence
    words: tuple[str, ...]  # the marker's words: needs-data, any-output; or the file's name

    @property
    def id(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"

    @property
    def transcript(self) -> bool:
        return self.lang != "bash" and any(line.startswith("$ ") for line in self.text.splitlines())


def blocks(doc: Path) -> list[Block]:
    text = doc.read_text(encoding="utf-8")
    out = []
    for m in FENCE.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        mark = MARK.search(before)
        out.append(Block(doc, line, m.group(1), m.group(2), mark.group(1) if mark else None,
                         tuple(mark.group(2).split()) if mark else ()))
    return out


ALL = [b for doc in DOCS for b in blocks(doc)]
RUNNABLE = [b for b in ALL if b.mark == "runnable"]

# Blocks known not to run as written: (doc, a piece of the block's text, why), run as
# xfail(strict=False); empty now that every doc runs.
KNOWN_FAILURES: list[tuple[str, str, str]] = []


def _known_failure(b: Block) -> str | None:
    doc = str(b.doc.relative_to(ROOT))
    return next((why for d, piece, why in KNOWN_FAILURES if d == doc and piece in b.text), None)


def shell_lines(b: Block) -> list[str]:
    """The command lines of a shell block (continuations joined); of a transcript, its $ lines."""
    lines = b.text.replace("\\\n", " ").splitlines()
    if b.lang == "console" or b.transcript:
        return [line[2:] for line in lines if line.startswith("$ ")]
    return lines if b.lang in SHELL else []


SKYLEASE = re.compile(r"(?:^|(?<=[\s;&|(]))(?:[\w./-]*/)?skylease(?=\s|$)")


def _strip_comment(line: str) -> str:
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


def skylease_calls(line: str) -> list[list[str]]:
    """The argument lists of the ``skylease`` calls in one shell line (also inside ``$(...)``)."""
    calls = []
    line = _strip_comment(line)
    for m in SKYLEASE.finditer(line):
        rest = re.split(r"&&|\|\||[;|)]|\s\d*[<>]", line[m.end():], maxsplit=1)[0]  # (a redirection ends it)
        calls.append(shlex.split(rest, comments=True))
    return calls


def parse(args: list[str]) -> None:
    """Parse a skylease command line as the CLI would, without running it (click raises if wrong)."""
    from skylease.cli import click_command

    ctx = click_command().make_context("skylease", list(args))
    while hasattr(ctx.command, "resolve_command"):
        rest = [*getattr(ctx, "_protected_args", getattr(ctx, "protected_args", [])), *ctx.args]
        if not rest:
            break
        name, cmd, rest = ctx.command.resolve_command(ctx, rest)
        ctx = cmd.make_context(name, rest, parent=ctx)


CALLS = [(b, line, args) for b in ALL for line in shell_lines(b) for args in skylease_calls(line)]


@pytest.mark.parametrize(("block", "line", "args"), [pytest.param(b, line, a, id=f"{b.id} {shlex.join(a)}")
                                                     for b, line, a in CALLS])
def test_every_skylease_line_in_the_docs_parses(block: Block, line: str, args: list[str]):
    try:
        parse(args)
    except Exception as e:  # click's usage errors, whichever click typer brings
        pytest.fail(f"{block.id}: `{line.strip()}`: {getattr(e, 'format_message', e.__str__)()}")


def test_the_docs_have_runnable_blocks_and_shell_lines():
    assert len(RUNNABLE) >= 5 and len(CALLS) >= 50
    for b in ALL:
        if b.mark == "runnable":
            assert b.lang in SHELL or b.transcript, f"{b.id}: only shell blocks run"
            assert set(b.words) <= {"needs-data", "any-output"}, f"{b.id}: unknown words {b.words}"
        if b.mark == "file:":
            assert len(b.words) == 1, f"{b.id}: <!-- file: NAME -->"
    for doc, piece, _ in KNOWN_FAILURES:
        assert sum(str(b.doc.relative_to(ROOT)) == doc and piece in b.text for b in RUNNABLE) == 1, piece


def _folder(block: Block, tmp_path: Path) -> Path:
    """A fresh working folder: a copy of examples/ and the doc's file blocks."""
    work = tmp_path / "work"
    shutil.copytree(ROOT / "examples", work / "examples")
    for b in blocks(block.doc):
        if b.mark == "file:":
            (work / b.words[0]).write_text(b.text, encoding="utf-8")
    return work


def _env(block: Block, tmp_path: Path, data: Path | None) -> dict[str, str]:
    env = {**os.environ, "MPLBACKEND": "Agg",
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
           "SKYLEASE_DATA": str(data if data is not None else tmp_path / "no-data")}
    env.pop("COLUMNS", None)
    return env


_TIMING = re.compile(r"\b(in|took) [\d,.]+ ?(s|ms|min)\b")


def _lines(text: str) -> list[str]:
    return [_TIMING.sub(r"\1 <time>", line.rstrip()) for line in text.splitlines()]


def _missing_output(expected: list[str], got: list[str]) -> str | None:
    """The first pasted line that is not in the output (in order); "..." stands for any lines, and
    a line ending in "..." for any line starting the same way."""
    i = 0
    for want in expected:
        if want.strip() in ("", "..."):
            continue
        prefix = want.endswith("...")
        while i < len(got) and not (got[i].startswith(want[:-3]) if prefix else got[i] == want):
            i += 1
        if i == len(got):
            return want
        i += 1
    return None


def _transcript(block: Block) -> list[tuple[str, list[str]]]:
    steps: list[tuple[str, list[str]]] = []
    for line in block.text.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        elif steps:
            steps[-1][1].append(line)
    return steps


#: A pasted error line (docs/cli.md): ``skylease CMD: error: ...``.
ERROR_LINE = re.compile(r"^skylease( [a-z0-9-]+)*: error: ")
ASSIGNMENT = re.compile(r"^[A-Z_][A-Z0-9_]*=\S")


def _prelude(block: Block) -> str:
    """The doc's variable assignments (``S=$(skylease data path ...)``), which its commands use."""
    lines = [line for b in blocks(block.doc) if b.lang in SHELL - {"console"} for line in shell_lines(b)]
    return "".join(_strip_comment(line).rstrip() + "\n" for line in lines if ASSIGNMENT.match(line))


def _run(command: str, work: Path, env: dict[str, str], prelude: str = "") -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-e", "-o", "pipefail", "-c", prelude + command], cwd=work, env=env,
                          text=True, capture_output=True, timeout=BLOCK_TIMEOUT_S)


def _runnable_param(b: Block):
    why = _known_failure(b)
    return pytest.param(b, id=b.id, marks=[pytest.mark.xfail(strict=False, reason=why)] if why else [])


@pytest.mark.parametrize("block", [_runnable_param(b) for b in RUNNABLE])
def test_runnable_blocks_run_as_written(block: Block, tmp_path: Path, request):
    data = request.getfixturevalue("shared_data") if "needs-data" in block.words else None
    work = _folder(block, tmp_path)
    env = _env(block, tmp_path, data)
    if not block.transcript:
        r = _run(block.text, work, env)
        assert r.returncode == 0, f"{block.id}: exit {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
        return
    for command, pasted in _transcript(block):
        r = _run(command, work, env, _prelude(block))
        got = _lines(r.stdout + r.stderr)
        if "any-output" not in block.words:
            missing = _missing_output(_lines("\n".join(pasted)), got)
            assert missing is None, f"{block.id}: `{command}` did not print\n{missing}\nit printed:\n" + \
                "\n".join(got[-40:])
        wants_error = any(ERROR_LINE.match(line) for line in pasted)
        assert (r.returncode == 2) if wants_error else (r.returncode == 0), \
            f"{block.id}: `{command}`: exit {r.returncode}\n{r.stderr[-2000:]}"


def test_the_architecture_lists_every_command():
    """docs/architecture.md's layout names every top-level command the CLI has."""
    from skylease.cli import click_command

    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    entry = re.search(r"cli(?:\.py|/)\s+\[built\] `skylease` \(typer \+ rich\):(.*?)\n  \w", text, re.S)
    assert entry is not None, "docs/architecture.md: the cli/ entry of the layout moved"
    listed = {w.strip() for w in entry.group(1).replace("\n", " ").split(",")}
    assert listed == {"--version", *click_command().commands}
