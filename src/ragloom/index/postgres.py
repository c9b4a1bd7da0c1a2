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
transaction-level advisory lock so concurrent first runs do not race.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import queue
import shutil
import tempfile
import threading
import time
from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from ragloom.errors import ConfigError, DbError, IndexLockedError, IndexNotFoundError
from ragloom.index.store import ChunkRow, FileRow, GraphDefRow

if TYPE_CHECKING:
    import psycopg

    from ragloom.types import Chunk

__all__ = [
    "DEFAULT_EF_SEARCH",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "PgBm25",
    "PgUpdate",
    "PgVectors",
    "PostgresBackend",
    "RepositoryInfo",
    "connect",
    "dsn_from_env",
    "migrate",
]

log = logging.getLogger("ragloom.index")

DSN_ENV: Final = "RAGLOOM_DSN"
DEFAULT_EF_SEARCH = 100
"""pgvector ``hnsw.ef_search`` floor (raised to ``2 k`` for deep lists, at most 1000): the same
beam the embedded hnswlib index searches with (``HNSW_EF_SEARCH_MIN``)."""
EF_SEARCH_MAX = 1000
"""pgvector's upper bound for ``hnsw.ef_search``."""
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 100
"""Same graph parameters as the embedded hnswlib index (``ragloom.index.vectors``)."""
_LOCK_CLASS = 0x726C
"""First key of ragloom's advisory locks ('rl'); the second is the repository id."""
_MIGRATION_LOCK = 0x726C0000
"""Transaction-level advisory lock serialising migrations."""

