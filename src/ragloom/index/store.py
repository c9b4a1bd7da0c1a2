"""SQLite store: the source of truth for files, chunks, embeddings and index metadata.

WAL mode lets readers keep working while one writer runs. The schema is versioned and
migrated by numbered steps (``MIGRATIONS``); an index whose schema is newer than this
ragloom understands is refused with :class:`~ragloom.errors.IncompatibleIndexError`.

Chunk rows are keyed by an integer ``rowid`` that is never reused (AUTOINCREMENT): the derived
indexes (BM25, HNSW) store rowids, so a rowid names one version of one chunk's text.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ragloom.errors import DbError, IncompatibleIndexError
from ragloom.types import Chunk

__all__ = ["SCHEMA_VERSION", "ChunkRow", "FileRow", "Store"]

SCHEMA_VERSION = 1
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
)

_IN_BATCH = 900
"""Values per ``IN (...)`` query."""

_CHUNK_COLS = (
    "rowid, id, path, symbol, kind, language, source, parent_id, start_byte, end_byte, "
    "start_line, end_line, node_hash, file_hash"
)


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


def _row_to_chunk(row: Sequence[object]) -> ChunkRow:
    return ChunkRow(*row)  # type: ignore[arg-type]


class Store:
    """A connection to the index's SQLite database."""

    def __init__(self, path: Path, *, readonly: bool = False) -> None:
        self.path = path
        self.readonly = readonly
        try:
            if readonly:
                uri = f"file:{path}?mode=ro"
                self._db = sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=30)
            else:
                self._db = sqlite3.connect(path, check_same_thread=False, timeout=30)
                self._db.execute("PRAGMA journal_mode=WAL")
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
                with self._db:
                    self._db.executescript(MIGRATIONS[number])
                    self._db.execute(f"PRAGMA user_version={number + 1}")
        except sqlite3.Error as exc:
            raise DbError(f"schema migration failed: {exc}") from exc

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
        raw = self.get_meta("generation")
        return int(raw) if raw else 0

    # -- files --------------------------------------------------------------------------
    def files(self) -> dict[str, FileRow]:
        rows = self._db.execute(
            "SELECT path, hash, size, mtime, language, source, n_chunks FROM files"
        ).fetchall()
        return {r[0]: FileRow(*r) for r in rows}

    def file_count(self) -> int:
        return int(self._db.execute("SELECT count(*) FROM files").fetchone()[0])

    # -- chunks -------------------------------------------------------------------------
    def chunk_count(self) -> int:
        return int(self._db.execute("SELECT count(*) FROM chunks").fetchone()[0])

    def chunks_for_path(self, path: str) -> list[ChunkRow]:
        rows = self._db.execute(
            f"SELECT {_CHUNK_COLS} FROM chunks WHERE path=? ORDER BY start_byte", (path,)
        ).fetchall()
        return [_row_to_chunk(r) for r in rows]

    def _select_in(
        self, columns: str, key: str, values: Sequence[int] | Sequence[str]
    ) -> Iterator[Sequence[Any]]:
        """Rows of ``SELECT columns FROM chunks WHERE key IN values``, 900 values per query
        (below SQLite's 999 bound-parameter limit of older builds)."""
        for start in range(0, len(values), _IN_BATCH):
            part = list(values[start : start + _IN_BATCH])
            marks = ",".join("?" * len(part))
            yield from self._db.execute(
                f"SELECT {columns} FROM chunks WHERE {key} IN ({marks})", part
            )

    def chunks_by_rowids(self, rowids: Sequence[int]) -> dict[int, ChunkRow]:
        return {int(r[0]): _row_to_chunk(r) for r in self._select_in(_CHUNK_COLS, "rowid", rowids)}

    def chunks_by_ids(self, ids: Sequence[str]) -> dict[str, ChunkRow]:
        return {str(r[1]): _row_to_chunk(r) for r in self._select_in(_CHUNK_COLS, "id", ids)}

    def texts_by_rowids(self, rowids: Sequence[int]) -> dict[int, str]:
        return {int(r[0]): str(r[1]) for r in self._select_in("rowid, text", "rowid", rowids)}

    def iter_chunk_texts(self, batch: int = 2000) -> Iterator[list[tuple[int, str, str]]]:
        """Yield batches of (rowid, text, symbol + path) over all chunks, rowid order."""
        last = -1
        while True:
            rows = self._db.execute(
                "SELECT rowid, text, symbol || ' ' || path FROM chunks WHERE rowid > ? "
                "ORDER BY rowid LIMIT ?",
                (last, batch),
            ).fetchall()
            if not rows:
                return
            yield [(int(r[0]), str(r[1]), str(r[2])) for r in rows]
            last = int(rows[-1][0])

    def all_rowids(self) -> np.ndarray:
        rows = self._db.execute("SELECT rowid FROM chunks").fetchall()
        return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))

    def symbol_table(self) -> list[tuple[str, str, str]]:
        """(symbol, path, id) for every chunk: input for query entity extraction."""
        return [
            (str(r[0]), str(r[1]), str(r[2]))
            for r in self._db.execute("SELECT symbol, path, id FROM chunks")
        ]

    def kind_counts(self) -> dict[str, int]:
        return {
            str(k): int(n)
            for k, n in self._db.execute("SELECT kind, count(*) FROM chunks GROUP BY kind")
        }

    def language_counts(self) -> dict[str, int]:
        return {
            str(k): int(n)
            for k, n in self._db.execute("SELECT language, count(*) FROM chunks GROUP BY language")
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
    ) -> tuple[int, int, int, int]:
        """Write one file's new chunk set; returns (added, updated, removed, kept) chunk counts.

        A chunk whose id and node hash are unchanged keeps its rowid (only its spans are
        updated if it moved), so its BM25 entry and embedding stay valid.
        """
        existing = {
            str(r[0]): (int(r[1]), str(r[2]))
            for r in conn.execute("SELECT id, rowid, node_hash FROM chunks WHERE path=?", (path,))
        }
        new_ids = {c.id for c in chunks}
        added = updated = kept = 0
        for c in chunks:
            old = existing.get(c.id)
            if old is not None and old[1] == c.node_hash:
                conn.execute(
                    "UPDATE chunks SET symbol=?, kind=?, language=?, source=?, parent_id=?, "
                    "start_byte=?, end_byte=?, start_line=?, end_line=?, file_hash=? "
                    "WHERE rowid=?",
                    (
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
                        old[0],
                    ),
                )
                kept += 1
                continue
            if old is not None:
                conn.execute("DELETE FROM chunks WHERE rowid=?", (old[0],))
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
        stale = [rowid for cid, (rowid, _) in existing.items() if cid not in new_ids]
        conn.executemany("DELETE FROM chunks WHERE rowid=?", [(r,) for r in stale])
        conn.execute(
            "INSERT OR REPLACE INTO files(path, hash, size, mtime, language, source, n_chunks, "
            "indexed_at) VALUES (?,?,?,?,?,?,?,?)",
            (path, file_hash, size, mtime, language, source, len(chunks), time.time()),
        )
        return added, updated, len(stale), kept

    def remove_file(self, conn: sqlite3.Connection, path: str) -> int:
        cur = conn.execute("DELETE FROM chunks WHERE path=?", (path,))
        conn.execute("DELETE FROM files WHERE path=?", (path,))
        return int(cur.rowcount)

    # -- embeddings ---------------------------------------------------------------------
    def missing_embeddings(self, model_id: str) -> list[tuple[str, str]]:
        """(node_hash, embedding text) of chunks with no embedding for ``model_id``, one per
        hash; the text is :func:`ragloom.embed.document.embedding_text` of the chunk with the
        smallest rowid among those sharing the hash (deterministic)."""
        from ragloom.embed.document import embedding_text

        rows = self._db.execute(
            "SELECT c.node_hash, min(c.rowid), c.path, c.kind, c.symbol, c.text FROM chunks c "
            "LEFT JOIN embeddings e ON e.model_id=? AND e.node_hash=c.node_hash "
            "WHERE e.node_hash IS NULL GROUP BY c.node_hash",
            (model_id,),
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

    def embedded_rowids(self, model_id: str) -> np.ndarray:
        """Rowids of the chunks that have an embedding for ``model_id``."""
        rows = self._db.execute(
            "SELECT c.rowid FROM chunks c JOIN embeddings e "
            "ON e.model_id=? AND e.node_hash=c.node_hash",
            (model_id,),
        ).fetchall()
        return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))

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
