"""A symbol far over the size cap (a 20,000-line function) is split into parts; searching its
name must return the part that holds its definition line first, and every later part names
its symbol and part: ``# reticulate_splines_quux (part 3 of 154)``.

Two indexes: the 20,000-line Python and Go functions without embeddings (sparse, and hybrid
falling back to BM25), and smaller functions that are still split (Python and TypeScript) with
the packaged embedding model, for the real hybrid ranking.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import ragloom
from ragloom.ingest.chunker import chunk_file, head_id, is_part, part_label
from ragloom.types import Chunk
from tests.conftest import run_cli

pytestmark = pytest.mark.integration

HUGE_LINES = 20_000
MEDIUM_LINES = 600

PY_NAME = "reticulate_splines_quux"
PY_DEF_LINE = 4
GO_NAME = "HandleFrobnication"
GO_SYMBOL = "Server.HandleFrobnication"
GO_DEF_LINE = 9
TS_NAME = "assembleWidgetPayload"
TS_DEF_LINE = 3


def _python(name: str, n: int) -> str:
    body = "".join(
        f"    total += data.get({i}, 0)  # step_marker_{i}\n"
        if i % 10 == 0
        else f"    total += data.get({i}, 0)\n"
        for i in range(n)
    )
    return (
        "import os\n\n\n"
        f"def {name}(data, limit):\n"  # line 4
        '    """Reticulate the splines of every record in ``data``."""\n'
        "    total = 0\n"
        f"{body}"
        "    return total\n\n\n"
        "def other_function(x):\n    return x + 1\n"
    )


def _go(n: int) -> str:
    body = "".join(
        f"\tcount += s.lookup({i}) // go_marker_{i}\n"
        if i % 10 == 0
        else f"\tcount += s.lookup({i})\n"
        for i in range(n)
    )
    return (
        "package server\n\n"
        'import "context"\n\n'
        "type Server struct {\n\tname string\n}\n\n"
        f"func (s *Server) {GO_NAME}(ctx context.Context, id int) (int, error) {{\n"  # line 9
        "\tcount := 0\n"
        f"{body}"
        "\treturn count, nil\n}\n\n"
        "func (s *Server) lookup(n int) int {\n\treturn len(s.name) + n\n}\n"
    )


def _typescript(n: int) -> str:
    body = "".join(
        f"  payload.push(widgets[{i}] ?? defaultWidget({i})); // ts_marker_{i}\n" for i in range(n)
    )
    return (
        "import { defaultWidget } from './widgets';\n\n"
        f"export function {TS_NAME}(widgets: Widget[]): Widget[] {{\n"  # line 3
        "  const payload: Widget[] = [];\n"
        f"{body}"
        "  return payload;\n}\n"
    )


_CALLER = f"from big import {PY_NAME}\n\n\ndef caller(d):\n    return {PY_NAME}(d, 3)\n"


def _write(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def huge(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = _write(
        tmp_path_factory.mktemp("huge") / "repo",
        {
            "big.py": _python(PY_NAME, HUGE_LINES),
            "use.py": _CALLER,
            "server.go": _go(HUGE_LINES),
            "notes.md": f"# Notes\n\nCall `{PY_NAME}` and `{GO_NAME}` with care.\n",
        },
    )
    proc = run_cli("index", str(root), "--json", "--no-embed", check=True)
    assert json.loads(proc.stdout)["chunks_total"] > 150
    return root


@pytest.fixture(scope="module")
def huge_index(huge: Path) -> Iterator[ragloom.Index]:
    index = ragloom.open(huge)
    yield index
    index.close()


@pytest.fixture(scope="module")
def medium_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ragloom.Index]:
    """Indexed in-process with the packaged embedding model (loaded once for the module)."""
    root = _write(
        tmp_path_factory.mktemp("medium") / "repo",
        {
            "big.py": _python(PY_NAME, MEDIUM_LINES),
            "use.py": _CALLER,
            "widgets.ts": _typescript(MEDIUM_LINES // 2),
        },
    )
    index = ragloom.open(root)
    index.index()
    yield index
    index.close()


def _cli_search(root: Path, query: str, *strategy: str) -> list[dict[str, object]]:
    args = ["search", query, "--json", "-k", "5", "--index-dir", str(root / ".ragloom")]
    proc = run_cli(*args, *strategy, check=True)
    hits: list[dict[str, object]] = json.loads(proc.stdout)
    return hits


def _parts(root: Path, path: str, symbol: str) -> list[Chunk]:
    data = (root / path).read_bytes()
    return [c for c in chunk_file(path, data, "h") if c.symbol == symbol]


def test_huge_functions_are_split_and_labelled(huge: Path) -> None:
    for path, symbol, def_line, marker in (
        ("big.py", PY_NAME, PY_DEF_LINE, "#"),
        ("server.go", GO_SYMBOL, GO_DEF_LINE, "//"),
    ):
        parts = _parts(huge, path, symbol)
        n = len(parts)
        assert n > 50, (path, n)
        assert parts[0].start_line == def_line and not is_part(parts[0].id)
        assert part_label(parts[0].id, parts[0].text) is None
        for k, c in enumerate(parts[1:], 2):
            assert c.id == f"{parts[0].id}#part{k}" and head_id(c.id) == parts[0].id
            assert part_label(c.id, c.text) == f"{symbol} (part {k} of {n})"
            assert c.text.startswith(f"{marker} {symbol} (part {k} of {n})\n")


@pytest.mark.parametrize(
    ("query", "path", "symbol", "def_line", "strategy"),
    [
        (PY_NAME, "big.py", PY_NAME, PY_DEF_LINE, ()),  # the default strategy, hybrid
        (GO_NAME, "server.go", GO_SYMBOL, GO_DEF_LINE, ("--strategy", "sparse")),
    ],
)
def test_cli_search_name_gives_definition_part_first(
    huge: Path, query: str, path: str, symbol: str, def_line: int, strategy: tuple[str, ...]
) -> None:
    first = _cli_search(huge, query, *strategy)[0]
    assert (first["path"], first["symbol"], first["start_line"]) == (path, symbol, def_line)
    assert not is_part(str(first["id"]))


@pytest.mark.parametrize("strategy", ["sparse", "hybrid", "sparse+no-exact", "hybrid+no-exact"])
@pytest.mark.parametrize(
    ("query", "path", "symbol", "def_line"),
    [
        (PY_NAME, "big.py", PY_NAME, PY_DEF_LINE),
        (f"where is `{PY_NAME}` defined", "big.py", PY_NAME, PY_DEF_LINE),
        (GO_NAME, "server.go", GO_SYMBOL, GO_DEF_LINE),
        (GO_SYMBOL, "server.go", GO_SYMBOL, GO_DEF_LINE),
    ],
)
def test_name_finds_the_definition_part_first(
    huge_index: ragloom.Index, query: str, path: str, symbol: str, def_line: int, strategy: str
) -> None:
    hits = huge_index.search(query, top_k=5, strategy=strategy).hits
    if strategy.endswith("+no-exact"):
        # without the exact-match boost a short caller may rank first, but the symbol's first
        # part still stands for its parts: none of them ranks above it
        hits = [h for h in hits if h.symbol == symbol]
    first = hits[0]
    assert (first.path, first.symbol, first.start_line) == (path, symbol, def_line), strategy
    assert not is_part(first.id)


def test_later_part_found_by_its_content_names_symbol_and_part(huge_index: ragloom.Index) -> None:
    for query, path, symbol, marker in (
        ("step_marker_10300", "big.py", PY_NAME, "#"),
        ("go_marker_10300", "server.go", GO_SYMBOL, "//"),
    ):
        hit = huge_index.search(query, top_k=3, strategy="sparse").hits[0]
        assert (hit.path, hit.symbol) == (path, symbol)
        assert hit.start_line > 10_000
        label = part_label(hit.id, hit.text)
        assert hit.part == label  # the Python API's hit says it too, as `search --json` does
        m = re.fullmatch(rf"{re.escape(symbol)} \(part (\d+) of (\d+)\)", str(label))
        assert m is not None, hit.text[:120]
        k, n = int(m.group(1)), int(m.group(2))
        assert 1 < k < n and hit.id.endswith(f"#part{k}")
        assert hit.text.startswith(f"{marker} {symbol} (part {k} of {n})\n")
        assert query in hit.text


def test_cli_search_with_embeddings(medium_index: ragloom.Index) -> None:
    assert len(_parts(medium_index.root, "big.py", PY_NAME)) >= 3  # still split
    first = _cli_search(medium_index.root, PY_NAME)[0]  # default strategy: hybrid, with vectors
    assert (first["path"], first["start_line"]) == ("big.py", PY_DEF_LINE)


@pytest.mark.parametrize("strategy", ["hybrid", "hybrid-mmr", "dense", "sparse", "hybrid+no-exact"])
@pytest.mark.parametrize(
    ("query", "path", "symbol", "def_line"),
    [(PY_NAME, "big.py", PY_NAME, PY_DEF_LINE), (TS_NAME, "widgets.ts", TS_NAME, TS_DEF_LINE)],
)
def test_name_finds_the_definition_part_first_with_embeddings(
    medium_index: ragloom.Index, query: str, path: str, symbol: str, def_line: int, strategy: str
) -> None:
    assert len(_parts(medium_index.root, path, symbol)) >= 3  # still split
    result = medium_index.search(query, top_k=5, strategy=strategy)
    assert result.vectors_complete and not result.fallback_used
    hits = result.hits
    if strategy.endswith("+no-exact"):
        # as above: without the exact-match boost a short caller may rank first (the model
        # reads the whole caller file's BM25 score), but no part of the symbol ranks above
        # its first part
        hits = [h for h in hits if h.symbol == symbol]
    first = hits[0]
    assert (first.path, first.symbol, first.start_line) == (path, symbol, def_line), strategy


def test_a_hit_in_a_minified_line_comes_back_in_a_window(tmp_path: Path) -> None:
    """A 400 kB one-line bundle: search found the function, but context is cut at line
    boundaries, so the line fitted no budget and every context came back empty. The line is
    now shown as a window around the hit; other files' lines are left whole."""
    from ragloom.assemble.snippets import LONG_LINE_CHARS

    root = tmp_path / "web"
    root.mkdir()
    (root / "real.min.js").write_text(
        ";".join(
            f"function minfn{i}(a,b){{var minvar{i}=a*{i}+b;return minvar{i}}}" for i in range(6000)
        )
    )
    (root / "app.py").write_text("def use_bundle():\n    return 'minvar4500'\n")
    with ragloom.open(root, embedder="hashing:64") as idx:
        idx.index(history=False)
        assert "minfn4500" in [h.symbol for h in idx.search("minvar4500", top_k=3).hits]
        for budget in (2000, 8000):
            ctx = idx.get_context("minvar4500", budget=budget, top_k=5)
            bundle = [p for p in ctx.parts if p.file_path == "real.min.js"]
            assert bundle, budget
            assert "minvar4500=a*4500+b" in bundle[0].text
            assert "characters] ..." in bundle[0].text
            assert len(bundle[0].text) < 2 * LONG_LINE_CHARS
            assert ctx.stats.tokens_total <= budget
        app = [
            p for p in idx.get_context("use_bundle", budget=8000).parts if p.file_path == "app.py"
        ]
        assert app and "characters]" not in app[0].text
