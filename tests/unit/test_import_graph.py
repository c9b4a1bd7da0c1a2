"""The import graph of ``src/ragloom`` has no cycles, and layers import downward only.

Every module is parsed with :mod:`ast`; every ``import`` and ``from ... import`` counts, at the
top of a module or inside a function (a lazy import is still a dependency, and the cycles this
test was written against were lazy ones), under ``if TYPE_CHECKING`` too. Relative imports are
resolved against the importing module's package. ``from pkg import name`` depends on the module
``pkg.name`` when there is one, else on ``pkg`` itself.

The layers (STYLE.md habit 11), bottom to top: types, errors and the small shared modules;
ingest, embed, index; retrieve and assemble; the service; the entry points (``ragloom`` itself,
the API, the CLI) with evaluation and benchmarks beside them.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = "ragloom"

CORE = ("ingest", "index", "embed", "graph", "retrieve", "assemble")
"""The pipeline's lower layers: they never import the service, entry points, eval or bench."""
FOUNDATION = ("types", "errors", "paths", "telemetry", "logs", "_version")
"""Modules at the bottom, below even the core."""
ABOVE_CORE = ("service", "api", "cli", "bench", "eval", "integrations", "sources")
"""What the core must not import (nor the ``ragloom`` package's own face, which re-exports
the API)."""
LAYER_RULES: dict[str, tuple[str, ...]] = {
    **{layer: (*ABOVE_CORE, "") for layer in CORE},
    **{module: (*ABOVE_CORE, "") for module in FOUNDATION},
    "service": ("api", "cli", "bench", "eval", ""),
    "eval": ("cli", "bench"),
    "bench": ("cli",),
    "integrations": ("cli", "bench", "eval"),
    "settings": ("cli", "server", "bench", "eval"),
    "server": ("cli", "bench", "eval"),
    "sources": ("cli", "bench", "server", "eval"),
}
"""Importer (a sub-package or module under ragloom) -> what it must not import; ``""`` stands
for the ``ragloom`` package itself (its ``__init__``)."""


def module_files(root: Path, package: str) -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is a package ``__init__``) for every ``.py`` under
    ``root/package``."""
    out: dict[str, tuple[Path, bool]] = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts.pop()
        out[".".join(parts)] = (path, is_pkg)
    return out


def _known(name: str, modules: Mapping[str, object]) -> str | None:
    """The longest prefix of ``name`` that is a module of ours (``a.b.C`` -> ``a.b``)."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def _imported(node: ast.AST, module: str, is_pkg: bool, modules: Mapping[str, object]) -> set[str]:
    """Modules of ours that one import statement depends on."""
    found: set[str] = set()
    if isinstance(node, ast.Import):
        for alias in node.names:
            target = _known(alias.name, modules)
            if target is not None:
                found.add(target)
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            package = module if is_pkg else module.rpartition(".")[0]
            base = package.split(".")
            if node.level - 1 > len(base) - 1:
                raise ValueError(f"{module}: relative import beyond the top package")
            base = base[: len(base) - (node.level - 1)]
            source = ".".join([*base, node.module] if node.module else base)
        else:
            source = node.module or ""
        for alias in node.names:
            target = _known(f"{source}.{alias.name}", modules)
            if target is None or not target.startswith(f"{source}."):
                target = _known(source, modules)  # a name defined in ``source``
            if target is not None:
                found.add(target)
    return found


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """Module -> the modules of ``package`` it imports anywhere in its body."""
    modules = module_files(root, package)
    graph: dict[str, set[str]] = {}
    for name, (path, is_pkg) in modules.items():
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            deps |= _imported(node, name, is_pkg, modules)
        deps.discard(name)
        graph[name] = deps
    return graph


def find_cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """One cycle per strongly connected component of two or more modules, as a path
    ``[a, b, ..., a]`` (Tarjan's algorithm, iterative; components and paths sorted)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, list[str]]] = [(start, sorted(graph[start]))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, todo = work[-1]
            if todo:
                nxt = todo.pop(0)
                if nxt not in graph:
                    continue
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(graph[nxt])))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return [_cycle_path(graph, comp) for comp in sorted(components)]


def _cycle_path(graph: Mapping[str, Iterable[str]], component: list[str]) -> list[str]:
    """A shortest cycle through the component's first module, staying inside the component."""
    members = set(component)
    first = component[0]
    parents: dict[str, str] = {}
    frontier = [first]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for nxt in sorted(graph[node]):
                if nxt == first:
                    path = [node]
                    while path[-1] != first:
                        path.append(parents[path[-1]])
                    return [*reversed(path), first]
                if nxt in members and nxt not in parents and nxt != first:
                    parents[nxt] = node
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"no cycle through {first}")  # pragma: no cover - SCC guarantees one


_CLI_MODULES = {"ragloom.entry"}
"""Modules of the CLI layer outside ``cli/``: the console script's launcher sits beside the
package so that a Ctrl-C while ``ragloom.cli`` loads can be caught (docs/architecture.md)."""


