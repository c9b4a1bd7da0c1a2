"""The large symbol-level docstring sets: deterministic, docstring-free, test code never gold."""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

import pytest

from ragloom.errors import InputError
from ragloom.eval.dataset import load_dataset
from ragloom.eval.datasets import stdlib_root
from ragloom.eval.symbolset import (
    RESERVED_PACKAGES,
    SETS,
    build_symbol_set,
    is_test_path,
    parse_entry,
    score_run_file,
    split_of,
)

STDLIB_FILES = ("textwrap.py", "shlex.py", "json", "test/test_textwrap.py")

FAKE_TESTS = '''\
"""Tests of the fake package."""


def helper_that_builds_a_fixture_for_tests(x):
    """Build a large fixture object for every test in this module."""
    return x


class TestWrapping:
    """Wrapping tests."""

    def test_wraps_long_lines_at_the_width(self):
        """Check that long lines are wrapped at the requested width."""
        assert True
'''

PKG_INIT = '''\
"""A fake third-party package."""


def compute_the_answer_to_everything(a, b):
    """Compute the answer to life, the universe and everything else.

    More text.
    """
    return a + b


def compute_short(a):
    """Too short to ask."""
    return a


class Shape:
    """A shape."""

    def area_of_the_shape(self):
        """Return the area covered by this shape in square units."""
        return 0

    def perimeter(self):
        """Return the area covered by this shape in square units."""
        return 1
'''


def _roots(tmp: Path) -> dict[str, Path]:
    std = tmp / "src" / "stdlib"
    for rel in STDLIB_FILES:
        src = stdlib_root() / rel
        dest = std / rel
        if src.is_dir():
            shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(src, dest)
    site = tmp / "src" / "site"
    (site / "fakepkg" / "tests").mkdir(parents=True)
    (site / "fakepkg" / "__init__.py").write_text(PKG_INIT, encoding="utf-8")
    (site / "fakepkg" / "tests" / "test_core.py").write_text(FAKE_TESTS, encoding="utf-8")
    (site / "fakepkg" / "broken.py").write_text("def f(:\n    pass\n", encoding="utf-8")
    return {"stdlib": std, "site-packages": site}


ENTRIES = (
    "stdlib:json",
    "stdlib:shlex.py",
    "stdlib:textwrap.py",
    "stdlib:test/test_textwrap.py",
    "site-packages:fakepkg",
)


def _snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, Path]]:
    tmp = tmp_path_factory.mktemp("symset")
    roots = _roots(tmp)
    a, b = tmp / "a", tmp / "b"
    # n_queries above the candidate count: every candidate is asked (the cap is tested below)
    build_symbol_set(a, ENTRIES, name="tiny", n_queries=1000, roots=roots)
    build_symbol_set(b, ENTRIES, name="tiny", n_queries=1000, roots=roots)
    return a, b, roots


def test_build_is_byte_for_byte_deterministic(
    built: tuple[Path, Path, dict[str, Path]],
) -> None:
    a, b, _ = built
    snap_a, snap_b = _snapshot(a), _snapshot(b)
    assert snap_a == snap_b
    assert {"queries.jsonl", "tune.jsonl", "test.jsonl", "meta.json"} <= set(snap_a)


