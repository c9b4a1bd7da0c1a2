"""Dataset loading and the built-in dataset generator."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from ragloom.errors import InputError
from ragloom.eval.dataset import EvalQuery, dump_dataset, load_dataset
from ragloom.eval.datasets import (
    DEFAULT_PACKAGES,
    build_datasets,
    collect_functions,
    first_sentence,
    identifier_query,
    split_words,
    strip_docstrings,
)

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "ragloom_questions.jsonl"
REPO = Path(__file__).resolve().parents[2]


def _write(tmp_path: Path, lines: list[str]) -> Path:
    p = tmp_path / "ds.jsonl"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


def test_load_ignores_unknown_fields_and_blank_lines(tmp_path: Path) -> None:
    p = _write(
        tmp_path,
        [
            json.dumps({"id": "q1", "query": "x y", "gold_files": ["a.py"], "note": "hi"}),
            "",
            json.dumps({"id": 2, "query": "z", "gold_files": ["./b.py"], "gold_symbols": ["C.f"]}),
        ],
    )
    qs = load_dataset(p)
    assert qs == [
        EvalQuery("q1", "x y", ("a.py",), ()),
        EvalQuery("2", "z", ("b.py",), ("C.f",)),
    ]


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ("{not json", "invalid JSON"),
        ("[1, 2]", "expected a JSON object"),
        ('{"id": "q", "gold_files": ["a"]}', "query"),
        ('{"id": "q", "query": "x", "gold_files": []}', "gold_files"),
        ('{"id": "q", "query": "x"}', "gold_files"),
        ('{"id": "q", "query": "x", "gold_files": ["a"], "gold_symbols": "f"}', "gold_symbols"),
        ('{"query": "x", "gold_files": ["a"]}', "id"),
    ],
)
def test_malformed_line_names_file_and_line(tmp_path: Path, bad: str, reason: str) -> None:
    good = json.dumps({"id": "ok", "query": "x", "gold_files": ["a.py"]})
    p = _write(tmp_path, [good, "", bad])
    with pytest.raises(InputError) as info:
        load_dataset(p)
    msg = str(info.value)
    assert f"{p}:3:" in msg
    assert reason in msg


def test_duplicate_ids_and_missing_file(tmp_path: Path) -> None:
    line = json.dumps({"id": "q", "query": "x", "gold_files": ["a.py"]})
    with pytest.raises(InputError, match=r":2: duplicate id 'q' \(first on line 1\)"):
        load_dataset(_write(tmp_path, [line, line]))
    with pytest.raises(InputError, match="not found"):
        load_dataset(tmp_path / "missing.jsonl")


def test_dump_then_load_round_trips(tmp_path: Path) -> None:
    qs = [EvalQuery("a", "q one", ("x.py",), ("F.g",)), EvalQuery("b", "q two", ("y.py",))]
    dump_dataset(qs, tmp_path / "o.jsonl")
    assert load_dataset(tmp_path / "o.jsonl") == qs


def test_golden_ragloom_questions_are_valid() -> None:
    qs = load_dataset(GOLDEN)
    assert len(qs) >= 30
    for q in qs:
        assert q.gold_symbols, q.id
        for f in q.gold_files:
            assert (REPO / f).is_file(), f"{q.id}: gold file {f} does not exist"


SOURCE = b'''"""Module doc with the secret phrase."""
import os


class Box:
    """Holds things.

    Many lines.
    """

    def put(self, x):
        """Store one value in the box for later use."""
        self.x = x

    async def get(self):
        """Fetch the stored value
        back out. Second sentence.
        """
        return self.x


def lonely():
    """Only a docstring, no body at all."""


def short():
    """Too short."""
    return 1
'''


def test_strip_docstrings_keeps_python_valid_and_lines() -> None:
    out = strip_docstrings(SOURCE)
    tree = ast.parse(out)
    assert out.count(b"\n") == SOURCE.count(b"\n")
    for phrase in (b"secret phrase", b"Holds things", b"Store one value", b"Fetch the", b"Only a"):
        assert phrase in SOURCE and phrase not in out
    defs = {
        n.name: n.lineno
        for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    orig = {
        n.name: n.lineno
        for n in ast.walk(ast.parse(SOURCE))
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    assert defs == orig
    assert all(
        ast.get_docstring(n) is None for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
    )


def test_strip_docstrings_rejects_invalid_python() -> None:
    with pytest.raises(SyntaxError):
        strip_docstrings(b"def f(:\n")


def test_collect_functions_and_queries() -> None:
    found = {f.qualname: f for f in collect_functions(SOURCE, "pkg/box.py")}
    assert set(found) == {"Box.put", "Box.get", "lonely"}  # "Too short." has < 3 words
    assert found["Box.put"].first_sentence == "Store one value in the box for later use"
    assert found["Box.get"].first_sentence == "Fetch the stored value back out"
    assert found["Box.put"].lineno == 11


def test_first_sentence_and_words() -> None:
    assert first_sentence("Return self.") is None
    assert first_sentence("Decode a JSON doc. Then more.") == "Decode a JSON doc"
    assert first_sentence(">>> f(1) returns 2") is None
    assert split_words("raw_decode") == ["raw", "decode"]
    assert split_words("HTTPResponse") == ["http", "response"]
    assert identifier_query("JSONDecoder.raw_decode", "json") == "raw decode json decoder"
    assert identifier_query("Box.__init__", "pkg") is None


def test_generator_is_deterministic_and_large(tmp_path: Path) -> None:
    a = build_datasets(tmp_path / "a", DEFAULT_PACKAGES)
    b = build_datasets(tmp_path / "b", DEFAULT_PACKAGES)
    assert len(a.docstring) >= 1000
    assert len(a.identifier) >= 1000
    assert a.docstring == b.docstring and a.identifier == b.identifier
    assert (tmp_path / "a" / "docstring.jsonl").read_bytes() == (
        tmp_path / "b" / "docstring.jsonl"
    ).read_bytes()
    ids = [q.id for q in a.docstring]
    assert len(ids) == len(set(ids))
    # every gold file exists in the copy, and a sample of query texts is gone from it
    for q in a.docstring[::50]:
        text = (a.corpus_dir / q.gold_files[0]).read_text(encoding="utf-8")
        assert q.query not in text, q.id
    capped = build_datasets(tmp_path / "c", ["json", "textwrap"], max_queries=10)
    assert len(capped.docstring) == 10
    again = build_datasets(tmp_path / "d", ["json", "textwrap"], max_queries=10)
    assert capped.docstring == again.docstring


def test_unknown_package_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no package or module"):
        build_datasets(tmp_path, ["no_such_pkg_xyz"])
