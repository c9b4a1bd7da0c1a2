"""The SQLite store's schema: numbered migrations (``MIGRATIONS``, ``SCHEMA_VERSION``), the
SQL fragments that pick a generation's rows, and :class:`StoreBase`, what the mixins of
:class:`~ragloom.index.store.Store` may use of it. :meth:`Store._migrate
<ragloom.index.store.Store._migrate>` applies the migrations; :mod:`ragloom.index.store`
re-exports every name. The row types and chunk columns both backends share are in
:mod:`ragloom.index.rows`.
"""

from __future__ import annotations

import sqlite3
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from ragloom.index.rows import CHUNK_META_COLS

SCHEMA_VERSION = 3
"""Current schema version; each entry of MIGRATIONS moves the schema up by one."""

MIGRATIONS: tuple[str, ...] = (
    # 1: initial schema
    """
    CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS files (
        path TEXT PRIMARY KEY,
        hash TEXT NOT NULL,
        size INTEGER NOT NULL,
        mtime REAL NOT NULL,
        language TEXT,
        source TEXT NOT NULL,
        n_chunks INTEGER NOT NULL,
        indexed_at REAL NOT NULL
    );
    CREATE TABLE IF NOT EXISTS chunks (
        rowid INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
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
        text TEXT NOT NULL
    );
    CREATE INDEX IF NOT EXISTS chunks_path ON chunks(path);
    CREATE INDEX IF NOT EXISTS chunks_node_hash ON chunks(node_hash);
    CREATE INDEX IF NOT EXISTS chunks_symbol ON chunks(symbol);
    CREATE TABLE IF NOT EXISTS embeddings (
        model_id TEXT NOT NULL,
        node_hash TEXT NOT NULL,
        vector BLOB NOT NULL,
        PRIMARY KEY (model_id, node_hash)
    ) WITHOUT ROWID;
    """,
    # 2: generations. ``chunks`` is rebuilt: a chunk id may now have two rows (the version the
    # published generation shows and the one the pending generation writes), ``gen_removed``
    # sits before ``text`` so reading it never touches a long text's overflow pages, and the
    # AUTOINCREMENT counter is carried over so no rowid is ever handed out twice.
    """
    CREATE TABLE chunks_v2 (
        rowid INTEGER PRIMARY KEY AUTOINCREMENT,
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
        gen_removed INTEGER,
        text TEXT NOT NULL
    );
    INSERT INTO chunks_v2(rowid, id, path, symbol, kind, language, source, parent_id,
        start_byte, end_byte, start_line, end_line, node_hash, file_hash, text)
        SELECT rowid, id, path, symbol, kind, language, source, parent_id, start_byte,
        end_byte, start_line, end_line, node_hash, file_hash, text FROM chunks ORDER BY rowid;
    CREATE TEMP TABLE _old_seq AS
        SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'chunks'), 0) AS seq;
    DROP TABLE chunks;
    ALTER TABLE chunks_v2 RENAME TO chunks;
    INSERT INTO sqlite_sequence(name, seq) SELECT 'chunks', 0
        WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'chunks');
    UPDATE sqlite_sequence SET seq = max(seq, (SELECT seq FROM _old_seq)) WHERE name = 'chunks';
    DROP TABLE _old_seq;
    CREATE UNIQUE INDEX chunks_live_id ON chunks(id) WHERE gen_removed IS NULL;
    CREATE INDEX chunks_path ON chunks(path);
    CREATE INDEX chunks_node_hash ON chunks(node_hash);
    CREATE INDEX chunks_symbol ON chunks(symbol);
    CREATE INDEX chunks_gen_removed ON chunks(gen_removed);
    CREATE TABLE chunk_updates (
        rowid INTEGER PRIMARY KEY,
        symbol TEXT NOT NULL,
        kind TEXT NOT NULL,
        language TEXT NOT NULL,
        source TEXT NOT NULL,
        parent_id TEXT,
        start_byte INTEGER NOT NULL,
        end_byte INTEGER NOT NULL,
        start_line INTEGER NOT NULL,
        end_line INTEGER NOT NULL,
        file_hash TEXT NOT NULL
    );
    CREATE TABLE file_updates (
        path TEXT PRIMARY KEY,
        removed INTEGER NOT NULL,
        hash TEXT,
        size INTEGER,
        mtime REAL,
        language TEXT,
        source TEXT,
        n_chunks INTEGER,
        indexed_at REAL
    );
    INSERT OR IGNORE INTO meta(key, value) VALUES ('generation', '0');
    INSERT OR REPLACE INTO meta(key, value)
        VALUES ('watermark', CAST((SELECT coalesce(max(rowid), 0) FROM chunks) AS TEXT));
    INSERT OR REPLACE INTO meta(key, value) VALUES ('convert_auto_vacuum', '1');
    """,
    # 3: the code graph's per-file records (ingest/filegraph.py): one per version of a file, so
    # a record never changes; a generation shows those of the file rows it shows.
    """
    CREATE TABLE file_graph (
        path TEXT NOT NULL,
        hash TEXT NOT NULL,
        data BLOB NOT NULL,
        PRIMARY KEY (path, hash)
    ) WITHOUT ROWID;
    """,
)

