"""Storage of one non-code source: items in SQLite, BM25 over them in tantivy.

Each source keeps ``<index>/sources/<name>.db`` (its items and a small key/value table for sync
cursors) and ``<index>/sources/<name>.bm25/`` (a :class:`~ragloom.index.bm25.TantivyBm25`
keyed by the item's SQLite rowid). The BM25 engine and the tokeniser are the code index's own
(code-aware tokens: identifiers in commit messages and issue titles split the same way as in
code, so ``parse_header`` in an issue matches ``parse header`` in a question). The title goes
into the ``symbol`` field and the item's paths into the ``path`` field, so the field boosts
tuned for code apply to their closest counterparts.

Why not bm25s (a pure numpy engine): it cannot delete documents, and incremental sync of issues
replaces updated items in place; tantivy opens in ~1 ms and deletes by rowid.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ragloom.errors import DbError
from ragloom.index.bm25 import FIELD_SEP, TantivyBm25, tokenise_document
from ragloom.sources.base import (
    RetrieveOptions,
    SourceContext,
    SourceFilter,
    SourceHit,
    SourceQuery,
    SourceSettings,
)

__all__ = ["Item", "ItemStore"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS items (
    rowid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    title TEXT NOT NULL,
    text TEXT NOT NULL,
    date REAL,
    url TEXT,
    author TEXT NOT NULL DEFAULT '',
    paths TEXT NOT NULL DEFAULT '[]',
    attribution TEXT NOT NULL DEFAULT '{}',
    language TEXT NOT NULL DEFAULT '',
    groupkey TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS items_group ON items(groupkey);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""
_OVERFETCH = 4
"""With a filter, BM25 is asked for this many times ``top_k`` before filtering."""


@dataclass(frozen=True, slots=True)
class Item:
    """One stored item. ``group`` ties items that are replaced together (a document's
    sections: re-syncing the document deletes its group first)."""

    id: str
    kind: str
    title: str
    text: str
    date: float | None = None
    url: str | None = None
    author: str = ""
    paths: tuple[str, ...] = ()
    attribution: dict[str, object] | None = None
    language: str = ""
    group: str = ""


class ItemStore:
    """Items of one source, with BM25 search and filters."""

    def __init__(self, data_dir: Path, name: str) -> None:
        self.name = name
        self.db_path = data_dir / f"{name}.db"
        self.bm25_dir = data_dir / f"{name}.bm25"
        self._lock = threading.Lock()
        try:
            data_dir.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.db_path, check_same_thread=False)
            self._db.executescript(_SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise DbError(f"cannot open the {name} source store at {self.db_path}: {exc}") from exc
        self._bm25 = TantivyBm25(self.bm25_dir, create=True)

    # -- meta ---------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str | None) -> None:
        with self._lock, self._db:
            if value is None:
                self._db.execute("DELETE FROM meta WHERE key = ?", (key,))
            else:
                self._db.execute(
                    "INSERT INTO meta(key, value) VALUES(?, ?) "
                    "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                    (key, value),
                )

    # -- writing ------------------------------------------------------------------------
    def upsert(self, items: Iterable[Item], *, replace_groups: Sequence[str] = ()) -> int:
        """Insert or replace items (by id) and delete the groups named; one commit of SQLite,
        then one of BM25. Returns the number of items written."""
        batch = list(items)
        removed: list[int] = []
        added: list[tuple[int, str]] = []
        with self._lock, self._db:
            for group in replace_groups:
                rows = self._db.execute("SELECT rowid FROM items WHERE groupkey = ?", (group,))
                removed.extend(int(r[0]) for r in rows)
                self._db.execute("DELETE FROM items WHERE groupkey = ?", (group,))
            for it in batch:
                old = self._db.execute("SELECT rowid FROM items WHERE id = ?", (it.id,)).fetchone()
                if old is not None:
                    removed.append(int(old[0]))
                    self._db.execute("DELETE FROM items WHERE rowid = ?", (old[0],))
                cur = self._db.execute(
                    "INSERT INTO items(id, kind, title, text, date, url, author, paths, "
                    "attribution, language, groupkey) VALUES(?,?,?,?,?,?,?,?,?,?,?)",
                    (
                        it.id,
                        it.kind,
                        it.title,
                        it.text,
                        it.date,
                        it.url,
                        it.author,
                        json.dumps(list(it.paths)),
                        json.dumps(it.attribution or {}),
                        it.language,
                        it.group,
                    ),
                )
                rowid = int(cur.lastrowid or 0)
                doc = FIELD_SEP.join((it.text, " ".join(it.paths), it.title, "", ""))
                added.append((rowid, tokenise_document(f"{it.title}\n{doc}")))
        new = {r for r, _ in added}
        self._bm25.apply(added, [r for r in removed if r not in new])
        return len(batch)

    def remove_groups(self, groups: Sequence[str]) -> int:
        """Delete every item of these groups; returns how many."""
        with self._lock, self._db:
            gone: list[int] = []
            for group in groups:
                rows = self._db.execute("SELECT rowid FROM items WHERE groupkey = ?", (group,))
                gone.extend(int(r[0]) for r in rows)
                self._db.execute("DELETE FROM items WHERE groupkey = ?", (group,))
        if gone:
            self._bm25.apply([], gone)
        return len(gone)

    def clear(self) -> None:
        """Drop every item and cursor (a rewritten history starts over)."""
        with self._lock, self._db:
            self._db.execute("DELETE FROM items")
            self._db.execute("DELETE FROM meta")
        self._bm25 = TantivyBm25.reset(self.bm25_dir)

    # -- reading ------------------------------------------------------------------------
    def count(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT count(*) FROM items").fetchone()[0])

    def groups(self) -> dict[str, int]:
        """Group key -> item count."""
        with self._lock:
            rows = self._db.execute("SELECT groupkey, count(*) FROM items GROUP BY groupkey")
            return {str(g): int(n) for g, n in rows}

    def paths(self) -> set[str]:
        """Every path any item names."""
        with self._lock:
            rows = self._db.execute("SELECT DISTINCT paths FROM items").fetchall()
        return {p for (raw,) in rows for p in json.loads(raw)}

    def path_lists(self, until: float | None = None) -> list[list[str]]:
        """The paths of every item (dated at most ``until`` when given), one list per item,
        in rowid order."""
        with self._lock:
            if until is None:
                rows = self._db.execute("SELECT paths FROM items ORDER BY rowid").fetchall()
            else:
                rows = self._db.execute(
                    "SELECT paths FROM items WHERE date <= ? ORDER BY rowid", (until,)
                ).fetchall()
        return [list(json.loads(raw)) for (raw,) in rows]

    def recent_path_lists(self, n: int, until: float | None = None) -> list[list[str]]:
        """The paths of the ``n`` newest items (dated at most ``until`` when given), newest
        first (ties by rowid, the order they were stored in)."""
        with self._lock:
            if until is None:
                rows = self._db.execute(
                    "SELECT paths FROM items ORDER BY date DESC, rowid LIMIT ?", (n,)
                ).fetchall()
            else:
                rows = self._db.execute(
                    "SELECT paths FROM items WHERE date <= ? ORDER BY date DESC, rowid LIMIT ?",
                    (until, n),
                ).fetchall()
        return [list(json.loads(raw)) for (raw,) in rows]

    def search(
        self, text: str, top_k: int, flt: SourceFilter | None = None, *, source: str = ""
    ) -> list[SourceHit]:
        """BM25 top ``top_k`` items for ``text`` that pass ``flt``, best first."""
        f = flt or SourceFilter()
        want = top_k if f.empty else top_k * _OVERFETCH
        ranked = self._bm25.search(text, want)
        if not ranked:
            return []
        by_row = {r: s for r, s in ranked}
        marks = ",".join("?" * len(by_row))
        with self._lock:
            rows = self._db.execute(
                "SELECT rowid, id, kind, title, text, date, url, author, paths, attribution, "
                f"language FROM items WHERE rowid IN ({marks})",
                list(by_row),
            ).fetchall()
        hits: list[SourceHit] = []
        for rowid, iid, kind, title, text_, date, url, author, paths, attr, lang in rows:
            ps = tuple(json.loads(paths))
            if not f.accepts(paths=ps, language=lang, date=date, author=author):
                continue
            hits.append(
                SourceHit(
                    source=source or self.name,
                    id=iid,
                    title=title,
                    text=text_,
                    score=by_row[int(rowid)],
                    date=date,
                    url=url,
                    attribution=json.loads(attr),
                    author=author,
                    kind=kind,
                    paths=ps,
                )
            )
        hits.sort(key=lambda h: (-h.score, h.id))
        return hits[:top_k]

    def newest(self, column: str = "date") -> float | None:
        """The newest item date (None when empty)."""
        if column != "date":
            raise ValueError(column)
        with self._lock:
            row = self._db.execute("SELECT max(date) FROM items").fetchone()
        return None if row is None or row[0] is None else float(row[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()


class StoredSource:
    """What the sources kept in an :class:`ItemStore` share (docs, commits, issues, prs):
    their settings, the store opened on first use, BM25 retrieval over it, and disposal.
    Subclasses set ``name`` and add ``sync``, ``freshness`` and ``health_check``."""

    name = ""

    def __init__(self, context: SourceContext, settings: SourceSettings) -> None:
        self.context = context
        self.settings = settings
        self._store: ItemStore | None = None

    @property
    def enabled(self) -> bool:
        return self.settings.enabled

    @property
    def store(self) -> ItemStore:
        if self._store is None:
            self._store = ItemStore(self.context.data_dir, self.name)
        return self._store

    def initialize(self, settings: SourceSettings) -> None:
        self.settings = settings

    async def retrieve(self, query: SourceQuery, options: RetrieveOptions) -> list[SourceHit]:
        return await asyncio.to_thread(
            self.store.search, query.text, options.top_k, options.filter, source=self.name
        )

    async def dispose(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None
