"""The plug-in loader (skylease.control.plugins): a class named by MODULE:CLASS, FILE.py:CLASS or an
installed entry point, its parameters from text or a TOML table, and every mistake as one line."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

from skylease.control import plugins
from skylease.control.env import Policy
from skylease.control.fixed import FixedPool
from skylease.control.plugins import POLICY_GROUP, PluginError, load, load_class, parse_args
from skylease.model.errors import UserError

MINE = '''\
from __future__ import annotations

from typing import Optional

from skylease.control.env import Policy


class Mine(Policy):
    def __init__(self, n: int = 1, pool: str | None = None, factor: float = 1.0, quiet: bool = False,
                 cap: Optional[int] = None, size: int | float = 2, tags: list[str] | None = None,
                 note=None) -> None:
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        self.n, self.pool, self.factor, self.quiet, self.cap, self.size = n, pool, factor, quiet, cap, size
        self.tags, self.note = tags, note
        self.env = None


class Buggy(Policy):
    def __init__(self) -> None:
        self.x = {}["missing"]


class NotAPolicy:
    pass
'''


def one_line(e: pytest.ExceptionInfo) -> str:
    text = str(e.value)
    assert "\n" not in text and "Traceback" not in text
    return text


@pytest.fixture
def mine(tmp_path: Path) -> Path:
    path = tmp_path / "mine.py"
    path.write_text(MINE)
    return path


def test_a_file_plug_in_loads_once_and_leaves_sys_path_as_it_was(tmp_path, mine):
    (tmp_path / "helper.py").write_text("N = 3\n")
    user = tmp_path / "user.py"
    user.write_text("from helper import N\nfrom skylease.control.env import Policy\n\n"
                    "class P(Policy):\n    n = N\n")
    before = list(sys.path)
    cls = load_class(f"{user}:P", base=Policy)
    assert cls.n == 3 and sys.path == before  # its helper imported while it ran; sys.path restored
    assert load_class(f"{user}:P") is cls  # unchanged: not run again
    assert plugins.class_path(cls) == f"{user.resolve()}:P"  # the spec that loads it again
    policy = load(f"{mine}:Mine", parse_args(["n=3"]), base=Policy)
    assert (type(policy).__name__, policy.n) == ("Mine", 3)
    # a relative path means the same file from anywhere once resolved
    spec = plugins.resolve_file_spec("mine.py:Mine", base=tmp_path)
    assert spec == f"{mine.resolve()}:Mine" and plugins.resolve_file_spec("fixed:2") == "fixed:2"


def test_a_changed_file_is_loaded_again(tmp_path):
    path = tmp_path / "p.py"
    path.write_text("from skylease.control.env import Policy\nclass P(Policy):\n    v = 1\n")
    assert load_class(f"{path}:P").v == 1
    path.write_text("from skylease.control.env import Policy\nclass P(Policy):\n    v = 22\n")
    assert load_class(f"{path}:P").v == 22


def test_a_module_plug_in_and_its_describe():
    policy = load("skylease.control.fixed:FixedPool", parse_args(["n=2", "pool=p"]), base=Policy)
    assert isinstance(policy, FixedPool) and (policy.n, policy.pool) == (2, "p")
    assert policy.describe() == "skylease.control.fixed:FixedPool(n=2, pool='p')"


def test_text_parameters_follow_the_constructors_annotations(mine):
    p = load(f"{mine}:Mine", parse_args(["n=4", "factor=0.5", "quiet=yes", "cap=none", "size=3",
                                          "pool=cloud", "note=anything"]))
    assert (p.n, p.factor, p.quiet, p.cap, p.size, p.pool, p.note) == (4, 0.5, True, None, 3, "cloud",
                                                                        "anything")
    assert type(p.size) is int  # `int | float`: the first type that reads the text
    assert load(f"{mine}:Mine", parse_args(["pool=none"])).pool is None  # `str | None`: none is None
    p = load(f"{mine}:Mine", parse_args(["size=2.5", "cap=7", "factor=inf", "quiet=0"]))
    assert (p.size, p.cap, p.factor, p.quiet) == (2.5, 7, math.inf, False)


def test_toml_parameters_are_typed_and_checked(tmp_path, mine):
    toml = tmp_path / "params.toml"
    toml.write_text('[policy]\nn = 5\nfactor = 2\nquiet = true\ntags = ["a", "b"]\n')
    p = load(f"{mine}:Mine", plugins.params_from_toml(toml, "policy"))
    assert (p.n, p.factor, p.quiet, p.tags) == (5, 2, True, ["a", "b"])  # an int fits a float
    toml.write_text('n = "5"\n')
    with pytest.raises(PluginError) as e:
        load(f"{mine}:Mine", plugins.params_from_toml(toml))
    assert one_line(e) == "parameter 'n' of Mine takes int, got '5'" and e.value.param == "n"
    with pytest.raises(PluginError) as e:
        load(f"{mine}:Mine", {"quiet": 1})
    assert one_line(e) == "parameter 'quiet' of Mine takes bool, got 1"
    toml.write_text("n = 5\nn = 6\n")
    with pytest.raises(PluginError) as e:
        plugins.params_from_toml(toml)
    assert one_line(e).startswith(f"{toml}:2: not valid TOML")
    with pytest.raises(PluginError) as e:
        plugins.params_from_toml(toml.with_name("gone.toml"))
    assert one_line(e) == f"{toml.with_name('gone.toml')}: file not found"


#: (spec, params) -> the one line it gets (FILE stands for the plug-in file's path).
MISTAKES = [
    ("gone.py:Mine", {}, "{dir}/gone.py: no such file"),
    ("nosuch_module_zz:X", {}, "no module named 'nosuch_module_zz'"),
    ("skylease.control.nosuch_zz:X", {}, "no module named 'skylease.control.nosuch_zz'"),
    ("{file}:Nope", {}, "{file} has no class 'Nope'"),
    ("skylease.control.fixed:Nope", {}, "module 'skylease.control.fixed' has no class 'Nope'"),
    ("{file}:NotAPolicy", {},
     ":NotAPolicy is not a bag policy: it must derive from skylease.control.env:Policy"),
    ("math:pi", {}, "'math:pi' is a float, not a class"),
    ("{file}:Mine", {"zz": "1"},
     "unknown parameter 'zz' of Mine; it takes n, pool, factor, quiet, cap, size, tags, note"),
    ("{file}:Mine", {"n": "x"}, "parameter 'n' of Mine takes int, got 'x'"),
    ("{file}:Mine", {"n": "1.5"}, "parameter 'n' of Mine takes int, got '1.5'"),
    ("{file}:Mine", {"factor": "nan"}, "parameter 'factor' of Mine takes float, got 'nan'"),
    ("{file}:Mine", {"quiet": "maybe"}, "parameter 'quiet' of Mine takes bool, got 'maybe'"),
    ("{file}:Mine", {"cap": "x"}, "parameter 'cap' of Mine takes int | None, got 'x'"),
    ("{file}:Mine", {"tags": "a,b"}, "parameter 'tags' of Mine is list[str] | None, which cannot be given as "
                                     "text (give it in a TOML table)"),
    ("{file}:Mine", {"n": "0"}, "{file}:Mine: n must be >= 1, got 0"),
    ("skylease.control.fixed:FixedPool", {}, "FixedPool needs the parameter 'n'"),
    ("not a spec", {}, "'not a spec' is not MODULE:CLASS or FILE.py:CLASS"),
]


@pytest.mark.parametrize(("spec", "params", "line"), MISTAKES, ids=[m[2][:40] for m in MISTAKES])
def test_each_mistake_is_one_line(tmp_path, mine, spec, params, line):
    fill = {"file": str(mine), "dir": str(tmp_path)}
    spec, line = spec.format(**fill), line.format(**fill)
    with pytest.raises(PluginError) as e:
        args = parse_args([f"{k}={v}" for k, v in params.items()])  # as --policy-arg gives them
        load(spec if "gone" not in spec else f"{tmp_path}/{spec}", args, base=Policy, what="bag policy")
    assert line in one_line(e)


@pytest.mark.parametrize(("body", "line", "needle"), [
    ("from skylease.control.env import Policy\nclass P(Policy)\n    pass\n", 2, "SyntaxError: expected ':'"),
    ("import os\nimport nosuch_dependency_zz\n", 2,
     "ModuleNotFoundError: No module named 'nosuch_dependency_zz'"),
    ("x = 1\n\nraise RuntimeError('site not configured')\n", 3, "RuntimeError: site not configured"),
    ("import sys\nsys.exit(3)\n", 2, "SystemExit: 3"),  # not an exit of skylease
])
def test_an_error_inside_the_plug_in_names_its_file_and_line(tmp_path, body, line, needle):
    path = tmp_path / "broken.py"
    path.write_text(body)
    with pytest.raises(PluginError) as e:
        load_class(f"{path}:P")
    assert one_line(e).startswith(f"{path.resolve()}:{line}: cannot load ") and needle in str(e.value)
    assert (e.value.file, e.value.line) == (str(path.resolve()), line)


def test_an_error_inside_a_module_plug_in_names_its_file_and_line(tmp_path, monkeypatch):
    (tmp_path / "site_broken_zz.py").write_text("\n\nundefined_name\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(PluginError) as e:
        load_class("site_broken_zz:P")
    assert one_line(e) == (f"{tmp_path / 'site_broken_zz.py'}:3: cannot load site_broken_zz: NameError: "
                           "name 'undefined_name' is not defined")


def test_a_constructor_that_fails_is_one_line_at_its_line(mine):
    with pytest.raises(PluginError) as e:
        load(f"{mine}:Buggy")
    line = MINE.splitlines().index('        self.x = {}["missing"]') + 1
    assert one_line(e) == f"{mine.resolve()}:{line}: {mine}:Buggy: KeyError: 'missing'"


def _install(site: Path, name: str, value: str) -> None:
    """An installed distribution as pip leaves it: a dist-info folder with entry_points.txt."""
    info = site / "skylease_test_plugins-1.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: skylease-test-plugins\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{POLICY_GROUP}]\n{name} = {value}\n")


def test_an_installed_package_names_its_policy_by_an_entry_point(tmp_path, monkeypatch):
    site = tmp_path / "site"
    (site / "zz_site_policies").mkdir(parents=True)
    (site / "zz_site_policies" / "__init__.py").write_text(
        "from skylease.control.env import Policy\n\nclass Greedy(Policy):\n"
        "    def __init__(self, n: int = 1) -> None:\n        self.n = n\n")
    _install(site, "zz-greedy", "zz_site_policies:Greedy")
    monkeypatch.syspath_prepend(str(site))
    assert "zz-greedy" in plugins.entry_point_names(POLICY_GROUP)
    policy = load("zz-greedy", parse_args(["n=4"]), base=Policy, group=POLICY_GROUP)
    assert type(policy).__name__ == "Greedy" and policy.n == 4
    with pytest.raises(PluginError) as e:
        load("zz-other", base=Policy, group=POLICY_GROUP)
    assert "no plug-in named 'zz-other'" in one_line(e) and "installed: " in str(e.value)
    assert "zz-greedy" in str(e.value)


def test_an_entry_point_to_a_missing_module_is_one_line(tmp_path, monkeypatch):
    _install(tmp_path, "zz-gone", "zz_not_installed_anywhere:P")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(PluginError) as e:
        load_class("zz-gone", group=POLICY_GROUP)
    assert one_line(e) == "entry point 'zz-gone' (zz_not_installed_anywhere:P): no module named " \
                          "'zz_not_installed_anywhere'"


def test_key_value_arguments():
    assert parse_args(["a=1", " b = x y ", "c="]) == {"a": "1", "b": "x y", "c": ""}
    for bad, needle in ((["a"], "expected KEY=VALUE"), (["=1"], "expected KEY=VALUE"),
                        (["1a=2"], "expected KEY=VALUE"), (["a=1", "a=2"], "'a' is given twice")):
        with pytest.raises(UserError) as e:
            parse_args(bad)
        assert needle in one_line(e) and str(e.value).startswith("--policy-arg: ")


def test_a_file_that_is_not_python_source_is_one_line(tmp_path):
    binary = tmp_path / "binary.py"
    binary.write_bytes(b"\x89\x00PNG")
    with pytest.raises(PluginError) as e:
        load_class(f"{binary}:P")
    assert f"cannot load {binary}" in one_line(e)
    with pytest.raises(PluginError) as e:
        load_class(f"{tmp_path}/{'x' * 300}.py:P")
    assert one_line(e).endswith(": cannot read it: File name too long")
    with pytest.raises(PluginError) as e:
        load_class(f"{tmp_path}/:P")
    assert one_line(e) == f"{tmp_path}: is not a Python file (a folder?)"