def _layer(module: str) -> str:
    """``ragloom.retrieve.search`` -> ``retrieve``; ``ragloom`` -> ``""``."""
    if module in _CLI_MODULES:
        return "cli"
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


# -- the checks on ragloom ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph(SRC, PACKAGE)


def test_graph_sees_the_whole_package(graph: dict[str, set[str]]) -> None:
    assert {"ragloom", "ragloom.api", "ragloom.cli", "ragloom.retrieve.search"} <= set(graph)
    # a lazy, function-level import is an edge (api imports the service's status reader inside
    # Index.status)
    assert "ragloom.service.index_state" in graph["ragloom.api"]


def test_no_import_cycles(graph: dict[str, set[str]]) -> None:
    cycles = find_cycles(graph)
    assert not cycles, "import cycles in src/ragloom:\n" + "\n".join(
        "  " + " -> ".join(c) for c in cycles
    )


def test_layers_import_downward_only(graph: dict[str, set[str]]) -> None:
    bad: list[str] = []
    for module, deps in sorted(graph.items()):
        forbidden = LAYER_RULES.get(_layer(module), ())
        for dep in sorted(deps):
            if _layer(dep) in forbidden and _layer(dep) != _layer(module):
                bad.append(f"{module} imports {dep}")
    assert not bad, "imports against the layering (STYLE.md habit 11):\n" + "\n".join(bad)


def _module_level_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Imports that run when the module is imported: its top-level statements and the bodies of
    top-level ``if``/``try``/``with`` blocks, except ``if TYPE_CHECKING:`` (never run) and
    function and class bodies (run later, when called)."""
    found: list[ast.Import | ast.ImportFrom] = []
    todo: list[ast.stmt] = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        elif isinstance(node, ast.If):
            test = node.test
            name = test.id if isinstance(test, ast.Name) else getattr(test, "attr", "")
            if name != "TYPE_CHECKING":
                todo.extend(node.body)
            todo.extend(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                todo.extend(block)
        elif isinstance(node, ast.With):
            todo.extend(node.body)
    return found


def test_sources_import_neither_api_nor_eval_at_module_level() -> None:
    """The API imports ``ragloom.sources`` (the commits source, the change history), so a
    source module may reach the API only lazily, inside the function that needs it (the code
    source making its own ``Index``), or for type checking; never evaluation (git reading is
    ``ragloom.ingest.git``)."""
    modules = module_files(SRC, PACKAGE)
    bad: list[str] = []
    for name, (path, is_pkg) in sorted(modules.items()):
        if _layer(name) != "sources":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in _module_level_imports(tree):
            for dep in sorted(_imported(node, name, is_pkg, modules)):
                if _layer(dep) in ("api", "eval", ""):
                    bad.append(f"{name} imports {dep} at line {node.lineno}")
    assert not bad, "module-level imports up the layers in sources/:\n" + "\n".join(bad)


def test_module_level_imports_skip_lazy_and_type_only(tmp_path: Path) -> None:
    src = (
        "from typing import TYPE_CHECKING\nimport a\nif TYPE_CHECKING:\n    import b\n"
        "else:\n    import c\ntry:\n    import d\nexcept ImportError:\n    import e\n"
        "def f():\n    import g\nclass K:\n    import h\n"
    )
    names = {
        alias.name
        for node in _module_level_imports(ast.parse(src))
        for alias in node.names
        if isinstance(node, ast.Import)
    }
    assert names == {"a", "c", "d", "e"}


def test_nothing_imports_the_cli(graph: dict[str, set[str]]) -> None:
    importers = sorted(
        m
        for m, deps in graph.items()
        if _layer(m) != "cli" and any(_layer(d) == "cli" for d in deps)
    )
    assert not importers, f"the CLI is the top layer; imported by {importers}"


# -- the checker itself ----------------------------------------------------------------------


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_checker_finds_lazy_relative_cycles(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "def f():\n    from .sub import b\n",
            "pkg/sub/__init__.py": "",
            "pkg/sub/b.py": "from ..c import thing\n",
            "pkg/c.py": "import os\nif True:\n    import pkg.a\nthing = 1\n",
            "pkg/d.py": "from pkg import c\nfrom . import sub\n",
        },
    )
    g = import_graph(tmp_path, "pkg")
    assert g["pkg.a"] == {"pkg.sub.b"}
    assert g["pkg.sub.b"] == {"pkg.c"}
    assert g["pkg.c"] == {"pkg.a"}
    assert g["pkg.d"] == {"pkg.c", "pkg.sub"}
    assert find_cycles(g) == [["pkg.a", "pkg.sub.b", "pkg.c", "pkg.a"]]


def test_checker_accepts_a_dag(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.top import run\n",
            "pkg/top.py": "from pkg.low import x\n\ndef run():\n    from pkg import low\n",
            "pkg/low.py": "x = 1\n",
        },
    )
    g = import_graph(tmp_path, "pkg")
    assert g["pkg"] == {"pkg.top"}
    assert find_cycles(g) == []