MIGRATIONS: tuple[str, ...] = (
    # 1: repositories, files, chunks, embedding cache
    """
    CREATE EXTENSION IF NOT EXISTS vector;
    CREATE TABLE repositories (
        id BIGSERIAL PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        root TEXT NOT NULL DEFAULT '',
        generation BIGINT NOT NULL DEFAULT 0,
        watermark BIGINT NOT NULL DEFAULT 0,
        data_version BIGINT NOT NULL DEFAULT 0,
        n_chunks BIGINT NOT NULL DEFAULT 0,
        n_embedded BIGINT NOT NULL DEFAULT 0,
        embedding_key TEXT NOT NULL DEFAULT '',
        embedding_dim INTEGER NOT NULL DEFAULT 0,
        embedding_model TEXT NOT NULL DEFAULT '',
        embedding_spec TEXT NOT NULL DEFAULT '',
        tokenizer_version TEXT NOT NULL DEFAULT '',
        ragloom_version TEXT NOT NULL DEFAULT '',
        created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        published_at TIMESTAMPTZ
    );
    CREATE TABLE files (
        repo_id BIGINT NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
        path TEXT NOT NULL,
        hash TEXT NOT NULL,
        size BIGINT NOT NULL,
        mtime DOUBLE PRECISION NOT NULL,
        language TEXT,
        source TEXT NOT NULL,
        n_chunks INTEGER NOT NULL,
        indexed_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (repo_id, path)
    );
    CREATE TABLE chunks (
        rowid BIGSERIAL PRIMARY KEY,
        repo_id BIGINT NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
        id TEXT NOT NULL,
        path TEXT NOT NULL,
        symbol TEXT NOT NULL,
        kind TEXT NOT NULL,
        language TEXT NOT NULL,
        source TEXT NOT NULL,
        parent_id TEXT,
        start_byte INTEGER NOT NULL,
        end_byte INTEGER NOT NULL,
        start_line INTEGER NOT NULL,
        end_line INTEGER NOT NULL,
        node_hash TEXT NOT NULL,
        file_hash TEXT NOT NULL,
        text TEXT NOT NULL,
        embedding_dim INTEGER,
        embedding vector,
        UNIQUE (repo_id, id)
    );
    CREATE INDEX chunks_repo_path ON chunks(repo_id, path);
    CREATE INDEX chunks_repo_symbol ON chunks(repo_id, symbol);
    CREATE INDEX chunks_repo_unembedded ON chunks(repo_id) WHERE embedding IS NULL;
    CREATE TABLE embeddings (
        model_key TEXT NOT NULL,
        node_hash TEXT NOT NULL,
        vector vector NOT NULL,
        PRIMARY KEY (model_key, node_hash)
    );
    """,
    # 2: feedback and query logs (tamma-rag-pipeline-plan.md plans them in PostgreSQL)
    """
    CREATE TABLE feedback (
        id BIGSERIAL PRIMARY KEY,
        repo_id BIGINT NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
        query TEXT NOT NULL,
        chunk_id TEXT NOT NULL,
        signal SMALLINT NOT NULL,
        created_at TIMESTAMPTZ NOT NULL DEFAULT now()
    );
    CREATE INDEX feedback_repo ON feedback(repo_id, created_at);
    CREATE TABLE query_log (
        id BIGSERIAL PRIMARY KEY,
        repo_id BIGINT NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
        query TEXT NOT NULL,
        strategy TEXT NOT NULL,
        generation BIGINT NOT NULL,
        hits INTEGER NOT NULL,
        latency_ms DOUBLE PRECISION NOT NULL,
        created_at TIMESTAMPTZ NOT NULL DEFAULT now()
    );
    CREATE INDEX query_log_repo ON query_log(repo_id, created_at);
    """,
    # 3: the serving engine's feedback model (ragloom.server.feedback): answers named by
    # query_id with their hit ids, ratings with comments, context usage. Additive: rows of
    # migration 2's shape stay readable.
    """
    ALTER TABLE query_log
        ADD COLUMN query_id TEXT,
        ADD COLUMN route TEXT NOT NULL DEFAULT 'api',
        ADD COLUMN hit_ids TEXT[] NOT NULL DEFAULT '{}',
        ADD COLUMN source TEXT NOT NULL DEFAULT 'api',
        ADD COLUMN ts DOUBLE PRECISION NOT NULL DEFAULT extract(epoch FROM now());
    CREATE UNIQUE INDEX query_log_query_id ON query_log(repo_id, query_id)
        WHERE query_id IS NOT NULL;
    ALTER TABLE feedback
        ADD COLUMN query_id TEXT,
        ADD COLUMN rating TEXT
            CHECK (rating IN ('helpful', 'not_helpful', 'partially_helpful')),
        ADD COLUMN comment TEXT,
        ADD COLUMN in_results BOOLEAN,
        ADD COLUMN ts DOUBLE PRECISION NOT NULL DEFAULT extract(epoch FROM now());
    CREATE INDEX feedback_query ON feedback(repo_id, query_id);
    CREATE TABLE context_usage (
        repo_id BIGINT NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
        query_id TEXT NOT NULL,
        chunk_id TEXT NOT NULL,
        ts DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (repo_id, query_id, chunk_id)
    );
    """,
    # 4: chunks by text hash, for giving a batch of new vectors to the chunks of their texts.
    # Without it each batch scanned every chunk still without a vector: quadratic in the
    # repository's size (the 1M-chunk bench spent over 25 minutes there; docs/postgres.md).
    """
    CREATE INDEX chunks_repo_node_hash ON chunks(repo_id, node_hash);
    """,
    # 5: the code graph's per-file records (ingest/filegraph.py; docs/graph.md). The embedded
    # store keeps one record per (path, hash) because its pending generation sits beside the
    # published one; here an update is one transaction, so readers see the old record until
    # the commit that replaces the file row, and one record per path is enough. ``hash`` is
    # the file version the record describes (a record whose hash is not the file row's is
    # made again). ``graph_version``: the FILE_GRAPH_VERSION of the repository's records (0:
    # none yet; another version's records are dropped and made again by the next update).
    """
    CREATE TABLE file_graph (
        repo_id BIGINT NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
        path TEXT NOT NULL,
        hash TEXT NOT NULL,
        data BYTEA NOT NULL,
        PRIMARY KEY (repo_id, path)
    );
    ALTER TABLE repositories ADD COLUMN graph_version INTEGER NOT NULL DEFAULT 0;
    """,
)
SCHEMA_VERSION = len(MIGRATIONS)

_CHUNK_COLS = (
    "rowid, id, path, symbol, kind, language, source, parent_id, start_byte, end_byte, "
    "start_line, end_line, node_hash, file_hash"
)
_INSERT_COLS = (
    "repo_id, id, path, symbol, kind, language, source, parent_id, start_byte, end_byte, "
    "start_line, end_line, node_hash, file_hash, text"
)
_META_COLS = (
    "symbol",
    "kind",
    "language",
    "source",
    "parent_id",
    "start_byte",
    "end_byte",
    "start_line",
    "end_line",
    "file_hash",
)


