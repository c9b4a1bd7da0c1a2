"""A query asks the store for its generation once (the pin), not once per cache it checks.

The per-generation caches (chunk roles, symbols, chunk count, history tables, code graph) are
checked against the generation the query was pinned to. With PostgreSQL each ask of the store
was a round trip: nine of the twenty statements of a hybrid query before (docs/postgres.md)."""

from __future__ import annotations

from pathlib import Path

from ragloom.api import Index
from tests.conftest import copy_stdlib_packages

QUERIES = ["decode a JSON document", "JSONDecodeError", "wrap text to a given width"]


def test_a_query_reads_the_generation_from_its_pinned_view(tmp_path: Path) -> None:
    root = copy_stdlib_packages(tmp_path / "repo", ["json", "textwrap"])
    with Index.at(root, embedder="hashing:64") as idx:
        idx.index()
        retriever = idx.retriever
        retriever.search(QUERIES[0], top_k=5)  # pins the published generation
        calls = 0
        real = retriever.store.generation

        def counting() -> int:
            nonlocal calls
            calls += 1
            return real()

        retriever.store.generation = counting  # type: ignore[method-assign]
        before = [retriever.search(q, top_k=5).hits for q in QUERIES]
        assert calls == 0
        # outside a query the caches still ask the store
        assert retriever.chunk_count() > 0 and calls == 1
    # a reader that stays open sees a new generation: the pin's data_version check, then a
    # fresh view, and its caches follow it
    with (
        Index.at(root, embedder="hashing:64") as reader,
        Index.at(root, embedder="hashing:64") as w,
    ):
        assert [reader.retriever.search(q, top_k=5).hits for q in QUERIES] == before
        (root / "textwrap.py").write_text(
            (root / "textwrap.py").read_text() + "\ndef frobnicate_widths():\n    return 1\n"
        )
        w.index()
        hits = reader.retriever.search("frobnicate_widths", top_k=3, strategy="hybrid").hits
        assert hits and hits[0].symbol == "frobnicate_widths"
        assert reader.retriever.chunk_count() == w.retriever.chunk_count()
