"""PostgreSQL-only properties: numbered migrations, errors a reader meets, ef_search, feedback."""

from __future__ import annotations

import numpy as np
import psycopg
import pytest

from ragloom.errors import DbError, IndexNotFoundError
from ragloom.index.postgres import MIGRATIONS, SCHEMA_VERSION, PostgresBackend, connect, migrate


def test_migrations_are_numbered_recorded_and_idempotent(pg_dsn: str) -> None:
    with connect(pg_dsn) as conn:
        assert migrate(conn) == SCHEMA_VERSION == len(MIGRATIONS)
        assert migrate(conn) == SCHEMA_VERSION  # nothing left to apply
        rows = conn.execute("SELECT version FROM schema_migrations ORDER BY version").fetchall()
        assert [r[0] for r in rows] == list(range(1, SCHEMA_VERSION + 1))
        tables = {
            r[0]
            for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        }
        assert {"repositories", "files", "chunks", "embeddings", "feedback", "query_log"} <= tables
        # a database migrated by a newer ragloom is refused, not misread
        conn.execute("INSERT INTO schema_migrations(version) VALUES (%s)", (SCHEMA_VERSION + 1,))
        with pytest.raises(DbError, match="newer than this ragloom"):
            migrate(conn)
    with pytest.raises(DbError, match="newer than this ragloom"):
        PostgresBackend(pg_dsn, "r")


def test_reader_errors_name_the_fix(pg_dsn: str) -> None:
    with pytest.raises(IndexNotFoundError, match="ragloom index PATH --backend postgres"):
        PostgresBackend(pg_dsn, "r")  # no ragloom tables yet
    PostgresBackend(pg_dsn, "alpha", create=True).close()
    with pytest.raises(IndexNotFoundError, match=r"no repository 'beta'.*it holds: alpha"):
        PostgresBackend(pg_dsn, "beta")


def test_ef_search_follows_k_and_feedback_is_stored(pg_dsn: str) -> None:
    b = PostgresBackend(pg_dsn, "r", create=True, ef_search=40)
    try:
        b.set_repository(
            root="/r",
            embedding_key="k",
            embedding_dim=3,
            embedding_model="m",
            embedding_spec="m",
            tokenizer_version="t",
            ragloom_version="0",
        )
        q = np.array([1.0, 0.0, 0.0], dtype=np.float32)
        for k, ef in ((5, 40), (300, 600), (900, 1000)):
            assert b.vector_search(q, k) == []
            row = b._conn.execute("SHOW hnsw.ef_search").fetchone()
            assert row == (str(ef),)
        b.record_feedback("how to x", "a.py::x", 1)
        b.log_query("how to x", "hybrid", 1, 3, 12.5)
        with psycopg.connect(pg_dsn) as conn:
            fb = conn.execute("SELECT query, chunk_id, signal FROM feedback").fetchall()
            ql = conn.execute("SELECT strategy, generation, hits FROM query_log").fetchall()
        assert fb == [("how to x", "a.py::x", 1)] and ql == [("hybrid", 1, 3)]
    finally:
        b.close()


def test_a_database_of_the_previous_schema_is_refused_then_migrated_in_place(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Migration 6 (the repositories' ranking models) on a database ragloom made at schema 5:
    readers name the command that upgrades it, the indexer applies it, and what the database
    held stays."""
    import ragloom.index.pg_schema as schema
    from ragloom.retrieve.adapt import RowModelStore

    with monkeypatch.context() as m:  # the ragloom before migration 6
        m.setattr(schema, "SCHEMA_VERSION", 5)
        PostgresBackend(pg_dsn, "alpha", create=True).close()
    with pytest.raises(
        DbError, match=rf"version 5 is older than {SCHEMA_VERSION}; run `ragloom index"
    ):
        PostgresBackend(pg_dsn, "alpha")
    PostgresBackend(pg_dsn, "alpha", create=True).close()  # `ragloom index` migrates
    backend = PostgresBackend(pg_dsn, "alpha")
    try:
        store = RowModelStore(backend)
        assert store.where == "postgres:alpha" and store.stamp() is None and store.read() is None
        backend.set_ranking_model('{"format": "x"}', "d" * 12, "b" * 12)
        first = store.stamp()
        assert first is not None and store.read() == '{"format": "x"}'
        backend.set_ranking_model('{"format": "y"}', "d" * 12, "b" * 12)
        assert store.stamp() != first  # the same digest written again is a new stamp
        assert store.remove() is True and store.stamp() is None and store.remove() is False
    finally:
        backend.close()


def test_readers_go_on_with_a_database_a_storage_migration_behind(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Migrations 7 and 8 change only how vectors are stored and add the files' bytes, which a
    reader does without: a database at schema 6 is read (a team's upgraded servers go on
    answering), and the indexer migrates it."""
    import ragloom.index.pg_schema as schema

    assert schema.READER_SCHEMA == 6 < SCHEMA_VERSION
    with monkeypatch.context() as m:  # the ragloom before migration 7
        m.setattr(schema, "SCHEMA_VERSION", 6)
        PostgresBackend(pg_dsn, "alpha", create=True).close()
    reader = PostgresBackend(pg_dsn, "alpha")  # no refusal
    try:
        assert reader.generation() == 0
        assert reader.file_contents(["a.py"]) == {}  # no files.content yet (migration 8)
    finally:
        reader.close()
    PostgresBackend(pg_dsn, "alpha", create=True).close()  # `ragloom index` migrates
    with connect(pg_dsn) as conn:
        version = conn.execute("SELECT max(version) FROM schema_migrations").fetchone()
        storage = conn.execute(
            "SELECT attstorage FROM pg_attribute WHERE attrelid = 'chunks'::regclass "
            "AND attname = 'embedding'"
        ).fetchone()
    assert version == (SCHEMA_VERSION,) and storage == ("m",)