def _one_line(exc: BaseException) -> str:
    """libpq's messages span lines (a hint after a tab): ragloom errors are one line."""
    return " ".join(str(exc).split())


def dsn_from_env() -> str | None:
    """``RAGLOOM_DSN`` when set and not empty."""
    return os.environ.get(DSN_ENV) or None


def connect(dsn: str, *, autocommit: bool = True, app: str = "ragloom") -> psycopg.Connection[Any]:
    """A psycopg connection with pgvector's types registered; DbError with the reason when the
    server cannot be reached (the DSN's password is never echoed)."""
    import psycopg
    from pgvector.psycopg import register_vector

    try:
        conn = psycopg.connect(dsn, autocommit=autocommit, application_name=app)
    except psycopg.Error as exc:
        raise DbError(f"cannot connect to PostgreSQL: {_one_line(exc)}") from exc
    # without the extension yet (created by the first migration), register after migrating
    with contextlib.suppress(psycopg.ProgrammingError):
        register_vector(conn)
    return conn


def migrate(conn: psycopg.Connection[Any]) -> int:
    """Apply the migrations the database lacks, each in its own transaction; returns the schema
    version. DbError when the database is newer than this ragloom."""
    import psycopg
    from pgvector.psycopg import register_vector

    try:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, "
                "applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
            )
            row = conn.execute("SELECT coalesce(max(version), 0) FROM schema_migrations").fetchone()
            current = int(row[0]) if row else 0
            if current > SCHEMA_VERSION:
                raise DbError(
                    f"PostgreSQL schema version {current} is newer than this ragloom supports "
                    f"({SCHEMA_VERSION}); upgrade ragloom"
                )
            for number in range(current, SCHEMA_VERSION):
                with conn.transaction():  # a savepoint: a failed step leaves the previous one
                    conn.execute(MIGRATIONS[number])
                    conn.execute(
                        "INSERT INTO schema_migrations(version) VALUES (%s)", (number + 1,)
                    )
    except psycopg.errors.InsufficientPrivilege as exc:
        raise DbError(
            f"PostgreSQL refused the schema migration ({_one_line(exc)}): the role needs "
            "CREATE on the database (and the vector extension created by an administrator: "
            "CREATE EXTENSION vector); docs/postgres.md"
        ) from exc
    except psycopg.Error as exc:
        raise DbError(f"PostgreSQL schema migration failed: {_one_line(exc)}") from exc
    register_vector(conn)
    return SCHEMA_VERSION


@dataclass(frozen=True, slots=True)
class RepositoryInfo:
    """One repository's row: its published generation and what it was indexed with."""

    id: int
    name: str
    root: str
    generation: int
    watermark: int
    data_version: int
    n_chunks: int
    n_embedded: int
    embedding_key: str
    embedding_dim: int
    embedding_model: str
    embedding_spec: str
    tokenizer_version: str
    ragloom_version: str


_REPO_COLS = (
    "id, name, root, generation, watermark, data_version, n_chunks, n_embedded, embedding_key, "
    "embedding_dim, embedding_model, embedding_spec, tokenizer_version, ragloom_version"
)


def _row_to_chunk(row: Sequence[Any]) -> ChunkRow:
    return ChunkRow(*row)


def _vec_literal(vector: np.ndarray) -> str:
    return "[" + ",".join(repr(float(x)) for x in np.asarray(vector, dtype=np.float32)) + "]"


