"""The PostgreSQL + pgvector storage backend: one database, many repositories, many servers.

Why (issue 14, docs/postgres.md): a team with many repositories and several ragloom servers
behind a load balancer needs one proven database instead of per-laptop files. Everything the
embedded backend keeps in ``index.sqlite`` and ``vectors/`` lives in tables keyed by
repository; BM25 stays ragloom's engine, rebuilt on each serving node from the database's
current generation (:class:`PgBm25`, the seed's "Rebuild from DB").

Consistency. Each index update is **one transaction** (:class:`PgUpdate`): it writes the
changed files' chunk rows (COPY) and code graph records, deletes the replaced ones, fills
vectors from the embedding cache and bumps the repository's ``generation`` and ``watermark``
(the largest chunk rowid it shows), then commits. PostgreSQL's MVCC makes the whole generation visible at once; a writer
killed at any point never committed, so the previous generation stays intact. Readers answer
from one generation with the retriever's seqlock (docs/consistency.md): a query pins
(generation, watermark), drops rows above the watermark, and is answered again if the
generation changed while it ran. Rowids come from one sequence and are never reused, so a rowid
names one version of one chunk's text, as in SQLite.

Embeddings are a content-addressed cache (``embeddings``: embedding key, node hash -> vector)
shared by all repositories; each chunk row carries the vector of its text for the repository's
embedding key, so the pgvector HNSW index (cosine, one partial expression index per dimension)
searches chunk rows directly. Chunks without a vector yet (``--no-embed``, an interrupted
embedding run) are found by BM25 only until embedded, as in the embedded backend.

Two indexers of one repository cannot interleave: a session-level advisory lock on the
repository (released by the server when the holder's connection dies, even by SIGKILL) makes
the second fail with the same :class:`~ragloom.errors.IndexLockedError` the folder lock gives.

Schema changes are numbered migrations recorded in ``schema_migrations``, applied under a
transaction-level advisory lock so concurrent first runs do not race
(:mod:`ragloom.index.pg_schema`). :class:`PgUpdate` lives in :mod:`ragloom.index.pg_update`,
:class:`PgVectors` and :class:`PgBm25` in :mod:`ragloom.index.pg_search`; this module keeps
:class:`PostgresBackend` and re-exports their names.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
import time
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np

from ragloom.errors import ConfigError, DbError, IndexLockedError, IndexNotFoundError
from ragloom.index.pg_schema import (
    _LOCK_CLASS,
    _REPO_COLS,
    DEFAULT_EF_SEARCH,
    MIGRATIONS,
    READER_SCHEMA,
    SCHEMA_VERSION,
    RepositoryInfo,
    _one_line,
    connect,
    dsn_from_env,
    migrate,
)
from ragloom.index.pg_schema import DSN_ENV as DSN_ENV
from ragloom.index.pg_schema import EF_SEARCH_MAX as EF_SEARCH_MAX
from ragloom.index.pg_schema import HNSW_EF_CONSTRUCTION as HNSW_EF_CONSTRUCTION
from ragloom.index.pg_schema import HNSW_M as HNSW_M
from ragloom.index.pg_schema import ensure_vector_index as ensure_vector_index
from ragloom.index.pg_schema import list_repositories as list_repositories
from ragloom.index.pg_schema import only_repository as only_repository
from ragloom.index.pg_search import BM25_CATCH_UP_WAIT_S as BM25_CATCH_UP_WAIT_S
from ragloom.index.pg_search import BM25_KEEP_GENERATIONS as BM25_KEEP_GENERATIONS
from ragloom.index.pg_search import PgBm25, PgSearchBackend, PgVectors, _fill_vectors
from ragloom.index.pg_search import bm25_cache_dir as bm25_cache_dir
from ragloom.index.pg_update import PgUpdate
from ragloom.index.rows import CHUNK_COLS as _CHUNK_COLS
from ragloom.index.rows import (
    FILE_COLS,
    MANIFEST_WHERE,
    ChunkCounts,
    ChunkRow,
    FileRow,
    GraphDefRow,
    graph_record,
    manifest_texts,
)
from ragloom.index.rows import row_to_chunk as _row_to_chunk

if TYPE_CHECKING:
    import psycopg

log = logging.getLogger("ragloom.index")

CONTENT_BATCH = 200
"""Files given their bytes per transaction by the backfill after migration 8."""

__all__ = [
    "DEFAULT_EF_SEARCH",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "PgBm25",
    "PgUpdate",
    "PgVectors",
    "PostgresBackend",
    "RepositoryInfo",
    "RepositoryModel",
    "connect",
    "dsn_from_env",
    "migrate",
]


class RepositoryModel(TypedDict):
    """What a repository is indexed with (:meth:`PostgresBackend.set_repository`)."""

    root: str
    embedding_key: str
    embedding_dim: int
    embedding_model: str
    embedding_spec: str
    tokenizer_version: str
    ragloom_version: str


class PostgresBackend(PgSearchBackend, ChunkCounts):
    """One repository in a PostgreSQL database (the storage contract, ``index/backend.py``).

    ``create=True`` (the indexer) migrates the schema and creates the repository row; readers
    open an existing repository (IndexNotFoundError otherwise). One autocommit connection serves
    reads (each statement sees the latest commit; the retriever's seqlock keeps an answer to
    one generation); updates use their own connection and transaction."""

    name = "postgres"
    keeps_content = True

    def __init__(
        self,
        dsn: str,
        repository: str,
        *,
        create: bool = False,
        ef_search: int = DEFAULT_EF_SEARCH,
        pool_size: int = 1,
    ) -> None:
        if not dsn:
            raise ConfigError(
                f"the postgres backend needs a DSN: --dsn postgresql://... or {DSN_ENV}"
            )
        self.dsn = dsn
        self.repository = repository
        self.ef_search = ef_search
        self._conn = connect(dsn)
        self._lock = threading.RLock()
        self._pool_size = max(1, int(pool_size))
        self._pool: queue.LifoQueue[psycopg.Connection[Any]] = queue.LifoQueue()
        self._pool_open = 0
        self._pool_lock = threading.Lock()
        self._efs: dict[int, int] = {}
        """hnsw.ef_search each read connection is set to (by ``id``; absent: not yet)."""
        try:
            if create:
                migrate(self._conn)
                self._conn.execute(
                    "INSERT INTO repositories(name) VALUES (%s) ON CONFLICT (name) DO NOTHING",
                    (repository,),
                )
            else:
                self._check_schema()
            self.info = self._read_info()
        except BaseException:
            self._conn.close()
            raise
        self.repo_id = self.info.id

    # -- repositories ---------------------------------------------------------------------
    def _check_schema(self) -> None:
        import psycopg

        try:
            row = self._conn.execute("SELECT max(version) FROM schema_migrations").fetchone()
        except psycopg.errors.UndefinedTable:
            raise IndexNotFoundError(
                "no ragloom index in this PostgreSQL database; create one with "
                "`ragloom index PATH --backend postgres --dsn ...`"
            ) from None
        version = int(row[0]) if row and row[0] is not None else 0
        if version > SCHEMA_VERSION:
            raise DbError(
                f"PostgreSQL schema version {version} is newer than this ragloom supports "
                f"({SCHEMA_VERSION}); upgrade ragloom"
            )
        if version < READER_SCHEMA:
            raise DbError(
                f"PostgreSQL schema version {version} is older than {SCHEMA_VERSION}; run "
                "`ragloom index PATH --backend postgres` to migrate it"
            )

    def _read_info(self) -> RepositoryInfo:
        row = self._fetchone(
            f"SELECT {_REPO_COLS} FROM repositories WHERE name = %s", (self.repository,)
        )
        if row is None:
            with self._lock:
                names = list_repositories(self._conn)
            raise IndexNotFoundError(
                f"no repository {self.repository!r} in this PostgreSQL database"
                + (f" (it holds: {', '.join(names)})" if names else "")
                + "; create it with `ragloom index PATH --backend postgres --repo NAME`"
            )
        return RepositoryInfo(*row)

    def refresh_info(self) -> RepositoryInfo:
        with self._lock:
            self.info = self._read_info()
        return self.info

    def set_repository(
        self,
        *,
        root: str,
        embedding_key: str,
        embedding_dim: int,
        embedding_model: str,
        embedding_spec: str,
        tokenizer_version: str,
        ragloom_version: str,
        fill: bool = False,
    ) -> bool:
        """Record what the repository is indexed with; True when the embedding key or
        dimension changed (every stored vector of the repository is then dropped, in the same
        transaction, and re-filled from the cache or re-embedded). ``fill``: the new model's
        vectors are in the cache already (a staged switch): the chunks get them in the same
        transaction, so a reader sees the old model's vectors or the new one's, never none."""
        if fill and embedding_dim:
            ensure_vector_index(self._conn, embedding_dim)  # before: filled rows go into it
        with self._lock, self._conn.transaction():
            row = self._conn.execute(
                "SELECT embedding_key, embedding_dim FROM repositories WHERE id = %s FOR UPDATE",
                (self.repo_id,),
            ).fetchone()
            assert row is not None
            changed = bool(row[0]) and (row[0] != embedding_key or row[1] != embedding_dim)
            if changed:
                self._conn.execute(
                    "UPDATE chunks SET embedding = NULL, embedding_dim = NULL WHERE repo_id = %s",
                    (self.repo_id,),
                )
            self._conn.execute(
                "UPDATE repositories SET root = %s, embedding_key = %s, embedding_dim = %s, "
                "embedding_model = %s, embedding_spec = %s, tokenizer_version = %s, "
                "ragloom_version = %s, data_version = data_version + %s, "
                "n_embedded = CASE WHEN %s THEN 0 ELSE n_embedded END WHERE id = %s",
                (
                    root,
                    embedding_key,
                    embedding_dim,
                    embedding_model,
                    embedding_spec,
                    tokenizer_version,
                    ragloom_version,
                    int(changed),
                    changed,
                    self.repo_id,
                ),
            )
            if changed and fill:
                _fill_vectors(self._conn, self.repo_id, embedding_key, None)
        if embedding_dim:
            ensure_vector_index(self._conn, embedding_dim)
        self.refresh_info()
        return changed

    # -- generations ----------------------------------------------------------------------
    def generation(self) -> int:
        row = self._fetchone("SELECT generation FROM repositories WHERE id = %s", (self.repo_id,))
        return int(row[0]) if row else 0

    def published(self) -> tuple[int, int]:
        row = self._fetchone(
            "SELECT generation, watermark FROM repositories WHERE id = %s", (self.repo_id,)
        )
        return (int(row[0]), int(row[1])) if row else (0, 0)

    def data_version(self) -> int:
        """Bumped by every publish and every batch of vectors; the repository row is re-read
        with it, so counts the retriever caches follow."""
        with self._lock:
            self.info = self._read_info()
        return self.info.data_version

    def hidden_rowids(self, generation: int) -> list[int]:
        """None: a published update deleted its replaced rows in the same transaction."""
        return []

    # -- locks ----------------------------------------------------------------------------
    @contextmanager
    def write_lock(self, wait_s: float = 0.0) -> Iterator[object]:
        """The repository's advisory lock, held by this backend's session (tried again every
        0.1 s for ``wait_s`` seconds while another writer holds it)."""
        deadline = time.monotonic() + max(0.0, wait_s)
        while True:
            with self._lock:
                row = self._conn.execute(
                    "SELECT pg_try_advisory_lock(%s, %s)", (_LOCK_CLASS, self.repo_id)
                ).fetchone()
            if (row and row[0]) or time.monotonic() >= deadline:
                break
            time.sleep(0.1)
        if not row or not row[0]:
            holder = self._lock_holder()
            raise IndexLockedError(
                f"index is locked: another ragloom process ({holder}) is writing to "
                f"repository {self.repository!r} in PostgreSQL; wait for it to finish"
            )
        self._conn.execute(
            "SELECT set_config('application_name', %s, false)",
            (f"ragloom index pid {os.getpid()}",),
        )
        try:
            yield self
        finally:
            with self._lock:
                self._conn.execute("SELECT pg_advisory_unlock(%s, %s)", (_LOCK_CLASS, self.repo_id))

    def _lock_holder(self) -> str:
        row = self._fetchone(
            "SELECT a.application_name, a.pid FROM pg_locks l JOIN pg_stat_activity a "
            "ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.classid = %s "
            "AND l.objid = %s AND l.granted",
            (_LOCK_CLASS, self.repo_id),
        )
        if row is None:
            return "unknown"
        return f"{row[0] or 'server pid'} (server pid {row[1]})"

    def begin_update(self) -> PgUpdate:
        return PgUpdate(self)

    # -- files and chunks (the published generation) -------------------------------------
    @contextmanager
    def _reader(self) -> Iterator[psycopg.Connection[Any]]:
        """A connection for one read statement: the backend's own one (under its lock) with
        ``pool_size`` 1, else one of up to ``pool_size`` read connections, opened on demand, so
        a serving node's concurrent queries run their statements side by side instead of one
        after another on one connection (docs/postgres.md, "Serving from the database").
        Autocommit: each statement sees the latest commit, as on the single connection."""
        if self._pool_size <= 1:
            with self._lock:
                yield self._conn
            return
        try:
            conn = self._pool.get_nowait()
        except queue.Empty:
            with self._pool_lock:
                fresh = self._pool_open < self._pool_size
                if fresh:
                    self._pool_open += 1
            if fresh:
                try:
                    conn = connect(self.dsn, app="ragloom-read")
                except BaseException:
                    with self._pool_lock:
                        self._pool_open -= 1
                    raise
            else:
                conn = self._pool.get()
        try:
            yield conn
        finally:
            if conn.closed or conn.broken:
                with self._pool_lock:
                    self._pool_open -= 1
                self._efs.pop(id(conn), None)
            else:
                self._pool.put(conn)

    def _fetchone(self, sql: str, params: Sequence[Any] = ()) -> Any:
        with self._reader() as conn:
            return conn.execute(sql, params).fetchone()

    def _fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        with self._reader() as conn:
            return conn.execute(sql, params).fetchall()

    def files(self) -> dict[str, FileRow]:
        rows = self._fetchall(f"SELECT {FILE_COLS} FROM files WHERE repo_id = %s", (self.repo_id,))
        return {str(r[0]): FileRow(*r) for r in rows}

    def files_at(self, paths: Sequence[str]) -> dict[str, FileRow]:
        """The rows of these files (one statement)."""
        wanted = list(dict.fromkeys(paths))
        if not wanted:
            return {}
        rows = self._fetchall(
            f"SELECT {FILE_COLS} FROM files WHERE repo_id = %s AND path = ANY(%s)",
            (self.repo_id, wanted),
        )
        return {str(r[0]): FileRow(*r) for r in rows}

    def file_count(self) -> int:
        row = self._fetchone("SELECT count(*) FROM files WHERE repo_id = %s", (self.repo_id,))
        return int(row[0])

    def files_without_content(self) -> list[tuple[str, str]]:
        """(path, hash) of the published files indexed before migration 8 kept their bytes."""
        rows = self._fetchall(
            "SELECT path, hash FROM files WHERE repo_id = %s AND content IS NULL ORDER BY path",
            (self.repo_id,),
        )
        return [(str(r[0]), str(r[1])) for r in rows]

    def put_file_contents(self, items: Iterable[tuple[str, str, bytes]]) -> int:
        """Keep the bytes of files indexed before migration 8, in transactions of
        :data:`CONTENT_BATCH` files (a file's row is written only while it is that version and
        still has none)."""
        import psycopg

        done = 0
        batch: list[tuple[bytes, int, str, str]] = []

        def flush() -> None:
            nonlocal done
            try:
                with self._lock, self._conn.transaction(), self._conn.cursor() as cur:
                    for row in batch:
                        cur.execute(
                            "UPDATE files SET content = %s WHERE repo_id = %s AND path = %s "
                            "AND hash = %s AND content IS NULL",
                            row,
                        )
                        done += int(cur.rowcount or 0)
            except psycopg.Error as exc:
                raise DbError(f"index write failed: {_one_line(exc)}") from exc
            batch.clear()

        for path, digest, data in items:
            batch.append((data, self.repo_id, path, digest))
            if len(batch) >= CONTENT_BATCH:
                flush()
        if batch:
            flush()
        return done

    def sample_paths(self, n: int) -> list[str]:
        """Up to ``n`` indexed paths (the first by name): enough to tell whether a folder is a
        checkout of the repository."""
        rows = self._fetchall(
            "SELECT path FROM files WHERE repo_id = %s ORDER BY path LIMIT %s", (self.repo_id, n)
        )
        return [str(r[0]) for r in rows]

    def file_contents(self, paths: Sequence[str]) -> dict[str, bytes]:
        """The bytes of these files as they were indexed (``files.content``, migration 8), for
        a node without a checkout; a file indexed before migration 8 has none (left out), as
        has every file of a database not migrated yet."""
        import psycopg

        if not paths:
            return {}
        try:
            rows = self._fetchall(
                "SELECT path, content FROM files WHERE repo_id = %s AND path = ANY(%s) "
                "AND content IS NOT NULL",
                (self.repo_id, list(dict.fromkeys(paths))),
            )
        except psycopg.errors.UndefinedColumn:
            log.warning("the database keeps no file contents yet: run `ragloom index` to migrate")
            return {}
        return {str(path): bytes(data) for path, data in rows}

    def chunk_count(self) -> int:
        row = self._fetchone(
            "SELECT count(*) FROM chunks WHERE repo_id = %s AND rowid <= "
            "(SELECT watermark FROM repositories WHERE id = %s)",
            (self.repo_id, self.repo_id),
        )
        return int(row[0])

    def chunks_for_path(self, path: str) -> list[ChunkRow]:
        rows = self._fetchall(
            f"SELECT {_CHUNK_COLS} FROM chunks WHERE repo_id = %s AND path = %s "
            "ORDER BY start_byte",
            (self.repo_id, path),
        )
        return [_row_to_chunk(r) for r in rows]

    def chunks_by_rowids(self, rowids: Sequence[int]) -> dict[int, ChunkRow]:
        if not len(rowids):
            return {}
        rows = self._fetchall(
            f"SELECT {_CHUNK_COLS} FROM chunks WHERE rowid = ANY(%s) AND repo_id = %s",
            ([int(r) for r in rowids], self.repo_id),
        )
        return {int(r[0]): _row_to_chunk(r) for r in rows}

    def chunks_by_ids(self, ids: Sequence[str]) -> dict[str, ChunkRow]:
        if not len(ids):
            return {}
        rows = self._fetchall(
            f"SELECT {_CHUNK_COLS} FROM chunks WHERE repo_id = %s AND id = ANY(%s)",
            (self.repo_id, list(ids)),
        )
        return {str(r[1]): _row_to_chunk(r) for r in rows}

    def texts_by_rowids(self, rowids: Sequence[int]) -> dict[int, str]:
        if not len(rowids):
            return {}
        rows = self._fetchall(
            "SELECT rowid, text FROM chunks WHERE rowid = ANY(%s)", ([int(r) for r in rowids],)
        )
        return {int(r[0]): str(r[1]) for r in rows}

    def all_rowids(self) -> np.ndarray:
        rows = self._fetchall("SELECT rowid FROM chunks WHERE repo_id = %s", (self.repo_id,))
        return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))

    def symbol_table(self) -> list[tuple[str, str, str]]:
        return [
            (str(r[0]), str(r[1]), str(r[2]))
            for r in self._fetchall(
                "SELECT symbol, path, id FROM chunks WHERE repo_id = %s", (self.repo_id,)
            )
        ]

    def _count_by(self, column: str) -> dict[str, int]:
        return {
            str(k): int(n)
            for k, n in self._fetchall(
                f"SELECT {column}, count(*) FROM chunks WHERE repo_id = %s GROUP BY {column}",
                (self.repo_id,),
            )
        }

    # -- code graph records ---------------------------------------------------------------
    def files_without_graph(self, languages: Collection[str]) -> list[tuple[str, str]]:
        """(path, hash) of the published files in ``languages`` without a current graph
        record: none, one of another file version, or (all of them) records another
        ``FILE_GRAPH_VERSION`` made (a repository indexed before the graph was kept)."""
        from ragloom.ingest.filegraph import FILE_GRAPH_VERSION

        rows = self._fetchall(
            "SELECT f.path, f.hash FROM files f JOIN repositories r ON r.id = f.repo_id "
            "LEFT JOIN file_graph g ON g.repo_id = f.repo_id AND g.path = f.path "
            "WHERE f.repo_id = %s AND f.language = ANY(%s) "
            "AND (g.hash IS DISTINCT FROM f.hash OR r.graph_version <> %s) ORDER BY f.path",
            (self.repo_id, sorted(languages), FILE_GRAPH_VERSION),
        )
        return [(str(r[0]), str(r[1])) for r in rows]

    def graph_snapshot(
        self, languages: Collection[str]
    ) -> tuple[int, list[GraphDefRow], list[tuple[str, str, bytes]]]:
        """What the code graph of the published generation is built from, read in one
        repeatable-read, read-only snapshot (as :meth:`ragloom.index.store.Store.graph_snapshot`):
        (generation, the code chunks as definitions, (path, language, record) per file with a
        record of its version or in ``languages``; ``b""`` for a file without one)."""
        import psycopg

        with connect(self.dsn, app="ragloom-read") as conn:
            conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            conn.read_only = True
            with conn.transaction():
                row = conn.execute(
                    "SELECT generation FROM repositories WHERE id = %s", (self.repo_id,)
                ).fetchone()
                defs = [
                    GraphDefRow(
                        int(r[0]),
                        str(r[1]),
                        str(r[2]),
                        str(r[3]),
                        str(r[4]),
                        str(r[5]),
                        None if r[6] is None else str(r[6]),
                        int(r[7]),
                        int(r[8]),
                    )
                    for r in conn.execute(
                        "SELECT rowid, id, path, symbol, kind, language, parent_id, start_line, "
                        "end_line FROM chunks WHERE repo_id = %s AND source = 'code' "
                        "ORDER BY rowid",
                        (self.repo_id,),
                    )
                ]
                records = [
                    graph_record(r)
                    for r in conn.execute(
                        "SELECT f.path, f.language, g.data FROM files f LEFT JOIN file_graph g "
                        "ON g.repo_id = f.repo_id AND g.path = f.path AND g.hash = f.hash "
                        "WHERE f.repo_id = %s AND (g.data IS NOT NULL OR f.language = ANY(%s)) "
                        "ORDER BY f.path",
                        (self.repo_id, sorted(languages)),
                    )
                ]
        return (int(row[0]) if row else 0), defs, records

    def graph_manifests(self) -> list[tuple[str, str]]:
        """(path, text) of the repository's ``go.mod`` and ``package.json`` files, from their
        chunks (as :meth:`ragloom.index.store.Store.graph_manifests`)."""
        return manifest_texts(
            self._fetchall(
                f"SELECT path, start_byte, end_byte, text FROM chunks WHERE repo_id = %s AND "
                f"{MANIFEST_WHERE.replace('%', '%%')} ORDER BY path, start_byte",
                (self.repo_id,),
            )
        )

    # -- the git state the last index was made from (migration 6) ---------------------------
    def set_git_state(self, state: Mapping[str, str | None] | None) -> None:
        """Record the work tree's branch and HEAD (:func:`ragloom.ingest.git.state_record`;
        None outside a work tree) once an index run has published."""
        with self._lock:
            self._conn.execute(
                "UPDATE repositories SET git_state = %s WHERE id = %s",
                (json.dumps(state, sort_keys=True) if state is not None else None, self.repo_id),
            )

    def git_state(self) -> object:
        """What :meth:`set_git_state` recorded (None: nothing, or an index made before it)."""
        row = self._fetchone("SELECT git_state FROM repositories WHERE id = %s", (self.repo_id,))
        if row is None or row[0] is None:
            return None
        try:
            return json.loads(str(row[0]))
        except ValueError:
            return None

    # -- the repository's ranking model (migration 6; ragloom.retrieve.adapt.RowModelStore) --
    def ranking_model_stamp(self) -> object | None:
        """(digest, written_at) of the repository's ranking model; None when it has none."""
        row = self._fetchone(
            "SELECT digest, written_at FROM ranking_models WHERE repo_id = %s", (self.repo_id,)
        )
        return (str(row[0]), float(row[1])) if row is not None else None

    def ranking_model_text(self) -> str | None:
        row = self._fetchone("SELECT model FROM ranking_models WHERE repo_id = %s", (self.repo_id,))
        return str(row[0]) if row is not None else None

    def set_ranking_model(self, text: str, digest: str, base_digest: str) -> None:
        """Write the repository's ranking model (one statement: readers see the old row or
        the new one)."""
        with self._lock:
            self._conn.execute(
                "INSERT INTO ranking_models(repo_id, digest, base_digest, model, written_at) "
                "VALUES (%s, %s, %s, %s, extract(epoch FROM clock_timestamp())) "
                "ON CONFLICT (repo_id) DO UPDATE SET digest = EXCLUDED.digest, "
                "base_digest = EXCLUDED.base_digest, model = EXCLUDED.model, "
                "written_at = EXCLUDED.written_at",
                (self.repo_id, digest, base_digest, text),
            )

    def remove_ranking_model(self) -> bool:
        """Delete the repository's ranking model; whether it had one."""
        with self._lock:
            cur = self._conn.execute(
                "DELETE FROM ranking_models WHERE repo_id = %s", (self.repo_id,)
            )
            return cur.rowcount > 0

    # -- feedback and query logs ----------------------------------------------------------
    def record_feedback(self, query: str, chunk_id: str, signal: int) -> None:
        """One relevance judgement (+1 / -1) on a chunk for a query."""
        with self._lock:
            self._conn.execute(
                "INSERT INTO feedback(repo_id, query, chunk_id, signal) VALUES (%s, %s, %s, %s)",
                (self.repo_id, query, chunk_id, int(signal)),
            )

    def log_query(
        self, query: str, strategy: str, generation: int, hits: int, latency_ms: float
    ) -> None:
        with self._lock:
            self._conn.execute(
                "INSERT INTO query_log(repo_id, query, strategy, generation, hits, latency_ms) "
                "VALUES (%s, %s, %s, %s, %s, %s)",
                (self.repo_id, query, strategy, generation, hits, latency_ms),
            )

    def close(self) -> None:
        while True:
            try:
                self._pool.get_nowait().close()
            except queue.Empty:
                break
        self._conn.close()