_IN_BATCH = 900
"""Values per ``IN (...)`` query."""

_META_COLS = ", ".join(CHUNK_META_COLS)
"""What may change on a chunk row that keeps its rowid (same id and text, moved)."""

_GEN = "(SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'generation')"
_WATERMARK = "(SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'watermark')"
_VISIBLE = f"rowid <= {_WATERMARK} AND (gen_removed IS NULL OR gen_removed > {_GEN})"
"""SQL condition: the row belongs to the published generation (evaluated per statement, so each
statement reads one consistent state)."""
_WANTED = f"(gen_removed IS NULL OR gen_removed > {_GEN})"
"""SQL condition: the row is in the published or the pending generation, so BM25 and HNSW must
hold it."""

CHUNKER_VERSION_META = "chunker_version"
"""Meta key: the :data:`~ragloom.ingest.chunker.CHUNKER_VERSION` the index's chunks were made
by (absent: an index made before the key, chunked by version 1)."""
GRAPH_VERSION_META = "graph_version"
"""Meta key: the :data:`~ragloom.ingest.filegraph.FILE_GRAPH_VERSION` of the index's graph
records."""
GRAPH_STATE_KEYS = (
    "generation",
    "watermark",
    "published_at",
    CHUNKER_VERSION_META,
    GRAPH_VERSION_META,
)
"""Meta keys that name what the published generation's code graph is made from: the
generation, its watermark and publish time (a rebuild from nothing counts generations from 1
again, its publish time differs) and the versions of the rules that made its chunks and graph
records (:meth:`~ragloom.index.store.Store.graph_state`)."""

RECLAIM_PAGES_PER_STEP = 4096
"""Pages ``incremental_vacuum`` returns to the file system per step (16 MB at 4 KiB pages;
~0.3 s each on the 2-core test machine, docs/consistency.md)."""


_DROP_UNUSED_GRAPHS = (
    "DELETE FROM file_graph WHERE NOT EXISTS (SELECT 1 FROM files f WHERE f.path = "
    "file_graph.path AND f.hash = file_graph.hash) AND NOT EXISTS (SELECT 1 FROM file_updates u "
    "WHERE u.path = file_graph.path AND u.hash = file_graph.hash)"
)
"""Graph records no file row of the published or the pending generation names."""


class StoreBase:
    """What the mixins of :class:`~ragloom.index.store.Store` (:mod:`ragloom.index.store_generations`,
    :mod:`ragloom.index.store_embeddings`) use of it: declared for the type checker only."""

    _db: sqlite3.Connection
    readonly: bool

    if TYPE_CHECKING:

        def transaction(self) -> AbstractContextManager[sqlite3.Connection]: ...

        def get_meta(self, key: str) -> str | None: ...

        def set_meta(
            self, key: str, value: str, conn: sqlite3.Connection | None = None
        ) -> None: ...

        def generation(self) -> int: ...

        def published(self) -> tuple[int, int]: ...

        def pending_generation(self) -> int | None: ...

        def hidden_rowids(self, generation: int) -> list[int]: ...

        def _auto_vacuum(self) -> int: ...

        @staticmethod
        def _embedding_keys(conn: sqlite3.Connection) -> list[str]: ...
