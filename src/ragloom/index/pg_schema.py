"""The PostgreSQL backend's schema and connections: numbered migrations, ``connect``,
``migrate``, the repository rows and the HNSW index of a dimension (docs/postgres.md).

Schema changes are numbered migrations recorded in ``schema_migrations``, applied under a
transaction-level advisory lock so concurrent first runs do not race.
:mod:`ragloom.index.postgres` re-exports every name.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from ragloom.errors import ConfigError, DbError, IndexNotFoundError

if TYPE_CHECKING:
    import psycopg

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
    # 6: the repository's own ranking model (``ragloom adapt``, ragloom.learn.adapt): one row
    # per repository, replaced in one statement, so every server of a team ranks with the same
    # model and a server sees a new one by its (digest, written_at) stamp. And the git state
    # (branch, HEAD) the last index was made from, which ``status`` compares with the work
    # tree's, as a folder's meta store does.
    """
    ALTER TABLE repositories ADD COLUMN git_state TEXT;
    CREATE TABLE ranking_models (
        repo_id BIGINT PRIMARY KEY REFERENCES repositories(id) ON DELETE CASCADE,
        digest TEXT NOT NULL,
        base_digest TEXT NOT NULL,
        model TEXT NOT NULL,
        written_at DOUBLE PRECISION NOT NULL DEFAULT extract(epoch FROM clock_timestamp())
    );
    """,
    # 7: chunk vectors kept in their rows. pgvector's type is stored out of line (TOAST) by
    # default, and a 384-d vector with its chunk's text passes the 2 kB a row keeps inline: an
    # exact scan then fetched every vector from the TOAST table, which the planner does not
    # cost (15 ms for a 5k-chunk repository against 1.5 ms; docs/postgres.md, "Vectors in their
    # rows"). MAIN keeps a vector in the row unless the row passes toast_tuple_target (a page:
    # vectors of up to about 1,900 dimensions). Rows written from now on; a repository's older
    # rows move with `ragloom index --rebuild` (vectors come from the embedding cache).
    """
    ALTER TABLE chunks ALTER COLUMN embedding SET STORAGE MAIN;
    ALTER TABLE chunks SET (toast_tuple_target = 8160);
    """,
    # 8: each file's bytes as indexed, so a serving node without a checkout of the repository
    # assembles contexts from the database (docs/postgres.md, "Context without a checkout").
    # NULL for a file indexed before it, until the next `ragloom index` gives it its bytes
    # (backend_index._backfill_content).
    """
    ALTER TABLE files ADD COLUMN content BYTEA;
    """,
)
SCHEMA_VERSION = len(MIGRATIONS)
READER_SCHEMA = 6
"""The oldest schema this ragloom's readers (servers, ``search``, ``status``) read: the
migrations after it change only how rows are stored (7: vectors in their rows) or add what a
reader does without (8: the files' bytes, read only by a node without a checkout, which goes
without them until then), so a team's servers of the new ragloom go on answering until
``ragloom index`` migrates the database."""


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
