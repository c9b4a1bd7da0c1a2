"""docs/architecture.md keeps matching the code: every path it names exists, every name in its
seed-concept table is defined in the modules of that row, every package is placed in a layer,
and the query path is one Mermaid diagram."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "src" / "ragloom"
DOC = REPO / "docs" / "architecture.md"
REPO_ROOTS = ("src/", "tests/", "docs/", "scripts/")
"""Paths starting with these are relative to the repository; others to ``src/ragloom/``."""

_PY_PATH = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*\w+\.py)\b")
_FOLDER = re.compile(r"`((?:[\w.-]+/)+)`")
_CODE = re.compile(r"`([^`]+)`")


def _resolve(path: str) -> Path:
    return REPO / path if path.startswith(REPO_ROOTS) else PACKAGE / path


def _text() -> str:
    return DOC.read_text(encoding="utf-8")


def _section(title: str) -> str:
    text = _text()
    start = text.index(f"## {title}")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def _table_rows(section: str) -> list[list[str]]:
    rows = [line for line in section.splitlines() if line.startswith("|")]
    cells = [[c.strip() for c in row.strip().strip("|").split("|")] for row in rows]
    return [c for c in cells[2:] if c]  # skip the header and the |---| line


def _defined(paths: list[Path]) -> set[str]:
    """Top-level functions, classes and assignments of the modules, plus ``Class.member``."""
    names: set[str] = set()
    for path in paths:
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            if isinstance(node, ast.ClassDef):
                for member in node.body:
                    if isinstance(member, ast.FunctionDef | ast.AsyncFunctionDef):
                        names.add(f"{node.name}.{member.name}")
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = list(node.targets)
            elif isinstance(node, ast.AnnAssign):
                targets = [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def test_every_path_exists() -> None:
    text = _text()
    paths = set(_PY_PATH.findall(text)) | set(_FOLDER.findall(text))
    assert len(paths) > 30, "the page should name the modules it describes"
    missing = sorted(p for p in paths if not _resolve(p).exists())
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"


@pytest.mark.parametrize("row", _table_rows(_section("Where each seed concept lives")), ids=str)
def test_seed_concept_names_are_defined(row: list[str]) -> None:
    concept, code, names = row
    files: list[Path] = []
    for p in _CODE.findall(code):
        target = _resolve(p)
        assert target.exists(), f"{concept}: {p} does not exist"
        files.extend(sorted(target.rglob("*.py")) if target.is_dir() else [target])
    defined = _defined([f for f in files if f.suffix == ".py"])
    missing = [n for n in _CODE.findall(names) if n not in defined]
    assert not missing, f"{concept}: {missing} not defined in {_CODE.findall(code)}"


def test_every_package_is_in_a_layer() -> None:
    layers = " ".join(" ".join(row[1:2]) for row in _table_rows(_section("Layers")))
    packages = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())
    modules = sorted(p.name for p in PACKAGE.glob("*.py"))
    absent = [f"{p}/" for p in packages if f"`{p}/`" not in layers]
    absent += [m for m in modules if f"`{m}`" not in layers]
    assert not absent, f"place these in the Layers table of docs/architecture.md: {absent}"


def test_query_path_is_one_mermaid_diagram() -> None:
    section = _section("One query, from the command line to the rendered context")
    assert section.count("```mermaid") == 1
    diagram = section.split("```mermaid", 1)[1].split("```", 1)[0]
    assert diagram.strip().startswith("flowchart")
    for module in ("cli/query.py", "api.py", "retrieve/search.py", "assemble/context.py"):
        assert module in diagram, module
