"""Derived records of the SQLite store: cached embeddings (by model key and node hash) and
the code graph records of file versions; mixins of :class:`~ragloom.index.store.Store`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Iterable, Sequence

import numpy as np

from ragloom.index.rows import MANIFEST_WHERE, GraphDefRow, graph_record, manifest_texts
from ragloom.index.store_schema import _VISIBLE, GRAPH_STATE_KEYS, StoreBase


class StoreGraphMixin(StoreBase):
    """Code graph records: one per file version, read with the published generation."""

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
                graph_record(r)
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

    def graph_manifests(self) -> list[tuple[str, str]]:
        """(path, text) of the published generation's ``go.mod`` and ``package.json`` files
        (:data:`~ragloom.graph.modules.MANIFEST_NAMES`), from their chunks."""
        return manifest_texts(
            self._db.execute(
                f"SELECT path, start_byte, end_byte, text FROM chunks WHERE {MANIFEST_WHERE} "
                f"AND {_VISIBLE} ORDER BY path, start_byte"
            )
        )

    def graph_state(self) -> dict[str, str]:
        """What names the published generation's graph input: the meta values of
        :data:`~ragloom.index.store_schema.GRAPH_STATE_KEYS` that are set, read in one
        statement (one consistent state; :mod:`ragloom.graph.cache` keys the resolved graph by
        them)."""
        marks = ",".join("?" * len(GRAPH_STATE_KEYS))
        rows = self._db.execute(
            f"SELECT key, value FROM meta WHERE key IN ({marks})", GRAPH_STATE_KEYS
        ).fetchall()
        return {str(k): str(v) for k, v in rows}


class StoreEmbeddingsMixin(StoreBase):
    """Embeddings: cached by (model key, node hash), shared by chunks with the same text."""

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
