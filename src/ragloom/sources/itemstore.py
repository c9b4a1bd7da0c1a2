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

import abc
import asyncio
import json
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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

__all__ = [
    "BaseItemStore",
    "Item",
    "ItemStore",
    "StoredSource",
    "has_item_store",
    "item_document",
    "open_item_store",
]

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


def item_document(title: str, text: str, paths: Sequence[str]) -> str:
    """The BM25 token string of one item (the same on every backend, so scores agree): the
    title and text as the body, the paths in the ``path`` field, the title as the symbol."""
    doc = FIELD_SEP.join((text, " ".join(paths), title, "", ""))
    return tokenise_document(f"{title}\n{doc}")


def item_values(it: Item) -> tuple[object, ...]:
    """An item's stored columns, in :data:`ITEM_COLUMNS` order (paths and attribution as
    JSON)."""
    return (
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
    )


ITEM_COLUMNS = "id, kind, title, text, date, url, author, paths, attribution, language, groupkey"
"""The columns :func:`item_values` fills, on both backends."""


def last_per_id(items: Iterable[Item]) -> list[Item]:
    """``items`` with only the last of each id, in the order of those last ones (what writing
    them one by one, each replacing the one before, leaves)."""
    batch = list(items)
    last = {it.id: i for i, it in enumerate(batch)}
    return [it for i, it in enumerate(batch) if last[it.id] == i]


class BaseItemStore(abc.ABC):
    """An item store: the items of one source with BM25 search and filters. The reading half
    is here, the same on every backend (SQLite: :class:`ItemStore`; PostgreSQL:
    :class:`ragloom.sources.pg_items.PgItemStore`): a backend says how to run a ``SELECT``
    over its own items (:meth:`_select`, SQL with ``?`` placeholders), how BM25 ranks them
    (:meth:`_bm25_ranked`), and how it writes."""

    name = ""

    @abc.abstractmethod
    def _select(
        self, columns: str, where: str = "", params: Sequence[object] = (), tail: str = ""
    ) -> list[tuple[Any, ...]]:
        """``SELECT columns`` over this store's items, ``WHERE where`` when given, then
        ``tail`` (GROUP BY, ORDER BY, LIMIT)."""

    @abc.abstractmethod
    def _bm25_ranked(self, text: str, k: int) -> list[tuple[int, float]]:
        """Top ``k`` (rowid, BM25 score) for ``text``."""

    @abc.abstractmethod
    def get_meta(self, key: str) -> str | None:
        """A sync cursor or other value of the source (None when not set)."""

    @abc.abstractmethod
    def set_meta(self, key: str, value: str | None) -> None:
        """Set (None: delete) one meta value."""

    @abc.abstractmethod
    def upsert(self, items: Iterable[Item], *, replace_groups: Sequence[str] = ()) -> int:
        """Insert or replace items (by id) and delete the groups named, atomically; returns
        the number of items written."""

    @abc.abstractmethod
    def remove_groups(self, groups: Sequence[str]) -> int:
        """Delete every item of these groups; returns how many."""

    @abc.abstractmethod
    def clear(self) -> None:
        """Drop every item and meta value."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release what the store holds."""

    def count(self) -> int:
        return int(self._select("count(*)")[0][0])

    def state_token(self, meta_key: str) -> str:
        """``"<meta value>:<item count>"``: it changes when a sync moves the cursor ``meta_key``
        or the items (the change history's cache key)."""
        return f"{self.get_meta(meta_key) or ''}:{self.count()}"

    def groups(self) -> dict[str, int]:
        """Group key -> item count."""
        return {
            str(g): int(n) for g, n in self._select("groupkey, count(*)", tail="GROUP BY groupkey")
        }

    def paths(self) -> set[str]:
        """Every path any item names."""
        return {p for (raw,) in self._select("DISTINCT paths") for p in json.loads(raw)}

    def path_lists(self, until: float | None = None) -> list[list[str]]:
        """The paths of every item (dated at most ``until`` when given), one list per item,
        in rowid order."""
        where, params = ("date <= ?", (until,)) if until is not None else ("", ())
        rows = self._select("paths", where, params, "ORDER BY rowid")
        return [list(json.loads(raw)) for (raw,) in rows]

    def recent_path_lists(self, n: int, until: float | None = None) -> list[list[str]]:
        """The paths of the ``n`` newest items (dated at most ``until`` when given), newest
        first (ties by rowid, the order they were stored in)."""
        where, params = ("date <= ?", (until,)) if until is not None else ("", ())
        rows = self._select(
            "paths", where, (*params, n), "ORDER BY date DESC NULLS LAST, rowid LIMIT ?"
        )
        return [list(json.loads(raw)) for (raw,) in rows]

    def search(
        self, text: str, top_k: int, flt: SourceFilter | None = None, *, source: str = ""
    ) -> list[SourceHit]:
        """BM25 top ``top_k`` items for ``text`` that pass ``flt``, best first."""
        f = flt or SourceFilter()
        want = top_k if f.empty else top_k * _OVERFETCH
        ranked = self._ranked_through_ties(text, want)
        if not ranked:
            return []
        by_row = {r: s for r, s in ranked}
        rows = self._select(
            "rowid, id, kind, title, text, date, url, author, paths, attribution, language",
            f"rowid IN ({','.join('?' * len(by_row))})",
            list(by_row),
        )
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

    def _ranked_through_ties(self, text: str, want: int) -> list[tuple[int, float]]:
        """The top ``want`` of :meth:`_bm25_ranked` and every item that ties with the last
        one: which of equal scores the engine returns first depends on its segments' layout."""
        if want <= 0:
            return []
        k = want
        while True:
            ranked = self._bm25_ranked(text, k + 1)
            if len(ranked) <= want:
                return ranked
            edge = ranked[want - 1][1]
            if ranked[-1][1] < edge or len(ranked) <= k:
                return [r for r in ranked if r[1] >= edge]
            k *= 2

    def newest_items(self, n: int) -> list[Item]:
        """The ``n`` newest items, newest first (ties by rowid, as stored), without their URL,
        attribution, language and group."""
        rows = self._select(
            "id, kind, title, text, date, author, paths", "", (n,),
            "ORDER BY date DESC NULLS LAST, rowid LIMIT ?",
        )  # fmt: skip
        out = []
        for i, k, t, x, d, a, ps in rows:
            date = None if d is None else float(d)
            paths = tuple(json.loads(ps))
            out.append(Item(str(i), str(k), str(t), str(x), date, author=str(a), paths=paths))
        return out

    def newest(self, column: str = "date") -> float | None:
        """The newest item date (None when empty)."""
        if column != "date":
            raise ValueError(column)
        rows = self._select("max(date)")
        return None if not rows or rows[0][0] is None else float(rows[0][0])


