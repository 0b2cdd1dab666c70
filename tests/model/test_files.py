"""The one mechanism behind every configuration file: key lines, schema checks, one-line errors."""

from __future__ import annotations

import json
import string
from pathlib import Path
from typing import Annotated, Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import Field

from skylease.experiments.pools_file import PoolSpec
from skylease.experiments.run_options import RunOptions
from skylease.experiments.run_pools import pool_types
from skylease.model.errors import UserError
from skylease.model.files import KeyLines, field_name, parse_toml
from skylease.model.schema import FileModel, load_toml, validate
from skylease.runtime.job_toml import JobFile
from skylease.runtime.jobs import load_job


def test_key_lines_follow_tables_arrays_dotted_keys_and_multiline_strings():
    text = (
        "# a comment\n"
        'command = "x"\n'  # 2
        "[grid]\n"  # 3
        "a = [1]\n"  # 4
        "\n"
        '"b c" = [2]\n'  # 6
        "[[types]]\n"  # 7
        'name = "a"\n'  # 8
        "[[types]]\n"  # 9
        's = """\n'  # 10
        "speed = 3\n"  # 11: inside the string, not a key
        '"""\n'
        "speed = -1\n"  # 13
        "[types.sub]\n"  # 14: a table of the last [[types]]
        "q = 1\n"  # 15
        "[pools . gpu]\n"  # 16
        "kwargs = { cores = 1 }\n"  # 17
        "cpu.price = 3\n"  # 18
    )
    keys = KeyLines(text, "f.toml")
    assert keys.line("command") == 2
    assert (keys.line("grid"), keys.line("grid", "a"), keys.line("grid", "b c")) == (3, 4, 6)
    assert (keys.line("types", 0, "name"), keys.line("types", 1)) == (8, 9)
    assert keys.line("types", 1, "speed") == 13 and keys.line("types", 1, "sub", "q") == 15
    assert keys.line("pools", "gpu", "kwargs", "cores") == 17  # inside an inline table: its key's line
    assert keys.line("pools", "gpu", "cpu", "price") == 18
    assert keys.line("pools", "gpu", "nope") == 16  # the nearest enclosing key
    assert keys.line("nope") is None


def test_key_lines_of_json():
    text = '{"name": "x",\n "instance_type": [\n  {"name": "a"},\n  {"name": "b",\n   "speed": -1}]}'
    keys = KeyLines(text, "c.json", is_json=True)
    assert keys.line("instance_type", 1, "speed") == 5 and keys.line("instance_type", 0, "name") == 3
    assert KeyLines("{not json", "c.json", is_json=True).line("a") is None


def test_field_names():
    assert field_name(("models", 0, "n_tasks")) == "models[0].n_tasks"
    assert field_name(("pools", "gpu", "price")) == "pools.gpu.price"


class _Inner(FileModel):
    n: Annotated[int, Field(ge=1)]
    mode: Literal["a", "b"] = "a"


class _Schema(FileModel):
    count: Annotated[int, Field(ge=0)] | None = None
    rate: Annotated[float, Field(gt=0)] = 1.0
    limit: Annotated[float, Field(ge=0, allow_inf_nan=True)] = 1.0
    flag: bool = False
    names: Annotated[list[Annotated[str, Field(min_length=1)]], Field(min_length=1)] | None = None
    inner: list[_Inner] | None = None


def check(text: str) -> UserError:
    with pytest.raises(UserError) as e:
        validate(_Schema, parse_toml(text, "f.toml"), KeyLines(text, "f.toml"))
    assert "\n" not in str(e.value)
    return e.value


@pytest.mark.parametrize(("text", "line", "field", "message"), [
    ('count = "many"', 1, "count", "must be a whole number >= 0, got 'many'"),
    ("\ncount = -5", 2, "count", "must be a whole number >= 0, got -5"),
    ("count = 2.0", 1, "count", "must be a whole number >= 0, got 2.0"),
    ("count = true", 1, "count", "must be a whole number >= 0, got true"),
    ("rate = inf", 1, "rate", "must be a finite number > 0, got inf"),
    ('rate = "1"', 1, "rate", "must be a finite number > 0, got '1'"),
    ("limit = nan", 1, "limit", "must be a number >= 0, got nan"),
    ("flag = 1", 1, "flag", "must be true or false, got 1"),
    ("names = []", 1, "names", "must be a non-empty list of strings, got []"),
    ('names = ["a", ""]', 1, "names[1]", "must be a non-empty string, got ''"),
    ("names = 1979-05-27", 1, "names", "must be a non-empty list of strings, got a date/time"),
    ("[[inner]]\nn = 1\n[[inner]]\nmode = 'c'\nn = 2", 4, "inner[1].mode",
     "must be one of 'a', 'b', got 'c'"),
    ("[[inner]]\nmode = 'a'", 1, "inner[0].n", "required, but not given"),
    ("cuont = 3", 1, "cuont", "unknown key 'cuont'; did you mean 'count'?"),
    ("[[inner]]\nn = 1\nmood = 'a'", 3, "inner[0].mood", "unknown key 'mood'; did you mean 'mode'?"),
    ("zzz = 3", 1, "zzz", "unknown key 'zzz'; the keys are count, rate, limit, flag, names, inner"),
    ("flag = 3\ncount = -1", 1, "flag", "must be true or false, got 3"),  # the first in the file
])
def test_mistakes_are_one_line_in_our_words(text, line, field, message):
    e = check(text)
    assert (e.file, e.line, e.field, e.message) == ("f.toml", line, field, message)


