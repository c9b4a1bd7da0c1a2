"""A query asks the store for its generation once (the pin), not once per cache it checks.

The per-generation caches (chunk roles, symbols, chunk count, history tables, code graph) are
checked against the generation the query was pinned to. With PostgreSQL each ask of the store
was a round trip: nine of the twenty statements of a hybrid query before (docs/postgres.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ragloom.api import Index, open_postgres
from ragloom.sources.pg_items import PgItemStore
from tests.conftest import copy_stdlib_packages
from tests.integration.test_adapt_repo import _git, make_web_repo

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


def test_a_postgres_query_reads_the_history_version_once(
    tmp_path: Path, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The change history's cache key and its BM25's write counter come from one statement
    (three before: the sync cursor, the item count, the counter), and a sync between two
    queries is still seen by the next one."""
    import psycopg

    monkeypatch.setenv("RAGLOOM_CACHE_DIR", str(tmp_path / "cache"))
    root = make_web_repo(tmp_path / "web")
    writer = open_postgres(root, dsn=pg_dsn, embedder="hashing:64", create=True)
    reader = open_postgres(root, dsn=pg_dsn, cache_dir=tmp_path / "node")
    try:
        writer.index()
        hist = reader.retriever.history
        assert hist is not None
        reader.search("Fix the session handling of the cookie", top_k=3)
        seen: list[str] = []
        real = psycopg.Connection.execute

        def spy(self: psycopg.Connection[Any], query: Any, *a: Any, **k: Any) -> Any:
            seen.append(str(query))
            return real(self, query, *a, **k)

        monkeypatch.setattr(psycopg.Connection, "execute", spy)
        reader.search("Add retries to the upload of the form", top_k=3)
        monkeypatch.setattr(psycopg.Connection, "execute", real)
        history_reads = [q for q in seen if "source_versions" in q or "source_meta" in q]
        assert len(history_reads) == 1, history_reads
        store = hist.store
        assert isinstance(store, PgItemStore)
        before = store.version()

        (root / "web" / "upload.py").write_text("def frobnicate_upload():\n    return 1\n")
        _git(root, "add", "-A")
        _git(root, "commit", "-q", "-m", "Frobnicate the upload quota", date="2021-03-01T00:00")
        writer.index()
        # the next query reads the new counter: its BM25 of the commits is brought up to it
        used: list[int] = []
        similar = hist.similar

        def recording(query: str, k: int) -> Any:
            used.append(store.version())  # the counter the query's scope holds
            return similar(query, k)

        monkeypatch.setattr(hist, "similar", recording)
        reader.search("frobnicate the upload quota", top_k=3)
        assert used and used[0] == store.version() > before
        found = [p for _, paths in similar("frobnicate quota", 3) for p in paths]
        assert "web/upload.py" in found
    finally:
        reader.close()
        writer.close()
