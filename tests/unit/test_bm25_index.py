"""The tantivy BM25 index: search, idempotent replay after a crash between commit and sidecar."""

from __future__ import annotations

import shutil
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from ragloom.index.bm25 import TantivyBm25, _leading_tokens, bm25_document
from ragloom.index.tokenize import code_tokens


def _doc(text: str) -> str:
    return bm25_document(text, "sym", "a.py")


def test_search_finds_documents_by_code_tokens(tmp_path: Path) -> None:
    bm = TantivyBm25.reset(tmp_path / "bm25")
    bm.apply([(1, _doc("def parse_header(line): ...")), (2, _doc("class Wrapper: pass"))], [])
    hits = bm.search("parseHeader", 5)
    assert [r for r, _ in hits] == [1]
    assert bm.search("   ", 5) == [] and bm.search("?!", 5) == []


def test_replay_with_a_stale_sidecar_never_duplicates(tmp_path: Path) -> None:
    d = tmp_path / "bm25"
    bm = TantivyBm25.reset(d)
    bm.apply([(i, _doc(f"function number {i}")) for i in range(1, 6)], [])
    stale_sidecar = (d / "rowids.npy").read_bytes()
    # an update: remove 1-2, add 6-7; the engine commits...
    bm.apply([(6, _doc("new six")), (7, _doc("new seven"))], [1, 2])
    # ...but a crash lost the sidecar write: it still lists 1-5
    (d / "rowids.npy").write_bytes(stale_sidecar)
    again = TantivyBm25(d)
    assert set(again.rowids().tolist()) == {1, 2, 3, 4, 5}
    # the next run replays the same diff against the stale sidecar
    again.apply([(6, _doc("new six")), (7, _doc("new seven"))], [1, 2])
    assert again.doc_count() == 5 == len(again.rowids())
    assert [r for r, _ in again.search("seven", 5)] == [7]


def test_reopen_keeps_documents(tmp_path: Path) -> None:
    d = tmp_path / "bm25"
    TantivyBm25.reset(d).apply([(3, _doc("alpha beta"))], [])
    copy = tmp_path / "copy"
    shutil.copytree(d, copy)
    assert TantivyBm25(copy).search("beta", 3)[0][0] == 3


@given(
    st.lists(
        st.sampled_from(
            [
                "parseHeader",
                "a.b.c",
                "x",
                "  ",
                "\n",
                "42",
                "12345",
                "é",
                "foo_bar",
                "HTTPServer",
                "def",
                "(",
                "tab\tsep",
                "retry",
                "Queue.get",
            ]
        ),
        max_size=3000,
    ),
    st.integers(min_value=1, max_value=80),
)
def test_leading_tokens_are_the_first_distinct_code_tokens(parts: list[str], limit: int) -> None:
    """A long text is tokenised a window at a time, cut at whitespace, and only as far as
    needed: the tokens are those of tokenising it whole."""
    text = " ".join(parts)
    assert _leading_tokens(text, limit) == list(dict.fromkeys(code_tokens(text)))[:limit]
