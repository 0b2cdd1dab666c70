"""skylease's modules import each other without circles: every import, at the top of a module or
inside a function, points down the layers (cli/service -> experiments -> sim|runtime -> control,
planning -> traces -> model), so a strongly connected component of the import graph is a bug."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PKG = "skylease"


def modules(src: Path = SRC) -> dict[str, Path]:
    """Module name -> file, for every module of the package (a package is its ``__init__``)."""
    out = {}
    for path in sorted((src / PKG).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The package's modules that ``name`` imports anywhere in its file (functions included)."""
    is_pkg = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the module's package, up level - 1
                base = name.split(".") if is_pkg else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join([*base, *([node.module] if node.module else [])])
            else:
                mod = node.module or ""
            # `from a import b` imports a, and a.b when b is a module
            targets = [mod, *(f"{mod}.{a.name}" for a in node.names)]
        else:
            continue
        for t in targets:
            # `import a.b.c` runs a.b.c; the nearest module of ours it names is the edge
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != name:
                found.add(t)
    return found


def import_graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {m: imports(m, p, known) for m, p in mods.items()}


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(frozenset(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_import_graph_has_no_cycles() -> None:
    graph = import_graph()
    assert len(graph) > 50 and graph["skylease.launch"]  # the parse found the package and its imports
    bad = [sorted(c) for c in cycles(graph)]
    assert not bad, f"modules that import each other in a circle: {bad}"


def test_the_cycle_finder_sees_function_level_and_relative_imports(tmp_path, monkeypatch) -> None:
    pkg = tmp_path / PKG
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("import os\nfrom skylease.sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from .c import g\n")
    (pkg / "sub" / "c.py").write_text("def g():\n    import skylease.a\n")
    (pkg / "d.py").write_text("from . import a\n")
    mods = modules(tmp_path)
    graph = {m: imports(m, p, set(mods)) for m, p in mods.items()}
    assert graph["skylease.sub.b"] == {"skylease.sub.c"} and graph["skylease.d"] == {"skylease", "skylease.a"}
    assert cycles(graph) == [frozenset({"skylease.a", "skylease.sub.b", "skylease.sub.c"})]


def test_nothing_in_src_imports_the_testing_package() -> None:
    """skylease.testing (the test site of SSH hosts) serves the tests and its own command line only."""
    graph = import_graph()
    assert "skylease.testing.site" in graph  # the package is there to be checked
    users = sorted(m for m, deps in graph.items() if not m.startswith("skylease.testing")
                   and any(d == "skylease.testing" or d.startswith("skylease.testing.") for d in deps))
    assert not users, f"modules of src/ that import skylease.testing: {users}"