class _Short(FileModel):
    name: Annotated[str, Field(min_length=1, max_length=8)] = "a"
    tags: Annotated[list[str], Field(max_length=2)] | None = None


@pytest.mark.parametrize(("text", "field", "message"), [
    ('name = "abcdefghij"', "name", "too long: 10 characters, at most 8"),
    ('tags = ["a", "b", "c"]', "tags", "too long: 3 items, at most 2"),
    ('name = ""', "name", "must be a non-empty string, got ''"),
])
def test_too_long_says_so_with_the_limit(text, field, message):
    """issue 36: a 5,000-character lease command was "must be a non-empty string"."""
    with pytest.raises(UserError) as e:
        validate(_Short, parse_toml(text, "f.toml"), KeyLines(text, "f.toml"))
    assert (e.value.field, e.value.message) == (field, message)


def test_load_toml_reads_and_checks_a_file(tmp_path):
    p = tmp_path / "f.toml"
    p.write_text("count = 3\n[[inner]]\nn = 2\n")
    spec, keys = load_toml(p, _Schema)
    assert spec.count == 3 and spec.inner[0].n == 2 and keys.line("inner", 0, "n") == 3
    p.write_bytes(b"count = 3\n\xff\xfe")
    with pytest.raises(UserError, match="not a text file") as e:
        load_toml(p, _Schema)
    assert e.value.line == 2


# -- the property: any unknown key or wrong value names the file and the key's line ----------------
_key = st.text(string.ascii_lowercase + "_", min_size=1, max_size=12)
_bad_value = st.one_of(
    st.text(string.ascii_letters + " ", max_size=10).map(json.dumps),  # a string
    st.booleans().map(lambda b: "true" if b else "false"),
    st.integers(-10**6, -1).map(str),
    st.sampled_from(["-inf", "nan", "[1, 2]", "{ a = 1 }", "1979-05-27", "[]"]),
)


def _line_text(path: Path, line: int | None) -> str:
    assert line is not None
    return path.read_text().splitlines()[line - 1]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=_key, value=_bad_value, where=st.sampled_from(["top", "bottom"]))
def test_any_unknown_key_in_a_job_file_names_the_file_and_its_line(tmp_path, key, value, where):
    p = tmp_path / "job.toml"
    body = 'command = "echo {a}"\n[grid]\na = [1, 2]\n'
    if key in JobFile.model_fields:
        key = key + "_x"
    p.write_text(f"{key} = {value}\n{body}" if where == "top" else f"# c\n{key} = {value}\n{body}")
    with pytest.raises(UserError) as e:
        load_job(str(p))
    assert e.value.file == str(p) and key in _line_text(p, e.value.line)
    assert e.value.field == key and f"unknown key {key!r}" in e.value.message


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.sampled_from(["retries", "timeout", "command", "csv", "grid"]), value=_bad_value)
def test_any_wrong_value_in_a_job_file_names_the_file_and_its_line(tmp_path, key, value):
    p = tmp_path / "job.toml"
    others = {"command": 'command = "echo {a}"', "grid": "[grid]\na = [1, 2]"}
    others.pop(key, None)
    if key == "grid" and value.startswith("{"):
        value = "{ a = 1 }"  # a table whose value is not a list
    if key == "csv":
        others.pop("grid")
    if key == "command":
        others.pop("grid")
    p.write_text("# a job\n" + "\n".join([f"{key} = {value}", *others.values()]) + "\n")
    try:
        load_job(str(p))
    except UserError as e:
        assert e.file == str(p) and key in _line_text(p, e.line), (p.read_text(), e)
        return
    assert key == "command" and value.strip('"').strip()  # a non-blank string is a fine command


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.one_of(st.sampled_from(sorted(PoolSpec.model_fields)), _key), value=_bad_value,
       pools=st.integers(1, 3))
def test_any_unknown_key_or_wrong_value_in_a_pools_file_names_the_file_and_its_line(
        tmp_path, key, value, pools):
    p = tmp_path / "pools.toml"
    tables = [f"[pools.p{i}]\n" for i in range(pools)]
    tables[-1] += f"{key} = {value}\n"
    p.write_text("\n".join(tables))
    try:
        pool_types(RunOptions(pools_file=p))
    except UserError as e:
        assert e.file == str(p) and key in _line_text(p, e.line), (p.read_text(), e)
        assert e.field is not None and e.field.startswith(f"pools.p{pools - 1}")
        return
    assert key == "address" and value.strip('"').strip()  # any non-empty string is an address


def test_the_schemas_of_the_files_forbid_unknown_keys_and_loose_types():
    for schema in (JobFile, PoolSpec):
        assert schema.model_config["extra"] == "forbid" and schema.model_config["strict"]