class PostgresBackend:
    """One repository in a PostgreSQL database (the storage contract, ``index/backend.py``).

    ``create=True`` (the indexer) migrates the schema and creates the repository row; readers
    open an existing repository (IndexNotFoundError otherwise). One autocommit connection serves
    reads (each statement sees the latest commit; the retriever's seqlock keeps an answer to
    one generation); updates use their own connection and transaction."""

    name = "postgres"

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
        if version < SCHEMA_VERSION:
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
    ) -> bool:
        """Record what the repository is indexed with; True when the embedding key or
        dimension changed (every stored vector of the repository is then dropped, in the same
        transaction, and re-filled from the cache or re-embedded)."""
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
    def write_lock(self) -> Iterator[object]:
        """The repository's advisory lock, held by this backend's session."""
        with self._lock:
            row = self._conn.execute(
                "SELECT pg_try_advisory_lock(%s, %s)", (_LOCK_CLASS, self.repo_id)
            ).fetchone()
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
        rows = self._fetchall(
            "SELECT path, hash, size, mtime, language, source, n_chunks FROM files "
            "WHERE repo_id = %s",
            (self.repo_id,),
        )
        return {str(r[0]): FileRow(*r) for r in rows}

    def file_count(self) -> int:
        row = self._fetchone("SELECT count(*) FROM files WHERE repo_id = %s", (self.repo_id,))
        return int(row[0])

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

    def kind_counts(self) -> dict[str, int]:
        return {
            str(k): int(n)
            for k, n in self._fetchall(
                "SELECT kind, count(*) FROM chunks WHERE repo_id = %s GROUP BY kind",
                (self.repo_id,),
            )
        }

    def language_counts(self) -> dict[str, int]:
        return {
            str(k): int(n)
            for k, n in self._fetchall(
                "SELECT language, count(*) FROM chunks WHERE repo_id = %s GROUP BY language",
                (self.repo_id,),
            )
        }

    def bm25_snapshot(self) -> tuple[int, dict[int, str]]:
        """(generation, node hash by rowid) of the published generation, read in one
        repeatable-read snapshot (what a serving node's BM25 must hold)."""
        import psycopg

        with connect(self.dsn) as conn:
            conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            with conn.transaction():
                row = conn.execute(
                    "SELECT generation FROM repositories WHERE id = %s", (self.repo_id,)
                ).fetchone()
                rows = conn.execute(
                    "SELECT rowid, node_hash FROM chunks WHERE repo_id = %s", (self.repo_id,)
                ).fetchall()
        return (int(row[0]) if row else 0), {int(r[0]): str(r[1]) for r in rows}

    def bm25_sources(self, rowids: Sequence[int]) -> dict[int, tuple[str, str, str]]:
        """(text, symbol, path) by rowid."""
        if not len(rowids):
            return {}
        rows = self._fetchall(
            "SELECT rowid, text, symbol, path FROM chunks WHERE rowid = ANY(%s)",
            ([int(r) for r in rowids],),
        )
        return {int(r[0]): (str(r[1]), str(r[2]), str(r[3])) for r in rows}

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
                    (str(r[0]), str(r[1] or ""), bytes(r[2]) if r[2] is not None else b"")
                    for r in conn.execute(
                        "SELECT f.path, f.language, g.data FROM files f LEFT JOIN file_graph g "
                        "ON g.repo_id = f.repo_id AND g.path = f.path AND g.hash = f.hash "
                        "WHERE f.repo_id = %s AND (g.data IS NOT NULL OR f.language = ANY(%s)) "
                        "ORDER BY f.path",
                        (self.repo_id, sorted(languages)),
                    )
                ]
        return (int(row[0]) if row else 0), defs, records

    # -- embeddings and vectors -----------------------------------------------------------
    def missing_embeddings(self, key: str) -> list[tuple[str, str]]:
        """(node hash, embedding text) of the repository's chunks with no vector, one per hash
        (the text of the smallest rowid sharing it, as the embedded store does)."""
        from ragloom.embed.document import embedding_text

        rows = self._fetchall(
            "SELECT DISTINCT ON (c.node_hash) c.node_hash, c.path, c.kind, c.symbol, c.text "
            "FROM chunks c WHERE c.repo_id = %s AND c.embedding IS NULL AND NOT EXISTS "
            "(SELECT 1 FROM embeddings e WHERE e.model_key = %s AND e.node_hash = c.node_hash) "
            "ORDER BY c.node_hash, c.rowid",
            (self.repo_id, key),
        )
        return [
            (str(r[0]), embedding_text(str(r[1]), str(r[2]), str(r[3]), str(r[4]))) for r in rows
        ]

    def put_embeddings(self, key: str, items: Iterable[tuple[str, np.ndarray]]) -> None:
        """Cache vectors by node hash and give them to this repository's chunks (one
        transaction, so an interrupted embedding run resumes where it stopped). Loaded with a
        binary COPY into a temporary table, then merged (a hash cached already is kept)."""
        from pgvector import Vector

        batch = [(h, np.asarray(v, dtype=np.float32)) for h, v in items]
        if not batch:
            return
        with self._lock, self._conn.transaction():
            self._conn.execute(
                "CREATE TEMP TABLE IF NOT EXISTS _rl_vectors (node_hash TEXT, vector vector) "
                "ON COMMIT DELETE ROWS"
            )
            with (
                self._conn.cursor() as cur,
                cur.copy("COPY _rl_vectors (node_hash, vector) FROM STDIN (FORMAT BINARY)") as copy,
            ):
                copy.set_types(["text", "vector"])
                for h, v in batch:
                    copy.write_row((h, Vector(v)))
            self._conn.execute(
                "INSERT INTO embeddings(model_key, node_hash, vector) "
                "SELECT DISTINCT ON (node_hash) %s, node_hash, vector FROM _rl_vectors "
                "ORDER BY node_hash ON CONFLICT DO NOTHING",
                (key,),
            )
            if key == self.info.embedding_key:
                _fill_vectors(self._conn, self.repo_id, key, [h for h, _ in batch])

    def vectors_for_rowids(self, model_id: str, rowids: Sequence[int], dim: int) -> np.ndarray:
        out = np.zeros((len(rowids), dim), dtype=np.float32)
        if not len(rowids):
            return out
        pos: dict[int, list[int]] = {}
        for i, r in enumerate(rowids):
            pos.setdefault(int(r), []).append(i)
        rows = self._fetchall(
            "SELECT c.rowid, e.vector FROM chunks c JOIN embeddings e ON e.model_key = %s "
            "AND e.node_hash = c.node_hash WHERE c.rowid = ANY(%s)",
            (model_id, list(pos)),
        )
        for rowid, vec in rows:
            arr = np.asarray(vec.to_numpy() if hasattr(vec, "to_numpy") else vec, np.float32)
            if arr.shape == (dim,):
                for i in pos[int(rowid)]:
                    out[i] = arr
        return out

    def vector_search(self, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
        """Top ``k`` (rowid, cosine similarity) through the HNSW index of the repository's
        dimension, ``hnsw.ef_search`` = max(ef_search, 2 k) (iterative scan, strict order,
        so filtering by repository does not shorten the list)."""
        dim = self.info.embedding_dim
        if k <= 0 or not dim:
            return []
        vec = np.asarray(vector, dtype=np.float32).reshape(-1)
        if vec.shape[0] != dim:
            raise ConfigError(f"query vector has {vec.shape[0]} dimensions, the index {dim}")
        ef = min(EF_SEARCH_MAX, max(self.ef_search, 2 * k))
        lit = _vec_literal(vec)
        with self._reader() as conn:
            if self._efs.get(id(conn)) != ef:
                # session settings of the read connection: the same effect as SET LOCAL in a
                # transaction, without its three extra round trips per query
                conn.execute(
                    "SELECT set_config('hnsw.ef_search', %s, false), "
                    "set_config('hnsw.iterative_scan', 'strict_order', false)",
                    (str(int(ef)),),
                )
                self._efs[id(conn)] = ef
            rows = conn.execute(
                f"SELECT rowid, 1 - (embedding::vector({dim}) <=> %s::vector({dim})) "
                f"FROM chunks WHERE repo_id = %s AND embedding_dim = {dim} "
                f"ORDER BY embedding::vector({dim}) <=> %s::vector({dim}) LIMIT %s",
                (lit, self.repo_id, lit, int(k)),
            ).fetchall()
        return [(int(r[0]), float(r[1])) for r in rows]

    def get_vectors(self, rowids: Sequence[int]) -> dict[int, np.ndarray]:
        """The unit-length vectors stored on these chunk rows (those that have one)."""
        if not len(rowids):
            return {}
        rows = self._fetchall(
            "SELECT rowid, embedding FROM chunks WHERE rowid = ANY(%s) AND embedding IS NOT NULL",
            ([int(r) for r in rowids],),
        )
        out: dict[int, np.ndarray] = {}
        for rowid, vec in rows:
            arr = np.asarray(vec.to_numpy() if hasattr(vec, "to_numpy") else vec, np.float32)
            norm = float(np.linalg.norm(arr))
            out[int(rowid)] = arr / norm if norm > 0 else arr
        return out

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


def list_repositories(conn: psycopg.Connection[Any]) -> list[str]:
    import psycopg

    try:
        return [str(r[0]) for r in conn.execute("SELECT name FROM repositories ORDER BY name")]
    except psycopg.errors.UndefinedTable:
        return []


def only_repository(dsn: str) -> str:
    """The name of the database's single repository (ConfigError when there are several:
    name one with ``--repo``; IndexNotFoundError when there is none)."""
    with connect(dsn) as conn:
        names = list_repositories(conn)
    if not names:
        raise IndexNotFoundError(
            "no ragloom index in this PostgreSQL database; create one with "
            "`ragloom index PATH --backend postgres --dsn ...`"
        )
    if len(names) > 1:
        raise ConfigError(
            f"the database holds {len(names)} repositories ({', '.join(names)}); "
            "choose one with --repo NAME"
        )
    return names[0]


def ensure_vector_index(conn: psycopg.Connection[Any], dim: int) -> None:
    """The HNSW (cosine) index over chunk vectors of dimension ``dim`` (a partial expression
    index: ``chunks.embedding`` has no fixed dimension, so models of any size share the
    table). Built once, then maintained by PostgreSQL on every insert."""
    dim = int(dim)
    conn.execute(
        f"CREATE INDEX IF NOT EXISTS chunks_embedding_hnsw_{dim} ON chunks USING hnsw "
        f"((embedding::vector({dim})) vector_cosine_ops) "
        f"WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION}) "
        f"WHERE embedding_dim = {dim}"
    )


def _fill_vectors(
    conn: psycopg.Connection[Any], repo_id: int, key: str, hashes: Sequence[str] | None
) -> int:
    """Give the repository's chunks without a vector the cached one of their text (all such
    chunks, or those with these node hashes); keeps ``n_embedded`` and ``data_version`` in
    step. Runs inside the caller's transaction."""
    if hashes is None:
        cur = conn.execute(
            "UPDATE chunks c SET embedding = e.vector, embedding_dim = vector_dims(e.vector) "
            "FROM embeddings e WHERE c.repo_id = %s AND c.embedding IS NULL "
            "AND e.model_key = %s AND e.node_hash = c.node_hash",
            (repo_id, key),
        )
    else:
        # one index lookup per hash (chunks_repo_node_hash), not a scan of every chunk still
        # without a vector per batch
        cur = conn.execute(
            "UPDATE chunks c SET embedding = e.vector, embedding_dim = vector_dims(e.vector) "
            "FROM unnest(%s::text[]) AS h(node_hash) JOIN embeddings e "
            "ON e.model_key = %s AND e.node_hash = h.node_hash "
            "WHERE c.repo_id = %s AND c.node_hash = h.node_hash AND c.embedding IS NULL",
            (list(dict.fromkeys(hashes)), key, repo_id),
        )
    filled = int(cur.rowcount or 0)
    if filled:
        conn.execute(
            "UPDATE repositories SET n_embedded = n_embedded + %s, "
            "data_version = data_version + 1 WHERE id = %s",
            (filled, repo_id),
        )
    return filled


class PgUpdate:
    """Generation ``G + 1`` of one repository, written in one transaction on its own
    connection; nothing is visible to readers until :meth:`publish` commits."""

    def __init__(self, backend: PostgresBackend) -> None:
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
    ) -> tuple[int, int, int, int]:
        conn = self._conn
        if path in self._written:  # written before in this update: compare with those rows
            self._flush()
        existing = (
            {}
            if self._empty and path not in self._written
            else {
                str(r[0]): (int(r[1]), str(r[2]), tuple(r[3:]))
                for r in conn.execute(
                    f"SELECT id, rowid, node_hash, {', '.join(_META_COLS)} FROM chunks "
                    "WHERE repo_id = %s AND path = %s",
                    (self._repo_id, path),
                )
            }
        )
        new_ids = {c.id for c in chunks}
        added = updated = kept = 0
        drop: list[int] = []
        sets = ", ".join(f"{col} = %s" for col in _META_COLS)
        for c in chunks:
            old = existing.get(c.id)
            if old is not None and old[1] == c.node_hash:
                meta = (
                    c.symbol,
                    c.kind,
                    c.language,
                    c.source,
                    c.parent_id,
                    c.start_byte,
                    c.end_byte,
                    c.start_line,
                    c.end_line,
                    c.file_hash,
                )
                if meta != old[2]:
                    conn.execute(f"UPDATE chunks SET {sets} WHERE rowid = %s", (*meta, old[0]))
                kept += 1
                continue
            if old is not None:
                drop.append(old[0])
                updated += 1
            else:
                added += 1
            self._new.append(
                (
                    self._repo_id,
                    c.id,
                    c.path,
                    c.symbol,
                    c.kind,
                    c.language,
                    c.source,
                    c.parent_id,
                    c.start_byte,
                    c.end_byte,
                    c.start_line,
                    c.end_line,
                    c.node_hash,
                    c.file_hash,
                    c.text,
                )
            )
        self._written.add(path)
        stale = [rowid for cid, (rowid, _, _) in existing.items() if cid not in new_ids]
        drop.extend(stale)
        if drop:
            conn.execute("DELETE FROM chunks WHERE rowid = ANY(%s)", (drop,))
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
            )
        )
        self._graphs[path] = None if graph is None else (file_hash, graph)
        if len(self._new) >= 5000 or len(self._graphs) >= 2000:
            self._flush()
        return added, updated, len(stale), kept

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
                    "n_chunks, indexed_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) "
                    "ON CONFLICT (repo_id, path) DO UPDATE SET hash = EXCLUDED.hash, "
                    "size = EXCLUDED.size, mtime = EXCLUDED.mtime, language = EXCLUDED.language, "
                    "source = EXCLUDED.source, n_chunks = EXCLUDED.n_chunks, "
                    "indexed_at = EXCLUDED.indexed_at",
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
        if not self._done:
            self._done = True
            self._conn.rollback()
            self._conn.close()


