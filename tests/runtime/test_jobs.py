"""Loading jobs: text files, TOML grids and CSVs, callables with args files, and every user mistake."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skylease.model.errors import UserError
from skylease.runtime.jobs import Job, JobTask, load_job, substitute

ROOT = Path(__file__).resolve().parents[2]
# a command that prints its arguments as a JSON list: what the shell really passed
ARGV = f"{shlex.quote(sys.executable)} -c 'import json, sys; print(json.dumps(sys.argv[1:]))'"


def write(tmp: Path, name: str, text: str) -> Path:
    p = tmp / name
    p.write_text(text, encoding="utf-8")
    return p


def toml_str(s: str) -> str:
    """A TOML basic string for any text (every character outside printable ASCII escaped)."""
    return '"' + "".join(
        c if c.isascii() and c.isprintable() and c not in '"\\' else f"\\U{ord(c):08x}" for c in s
    ) + '"'


def argv_of(command: str) -> list[str]:
    out = subprocess.run(["sh", "-c", command], capture_output=True, check=True)
    return json.loads(out.stdout)


def user_error(spec: str, **kw) -> UserError:
    with pytest.raises(UserError) as info:
        load_job(spec, **kw)
    return info.value


# -- text files -----------------------------------------------------------------------------------


def test_text_file_skips_comments_and_blank_lines(tmp_path: Path) -> None:
    p = write(tmp_path, "jobs.txt", "# header\nsleep 0.5\n\n   \n  # indented comment\necho a && sleep 1\n"
              "  echo  padded  \n")
    job = load_job(str(p))
    assert job.name == "jobs" and job.source == str(p) and job.options == {}
    assert [t.command for t in job.tasks] == ["sleep 0.5", "echo a && sleep 1", "echo  padded"]
    assert [t.id for t in job.tasks] == [0, 1, 2]
    assert [t.source_line for t in job.tasks] == [2, 6, 7]
    assert {t.kind for t in job.tasks} == {"shell"}
    assert job.tasks[1].label == "echo a && sleep 1"


def test_long_label_is_cut_in_the_middle(tmp_path: Path) -> None:
    cmd = "render --scene " + "x" * 100 + " --frame 17"
    task = load_job(str(write(tmp_path, "j.txt", cmd + "\n"))).tasks[0]
    assert task.command == cmd
    assert len(task.label) == 60 and "…" in task.label
    assert task.label.startswith("render --scene") and task.label.endswith("--frame 17")


def test_example_files_load() -> None:
    sleep = load_job(str(ROOT / "examples" / "sleep-jobs.txt"))
    assert 20 <= len(sleep.tasks) <= 30
    sweep = load_job(str(ROOT / "examples" / "sweep.toml"))
    assert len(sweep.tasks) == 6
    csv_job = load_job(str(ROOT / "examples" / "sweep-csv.toml"))
    assert len(csv_job.tasks) == 4


# -- TOML grids -----------------------------------------------------------------------------------


def test_grid_is_the_product_in_key_order_last_key_fastest(tmp_path: Path) -> None:
    p = write(tmp_path, "sweep.toml", 'command = "run {frame} {scene} {out}"\nretries = 2\n'
              'timeout = 30\n[grid]\nscene = ["a b", "c"]\nframe = [1, 2, 3]\nout = ["o"]\n')
    job = load_job(str(p))
    assert job.name == "sweep" and job.options == {"retries": 2, "timeout": 30.0}
    assert [t.command for t in job.tasks] == [
        "run 1 'a b' o", "run 2 'a b' o", "run 3 'a b' o", "run 1 c o", "run 2 c o", "run 3 c o",
    ]
    assert [t.id for t in job.tasks] == list(range(6))
    assert all(t.source_line is None for t in job.tasks)


def test_format_spec_literal_braces_and_booleans(tmp_path: Path) -> None:
    p = write(tmp_path, "j.toml", 'command = "echo {{x}} {frame:04d} {flag}"\n'
              "[grid]\nframe = [7]\nflag = [true]\n")
    assert load_job(str(p)).tasks[0].command == "echo {x} 0007 true"


def test_hostile_value_is_one_argument_through_sh(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    value = f"a b; touch {marker}; $(touch {marker}) `touch {marker}` ' \" \\ * ~ \n x"
    toml = f"command = {toml_str(ARGV + ' {v} end')}\n[grid]\nv = [{toml_str(value)}]\n"
    p = write(tmp_path, "j.toml", toml)
    assert argv_of(load_job(str(p)).tasks[0].command) == [value, "end"]
    assert not marker.exists()


@settings(max_examples=200, deadline=None)
@given(a=st.text(), b=st.text())
def test_quoting_round_trips_through_shlex(a: str, b: str) -> None:
    with tempfile.TemporaryDirectory() as d:
        p = write(Path(d), "j.toml", f'command = "cmd {{a}} {{b}}"\n[grid]\na = [{toml_str(a)}]\n'
                  f"b = [{toml_str(b)}]\n")
        cmd = load_job(str(p)).tasks[0].command
    assert shlex.split(cmd) == ["cmd", a, b]


@settings(max_examples=15, deadline=None)
@given(values=st.lists(st.text(st.characters(exclude_characters="\x00", exclude_categories=["Cs"])),
                       min_size=1, max_size=3))
def test_quoted_values_reach_the_command_intact(values: list[str]) -> None:
    names = [f"v{i}" for i in range(len(values))]
    template = ARGV + "".join(f" {{{n}}}" for n in names)
    assert argv_of(substitute(template, dict(zip(names, values, strict=True)))) == values


# -- CSV and callables ----------------------------------------------------------------------------


def test_csv_job_one_task_per_row_with_row_lines(tmp_path: Path) -> None:
    write(tmp_path, "params.csv", "a, b\n1, x y\n\n2,\"q,r\"\n")
    (tmp_path / "sub").mkdir()
    p = write(tmp_path / "sub", "j.toml", 'command = "f {b} {a}"\ncsv = "../params.csv"\n')
    job = load_job(str(p))
    assert [t.command for t in job.tasks] == ["f 'x y' 1", "f q,r 2"]
    assert [t.source_line for t in job.tasks] == [2, 4]


def test_callable_job_with_csv_gives_string_kwargs(tmp_path: Path) -> None:
    write(tmp_path, "p.csv", "text,width\nab cd,2\n")
    job = load_job(str(write(tmp_path, "j.toml", 'callable = "textwrap:fill"\ncsv = "p.csv"\n')))
    assert [(dict(t.kwargs), t.source_line) for t in job.tasks] == [({"text": "ab cd", "width": "2"}, 2)]


def test_callable_job_with_grid_gives_kwargs(tmp_path: Path) -> None:
    p = write(tmp_path, "j.toml", 'callable = "builtins:int"\n[grid]\nx = ["ff", "10"]\nbase = [16]\n')
    job = load_job(str(p))
    assert [(t.kind, t.target, t.args, dict(t.kwargs)) for t in job.tasks] == [
        ("python", "builtins:int", (), {"x": "ff", "base": 16}),
        ("python", "builtins:int", (), {"x": "10", "base": 16}),
    ]


def test_callable_job_with_args_file(tmp_path: Path) -> None:
    args = write(tmp_path, "args.json", json.dumps([["a b", 1], {"text": "b", "width": 5}, "c"]))
    job = load_job("textwrap:fill", args=str(args))
    assert job.name == "fill" and job.source == "textwrap:fill"
    assert [(t.args, dict(t.kwargs)) for t in job.tasks] == [
        (("a b", 1), {}), ((), {"text": "b", "width": 5}), (("c",), {}),
    ]
    assert [t.kind for t in job.tasks] == ["python"] * 3
    assert job.tasks[0].label == "textwrap:fill('a b', 1)"
    assert job.tasks[1].label == "textwrap:fill(text='b', width=5)"


def test_json_round_trip_and_fingerprint(tmp_path: Path) -> None:
    args = write(tmp_path, "args.json", json.dumps([[1, [2, 3]], {"k": {"x": None}}]))
    job = load_job("builtins:dict", args=str(args))  # no signature: not checked
    for t in job.tasks:
        assert JobTask.from_json(json.loads(json.dumps(t.to_json()))) == t
    text = load_job(str(write(tmp_path, "j.txt", "echo a\necho b\n")))
    again = load_job(str(write(tmp_path, "k.txt", "# a comment moves the lines\n\necho a\necho b\n")))
    assert again.fingerprint() == text.fingerprint()  # labels and lines are not what a task does
    changed = load_job(str(write(tmp_path, "l.txt", "echo a\necho c\n")))
    assert changed.fingerprint() != text.fingerprint()
    swapped = Job("j", "x", (text.tasks[1], text.tasks[0]))
    assert swapped.fingerprint() != text.fingerprint()
    assert len(text.fingerprint()) == 64


# -- the run options of a job file ----------------------------------------------------------------


def test_retries_and_timeout_are_the_run_options_of_a_job_file(tmp_path: Path) -> None:
    p = write(tmp_path, "j.toml", 'command = "true"\nretries = 3\ntimeout = 2.5\n')
    assert load_job(str(p)).options == {"retries": 3, "timeout": 2.5}
    assert load_job(str(write(tmp_path, "k.toml", 'command = "true"\n'))).options == {}
    assert load_job(str(ROOT / "examples" / "sweep.toml")).options == {"retries": 1}


@pytest.mark.parametrize(("text", "line", "field", "message"), [
    ("retries = -1", 2, "retries", "must be a whole number >= 0 and <= 100, got -1"),
    ('retries = "2"', 2, "retries", "must be a whole number >= 0 and <= 100, got '2'"),
    ("retries = 1.5", 2, "retries", "must be a whole number >= 0 and <= 100, got 1.5"),
    ("retries = 101", 2, "retries", "must be a whole number >= 0 and <= 100, got 101"),
    ("timeout = -5", 2, "timeout", "must be a finite number > 0, got -5"),
    ("timeout = inf", 2, "timeout", "must be a finite number > 0, got inf"),
    ("retires = 2", 2, "retires", "unknown key 'retires'; did you mean 'retries'?"),
    ('pool = "big"', 2, "pool", "unknown key 'pool'; the keys are command, callable, grid, csv, retries, "
     "timeout"),
    ("[grid]\na = [1]\n[grid.sub]\nb = [2]", 4, "grid.sub", "must be a list of values, got a table"),
    ("[gird]\na = [1]", 2, "gird", "unknown key 'gird'; did you mean 'grid'?"),
])
def test_a_wrong_or_unknown_key_names_file_line_and_key(tmp_path: Path, text: str, line: int,
                                                       field: str, message: str) -> None:
    p = write(tmp_path, "j.toml", f'command = "echo {{a}}"\n{text}\n' if "grid" in text
              else f'command = "true"\n{text}\n')
    e = user_error(str(p))
    assert (e.file, e.line, e.field, e.message) == (str(p), line, field, message)


# -- user mistakes --------------------------------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    e = user_error(str(tmp_path / "nope.txt"))
    assert e.file == str(tmp_path / "nope.txt") and "not found" in e.message


def test_empty_job(tmp_path: Path) -> None:
    p = write(tmp_path, "j.txt", "# only\n\n")
    e = user_error(str(p))
    assert (e.file, e.line) == (str(p), 1) and "no commands" in e.message


def test_toml_syntax_error_has_the_line(tmp_path: Path) -> None:
    p = write(tmp_path, "j.toml", 'command = "x {a}"\n[grid]\na = [1, 2\nb = 3\n')
    e = user_error(str(p))
    assert e.file == str(p) and e.line == 4 and "not valid TOML" in e.message and "line" not in e.message


@pytest.mark.parametrize(("text", "line", "word"), [
    ('retries = 1\n[grid]\na = [1]\n', 1, "neither"),
    ('# c\ncommand = "x"\ncallable = "math:sqrt"\n', 2, "both"),
])
def test_command_xor_callable(tmp_path: Path, text: str, line: int, word: str) -> None:
    e = user_error(str(write(tmp_path, "j.toml", text)))
    assert e.line == line and word in e.message


def test_unknown_placeholder(tmp_path: Path) -> None:
    p = write(tmp_path, "j.toml", '# c\ncommand = "x {a} {bb}"\n[grid]\na = [1]\n')
    e = user_error(str(p))
    assert (e.file, e.line, e.field) == (str(p), 2, "command") and "{bb}" in e.message


def test_unused_parameter(tmp_path: Path) -> None:
    p = write(tmp_path, "j.toml", 'command = "x {a}"\n[grid]\na = [1]\n\nb = [2]\n')
    e = user_error(str(p))
    assert (e.line, e.field) == (5, "b") and "never used" in e.message


@pytest.mark.parametrize("template", ["x {a", "x a}", "x {a!r}", "x {a.b}", "x {0}", "x {}", "x {a:{a}}"])
def test_malformed_template(tmp_path: Path, template: str) -> None:
    p = write(tmp_path, "j.toml", f"\ncommand = {toml_str(template)}\n[grid]\na = [1]\n")
    e = user_error(str(p))
    assert (e.line, e.field) == (2, "command") and "malformed" in e.message


@pytest.mark.parametrize(("grid", "word"), [
    ("a = 3", "must be a list"), ("a = []", "empty"), ("a = [1979-05-27]", "values must be"),
    ("a = [[1, 2]]", "values must be"),
])
def test_bad_grid_value(tmp_path: Path, grid: str, word: str) -> None:
    p = write(tmp_path, "j.toml", f'command = "x {{a}} {{b}}"\n[grid]\nb = [1]\n{grid}\n')
    e = user_error(str(p))
    assert e.line == 4 and e.field == "grid.a" and word in e.message


def test_bad_format_spec_names_the_parameter(tmp_path: Path) -> None:
    p = write(tmp_path, "j.toml", 'command = "x {a:04d}"\n[grid]\na = ["s"]\n')
    e = user_error(str(p))
    assert (e.line, e.field) == (1, "a") and "cannot format" in e.message


def test_csv_missing_column(tmp_path: Path) -> None:
    csv_path = write(tmp_path, "p.csv", "a\n1\n")
    p = write(tmp_path, "j.toml", 'command = "x {a} {b}"\ncsv = "p.csv"\n')
    e = user_error(str(p))
    assert (e.file, e.line, e.field) == (str(p), 1, "command") and "{b}" in e.message
    write(tmp_path, "p.csv", "a,b,c\n1,2,3\n")
    e = user_error(str(p))
    assert (e.file, e.line, e.field) == (str(csv_path), 1, "c") and "never used" in e.message


def test_csv_ragged_row_has_its_line(tmp_path: Path) -> None:
    csv_path = write(tmp_path, "p.csv", "a,b\n1,2\n\n3\n")
    p = write(tmp_path, "j.toml", 'command = "x {a} {b}"\ncsv = "p.csv"\n')
    e = user_error(str(p))
    assert (e.file, e.line) == (str(csv_path), 4) and "expected 2 values" in e.message


def test_csv_file_missing_or_empty(tmp_path: Path) -> None:
    p = write(tmp_path, "j.toml", 'command = "x {a}"\ncsv = "p.csv"\n')
    e = user_error(str(p))
    assert (e.file, e.line, e.field) == (str(p), 2, "csv") and "not found" in e.message
    write(tmp_path, "p.csv", "a\n")
    e = user_error(str(p))
    assert e.file == str(tmp_path / "p.csv") and "no rows" in e.message


@pytest.mark.parametrize(("spec", "word"), [
    ("no_such_module_xyz:f", "cannot import"), ("math:no_such_function", "cannot find"),
    ("math:pi", "not a callable"),
])
def test_bad_callable_spec(tmp_path: Path, spec: str, word: str) -> None:
    args = write(tmp_path, "a.json", "[1]")
    e = user_error(spec, args=str(args))
    assert e.field == spec and word in e.message
    p = write(tmp_path, "j.toml", f'\ncallable = "{spec}"\n')
    e = user_error(str(p))
    assert (e.file, e.line, e.field) == (str(p), 2, "callable") and word in e.message


def test_arguments_that_do_not_fit_the_signature(tmp_path: Path) -> None:
    args = write(tmp_path, "a.json", json.dumps([[1, 2], {"nope": 1}]))
    e = user_error("json:dumps", args=str(args))
    assert (e.file, e.field) == (str(args), "[0]") and "does not fit" in e.message
    p = write(tmp_path, "j.toml", 'callable = "json:dumps"\n[grid]\nnope = [1]\n')
    e = user_error(str(p))
    assert (e.line, e.field) == (1, "callable") and "does not fit" in e.message


@pytest.mark.parametrize(("text", "line", "word"), [
    ('[1, 2,\n  oops]', 2, "not valid JSON"), ('{"a": 1}', 1, "expected a JSON list"),
    ("[]", 1, "no tasks"),
])
def test_bad_args_file(tmp_path: Path, text: str, line: int, word: str) -> None:
    args = write(tmp_path, "a.json", text)
    e = user_error("math:factorial", args=str(args))
    assert (e.file, e.line) == (str(args), line) and word in e.message


def test_args_only_with_a_callable(tmp_path: Path) -> None:
    assert user_error("math:factorial").field == "--args"
    assert user_error(str(write(tmp_path, "j.txt", "true\n")), args="a.json").field == "--args"
