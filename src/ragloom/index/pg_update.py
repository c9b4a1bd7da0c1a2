"""One index update of the PostgreSQL backend: :class:`PgUpdate`, generation ``G + 1`` of a
repository written in one transaction (docs/postgres.md).

It writes the changed files' chunk rows (COPY) and code graph records, deletes the replaced
ones, fills vectors from the embedding cache and bumps the repository's ``generation`` and
``watermark`` (the largest chunk rowid it shows), then commits: PostgreSQL's MVCC makes the
whole generation visible at once, and a writer killed at any point never committed.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ragloom.errors import DbError
from ragloom.index.pg_schema import RepositoryInfo, _one_line, connect
from ragloom.index.pg_search import _fill_vectors
from ragloom.index.rows import CHUNK_META_COLS, CHUNK_VALUE_COLS, chunk_values, diff_chunk_set

if TYPE_CHECKING:
    from ragloom.types import Chunk


class UpdateTarget(Protocol):
    """What :class:`PgUpdate` uses of its :class:`~ragloom.index.postgres.PostgresBackend`."""

    dsn: str
    repo_id: int
    info: RepositoryInfo

    def refresh_info(self) -> RepositoryInfo: ...


_INSERT_COLS = f"repo_id, {CHUNK_VALUE_COLS}"


class PgUpdate:
    """Generation ``G + 1`` of one repository, written in one transaction on its own
    connection; nothing is visible to readers until :meth:`publish` commits."""

    def __init__(self, backend: UpdateTarget) -> None:
        import psycopg

        from ragloom.ingest.filegraph import FILE_GRAPH_VERSION

        self._backend = backend
        self._repo_id = backend.repo_id
        self._conn = connect(backend.dsn, autocommit=False, app=f"ragloom index pid {os.getpid()}")
        self._new: list[tuple[Any, ...]] = []
        self._files: list[tuple[Any, ...]] = []
        self._graphs: dict[str, tuple[str, bytes] | None] = {}
        """Buffered graph records by path: (file hash, record) to upsert, None to delete."""
        self._done = False
        try:
            row = self._conn.execute(
                "SELECT generation, EXISTS (SELECT 1 FROM chunks WHERE repo_id = %s), "
                "graph_version FROM repositories WHERE id = %s FOR UPDATE",
                (self._repo_id, self._repo_id),
            ).fetchone()
            assert row is not None
            if int(row[2]) != FILE_GRAPH_VERSION:
                # records of another extractor version (or none yet): dropped in this
                # transaction; the indexer writes this version's (backend_index)
                self._conn.execute("DELETE FROM file_graph WHERE repo_id = %s", (self._repo_id,))
                self._conn.execute(
                    "UPDATE repositories SET graph_version = %s WHERE id = %s",
                    (FILE_GRAPH_VERSION, self._repo_id),
                )
        except psycopg.Error as exc:
            self._conn.close()
            raise DbError(f"index write failed: {_one_line(exc)}") from exc
        self._generation = int(row[0]) + 1
        self._empty = not row[1]
        """A first load: no stored chunk to compare with (one query per file saved)."""
        self._written: set[str] = set()
        """Paths written or removed by this update (their rows are no longer the stored ones)."""

    @property
    def generation(self) -> int:
        return self._generation

    def replace_file(
        self,
        path: str,
        chunks: Sequence[Chunk],
        *,
        file_hash: str,
        size: int,
        mtime: float,
        language: str | None,
        source: str,
        graph: bytes | None = None,
        content: bytes | None = None,
    ) -> tuple[int, int, int, int]:
        conn = self._conn
        if path in self._written:  # written before in this update: compare with those rows
            self._flush()
        diff = diff_chunk_set(
            ()
            if self._empty and path not in self._written
            else conn.execute(
                f"SELECT id, rowid, node_hash, {', '.join(CHUNK_META_COLS)} FROM chunks "
                "WHERE repo_id = %s AND path = %s",
                (self._repo_id, path),
            ),
            chunks,
        )
        sets = ", ".join(f"{col} = %s" for col in CHUNK_META_COLS)
        for rowid, meta in diff.moved:
            conn.execute(f"UPDATE chunks SET {sets} WHERE rowid = %s", (*meta, rowid))
        self._new.extend((self._repo_id, *chunk_values(c)) for c in diff.new)
        self._written.add(path)
        if diff.drop:
            conn.execute("DELETE FROM chunks WHERE rowid = ANY(%s)", (diff.drop,))
        self._files.append(
            (
                self._repo_id,
                path,
                file_hash,
                size,
                mtime,
                language,
                source,
                len(chunks),
                time.time(),
                content,
            )
        )
        self._graphs[path] = None if graph is None else (file_hash, graph)
        if len(self._new) >= 5000 or len(self._graphs) >= 2000:
            self._flush()
        return diff.counts

    def put_file_graph(self, path: str, file_hash: str, data: bytes) -> None:
        """Keep the graph record of a file whose chunks are unchanged (a backfill)."""
        self._graphs[path] = (file_hash, data)
        if len(self._graphs) >= 2000:
            self._flush()

    def remove_file(self, path: str) -> int:
        self._flush()  # buffered rows of this path (if any) go first
        self._written.add(path)
        cur = self._conn.execute(
            "DELETE FROM chunks WHERE repo_id = %s AND path = %s", (self._repo_id, path)
        )
        self._conn.execute(
            "DELETE FROM files WHERE repo_id = %s AND path = %s", (self._repo_id, path)
        )
        self._conn.execute(
            "DELETE FROM file_graph WHERE repo_id = %s AND path = %s", (self._repo_id, path)
        )
        return int(cur.rowcount or 0)

    def _flush(self) -> None:
        """Write the buffered file records and graph records (pipelined batches) and COPY the
        buffered new chunk rows (bulk load: ~10x faster than INSERTs)."""
        if self._graphs:
            drop = [p for p, rec in self._graphs.items() if rec is None]
            put = [(self._repo_id, p, *rec) for p, rec in self._graphs.items() if rec is not None]
            if drop:
                self._conn.execute(
                    "DELETE FROM file_graph WHERE repo_id = %s AND path = ANY(%s)",
                    (self._repo_id, drop),
                )
            if put:
                with self._conn.cursor() as cur:
                    cur.executemany(
                        "INSERT INTO file_graph(repo_id, path, hash, data) "
                        "VALUES (%s, %s, %s, %s) ON CONFLICT (repo_id, path) DO UPDATE SET "
                        "hash = EXCLUDED.hash, data = EXCLUDED.data",
                        put,
                    )
            self._graphs = {}
        if self._files:
            with self._conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO files(repo_id, path, hash, size, mtime, language, source, "
                    "n_chunks, indexed_at, content) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
                    "ON CONFLICT (repo_id, path) DO UPDATE SET hash = EXCLUDED.hash, "
                    "size = EXCLUDED.size, mtime = EXCLUDED.mtime, language = EXCLUDED.language, "
                    "source = EXCLUDED.source, n_chunks = EXCLUDED.n_chunks, "
                    "indexed_at = EXCLUDED.indexed_at, content = EXCLUDED.content",
                    self._files,
                )
            self._files = []
        if not self._new:
            return
        with (
            self._conn.cursor() as cur,
            cur.copy(f"COPY chunks ({_INSERT_COLS}) FROM STDIN") as copy,
        ):
            for row in self._new:
                copy.write_row(row)
        self._new = []

    def publish(self) -> int:
        """Flush, give new rows their cached vectors, bump generation and watermark, commit."""
        import psycopg

        conn = self._conn
        try:
            self._flush()
            info = self._backend.info
            if info.embedding_key:
                _fill_vectors(conn, self._repo_id, info.embedding_key, None)
            conn.execute(
                "UPDATE repositories SET generation = %s, "
                "watermark = greatest(watermark, "
                "(SELECT coalesce(max(rowid), 0) FROM chunks WHERE repo_id = %s)), "
                "n_chunks = (SELECT count(*) FROM chunks WHERE repo_id = %s), "
                "n_embedded = (SELECT count(*) FROM chunks WHERE repo_id = %s "
                "AND embedding IS NOT NULL), "
                "data_version = data_version + 1, published_at = now() WHERE id = %s",
                (self._generation, self._repo_id, self._repo_id, self._repo_id, self._repo_id),
            )
            conn.commit()
        except psycopg.Error as exc:
            conn.rollback()
            raise DbError(f"index write failed: {_one_line(exc)}") from exc
        finally:
            self._done = True
            conn.close()
        self._backend.refresh_info()
        return self._generation

    def abort(self) -> None:
        """Give the update up: nothing of it was committed. After a Ctrl-C that cut a
        statement short the connection is still busy with it and a rollback fails ("another
        command is already in progress"); closing the connection ends the transaction all the
        same, so the rollback is only tried."""
        import psycopg

        if not self._done:
            self._done = True
            try:
                self._conn.rollback()
            except psycopg.Error:
                pass
            finally:
                self._conn.close()