def test_docstrings_gone_and_line_numbers_kept(
    built: tuple[Path, Path, dict[str, Path]],
) -> None:
    a, _, roots = built
    corpus = a / "corpus"
    files = sorted(corpus.rglob("*.py"))
    assert files
    for path in files:
        rel = path.relative_to(corpus).as_posix()
        source, _, inner = rel.partition("/")
        original = (roots[source] / inner).read_bytes()
        stripped = path.read_bytes()
        assert stripped.count(b"\n") == original.count(b"\n"), rel
        tree = ast.parse(stripped)
        for node in ast.walk(tree):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                assert ast.get_docstring(node) is None, rel
        old = {
            n.name: n.lineno
            for n in ast.walk(ast.parse(original))
            if isinstance(n, ast.FunctionDef)
        }
        new = {n.name: n.lineno for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
        assert new == old, rel
    assert not (corpus / "site-packages" / "fakepkg" / "broken.py").exists()
    meta = json.loads((a / "meta.json").read_text(encoding="utf-8"))
    assert meta["skipped_files"] == {"syntax_error": ["site-packages/fakepkg/broken.py"]}


def test_queries_gold_and_splits(built: tuple[Path, Path, dict[str, Path]]) -> None:
    a, _, _ = built
    queries = load_dataset(a / "queries.jsonl")
    meta = json.loads((a / "meta.json").read_text(encoding="utf-8"))
    assert len(queries) == meta["candidates"] - meta["dropped"].get("in_corpus", 0) >= 20
    records = [json.loads(x) for x in (a / "queries.jsonl").read_text().splitlines()]
    corpus_text = "\n".join(
        " ".join(p.read_text(encoding="utf-8").lower().split())
        for p in (a / "corpus").rglob("*.py")
    )
    for q, rec in zip(queries, records, strict=True):
        assert len(q.gold_files) == 1 and len(q.gold_symbols) == 1
        assert not is_test_path(q.gold_files[0])
        assert (a / "corpus" / q.gold_files[0]).is_file()
        assert q.id == f"sym:{q.gold_files[0]}:{q.gold_symbols[0]}"
        assert len(q.query.split()) >= 5
        assert " ".join(q.query.lower().split()) not in corpus_text
        assert rec["split"] == split_of(q.id)
    golds = {(q.gold_files[0], q.gold_symbols[0]) for q in queries}
    pkg = "site-packages/fakepkg/__init__.py"
    assert (pkg, "compute_the_answer_to_everything") in golds
    assert (pkg, "compute_short") not in golds  # fewer than 5 words
    # the same first sentence on two methods: ambiguous, neither is asked
    assert (pkg, "Shape.area_of_the_shape") not in golds
    assert (pkg, "Shape.perimeter") not in golds
    assert not any("fakepkg/tests" in f or f.startswith("stdlib/test/") for f, _ in golds)
    tune = load_dataset(a / "tune.jsonl")
    test = load_dataset(a / "test.jsonl")
    assert len(tune) + len(test) == len(queries)
    assert {q.id for q in tune} | {q.id for q in test} == {q.id for q in queries}
    assert meta["dropped"]["ambiguous"] == 2
    assert meta["test_files"] == 2
    assert meta["tune"] + meta["test"] == len(queries)


def test_score_run_file_per_split(
    built: tuple[Path, Path, dict[str, Path]], tmp_path: Path
) -> None:
    a, _, _ = built
    queries = load_dataset(a / "queries.jsonl")
    runs = tmp_path / "runs.jsonl"
    with runs.open("w") as fh:
        for q in queries:
            gold = {
                "path": q.gold_files[0],
                "symbol": q.gold_symbols[0],
                "start_line": 1,
                "end_line": 2,
            }
            other = {"path": "x.py", "symbol": "y", "start_line": 1, "end_line": 2}
            fh.write(json.dumps({"id": q.id, "strategy": "s", "hits": [other, gold]}) + "\n")
    scores = score_run_file(a / "queries.jsonl", runs)["s"]
    for split in ("tune", "test", "all"):
        if split in scores:
            assert scores[split]["sym_mrr@10"] == pytest.approx(0.5)
            assert scores[split]["recall@1"] == 0.0
            assert scores[split]["sym_recall@5"] == 1.0


def test_helpers() -> None:
    assert is_test_path("stdlib/test/test_json/test_decode.py")
    assert is_test_path("site-packages/numpy/core/tests/test_umath.py")
    assert is_test_path("stdlib/idlelib/idle_test/htest.py")
    assert is_test_path("site-packages/pkg/conftest.py")
    assert not is_test_path("site-packages/numpy/testing/_private/utils.py")
    assert not is_test_path("stdlib/unittest/case.py")
    assert {split_of(f"q{i}") for i in range(20)} == {"tune", "test"}
    assert split_of("q1") == split_of("q1")
    assert parse_entry("stdlib:json").path == "json"
    with pytest.raises(InputError):
        parse_entry("json")
    with pytest.raises(InputError):
        parse_entry("stdlib:../etc")
    for reserved in ("site-packages:click", "site-packages:requests/api.py"):
        with pytest.raises(InputError, match="outside check"):
            parse_entry(reserved)
    entries10, min10 = SETS["sym10k"]
    entries50, min50 = SETS["sym50k"]
    assert (min10, min50) == (10_000, 50_000)
    # sym50k is a superset: stdlib:* holds every stdlib entry of sym10k but the Lib/test parts
    assert "stdlib:*" in entries50
    assert {e for e in entries10 if not e.startswith("stdlib:") or "/" in e} <= set(entries50)
    # no package of a repository kept for an outside check, in either set
    for entry in (*entries10, *entries50):
        assert parse_entry(entry).path.split("/")[0] not in RESERVED_PACKAGES


def test_missing_entry_and_minimum(tmp_path: Path) -> None:
    roots = _roots(tmp_path)
    with pytest.raises(InputError, match="no package or module"):
        build_symbol_set(tmp_path / "o", ["stdlib:nosuchmodule"], roots=roots)
    with pytest.raises(InputError, match="fewer than"):
        build_symbol_set(tmp_path / "o", ["stdlib:shlex.py"], roots=roots, min_functions=10_000)


def test_sample_is_capped_and_seeded(
    built: tuple[Path, Path, dict[str, Path]], tmp_path: Path
) -> None:
    a, _, roots = built
    every = {q.id for q in load_dataset(a / "queries.jsonl")}
    one = build_symbol_set(tmp_path / "x", ENTRIES, n_queries=7, roots=roots)
    two = build_symbol_set(tmp_path / "y", ENTRIES, n_queries=7, roots=roots, seed=1)
    ids_one = {q.id for q, _ in one.queries}
    ids_two = {q.id for q, _ in two.queries}
    assert len(ids_one) == len(ids_two) == 7
    assert ids_one <= every and ids_two <= every
    assert ids_one != ids_two
