"""``skylease run -``: a job of shell lines read from standard input, kept in the output folder.

Standard input takes one format only: shell commands, one a line, as a text job file (blank lines
and ``#`` comments skipped). A TOML job or a callable needs a file (a TOML file names a CSV file
beside it; a callable needs ``--args FILE``).

Decisions of ours (the issue is silent):

* The text read is kept as ``OUT/stdin-job.txt`` (written when the output folder is made, before
  the result store), so the run can be finished later: ``skylease run - --out OUT --resume`` reads
  that copy when standard input is a terminal or empty (the command a stopped run prints is run
  from a terminal, or from a script with nothing piped in). Commands piped in on a resume must be
  the same job (the run's fingerprint is checked, as for a file).
* At most :data:`MAX_STDIN_BYTES` are read: more is refused in one line before anything starts
  (``yes | skylease run -`` must not fill the memory); a job that large belongs in a file.
* A terminal on standard input without ``--resume`` is refused at once (nothing would run until
  Ctrl-D): ``skylease run -`` is for a pipe or a redirection.
"""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any

from skylease.experiments.store import atomic_write_text
from skylease.model.errors import UserError
from skylease.runtime.jobs import STDIN, Job, load_job, text_job

#: The copy of a job read from standard input, in the run's output folder.
STDIN_COPY = "stdin-job.txt"
#: The most bytes ``skylease run -`` reads from standard input.
MAX_STDIN_BYTES = 64 * 2**20
_WHERE = "standard input"


def load_run_job(spec: str, args: str | None, out: Path, *, resume: bool = False,
                 stdin: IO[Any] | None = None) -> Job:
    """The job of a run: ``load_job(spec)``, or for ``spec`` ``-`` the shell lines on ``stdin``
    (on a resume, the copy kept in ``out`` when nothing is piped in)."""
    if spec != STDIN:
        return load_job(spec, args=args)
    if args is not None:
        raise UserError("goes with a callable job (module:function), not with - (shell lines on "
                        "standard input)", field="--args")
    text = _read(stdin)
    if text is None or (resume and not text.strip()):
        kept = Path(out) / STDIN_COPY
        if not resume:
            raise UserError("standard input is a terminal: pipe the commands in "
                            "(e.g. `seq 3 | sed 's/^/echo /' | skylease run -`)", file=_WHERE)
        if not kept.is_file():
            raise UserError(f"nothing piped in, and no {STDIN_COPY} kept here to resume from "
                            "(was the run read from standard input?)", file=out)
        from skylease.model.files import read_text

        text = read_text(kept)
    return _with_text(text_job(text, STDIN, "stdin"), text)


def _read(stdin: IO[Any] | None) -> str | None:
    """The text on ``stdin``; None for a terminal (or no stream)."""
    if stdin is None:
        return None
    try:
        if stdin.isatty():
            return None
    except (AttributeError, ValueError):  # a closed or unusual stream: read it as it is
        pass
    raw: bytes | str = (stdin.buffer if hasattr(stdin, "buffer") else stdin).read(MAX_STDIN_BYTES + 1)
    if len(raw) > MAX_STDIN_BYTES:
        raise UserError(f"more than {MAX_STDIN_BYTES // 2**20} MiB: write the job to a file and run "
                        "that", file=_WHERE)
    if isinstance(raw, str):
        return raw
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise UserError("not text (invalid UTF-8)", file=_WHERE, line=line) from None


def _with_text(job: Job, text: str) -> Job:
    from dataclasses import replace

    return replace(job, text=text)


def keep_stdin_job(job: Job, out: Path) -> None:
    """Keep the text of a job read from standard input in the output folder (its resume reads it);
    nothing for a job from a file, or when the copy is already there (a resume)."""
    if job.source != STDIN or job.text is None:
        return
    kept = Path(out) / STDIN_COPY
    if not kept.exists():
        atomic_write_text(kept, job.text)
