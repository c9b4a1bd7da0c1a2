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

The schema, its migrations and the row types are in :mod:`ragloom.index.store_schema`; groups
of :class:`Store` methods are mixins: generations and disk space in
:mod:`ragloom.index.store_generations`, embeddings and code graph records in
:mod:`ragloom.index.store_embeddings`. This module re-exports their names.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from ragloom.errors import DbError, IncompatibleIndexError
from ragloom.index.rows import CHUNK_COLS as _CHUNK_COLS
from ragloom.index.rows import (
    CHUNK_VALUE_COLS,
    FILE_COLS,
    ChunkCounts,
    ChunkRow,
    FileRow,
    GraphDefRow,
    chunk_values,
    diff_chunk_set,
)
from ragloom.index.rows import row_to_chunk as _row_to_chunk
from ragloom.index.store_embeddings import StoreEmbeddingsMixin, StoreGraphMixin
from ragloom.index.store_generations import StoreGenerationsMixin, StoreSpaceMixin
from ragloom.index.store_schema import (
    _GEN,
    _IN_BATCH,
    _META_COLS,
    _VISIBLE,
    _WANTED,
    _WATERMARK,
    MIGRATIONS,
    SCHEMA_VERSION,
)
from ragloom.index.store_schema import RECLAIM_PAGES_PER_STEP as RECLAIM_PAGES_PER_STEP
from ragloom.types import Chunk

__all__ = ["SCHEMA_VERSION", "ChunkRow", "FileRow", "GraphDefRow", "Store"]

log = logging.getLogger("ragloom.index")


PAGE_SIZE = 8192
"""SQLite page size of a new index database (see ``Store.__init__``)."""


def open_readonly(path: Path) -> sqlite3.Connection:
    """A read-only connection; on a read-only folder (a CI cache, a container image, an NFS
    export) where SQLite cannot create the WAL's shared-memory file, one that reads the file
    as immutable (it cannot change there: nothing can write it)."""
    uri = f"file:{path}?mode=ro"
    db = sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=30)
    try:
        db.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
        return db
    except sqlite3.OperationalError:
        if os.access(path.parent, os.W_OK):
            raise
        db.close()
    log.info("index folder %s is read-only: its database is read as immutable", path.parent)
    return sqlite3.connect(
        f"file:{path}?immutable=1", uri=True, check_same_thread=False, timeout=30
    )


