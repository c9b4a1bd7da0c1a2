"""Fuzz query processing and the whole search path with hostile questions.

``process_query`` must be total (any text in, a well-formed :class:`ProcessedQuery` out), and a
search with any question and any strategy name must either answer or raise a typed
:class:`~ragloom.errors.RagError`: never another exception.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

import ragloom
from ragloom.errors import RagError
from ragloom.retrieve.query import InMemorySymbolTable, process_query
from tests.fuzzing import fuzz_settings

HOSTILE = st.one_of(
    st.text(max_size=300),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=80),
    st.sampled_from(
        [
            "",
            " ",
            "\x00",
            "?" * 2000,
            "a" * 10_000,
            "parse_header(" * 50,
            "what does `JSONDecoder.decode` do and how is parse_header used and why",
            "foo.bar.baz.qux.quux" * 40,
            '"unterminated',
            "$(rm -rf /); DROP TABLE chunks; --",
            "src/../../etc/passwd",
            "*:*",
            "AND OR NOT",
            "title:foo AND body:[a TO z]",
            "\u202e\u0301\ufeff",
            "日本語のクエリ と English",
            "in rust and go and python and typescript",
        ]
    ),
    st.lists(
        st.sampled_from(["parse", "header", "and", "in", "python", "::", ".", "_", "()", "`"]),
        max_size=60,
    ).map(" ".join),
)

STRATEGIES = st.one_of(
    st.sampled_from(
        [
            "hybrid",
            "hybrid-mmr",
            "dense",
            "sparse",
            "hybrid+raw",
            "hybrid+seed",
            "sparse+no-synonyms",
            "hybrid+no-expand+no-decompose",
        ]
    ),
    st.text(max_size=20),
)

ROWS = [
    ("JSONDecoder", "Lib/json/decoder.py", "c1"),
    ("JSONDecoder.decode", "Lib/json/decoder.py", "c2"),
    ("parse_header", "Lib/email/feedparser.py", "c3"),
]


@fuzz_settings(200)
@given(HOSTILE)
def test_process_query_is_total(text: str) -> None:
    pq = process_query(text, symbols=InMemorySymbolTable(ROWS))
    assert pq == process_query(text, symbols=InMemorySymbolTable(ROWS))
    assert isinstance(pq.dense_text, str)
    assert all(isinstance(t, str) and t for t in pq.terms)
    assert len({t.lower() for t in pq.terms}) == len(pq.terms)
    for e in pq.entities:
        assert 0.0 <= e.confidence <= 1.0


@pytest.fixture(scope="module")
def small_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ragloom.Index]:
    root = tmp_path_factory.mktemp("query-fuzz")
    (root / "json").mkdir()
    (root / "json" / "decoder.py").write_text(
        "class JSONDecoder:\n    def decode(self, s):\n        return s\n\n"
        "def parse_header(line):\n    return line.split(':', 1)\n"
    )
    (root / "main.go").write_text("package main\n\nfunc main() {}\n")
    (root / "notes.md").write_text("# Notes\n\nHeaders are parsed by parse_header.\n")
    idx = ragloom.Index.at(root, embedder="hashing:32")
    idx.index()
    yield idx
    idx.close()
    shutil.rmtree(root, ignore_errors=True)


@fuzz_settings(60)
@given(query=HOSTILE, strategy=STRATEGIES, top_k=st.integers(-3, 200))
def test_search_with_hostile_questions(
    small_index: ragloom.Index, query: str, strategy: str, top_k: int
) -> None:
    try:
        result = small_index.search(query, top_k=top_k, strategy=strategy)
    except RagError:
        return
    assert len(result.hits) <= max(top_k, 0)
    for hit in result.hits:
        assert hit.path and hit.start_line <= hit.end_line


@fuzz_settings(30)
@given(query=HOSTILE, budget=st.integers(-10, 5000), fmt=st.sampled_from(["xml", "json"]))
def test_context_with_hostile_questions(
    small_index: ragloom.Index, query: str, budget: int, fmt: str
) -> None:
    try:
        ctx = small_index.get_context(query, top_k=10, budget=budget, format=fmt)
    except RagError:
        return
    assert ctx.stats.tokens_total <= max(budget, 0)