class PgVectors:
    """pgvector search as the retriever's :class:`~ragloom.index.backend.VectorIndex`."""

    def __init__(self, backend: PostgresBackend) -> None:
        self._backend = backend

    def search(self, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
        return self._backend.vector_search(vector, k)

    def get(self, rowids: Sequence[int]) -> dict[int, np.ndarray]:
        return self._backend.get_vectors(rowids)

    def count(self) -> int:
        """Chunks with a vector (as of the last :meth:`PostgresBackend.data_version`)."""
        return self._backend.info.n_embedded

    def refreshed(self) -> PgVectors:
        return self


BM25_KEEP_GENERATIONS = 2
"""BM25 folders a serving node keeps per repository (the current one and the one before, which
a query pinned to it may still read)."""


def bm25_cache_dir(dsn: str, repository: str, base: Path | None = None) -> Path:
    """Where a serving node keeps its BM25 engines for one repository of one database:
    ``$RAGLOOM_CACHE_DIR`` or ``~/.cache/ragloom``, then ``pg-<hash of the DSN's database
    address>/<repository>``."""
    from urllib.parse import urlsplit

    if base is None:
        env = os.environ.get("RAGLOOM_CACHE_DIR")
        base = Path(env) if env else Path.home() / ".cache" / "ragloom"
    parts = urlsplit(dsn)
    where = f"{parts.hostname or ''}:{parts.port or ''}{parts.path}?{parts.query}"
    digest = hashlib.sha256(where.encode()).hexdigest()[:12]
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in repository)[:80]
    return base / f"pg-{digest}" / safe