class Store(
    StoreGenerationsMixin, StoreGraphMixin, StoreEmbeddingsMixin, StoreSpaceMixin, ChunkCounts
):
    """A connection to the index's SQLite database."""

    def __init__(self, path: Path, *, readonly: bool = False) -> None:
        self.path = path
        self.readonly = readonly
        self._own_version = 0
        try:
            if readonly:
                self._db = open_readonly(path)
            else:
                self._db = sqlite3.connect(path, check_same_thread=False, timeout=30)
                if self.schema_version() == 0:
                    # both must precede the first table. 8 KiB pages hold a vector row inline
                    # (a 384-d float32 vector is 1,536 bytes): on 4 KiB pages a WITHOUT ROWID
                    # row keeps about 1,000 bytes inline and moves the rest to an overflow
                    # page of its own, mostly empty (the embeddings took 4x their size, a user
                    # trial). auto_vacuum lets reclaim_space() shrink the file later
                    self._db.execute(f"PRAGMA page_size={PAGE_SIZE}")
                    self._db.execute("PRAGMA auto_vacuum=INCREMENTAL")
                self._db.execute("PRAGMA journal_mode=WAL")
                # the WAL is cut back to this size when it restarts (a VACUUM or a large update
                # may have grown it; readers keep it open, so it is not removed on close)
                self._db.execute("PRAGMA journal_size_limit=33554432")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._db.execute("PRAGMA busy_timeout=30000")
        except sqlite3.Error as exc:
            hint = ""
            if "malformed" in str(exc) or "not a database" in str(exc):
                hint = " (`ragloom index ROOT --rebuild` makes it again from the files)"
            raise DbError(f"cannot open index database {path}: {exc}{hint}") from exc
        if not readonly:
            self._migrate()
        else:
            self._check_version()

    # -- schema -------------------------------------------------------------------------
    def quick_check(self) -> str:
        """SQLite's ``PRAGMA quick_check(1)``: ``ok``, or the first problem found."""
        row = self._db.execute("PRAGMA quick_check(1)").fetchone()
        return str(row[0]) if row else "no answer"

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

    # -- files --------------------------------------------------------------------------
    def files(self) -> dict[str, FileRow]:
        """The files of the published generation."""
        rows = self._db.execute(f"SELECT {FILE_COLS} FROM files").fetchall()
        return {r[0]: FileRow(*r) for r in rows}

    def files_at(self, paths: Sequence[str]) -> dict[str, FileRow]:
        """The published generation's rows of these files (one indexed lookup each)."""
        wanted = list(dict.fromkeys(paths))
        if not wanted:
            return {}
        marks = ",".join("?" * len(wanted))
        rows = self._db.execute(
            f"SELECT {FILE_COLS} FROM files WHERE path IN ({marks})", wanted
        ).fetchall()
        return {r[0]: FileRow(*r) for r in rows}

    def file_hashes(self) -> dict[str, str]:
        """path -> content hash of the published generation's files."""
        return {str(p): str(h) for p, h in self._db.execute("SELECT path, hash FROM files")}

    def file_versions(
        self, paths: Sequence[str] | None = None
    ) -> tuple[dict[str, str], dict[str, str]]:
        """(path -> content hash of the published generation's files, the same for the pending
        generation's: the published files it keeps and the versions it writes; empty when no
        generation is pending), of every file or of ``paths``. For the writer, which holds the
        write lock: nothing changes between the reads."""
        if paths is None:
            published = self.file_hashes()
        else:
            published = {
                str(p): str(h)
                for p, h in self._select_in("path, hash", "path", paths, table="files")
            }
        if self.pending_generation() is None:
            return published, {}
        if paths is None:
            updates = self._db.execute("SELECT path, removed, hash FROM file_updates").fetchall()
        else:
            updates = list(
                self._select_in("path, removed, hash", "path", paths, table="file_updates")
            )
        pending = dict(published)
        for path, removed, digest in updates:
            if removed or digest is None:
                pending.pop(str(path), None)
            else:
                pending[str(path)] = str(digest)
        return published, pending

    def file_texts(self, paths: Sequence[str], *, pending: bool) -> dict[str, list[str]]:
        """The chunk texts of each of ``paths`` in the published generation (or, ``pending``,
        in the pending one: every row no generation removed), in no particular order."""
        where = "gen_removed IS NULL" if pending else _VISIBLE
        out: dict[str, list[str]] = {}
        for path, text in self._select_in("path, text", "path", paths, where=where):
            out.setdefault(str(path), []).append(str(text))
        return out

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

    def published_rowids(self) -> np.ndarray:
        """Rowids of the published generation's chunks, ascending (one statement: one state)."""
        rows = self._db.execute(
            f"SELECT rowid FROM chunks WHERE gen_removed IS NULL AND rowid <= {_WATERMARK} "
            f"UNION ALL SELECT rowid FROM chunks WHERE gen_removed > {_GEN} ORDER BY 1"
        )
        return np.fromiter((int(r[0]) for r in rows), dtype=np.int64)

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
    ) -> Iterable[Sequence[Any]]:
        """Rows of ``SELECT columns FROM table WHERE key IN values [AND where]``, 900 values
        per query (below SQLite's 999 bound-parameter limit of older builds). Up to 900 values
        (a query's few hits) come fetched whole, which costs less than through a generator;
        more come batch by batch."""
        extra = f" AND {where}" if where else ""

        def select(part: list[Any]) -> list[Any]:
            marks = ",".join("?" * len(part))
            sql = f"SELECT {columns} FROM {table} WHERE {key} IN ({marks}){extra}"
            return self._db.execute(sql, part).fetchall()

        if not values:
            return []
        if len(values) <= _IN_BATCH:
            return select(list(values))
        return (
            row
            for start in range(0, len(values), _IN_BATCH)
            for row in select(list(values[start : start + _IN_BATCH]))
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
        return self._rowids_where(_VISIBLE)

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

    # -- chunks (readers, continued) -----------------------------------------------------
    def symbol_table(self) -> list[tuple[str, str, str]]:
        """(symbol, path, id) for every chunk of the published generation: input for query
        entity extraction."""
        return [
            (str(r[0]), str(r[1]), str(r[2]))
            for r in self._db.execute(f"SELECT symbol, path, id FROM chunks WHERE {_VISIBLE}")
        ]

    def _count_by(self, column: str) -> dict[str, int]:
        return {
            str(k): int(n)
            for k, n in self._db.execute(
                f"SELECT {column}, count(*) FROM chunks WHERE {_VISIBLE} GROUP BY {column}"
            )
        }

    # -- chunks (writer) ----------------------------------------------------------------
    def wanted_rowids(self) -> np.ndarray:
        """Rowids BM25 and HNSW must hold: the published generation's and the pending one's."""
        # one string instead of a Python tuple per row: 45 ms instead of 75-140 ms at 100k rows
        # (every update runs this twice, before and after its publication)
        return self._rowids_where(_WANTED)

    def _rowids_where(self, condition: str) -> np.ndarray:
        """Rowids of the chunks that meet the SQL ``condition``, read as one string."""
        (joined,) = self._db.execute(
            f"SELECT group_concat(rowid) FROM chunks WHERE {condition}"
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
        diff = diff_chunk_set(
            conn.execute(
                f"SELECT id, rowid, node_hash, {_META_COLS} FROM chunks "
                "WHERE path=? AND gen_removed IS NULL",
                (path,),
            ),
            chunks,
        )
        for rowid, meta in diff.moved:
            if generation is None:
                sets = ", ".join(f"{col}=?" for col in _META_COLS.split(", "))
                conn.execute(f"UPDATE chunks SET {sets} WHERE rowid=?", (*meta, rowid))
            else:
                conn.execute(
                    f"INSERT OR REPLACE INTO chunk_updates(rowid, {_META_COLS}) "
                    "VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                    (rowid, *meta),
                )
        # the old rows go first: a chunk id has one live row
        self._drop_rows(conn, diff.drop, generation)
        conn.executemany(
            f"INSERT INTO chunks({CHUNK_VALUE_COLS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            [chunk_values(c) for c in diff.new],
        )
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
        return diff.counts

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
