"""Field-aware BM25: document fields (path, symbol, signature, doc beside the body), per-field
boosts on the query side, plain documents, the layout in the tokenizer version."""

from __future__ import annotations

from pathlib import Path

import pytest

import ragloom.index.bm25 as bm25
from ragloom.index.bm25 import (
    FIELD_SEP,
    FIELDS,
    TantivyBm25,
    bm25_document,
    bm25_source_document,
    tokenise_document,
)
from ragloom.index.tokenize import BM25_FIELDS, TOKENIZER_VERSION, code_tokens

pytestmark = pytest.mark.skipif(not BM25_FIELDS, reason="field-aware BM25 is switched off")

PY = '''@cached
def load_config(path: str,
                strict: bool = False) -> Config:
    """Read the settings file."""
    # parse TOML
    return parse(path)
'''
GO = """// Retry calls fn until it succeeds.
/* backoff doubles */
func Retry(fn func() error) error {
\treturn loop(fn, "http://x")
}
"""


def _fields(text: str, symbol: str, path: str) -> dict[str, str]:
    return dict(zip(FIELDS, bm25_source_document(text, symbol, path).split(FIELD_SEP), strict=True))


def test_python_chunk_fields() -> None:
    f = _fields(PY, "conf.load_config", "pkg/conf.py")
    assert f["body"] == f"conf.load_config pkg/conf.py\n{PY}"
    assert f["path"] == "pkg/conf.py" and f["symbol"] == "conf.load_config"
    # the declaration, decorator skipped, continued while its parentheses are open
    assert f["signature"] == "def load_config(path: str, strict: bool = False) -> Config:"
    assert "Read the settings file." in f["doc"] and "parse TOML" in f["doc"]
    assert "return" not in f["doc"]


def test_slash_comment_chunk_fields() -> None:
    f = _fields(GO, "Retry", "retry.go")
    assert f["signature"] == "func Retry(fn func() error) error {"
    assert "Retry calls fn until it succeeds." in f["doc"] and "backoff doubles" in f["doc"]


def test_prose_and_data_have_no_signature_or_doc() -> None:
    f = _fields("# Title\n\nSome words about retries.\n", "Title", "docs/guide.md")
    assert f["signature"] == "" and f["doc"] == "" and f["symbol"] == "Title"


def test_body_tokens_are_the_single_field_document() -> None:
    doc = bm25_document(PY, "conf.load_config", "pkg/conf.py")
    body = doc.split(FIELD_SEP)[0]
    assert body == " ".join(code_tokens(f"conf.load_config pkg/conf.py\n{PY}"))
    assert tokenise_document("parseHeader x") == "parseheader parse header"
    # a separator inside the chunk text cannot shift the fields
    assert len(bm25_document(f"a{FIELD_SEP}b", "s", "p.py").split(FIELD_SEP)) == len(FIELDS)


def test_docstring_match_outranks_a_body_only_match(tmp_path: Path) -> None:
    bm = TantivyBm25.reset(tmp_path / "bm25")
    bm.apply(
        [
            (1, bm25_document("def a():\n    return retry_count + 1\n", "a", "m/a.py")),
            (2, bm25_document('def b():\n    """Count each retry."""\n', "b", "m/b.py")),
        ],
        [],
    )
    assert [r for r, _ in bm.search("retry", 5)] == [2, 1]


def test_plain_documents_are_all_body(tmp_path: Path) -> None:
    bm = TantivyBm25.reset(tmp_path / "bm25")
    bm.apply([(7, tokenise_document("payload without fields"))], [])
    assert [r for r, _ in bm.search("payload", 3)] == [7]


def test_boosts_are_query_side(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bm = TantivyBm25.reset(tmp_path / "bm25")
    bm.apply([(1, bm25_document("x = 1\n", "alpha", "pkg/beta.py"))], [])
    base = dict.fromkeys(FIELDS, 0.0) | {"body": 1.0}
    monkeypatch.setattr(bm25, "FIELD_BOOSTS", base)
    body_only = bm.search("beta", 1)[0][1]
    monkeypatch.setattr(bm25, "FIELD_BOOSTS", base | {"path": 1.0})
    assert bm.search("beta", 1)[0][1] > body_only
    # weighted terms still scale a term's whole contribution
    assert bm.search([("beta", 0.5)], 1)[0][1] == pytest.approx(bm.search("beta", 1)[0][1] / 2)


def test_layout_is_part_of_the_tokenizer_version() -> None:
    assert TOKENIZER_VERSION != "code-v1"