BM25_CATCH_UP_WAIT_S = 2.0
"""How long a query waits for its node's BM25 build of a newly published generation before it
searches the engine it has (:meth:`PgBm25.reload`)."""


class PgBm25:
    """ragloom's BM25 engine (tantivy) for one repository on a serving node, rebuilt from the
    database for its current generation (the seed's "Rebuild from DB").

    Each generation gets its own folder ``gen-<G>-<tokenizer version>`` under
    :func:`bm25_cache_dir`: built by copying the newest folder there and applying the rowid
    difference (unchanged chunks keep their rowids, so an update costs what it changed), in a
    temporary folder renamed into place, so several processes on one node share it safely.
    :meth:`reload` (the retriever calls it when the generation changed) moves to the
    published generation's folder."""

    def __init__(self, backend: PostgresBackend, cache_dir: Path) -> None:
        self._backend = backend
        self.cache_dir = cache_dir
        self.generation = -1
        self._engine: Any = None
        self._lock = threading.Lock()
        self._building: threading.Thread | None = None
        self.builds = 0
        """Generations this object built (a test and the logs read it)."""
        self.reload()

    def _folder(self, generation: int) -> Path:
        from ragloom.index.tokenize import TOKENIZER_VERSION

        return self.cache_dir / f"gen-{generation}-{TOKENIZER_VERSION}"

    def reload(self) -> None:
        """Move to the published generation's engine.

        When its folder is not built yet on this node and an engine is open, one build runs
        in a background thread (however many queries ask at once: each concurrent query
        building its own copy is what made answers time out during a re-index), and the
        caller waits for it at most :data:`BM25_CATCH_UP_WAIT_S`. A small update is built
        within that and the answer is complete. A build that takes longer leaves the query on
        the engine it has (the previous generation's): rows the new generation deleted are
        dropped when hits are read from the database, so the answer still shows one
        generation, but chunks the update added are found only by vector until the switch.
        The first engine is built in the caller."""
        generation = self._backend.generation()
        with self._lock:
            if generation == self.generation and self._engine is not None:
                return
            folder = self._folder(generation)
            if (folder / "ready").exists():
                self._switch(generation, folder)
                return
            if self._engine is None:
                self._switch(*self._build())
                return
            if self._building is None or not self._building.is_alive():
                self._building = threading.Thread(
                    target=self._build_in_background, name="ragloom-bm25-build", daemon=True
                )
                self._building.start()
            building = self._building
        building.join(BM25_CATCH_UP_WAIT_S)
        if building.is_alive():
            log.info(
                "bm25 still catching up with generation %d; searching generation %d's",
                generation,
                self.generation,
            )

    def _switch(self, generation: int, folder: Path) -> None:
        from ragloom.index.bm25 import TantivyBm25

        self._engine = TantivyBm25(folder)
        self.generation = generation
        self._prune()

    def _build_in_background(self) -> None:
        try:
            generation, folder = self._build()
        except Exception as exc:  # the next reload tries again; queries keep the old engine
            log.warning("bm25 rebuild from PostgreSQL failed: %s", exc)
            return
        with self._lock:
            if generation > self.generation:
                self._switch(generation, folder)

    def wait_built(self, timeout: float | None = None) -> None:
        """Block until a background build finished (tests, benchmarks)."""
        thread = self._building
        if thread is not None:
            thread.join(timeout)

    def _build(self) -> tuple[int, Path]:
        from ragloom.index.bm25 import TantivyBm25, bm25_document

        generation, rows = self._backend.bm25_snapshot()
        folder = self._folder(generation)
        if (folder / "ready").exists():
            return generation, folder
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=self.cache_dir, prefix=".build-"))
        try:
            base = self._newest()
            if base is not None:
                shutil.copytree(base, tmp, dirs_exist_ok=True)
                (tmp / "ready").unlink(missing_ok=True)
            engine = TantivyBm25(tmp, create=True)
            want = np.fromiter(rows, dtype=np.int64, count=len(rows))
            have = engine.held_rowids()
            add = np.setdiff1d(want, have).tolist()
            remove = np.setdiff1d(have, want).tolist()
            docs: list[tuple[int, str]] = []
            for start in range(0, len(add), 2000):
                part = add[start : start + 2000]
                sources = self._backend.bm25_sources(part)
                docs.extend((r, bm25_document(*sources[r])) for r in part if r in sources)
            engine.apply(docs, remove)
            (tmp / "ready").write_text(str(generation))
            try:
                tmp.rename(folder)
            except OSError:  # another process built it first
                shutil.rmtree(tmp, ignore_errors=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        self.builds += 1
        log.info(
            "bm25 rebuilt from PostgreSQL",
            extra={"generation": generation, "added": len(docs), "removed": len(remove)},
        )
        return generation, folder

    def _generations(self) -> list[tuple[int, Path]]:
        from ragloom.index.tokenize import TOKENIZER_VERSION

        out: list[tuple[int, Path]] = []
        if not self.cache_dir.is_dir():
            return out
        suffix = f"-{TOKENIZER_VERSION}"
        for p in self.cache_dir.iterdir():
            name = p.name
            if name.startswith("gen-") and name.endswith(suffix) and (p / "ready").exists():
                try:
                    out.append((int(name[4 : -len(suffix)]), p))
                except ValueError:
                    continue
        return sorted(out)

    def _newest(self) -> Path | None:
        gens = self._generations()
        return gens[-1][1] if gens else None

    def _prune(self) -> None:
        for gen, path in self._generations()[:-BM25_KEEP_GENERATIONS]:
            if gen != self.generation:
                shutil.rmtree(path, ignore_errors=True)

    def search(self, query: str | Sequence[tuple[str, float]], k: int) -> list[tuple[int, float]]:
        result: list[tuple[int, float]] = self._engine.search(query, k)
        return result

    def doc_count(self) -> int:
        return int(self._engine.doc_count())
