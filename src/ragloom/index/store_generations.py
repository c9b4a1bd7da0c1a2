"""Generations and disk space of the SQLite store (docs/consistency.md): the writer's side of
a generation (begin, publish, roll back, collect the removed rows) and giving free pages back
to the file system; mixins of :class:`~ragloom.index.store.Store`.
"""

from __future__ import annotations

import sqlite3
import time

from ragloom.errors import DbError
from ragloom.index.store_schema import (
    _DROP_UNUSED_GRAPHS,
    _IN_BATCH,
    _META_COLS,
    RECLAIM_PAGES_PER_STEP,
    StoreBase,
)


class StoreGenerationsMixin(StoreBase):
    """Generations (writer): see :mod:`ragloom.index.store`."""

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


class StoreSpaceMixin(StoreBase):
    """Disk space: the file's size, its free pages, and giving them back."""

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
