"""SQLite store: the source of truth for files, chunks, embeddings and index metadata.

WAL mode lets readers keep working while one writer runs. The schema is versioned and
migrated by numbered steps (``MIGRATIONS``); an index whose schema is newer than this
ragloom understands is refused with :class:`~ragloom.errors.IncompatibleIndexError`.

Chunk rows are keyed by an integer ``rowid`` that is never reused (AUTOINCREMENT): the derived
indexes (BM25, HNSW) store rowids, so a rowid names one version of one chunk's text.

Generations (docs/consistency.md). Readers see the *published* generation ``G`` (meta
``generation``): the rows with ``rowid <= watermark`` (meta ``watermark``, the largest rowid when
``G`` was published) that were not removed at or before ``G`` (``gen_removed``). An update
writes generation ``G + 1`` beside it without changing what readers see: new rows get larger
rowids, replaced rows get ``gen_removed = G + 1``, the new positions of unchanged chunks and the
new file records wait in ``chunk_updates`` and ``file_updates``. :meth:`Store.publish` then makes
``G + 1`` visible in one small transaction, and :meth:`Store.collect_removed` deletes the rows
no generation shows any more once BM25 and HNSW have dropped them. An update that never got
published is undone by :meth:`Store.rollback_pending`.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ragloom.errors import DbError, IncompatibleIndexError
from ragloom.types import Chunk

__all__ = ["SCHEMA_VERSION", "ChunkRow", "FileRow", "GraphDefRow", "Store"]

log = logging.getLogger("ragloom.index")

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

_CHUNK_COLS = (
    "rowid, id, path, symbol, kind, language, source, parent_id, start_byte, end_byte, "
    "start_line, end_line, node_hash, file_hash"
)
_META_COLS = (
    "symbol, kind, language, source, parent_id, start_byte, end_byte, start_line, end_line, "
    "file_hash"
)
"""What may change on a chunk row that keeps its rowid (same id and text, moved)."""

_GEN = "(SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'generation')"
_WATERMARK = "(SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'watermark')"
_VISIBLE = f"rowid <= {_WATERMARK} AND (gen_removed IS NULL OR gen_removed > {_GEN})"
"""SQL condition: the row belongs to the published generation (evaluated per statement, so each
statement reads one consistent state)."""
_WANTED = f"(gen_removed IS NULL OR gen_removed > {_GEN})"
"""SQL condition: the row is in the published or the pending generation, so BM25 and HNSW must
hold it."""

RECLAIM_PAGES_PER_STEP = 4096
"""Pages ``incremental_vacuum`` returns to the file system per step (16 MB at 4 KiB pages;
~0.3 s each on the 2-core test machine, docs/consistency.md)."""


@dataclass(frozen=True, slots=True)
class FileRow:
    """One indexed file."""

    path: str
    hash: str
    size: int
    mtime: float
    language: str | None
    source: str
    n_chunks: int


@dataclass(frozen=True, slots=True)
class ChunkRow:
    """A chunk as stored, without its text (fetch text separately when needed)."""

    rowid: int
    id: str
    path: str
    symbol: str
    kind: str
    language: str
    source: str
    parent_id: str | None
    start_byte: int
    end_byte: int
    start_line: int
    end_line: int
    node_hash: str
    file_hash: str


@dataclass(frozen=True, slots=True)
class GraphDefRow:
    """A code chunk as the graph sees it: a definition (or a module's remainder)."""

    rowid: int
    id: str
    path: str
    symbol: str
    kind: str
    language: str
    parent_id: str | None
    start_line: int
    end_line: int


_DROP_UNUSED_GRAPHS = (
    "DELETE FROM file_graph WHERE NOT EXISTS (SELECT 1 FROM files f WHERE f.path = "
    "file_graph.path AND f.hash = file_graph.hash) AND NOT EXISTS (SELECT 1 FROM file_updates u "
    "WHERE u.path = file_graph.path AND u.hash = file_graph.hash)"
)
"""Graph records no file row of the published or the pending generation names."""


def _row_to_chunk(row: Sequence[object]) -> ChunkRow:
    return ChunkRow(*row)  # type: ignore[arg-type]


class Store:
    """A connection to the index's SQLite database."""

    def __init__(self, path: Path, *, readonly: bool = False) -> None:
        self.path = path
        self.readonly = readonly
        self._own_version = 0
        try:
            if readonly:
                uri = f"file:{path}?mode=ro"
                self._db = sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=30)
            else:
                self._db = sqlite3.connect(path, check_same_thread=False, timeout=30)
                if self.schema_version() == 0:
                    # must precede the first table; lets reclaim_space() shrink the file later
                    self._db.execute("PRAGMA auto_vacuum=INCREMENTAL")
                self._db.execute("PRAGMA journal_mode=WAL")
                # the WAL is cut back to this size when it restarts (a VACUUM or a large update
                # may have grown it; readers keep it open, so it is not removed on close)
                self._db.execute("PRAGMA journal_size_limit=33554432")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._db.execute("PRAGMA busy_timeout=30000")
        except sqlite3.Error as exc:
            raise DbError(f"cannot open index database {path}: {exc}") from exc
        if not readonly:
            self._migrate()
        else:
            self._check_version()

    # -- schema -------------------------------------------------------------------------
    def schema_version(self) -> int:
        row = self._db.execute("PRAGMA user_version").fetchone()
        return int(row[0])

    def _check_version(self) -> None:
        version = self.schema_version()
        if version > SCHEMA_VERSION:
            raise IncompatibleIndexError(
                f"index schema version {version} is newer than this ragloom supports "
                f"({SCHEMA_VERSION}); upgrade ragloom or rebuild with `ragloom index PATH --rebuild`"
            )
        if version < SCHEMA_VERSION:
            raise IncompatibleIndexError(
                f"index schema version {version} is older than {SCHEMA_VERSION}; "
                "run `ragloom index PATH` to migrate it"
            )

    def _migrate(self) -> None:
        version = self.schema_version()
        if version > SCHEMA_VERSION:
            self._check_version()
        try:
            for number in range(version, SCHEMA_VERSION):
                # one transaction per step: a step killed half way leaves the previous version
                self._db.executescript(
                    f"BEGIN IMMEDIATE;\n{MIGRATIONS[number]}\n"
                    f"PRAGMA user_version={number + 1};\nCOMMIT;"
                )
        except sqlite3.Error as exc:
            if self._db.in_transaction:
                self._db.rollback()
            raise DbError(f"schema migration failed: {exc}") from exc
        if self.get_meta("convert_auto_vacuum") is not None:
            # An index made before schema 2 cannot give pages back to the file system: switch
            # it to incremental auto-vacuum once (a full VACUUM, which also drops the pages of
            # the rebuilt chunks table; retried by the next writer if interrupted).
            try:
                if self._auto_vacuum() != 2:
                    self._db.execute("PRAGMA auto_vacuum=INCREMENTAL")
                    self._db.execute("VACUUM")
                self._db.execute("DELETE FROM meta WHERE key = 'convert_auto_vacuum'")
                self._db.commit()
            except sqlite3.Error as exc:  # still a valid index, it just keeps its size
                log.warning("could not switch the index to incremental vacuum: %s", exc)

    def _auto_vacuum(self) -> int:
        return int(self._db.execute("PRAGMA auto_vacuum").fetchone()[0])

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One atomic write: everything inside commits together or not at all."""
        try:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
        except sqlite3.Error as exc:
            raise DbError(f"index write failed: {exc}") from exc

    # -- meta ---------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str, conn: sqlite3.Connection | None = None) -> None:
        db = conn or self._db
        db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))
        if conn is None:
            self._db.commit()

    def get_meta_json(self, key: str) -> object:
        raw = self.get_meta(key)
        return None if raw is None else json.loads(raw)

    def generation(self) -> int:
        """The published generation: what every reader sees."""
        raw = self.get_meta("generation")
        return int(raw) if raw else 0

    def published(self) -> tuple[int, int]:
        """(generation, watermark) of the published generation, read in one statement."""
        row = self._db.execute(f"SELECT coalesce({_GEN}, 0), coalesce({_WATERMARK}, 0)").fetchone()
        return int(row[0]), int(row[1])

    def data_version(self) -> int:
        """Changes whenever another connection committed a change (SQLite ``data_version``):
        a reader that sees the same value knows nothing was written since (~1 us). A writable
        store's own commits do not change it, so there every call returns a new value."""
        if not self.readonly:
            self._own_version -= 1
            return self._own_version
        return int(self._db.execute("PRAGMA data_version").fetchone()[0])

    def pending_generation(self) -> int | None:
        """The generation an update is writing and has not published yet, if any."""
        raw = self.get_meta("pending")
        return int(raw) if raw else None

    # -- generations (writer) -----------------------------------------------------------
    def begin_generation(self, conn: sqlite3.Connection) -> int:
        """Start writing generation ``published + 1`` inside ``conn``'s transaction."""
        pending = self.generation() + 1
        self.set_meta("pending", str(pending), conn)
        return pending

    def publish(self) -> int:
        """Make the pending generation the published one (one small transaction): the moved
        positions of kept chunks and the new file records take effect together with the new
        generation number and watermark. Returns the published generation."""
        pending = self.pending_generation()
        if pending is None:
            return self.generation()
        with self.transaction() as conn:
            conn.execute(
                f"UPDATE chunks SET ({_META_COLS}) = (SELECT {_META_COLS} FROM chunk_updates u "
                "WHERE u.rowid = chunks.rowid) WHERE rowid IN (SELECT rowid FROM chunk_updates)"
            )
            conn.execute("DELETE FROM chunk_updates")
            conn.execute(
                "DELETE FROM files WHERE path IN (SELECT path FROM file_updates WHERE removed)"
            )
            conn.execute(
                "INSERT OR REPLACE INTO files(path, hash, size, mtime, language, source, "
                "n_chunks, indexed_at) SELECT path, hash, size, mtime, language, source, "
                "n_chunks, indexed_at FROM file_updates WHERE NOT removed"
            )
            conn.execute("DELETE FROM file_updates")
            self._set_watermark(conn)
            self.set_meta("generation", str(pending), conn)
            self.set_meta("published_at", repr(time.time()), conn)
            conn.execute("DELETE FROM meta WHERE key = 'pending'")
        return pending

    def rollback_pending(self) -> int:
        """Undo a generation written but never published (its update was interrupted); returns
        the rows dropped. BM25 and HNSW drop them at their next sync (a set difference)."""
        gen, watermark = self.published()
        row = self._db.execute(
            "SELECT (SELECT count(*) FROM chunks WHERE rowid > ?) + "
            "(SELECT count(*) FROM chunks WHERE gen_removed > ?) + "
            "(SELECT count(*) FROM chunk_updates) + (SELECT count(*) FROM file_updates) + "
            "(SELECT count(*) FROM meta WHERE key = 'pending')",
            (watermark, gen),
        ).fetchone()
        if not row[0]:
            return 0
        with self.transaction() as conn:
            dropped = int(conn.execute("DELETE FROM chunks WHERE rowid > ?", (watermark,)).rowcount)
            conn.execute("UPDATE chunks SET gen_removed = NULL WHERE gen_removed > ?", (gen,))
            conn.execute("DELETE FROM chunk_updates")
            conn.execute("DELETE FROM file_updates")
            conn.execute("DELETE FROM meta WHERE key = 'pending'")
        return dropped

    def collect_removed(self) -> tuple[int, int]:
        """Delete the rows no generation from the published one on shows (call once BM25 and
        HNSW no longer hold them), and in the same transaction the cached embeddings of their
        texts when no other chunk has the text; returns (rows, embeddings) deleted."""
        gen = self.generation()
        with self.transaction() as conn:
            hashes = list(
                dict.fromkeys(
                    str(r[0])
                    for r in conn.execute(
                        "SELECT node_hash FROM chunks INDEXED BY chunks_gen_removed "
                        "WHERE gen_removed <= ?",
                        (gen,),
                    )
                )
            )
            rows = int(conn.execute("DELETE FROM chunks WHERE gen_removed <= ?", (gen,)).rowcount)
            conn.execute(_DROP_UNUSED_GRAPHS)
            pruned = 0
            keys = self._embedding_keys(conn)
            for start in range(0, len(hashes), _IN_BATCH // 2):
                part = hashes[start : start + _IN_BATCH // 2]
                marks = ",".join("?" * len(part))
                for key in keys:
                    pruned += int(
                        conn.execute(
                            f"DELETE FROM embeddings WHERE model_id = ? AND node_hash IN ({marks}) "
                            "AND node_hash NOT IN (SELECT node_hash FROM chunks "
                            f"WHERE node_hash IN ({marks}))",
                            [key, *part, *part],
                        ).rowcount
                    )
        return rows, pruned

    def hidden_rowids(self, generation: int) -> list[int]:
        """Rows still stored (below the watermark) that ``generation`` does not show: removed
        at or before it and not collected yet. Few, and none once collected."""
        return [
            int(r[0])
            for r in self._db.execute(
                "SELECT rowid FROM chunks WHERE gen_removed <= ?", (generation,)
            )
        ]

    def _set_watermark(self, conn: sqlite3.Connection) -> None:
        conn.execute(
            "INSERT OR REPLACE INTO meta(key, value) "
            "VALUES ('watermark', CAST((SELECT coalesce(max(rowid), 0) FROM chunks) AS TEXT))"
        )

    # -- files --------------------------------------------------------------------------
    def files(self) -> dict[str, FileRow]:
        """The files of the published generation."""
        rows = self._db.execute(
            "SELECT path, hash, size, mtime, language, source, n_chunks FROM files"
        ).fetchall()
        return {r[0]: FileRow(*r) for r in rows}

    def file_count(self) -> int:
        return int(self._db.execute("SELECT count(*) FROM files").fetchone()[0])

    # -- chunks (readers: the published generation) -------------------------------------
    def chunk_count(self) -> int:
        """Chunks of the published generation (two index lookups, no table scan)."""
        row = self._db.execute(
            "SELECT (SELECT count(*) FROM chunks WHERE gen_removed IS NULL AND rowid <= "
            f"{_WATERMARK}) + (SELECT count(*) FROM chunks WHERE gen_removed > {_GEN})"
        ).fetchone()
        return int(row[0] or 0)

    def chunks_for_path(self, path: str) -> list[ChunkRow]:
        rows = self._db.execute(
            f"SELECT {_CHUNK_COLS} FROM chunks WHERE path=? AND {_VISIBLE} ORDER BY start_byte",
            (path,),
        ).fetchall()
        return [_row_to_chunk(r) for r in rows]

    def _select_in(
        self,
        columns: str,
        key: str,
        values: Sequence[int] | Sequence[str],
        where: str = "",
        table: str = "chunks",
    ) -> Iterator[Sequence[Any]]:
        """Rows of ``SELECT columns FROM table WHERE key IN values [AND where]``, 900 values
        per query (below SQLite's 999 bound-parameter limit of older builds)."""
        extra = f" AND {where}" if where else ""
        for start in range(0, len(values), _IN_BATCH):
            part = list(values[start : start + _IN_BATCH])
            marks = ",".join("?" * len(part))
            yield from self._db.execute(
                f"SELECT {columns} FROM {table} WHERE {key} IN ({marks}){extra}", part
            )

    def chunks_by_rowids(self, rowids: Sequence[int]) -> dict[int, ChunkRow]:
        """Rows of the published generation among ``rowids`` (others are left out)."""
        return {
            int(r[0]): _row_to_chunk(r)
            for r in self._select_in(_CHUNK_COLS, "rowid", rowids, _VISIBLE)
        }

    def chunks_by_ids(self, ids: Sequence[str]) -> dict[str, ChunkRow]:
        """Rows of the published generation with these chunk ids: the live row of an id through
        its index, or the row a pending update is replacing (which readers still see)."""
        live = self._select_in(
            _CHUNK_COLS,
            "id",
            ids,
            f"gen_removed IS NULL AND rowid <= {_WATERMARK}",
            # without statistics the planner would walk the gen_removed index instead
            table="chunks INDEXED BY chunks_live_id",
        )
        out = {str(r[1]): _row_to_chunk(r) for r in live}
        missing = [i for i in dict.fromkeys(ids) if i not in out]
        if missing:
            for r in self._select_in(_CHUNK_COLS, "id", missing, f"gen_removed > {_GEN}"):
                out[str(r[1])] = _row_to_chunk(r)
        return out

    def texts_by_rowids(self, rowids: Sequence[int]) -> dict[int, str]:
        """Texts by rowid (a rowid's text never changes, so no generation check is needed)."""
        return {int(r[0]): str(r[1]) for r in self._select_in("rowid, text", "rowid", rowids)}

    def iter_chunk_texts(self, batch: int = 2000) -> Iterator[list[tuple[int, str, str]]]:
        """Yield batches of (rowid, text, symbol + path) over the published generation's chunks,
        rowid order (pinned to the generation published when the iteration starts)."""
        gen, watermark = self.published()
        last = -1
        while True:
            rows = self._db.execute(
                "SELECT rowid, text, symbol || ' ' || path FROM chunks WHERE rowid > ? "
                "AND rowid <= ? AND (gen_removed IS NULL OR gen_removed > ?) "
                "ORDER BY rowid LIMIT ?",
                (last, watermark, gen, batch),
            ).fetchall()
            if not rows:
                return
            yield [(int(r[0]), str(r[1]), str(r[2])) for r in rows]
            last = int(rows[-1][0])

    def all_rowids(self) -> np.ndarray:
        """Rowids of the published generation."""
        rows = self._db.execute(f"SELECT rowid FROM chunks WHERE {_VISIBLE}").fetchall()
        return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))

    def visible_rowids(self) -> np.ndarray:
        """Rowids of the published generation, as :meth:`all_rowids`, read as one string
        (45 ms instead of 75-140 ms at 100k rows)."""
        (joined,) = self._db.execute(
            f"SELECT group_concat(rowid) FROM chunks WHERE {_VISIBLE}"
        ).fetchone()
        if not joined:
            return np.zeros(0, dtype=np.int64)
        return np.array(joined.split(","), dtype=np.int64)

    def symbol_rows(self, rowids: Sequence[int]) -> dict[int, tuple[str, str, str]]:
        """rowid -> (symbol, path, id) of these rows (any generation; absent rows left out)."""
        out: dict[int, tuple[str, str, str]] = {}
        ids = [int(r) for r in rowids]
        for start in range(0, len(ids), 500):
            part = ids[start : start + 500]
            marks = ",".join("?" * len(part))
            for r in self._db.execute(
                f"SELECT rowid, symbol, path, id FROM chunks WHERE rowid IN ({marks})", part
            ):
                out[int(r[0])] = (str(r[1]), str(r[2]), str(r[3]))
        return out

    def symbol_table_rows(self) -> dict[int, tuple[str, str, str]]:
        """rowid -> (symbol, path, id) for every chunk of the published generation."""
        return {
            int(r[0]): (str(r[1]), str(r[2]), str(r[3]))
            for r in self._db.execute(
                f"SELECT rowid, symbol, path, id FROM chunks WHERE {_VISIBLE}"
            )
        }

    # -- code graph records ----------------------------------------------------------------
    def put_file_graph(self, conn: sqlite3.Connection, path: str, digest: str, blob: bytes) -> None:
        """Keep the graph record of one file version (written once, never changed)."""
        conn.execute(
            "INSERT OR REPLACE INTO file_graph(path, hash, data) VALUES (?,?,?)",
            (path, digest, blob),
        )

    def files_without_graph(self, languages: Collection[str]) -> list[tuple[str, str]]:
        """(path, hash) of the published files in ``languages`` that have no graph record: an
        index made before the graph, or by another version of the extractor."""
        marks = ",".join("?" * len(languages))
        return [
            (str(r[0]), str(r[1]))
            for r in self._db.execute(
                f"SELECT f.path, f.hash FROM files f WHERE f.language IN ({marks}) AND NOT EXISTS "
                "(SELECT 1 FROM file_graph g WHERE g.path = f.path AND g.hash = f.hash)",
                list(languages),
            )
        ]

    def clear_file_graphs(self) -> None:
        with self.transaction() as conn:
            conn.execute("DELETE FROM file_graph")

    def graph_snapshot(
        self, languages: Collection[str]
    ) -> tuple[int, list[GraphDefRow], list[tuple[str, str, bytes]]]:
        """What the code graph of the published generation is built from, read in one snapshot:
        (generation, the code chunks as definitions, (path, language, record) per file with a
        record or in ``languages``; ``b""`` for a file without one, such as an empty
        ``__init__.py``, which still makes its folder a package)."""
        own = self._db.in_transaction
        if not own:
            self._db.execute("BEGIN")
        try:
            gen = self.generation()
            defs = [
                GraphDefRow(*r)
                for r in self._db.execute(
                    "SELECT rowid, id, path, symbol, kind, language, parent_id, start_line, "
                    f"end_line FROM chunks WHERE source = 'code' AND {_VISIBLE}"
                )
            ]
            records = [
                (str(r[0]), str(r[1] or ""), bytes(r[2]) if r[2] is not None else b"")
                for r in self._db.execute(
                    "SELECT f.path, f.language, g.data FROM files f "
                    "LEFT JOIN file_graph g ON g.path = f.path AND g.hash = f.hash "
                    "WHERE g.data IS NOT NULL OR f.language IN "
                    f"({','.join(repr(x) for x in sorted(languages))})"
                )
            ]
        finally:
            if not own:
                self._db.execute("COMMIT")
        return gen, defs, records

    def symbol_table(self) -> list[tuple[str, str, str]]:
        """(symbol, path, id) for every chunk of the published generation: input for query
        entity extraction."""
        return [
            (str(r[0]), str(r[1]), str(r[2]))
            for r in self._db.execute(f"SELECT symbol, path, id FROM chunks WHERE {_VISIBLE}")
        ]

    def kind_counts(self) -> dict[str, int]:
        return {
            str(k): int(n)
            for k, n in self._db.execute(
                f"SELECT kind, count(*) FROM chunks WHERE {_VISIBLE} GROUP BY kind"
            )
        }

    def language_counts(self) -> dict[str, int]:
        return {
            str(k): int(n)
            for k, n in self._db.execute(
                f"SELECT language, count(*) FROM chunks WHERE {_VISIBLE} GROUP BY language"
            )
        }

    # -- chunks (writer) ----------------------------------------------------------------
    def wanted_rowids(self) -> np.ndarray:
        """Rowids BM25 and HNSW must hold: the published generation's and the pending one's."""
        # one string instead of a Python tuple per row: 45 ms instead of 75-140 ms at 100k rows
        # (every update runs this twice, before and after its publication)
        (joined,) = self._db.execute(
            f"SELECT group_concat(rowid) FROM chunks WHERE {_WANTED}"
        ).fetchone()
        if not joined:
            return np.zeros(0, dtype=np.int64)
        return np.array(joined.split(","), dtype=np.int64)

    def pending_rowids(self, model_id: str | None = None) -> np.ndarray:
        """Rowids of the pending generation's new rows (above the watermark); with
        ``model_id``, only those whose text has an embedding for it."""
        _, watermark = self.published()
        if model_id is None:
            rows = self._db.execute("SELECT rowid FROM chunks WHERE rowid > ?", (watermark,))
        else:
            rows = self._db.execute(
                # CROSS JOIN keeps the rowid range outermost (else all embeddings are read)
                "SELECT c.rowid FROM chunks c CROSS JOIN embeddings e ON e.model_id = ? "
                "AND e.node_hash = c.node_hash WHERE c.rowid > ?",
                (model_id, watermark),
            )
        return np.fromiter((r[0] for r in rows), dtype=np.int64)

    def bm25_sources(self, rowids: Sequence[int]) -> dict[int, tuple[str, str, str]]:
        """(text, symbol, path) by rowid, whatever generation the rows belong to."""
        return {
            int(r[0]): (str(r[1]), str(r[2]), str(r[3]))
            for r in self._select_in("rowid, text, symbol, path", "rowid", rowids)
        }

    def replace_file(
        self,
        conn: sqlite3.Connection,
        path: str,
        chunks: Sequence[Chunk],
        *,
        file_hash: str,
        size: int,
        mtime: float,
        language: str | None,
        source: str,
        generation: int | None = None,
    ) -> tuple[int, int, int, int]:
        """Write one file's new chunk set; returns (added, updated, removed, kept) chunk counts.

        A chunk whose id and node hash are unchanged keeps its rowid, so its BM25 entry and
        embedding stay valid. With ``generation`` (from :meth:`begin_generation`) the new set
        belongs to that pending generation and readers keep seeing the old one until
        :meth:`publish`; without it the change is visible at once (a single-step writer).
        """
        existing = {
            str(r[0]): (int(r[1]), str(r[2]), tuple(r[3:]))
            for r in conn.execute(
                f"SELECT id, rowid, node_hash, {_META_COLS} FROM chunks "
                "WHERE path=? AND gen_removed IS NULL",
                (path,),
            )
        }
        new_ids = {c.id for c in chunks}
        added = updated = kept = 0
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
                    if generation is None:
                        sets = ", ".join(f"{col}=?" for col in _META_COLS.split(", "))
                        conn.execute(f"UPDATE chunks SET {sets} WHERE rowid=?", (*meta, old[0]))
                    else:
                        conn.execute(
                            f"INSERT OR REPLACE INTO chunk_updates(rowid, {_META_COLS}) "
                            "VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                            (old[0], *meta),
                        )
                kept += 1
                continue
            if old is not None:
                self._drop_rows(conn, [old[0]], generation)
                updated += 1
            else:
                added += 1
            conn.execute(
                f"INSERT INTO chunks({_CHUNK_COLS.replace('rowid, ', '')}, text) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
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
                ),
            )
        stale = [rowid for cid, (rowid, _, _) in existing.items() if cid not in new_ids]
        self._drop_rows(conn, stale, generation)
        record = (path, file_hash, size, mtime, language, source, len(chunks), time.time())
        if generation is None:
            conn.execute(
                "INSERT OR REPLACE INTO files(path, hash, size, mtime, language, source, "
                "n_chunks, indexed_at) VALUES (?,?,?,?,?,?,?,?)",
                record,
            )
            self._set_watermark(conn)
        else:
            conn.execute(
                "INSERT OR REPLACE INTO file_updates(path, removed, hash, size, mtime, language, "
                "source, n_chunks, indexed_at) VALUES (?,0,?,?,?,?,?,?,?)",
                record,
            )
        return added, updated, len(stale), kept

    def remove_file(
        self, conn: sqlite3.Connection, path: str, *, generation: int | None = None
    ) -> int:
        """Remove a file and its chunks (from ``generation`` on when given, else at once)."""
        rowids = [
            int(r[0])
            for r in conn.execute(
                "SELECT rowid FROM chunks WHERE path=? AND gen_removed IS NULL", (path,)
            )
        ]
        self._drop_rows(conn, rowids, generation)
        if generation is None:
            conn.execute("DELETE FROM files WHERE path=?", (path,))
        else:
            conn.execute(
                "INSERT OR REPLACE INTO file_updates(path, removed) VALUES (?, 1)", (path,)
            )
        return len(rowids)

    @staticmethod
    def _drop_rows(conn: sqlite3.Connection, rowids: Sequence[int], generation: int | None) -> None:
        if generation is None:
            conn.executemany("DELETE FROM chunks WHERE rowid=?", [(r,) for r in rowids])
        else:
            conn.executemany(
                "UPDATE chunks SET gen_removed=? WHERE rowid=?", [(generation, r) for r in rowids]
            )

    # -- embeddings ---------------------------------------------------------------------
    def missing_embeddings(
        self, model_id: str, *, above: int | None = None
    ) -> list[tuple[str, str]]:
        """(node_hash, embedding text) of live chunks with no embedding for ``model_id``, one
        per hash; the text is :func:`ragloom.embed.document.embedding_text` of the chunk with
        the smallest rowid among those sharing the hash (deterministic). ``above``: only
        hashes of rows with a larger rowid (one update's new rows: a rowid range, not the
        whole table)."""
        from ragloom.embed.document import embedding_text

        # the anti-join runs on the node-hash index alone (a row is read only for a missing hash)
        scope = "" if above is None else " AND h.rowid > ?"
        args: tuple[object, ...] = (model_id,) if above is None else (model_id, above)
        rows = self._db.execute(
            "SELECT c.node_hash, min(c.rowid), c.path, c.kind, c.symbol, c.text "
            "FROM chunks c INDEXED BY chunks_node_hash WHERE c.node_hash IN (SELECT h.node_hash FROM chunks h LEFT JOIN embeddings e "
            f"ON e.model_id=? AND e.node_hash=h.node_hash WHERE e.node_hash IS NULL{scope}) "
            "AND c.gen_removed IS NULL GROUP BY c.node_hash",
            args,
        ).fetchall()
        return [
            (str(r[0]), embedding_text(str(r[2]), str(r[3]), str(r[4]), str(r[5]))) for r in rows
        ]

    def put_embeddings(self, model_id: str, items: Iterable[tuple[str, np.ndarray]]) -> None:
        with self.transaction() as conn:
            conn.executemany(
                "INSERT OR REPLACE INTO embeddings(model_id, node_hash, vector) VALUES (?,?,?)",
                [(model_id, h, np.asarray(v, dtype=np.float32).tobytes()) for h, v in items],
            )

    def embedded_rowids(self, model_id: str, *, above: int | None = None) -> np.ndarray:
        """Rowids BM25/HNSW must hold (:meth:`wanted_rowids`) that have an embedding for
        ``model_id``; ``above``: only rowids larger than it (a rowid range read first)."""
        # the join reads the node-hash index only; the few collected-to-be rows are subtracted
        if above is None:
            rows = self._db.execute(
                "SELECT c.rowid FROM chunks c JOIN embeddings e "
                "ON e.model_id=? AND e.node_hash=c.node_hash",
                (model_id,),
            ).fetchall()
        else:
            rows = self._db.execute(
                # CROSS JOIN keeps the rowid range outermost (else all embeddings are read)
                "SELECT c.rowid FROM chunks c CROSS JOIN embeddings e ON e.model_id = ? "
                "AND e.node_hash = c.node_hash WHERE c.rowid > ?",
                (model_id, above),
            ).fetchall()
        embedded = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        gone = np.array(self.hidden_rowids(self.generation()), dtype=np.int64)
        return np.setdiff1d(embedded, gone) if len(gone) else embedded

    def vectors_for_rowids(self, model_id: str, rowids: Sequence[int], dim: int) -> np.ndarray:
        """Embeddings of the given chunk rowids, in order (zeros where missing).

        Two indexed lookups (rowid -> node hash, then (model, hash) -> vector): a single join
        lets SQLite scan the whole embeddings table (measured 200 ms for 50 rows at 5k chunks).
        """
        out = np.zeros((len(rowids), dim), dtype=np.float32)
        for start in range(0, len(rowids), 900):
            part = [int(r) for r in rowids[start : start + 900]]
            marks = ",".join("?" * len(part))
            hashes: dict[str, list[int]] = {}
            for rowid, node_hash in self._db.execute(
                f"SELECT rowid, node_hash FROM chunks WHERE rowid IN ({marks})", part
            ):
                hashes.setdefault(str(node_hash), []).append(int(rowid))
            if not hashes:
                continue
            pos = {r: start + i for i, r in enumerate(part)}
            keys = list(hashes)
            hmarks = ",".join("?" * len(keys))
            for node_hash, blob in self._db.execute(
                f"SELECT node_hash, vector FROM embeddings WHERE model_id=? "
                f"AND node_hash IN ({hmarks})",
                [model_id, *keys],
            ):
                vec = np.frombuffer(blob, dtype=np.float32)
                for rowid in hashes[str(node_hash)]:
                    out[pos[rowid]] = vec
        return out

    def embedding_count(self, model_id: str) -> int:
        return int(
            self._db.execute(
                "SELECT count(*) FROM chunks c JOIN embeddings e "
                "ON e.model_id=? AND e.node_hash=c.node_hash",
                (model_id,),
            ).fetchone()[0]
        )

    def prune_embeddings(self, model_id: str) -> int:
        """Drop cached embeddings of ``model_id`` whose text no chunk has any more."""
        with self.transaction() as conn:
            cur = conn.execute(
                "DELETE FROM embeddings WHERE model_id=? AND node_hash NOT IN "
                "(SELECT node_hash FROM chunks)",
                (model_id,),
            )
            return int(cur.rowcount)

    def prune_stale_embeddings(self, keep: str | None) -> int:
        """Drop the cached embeddings no chunk can use any more; returns rows deleted.

        Those stored under another key than ``keep`` (another model or embedding-text format;
        skipped when ``keep`` is None) go by primary-key range. Embeddings of texts no chunk has
        any more are normally dropped by :meth:`collect_removed` as their rows go; a full sweep
        (a scan of the embeddings table) runs once per index to catch those left by older
        versions or direct writes, and again whenever another key was dropped."""
        with self.transaction() as conn:
            pruned = 0
            for key in self._embedding_keys(conn):
                if keep is not None and key != keep:
                    cur = conn.execute("DELETE FROM embeddings WHERE model_id = ?", (key,))
                    pruned += int(cur.rowcount)
            swept = conn.execute("SELECT 1 FROM meta WHERE key = 'embeddings_swept'").fetchone()
            if pruned or swept is None:
                cur = conn.execute(
                    "DELETE FROM embeddings WHERE node_hash NOT IN (SELECT node_hash FROM chunks)"
                )
                pruned += int(cur.rowcount)
                self.set_meta("embeddings_swept", "1", conn)
        return pruned

    @staticmethod
    def _embedding_keys(conn: sqlite3.Connection) -> list[str]:
        """The distinct model keys of the embeddings table, one primary-key seek each."""
        rows = conn.execute(
            "WITH RECURSIVE k(m) AS (SELECT min(model_id) FROM embeddings UNION ALL "
            "SELECT (SELECT min(model_id) FROM embeddings WHERE model_id > k.m) FROM k "
            "WHERE k.m IS NOT NULL) SELECT m FROM k WHERE m IS NOT NULL"
        ).fetchall()
        return [str(r[0]) for r in rows]

    # -- disk space ---------------------------------------------------------------------
    def size_bytes(self) -> int:
        """Pages in use plus free pages, in bytes: the database file's size once checkpointed."""
        page_size = int(self._db.execute("PRAGMA page_size").fetchone()[0])
        return page_size * int(self._db.execute("PRAGMA page_count").fetchone()[0])

    def free_bytes(self) -> int:
        """Bytes of free pages inside the database file (what :meth:`reclaim_space` can give
        back)."""
        page_size = int(self._db.execute("PRAGMA page_size").fetchone()[0])
        return page_size * int(self._db.execute("PRAGMA freelist_count").fetchone()[0])

    def reclaim_space(self, max_seconds: float = 5.0) -> int:
        """Give free pages back to the file system (``incremental_vacuum``), 16 MB per step,
        for at most about ``max_seconds``; returns the bytes the database file shrinks by.

        Each step is a short write transaction that moves pages from the end of the file into
        free slots, so readers are never blocked and an indexer never holds the write lock for
        long; what the budget leaves is reclaimed by the next run. A passive checkpoint then
        copies the steps into the database file and truncates it (fully once no reader holds an
        older snapshot; the WAL itself is reused, not grown)."""
        if self._auto_vacuum() != 2:
            return 0
        before = self.size_bytes()
        deadline = time.perf_counter() + max_seconds
        try:
            while int(self._db.execute("PRAGMA freelist_count").fetchone()[0]) > 0:
                # sqlite3_exec steps the pragma to the end (execute() would free one page)
                self._db.executescript(f"PRAGMA incremental_vacuum({RECLAIM_PAGES_PER_STEP});")
                if time.perf_counter() >= deadline:
                    break
            self._db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except sqlite3.Error as exc:
            raise DbError(f"index write failed: {exc}") from exc
        return max(0, before - self.size_bytes())
