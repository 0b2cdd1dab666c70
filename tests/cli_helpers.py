"""What the CLI tests share: run ``skylease`` in-process, and check a one-line user error."""

from __future__ import annotations

from skylease.cli import main


def run(capsys, *argv):
    """``skylease ARGV`` in this process: (exit code, stdout, stderr)."""
    code = main([str(a) for a in argv])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def one_line(capsys, argv, *needles):
    """Run ARGV and check it is a user error: exit 2, one line on stderr holding every needle, no
    traceback. Returns (stdout, stderr)."""
    code, out, err = run(capsys, *argv)
    assert code == 2, (argv, out, err)
    assert err.count("\n") == 1 and err.startswith("skylease"), err
    assert "Traceback" not in out + err
    for n in needles:
        assert n in err, (n, err)
    return out, err