class ItemStore(BaseItemStore):
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
                    f"INSERT INTO items({ITEM_COLUMNS}) VALUES(?,?,?,?,?,?,?,?,?,?,?)",
                    item_values(it),
                )
                rowid = int(cur.lastrowid or 0)
                added.append((rowid, item_document(it.title, it.text, it.paths)))
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
    def _select(
        self, columns: str, where: str = "", params: Sequence[object] = (), tail: str = ""
    ) -> list[tuple[Any, ...]]:
        sql = f"SELECT {columns} FROM items" + (f" WHERE {where}" if where else "")
        with self._lock:
            return self._db.execute(f"{sql} {tail}", tuple(params)).fetchall()

    def _bm25_ranked(self, text: str, k: int) -> list[tuple[int, float]]:
        return self._bm25.search(text, k)

    def close(self) -> None:
        with self._lock:
            self._db.close()


def open_item_store(context: SourceContext, name: str) -> BaseItemStore:
    """The store of source ``name`` where ``context`` keeps its sources: the storage it
    carries, else ``<index>/sources/<name>.db`` (created when missing)."""
    if context.storage is not None:
        store = context.storage.open_store(name)
        if not isinstance(store, BaseItemStore):
            raise TypeError(
                f"{type(context.storage).__name__}.open_store gave {type(store).__name__}, "
                "not an item store"
            )
        return store
    return ItemStore(context.data_dir, name)


def has_item_store(context: SourceContext, name: str) -> bool:
    """True when source ``name`` has a store where ``context`` keeps its sources."""
    if context.storage is not None:
        return context.storage.has_store(name)
    return (context.data_dir / f"{name}.db").is_file()


class StoredSource:
    """What the sources kept in an :class:`ItemStore` share (docs, commits, issues, prs):
    their settings, the store opened on first use, BM25 retrieval over it, and disposal.
    Subclasses set ``name`` and add ``sync``, ``freshness`` and ``health_check``."""

    name = ""

    def __init__(self, context: SourceContext, settings: SourceSettings) -> None:
        self.context = context
        self.settings = settings
        self._store: BaseItemStore | None = None

    @property
    def enabled(self) -> bool:
        return self.settings.enabled

    @property
    def store(self) -> BaseItemStore:
        if self._store is None:
            self._store = open_item_store(self.context, self.name)
        return self._store

    def has_store(self) -> bool:
        """True when the source's store exists (without creating it)."""
        return self._store is not None or has_item_store(self.context, self.name)

    def indexed(self) -> bool:
        """True when the source was ever synced here (a query then answers from it; else the
        orchestrator reports it ``not_indexed`` instead of an empty ``ok``)."""
        if not self.has_store():
            return False
        return self.store.get_meta("last_sync") is not None or self.store.count() > 0

    @property
    def index_command(self) -> str:
        """The command that syncs this source where it is stored."""
        storage = self.context.storage
        flags = f" {storage.index_flags}" if storage is not None and storage.index_flags else ""
        return f"ragloom index{flags} --sources {self.name}"

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
