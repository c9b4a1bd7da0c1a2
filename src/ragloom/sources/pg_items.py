"""Items of the stored sources (docs, commits, issues, prs) in PostgreSQL: the team server's
counterpart of :class:`~ragloom.sources.itemstore.ItemStore` (docs/postgres.md, "Sources and
change history").

Tables (created here with ``CREATE TABLE IF NOT EXISTS`` by the first writer), keyed by the
repository (``repositories.id``) and the source's name:

* ``source_items``: one row per item, the columns of the SQLite ``items`` table; ``rowid``
  comes from one sequence and is never reused, so a rowid names one version of one item (an
  updated item is deleted and inserted again, with a new rowid);
* ``source_meta``: the source's sync cursors (``last_commit``, ``since``, ...), and under the
  source ``''`` the index's source configuration (what ``<index>/sources/config.json`` holds
  for a folder index);
* ``source_versions``: a counter per source, bumped by every write transaction.

Every write (``upsert``, ``remove_groups``, ``clear``) is one transaction, so a reader sees a
sync's batch whole or not at all. BM25 stays ragloom's tantivy engine with the same document
text (:func:`~ragloom.sources.itemstore.item_document`), so scores equal the folder index's:
each node keeps one folder per source under the repository's BM25 cache directory
(:func:`ragloom.index.postgres.bm25_cache_dir`), and before a search compares the source's
version with the one its folder was built at; when they differ it reads the item rowids in
one repeatable-read snapshot and applies only the difference (new rows tokenised, gone rows
deleted), under a file lock so processes of one node build it once. Every server sharing
the database thus answers from the same items.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragloom.errors import DbError, IndexLockedError, IndexNotFoundError
from ragloom.index.bm25 import TantivyBm25
from ragloom.index.readscope import memo
from ragloom.index.tokenize import TOKENIZER_VERSION
from ragloom.sources.itemstore import (
    ITEM_COLUMNS,
    BaseItemStore,
    Item,
    item_document,
    item_values,
    last_per_id,
)

if TYPE_CHECKING:
    import psycopg

__all__ = ["ITEM_SCHEMA", "PgItemStorage", "PgItemStore", "ensure_item_schema"]

ITEM_SCHEMA = """
CREATE TABLE IF NOT EXISTS source_items (
    rowid BIGSERIAL PRIMARY KEY,
    repo_id BIGINT NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
    source TEXT NOT NULL,
    id TEXT NOT NULL,
    kind TEXT NOT NULL,
    title TEXT NOT NULL,
    text TEXT NOT NULL,
    date DOUBLE PRECISION,
    url TEXT,
    author TEXT NOT NULL DEFAULT '',
    paths TEXT NOT NULL DEFAULT '[]',
    attribution TEXT NOT NULL DEFAULT '{}',
    language TEXT NOT NULL DEFAULT '',
    groupkey TEXT NOT NULL DEFAULT '',
    UNIQUE (repo_id, source, id)
);
CREATE INDEX IF NOT EXISTS source_items_group ON source_items(repo_id, source, groupkey);
CREATE TABLE IF NOT EXISTS source_meta (
    repo_id BIGINT NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
    source TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (repo_id, source, key)
);
CREATE TABLE IF NOT EXISTS source_versions (
    repo_id BIGINT NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
    source TEXT NOT NULL,
    version BIGINT NOT NULL,
    PRIMARY KEY (repo_id, source)
);
"""
_SCHEMA_LOCK = 0x726C_5352
"""Transaction-level advisory lock key of :func:`ensure_item_schema` (two first writers)."""
_SYNC_LOCK_CLASS = 0x726D
"""Advisory lock class of a repository's source sync (``ragloom index --sources``)."""
_CONFIG_SOURCE = ""
_COPY_COLUMNS = f"repo_id, source, {ITEM_COLUMNS}"


def ensure_item_schema(conn: psycopg.Connection[Any]) -> None:
    """Create the source tables when missing (idempotent; needs the ``repositories`` table)."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
        conn.execute(ITEM_SCHEMA)


def _pg(sql: str) -> str:
    """SQLite placeholders (``?``) as psycopg's (``%s``)."""
    return sql.replace("%", "%%").replace("?", "%s")


class PgItemStorage:
    """The stored sources of one repository in a PostgreSQL database: opens their
    :class:`PgItemStore` (one per source, sharing this object's connection), keeps the source
    configuration and the sync lock. ``cache_dir`` is the repository's BM25 cache directory;
    ``create`` (a writer) creates the tables when missing. Readers of a database whose sources
    were never synced see empty stores."""

    index_flags = "--backend postgres"

    def __init__(self, dsn: str, repository: str, cache_dir: Path, *, create: bool = False) -> None:
        from ragloom.index.pg_schema import connect

        self.dsn = dsn
        self.repository = repository
        self.cache_dir = cache_dir
        self.lock = threading.RLock()
        self.conn = connect(dsn, app="ragloom-sources")
        self._stores: dict[str, PgItemStore] = {}
        try:
            row = self.conn.execute(
                "SELECT id FROM repositories WHERE name = %s", (repository,)
            ).fetchone()
            if row is None:
                raise IndexNotFoundError(
                    f"no repository {repository!r} in this PostgreSQL database; index its "
                    "code first: `ragloom index PATH --backend postgres`"
                )
            self.repo_id = int(row[0])
            if create:
                ensure_item_schema(self.conn)
        except BaseException:
            self.conn.close()
            raise

    # -- reads and writes of the storage's connection -------------------------------------
    def tables_exist(self) -> bool:
        with self.lock:
            row = self.conn.execute("SELECT to_regclass('source_versions')").fetchone()
        return bool(row and row[0] is not None)

    def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Rows of one read statement (none when the tables were never created)."""
        import psycopg

        with self.lock:
            try:
                return list(self.conn.execute(sql, params).fetchall())
            except psycopg.errors.UndefinedTable:
                return []

    @contextmanager
    def transaction(self) -> Iterator[psycopg.Connection[Any]]:
        """One write transaction on the storage's connection (tables created if missing)."""
        with self.lock:
            if not self.tables_exist():
                ensure_item_schema(self.conn)
            with self.conn.transaction():
                yield self.conn

    # -- the ItemStorage protocol ---------------------------------------------------------
    def open_store(self, name: str) -> PgItemStore:
        with self.lock:
            store = self._stores.get(name)
            if store is None:
                store = self._stores[name] = PgItemStore(self, name)
            return store

    def has_store(self, name: str) -> bool:
        """True when source ``name`` was ever written (a meta value, an item or a version)."""
        rows = self.fetch(
            "SELECT 1 FROM source_versions WHERE repo_id = %s AND source = %s "
            "UNION ALL SELECT 1 FROM source_meta WHERE repo_id = %s AND source = %s LIMIT 1",
            (self.repo_id, name, self.repo_id, name),
        )
        return bool(rows)

    def load_config(self) -> dict[str, dict[str, Any]]:
        rows = self.fetch(
            "SELECT value FROM source_meta WHERE repo_id = %s AND source = %s AND key = 'config'",
            (self.repo_id, _CONFIG_SOURCE),
        )
        if not rows:
            return {}
        try:
            data = json.loads(rows[0][0])
        except ValueError:
            return {}
        sources = data.get("sources") if isinstance(data, dict) else None
        if not isinstance(sources, dict):
            return {}
        return {str(k): dict(v) for k, v in sources.items() if isinstance(v, dict)}

    def save_config(self, sources: Mapping[str, Mapping[str, Any]]) -> None:
        value = json.dumps({"sources": {k: dict(v) for k, v in sources.items()}}, sort_keys=True)
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO source_meta(repo_id, source, key, value) VALUES (%s, %s, 'config', %s) "
                "ON CONFLICT (repo_id, source, key) DO UPDATE SET value = excluded.value",
                (self.repo_id, _CONFIG_SOURCE, value),
            )

    @contextmanager
    def write_lock(self) -> Iterator[object]:
        """The repository's source-sync advisory lock (a second sync, on any machine, gets
        :class:`~ragloom.errors.IndexLockedError`)."""
        with self.lock:
            row = self.conn.execute(
                "SELECT pg_try_advisory_lock(%s, %s)", (_SYNC_LOCK_CLASS, self.repo_id)
            ).fetchone()
        if not row or not row[0]:
            raise IndexLockedError(
                "index is locked: another ragloom process is syncing the sources of "
                f"repository {self.repository!r} in PostgreSQL; wait for it to finish"
            )
        try:
            yield self
        finally:
            with self.lock:
                self.conn.execute(
                    "SELECT pg_advisory_unlock(%s, %s)", (_SYNC_LOCK_CLASS, self.repo_id)
                )

    def close(self) -> None:
        with self.lock:
            self._stores.clear()
            self.conn.close()


class PgItemStore(BaseItemStore):
    """The items of one source of one repository in PostgreSQL, with the same interface and
    answers as :class:`~ragloom.sources.itemstore.ItemStore` (the reads are shared code)."""

    def __init__(self, storage: PgItemStorage, name: str) -> None:
        self.name = name
        self.storage = storage
        self.bm25_dir = storage.cache_dir / "sources" / f"{name}-{TOKENIZER_VERSION}"
        self._bm25: TantivyBm25 | None = None
        self._bm25_version: int | None = None
        self._bm25_lock = threading.Lock()

    def _key(self) -> tuple[int, str]:
        return (self.storage.repo_id, self.name)

    # -- meta ---------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        rows = self.storage.fetch(
            "SELECT value FROM source_meta WHERE repo_id = %s AND source = %s AND key = %s",
            (*self._key(), key),
        )
        return None if not rows else str(rows[0][0])

    def set_meta(self, key: str, value: str | None) -> None:
        with self.storage.transaction() as conn:
            if value is None:
                conn.execute(
                    "DELETE FROM source_meta WHERE repo_id = %s AND source = %s AND key = %s",
                    (*self._key(), key),
                )
            else:
                conn.execute(
                    "INSERT INTO source_meta(repo_id, source, key, value) "
                    "VALUES (%s, %s, %s, %s) ON CONFLICT (repo_id, source, key) "
                    "DO UPDATE SET value = excluded.value",
                    (*self._key(), key, value),
                )

    # -- writing (one transaction each) ---------------------------------------------------
    def _bump(self, conn: psycopg.Connection[Any]) -> None:
        conn.execute(
            "INSERT INTO source_versions(repo_id, source, version) VALUES (%s, %s, 1) "
            "ON CONFLICT (repo_id, source) DO UPDATE SET version = source_versions.version + 1",
            self._key(),
        )

    def upsert(self, items: Iterable[Item], *, replace_groups: Sequence[str] = ()) -> int:
        """Insert or replace items (by id) and delete the groups named, in one transaction
        (replaced items get new rowids, as in SQLite)."""
        batch = list(items)
        rows = last_per_id(batch)
        with self.storage.transaction() as conn:
            conn.execute(
                "DELETE FROM source_items WHERE repo_id = %s AND source = %s "
                "AND (groupkey = ANY(%s) OR id = ANY(%s))",
                (*self._key(), list(replace_groups), [it.id for it in rows]),
            )
            with (
                conn.cursor() as cur,
                cur.copy(f"COPY source_items ({_COPY_COLUMNS}) FROM STDIN") as copy,
            ):
                for it in rows:
                    copy.write_row((*self._key(), *item_values(it)))
            self._bump(conn)
        return len(batch)

    def remove_groups(self, groups: Sequence[str]) -> int:
        if not groups:
            return 0
        with self.storage.transaction() as conn:
            cur = conn.execute(
                "DELETE FROM source_items WHERE repo_id = %s AND source = %s "
                "AND groupkey = ANY(%s)",
                (*self._key(), list(groups)),
            )
            gone = int(cur.rowcount or 0)
            if gone:
                self._bump(conn)
        return gone

    def clear(self) -> None:
        with self.storage.transaction() as conn:
            conn.execute("DELETE FROM source_items WHERE repo_id = %s AND source = %s", self._key())
            conn.execute("DELETE FROM source_meta WHERE repo_id = %s AND source = %s", self._key())
            self._bump(conn)

    # -- reading --------------------------------------------------------------------------
    def _select(
        self, columns: str, where: str = "", params: Sequence[object] = (), tail: str = ""
    ) -> list[tuple[Any, ...]]:
        sql = f"SELECT {columns} FROM source_items WHERE repo_id = ? AND source = ?"
        if where:
            sql += f" AND ({where})"
        return self.storage.fetch(_pg(f"{sql} {tail}"), (*self._key(), *params))

    def state_token(self, meta_key: str) -> str:
        """The base class's token in one statement, which also reads the write counter: a
        query that asks both (the change history's cache key, then its BM25) makes one round
        trip, and the counter is kept in its read scope for :meth:`version`."""
        key = self._key()
        rows = self.storage.fetch(
            "SELECT (SELECT value FROM source_meta WHERE repo_id = %s AND source = %s "
            "AND key = %s), (SELECT count(*) FROM source_items WHERE repo_id = %s "
            "AND source = %s), (SELECT version FROM source_versions WHERE repo_id = %s "
            "AND source = %s)",
            (*key, meta_key, *key, *key),
        )
        value, count, version = rows[0] if rows else (None, 0, None)
        seen = memo(("source_version", id(self)))
        if seen is not None:
            seen["version"] = int(version or 0)
        return f"{value or ''}:{int(count or 0)}"

    def version(self) -> int:
        """The source's write counter (0: never written); inside a query's read scope, the one
        this query read already (``ragloom.index.readscope``)."""
        seen = memo(("source_version", id(self)))
        if seen is not None and "version" in seen:
            return int(seen["version"])
        rows = self.storage.fetch(
            "SELECT version FROM source_versions WHERE repo_id = %s AND source = %s", self._key()
        )
        version = int(rows[0][0]) if rows else 0
        if seen is not None:
            seen["version"] = version
        return version

    def _bm25_ranked(self, text: str, k: int) -> list[tuple[int, float]]:
        engine = self.sync_bm25()
        return engine.search(text, k) if engine is not None else []

    def sync_bm25(self) -> TantivyBm25 | None:
        """This node's BM25 folder of the source, brought to the database's current version
        (None while the source has no items)."""
        version = self.version()
        with self._bm25_lock:
            if self._bm25 is not None and self._bm25_version == version:
                return self._bm25
            if version == 0:
                return None
            self.bm25_dir.mkdir(parents=True, exist_ok=True)
            with _file_lock(self.bm25_dir.parent / f"{self.bm25_dir.name}.lock"):
                self._bm25, self._bm25_version = self._catch_up()
            return self._bm25

    def _catch_up(self) -> tuple[TantivyBm25, int]:
        """Apply the difference between the database's items and the folder's (under the
        node's file lock): the rowids are read in one repeatable-read snapshot with the
        version they belong to."""
        state = self.bm25_dir / "source_version.json"
        engine = TantivyBm25(self.bm25_dir, create=True)  # fresh: another process may have
        try:  # written it since this one last looked
            built = int(json.loads(state.read_text(encoding="utf-8"))["version"])
        except (OSError, ValueError, KeyError, TypeError):
            built = -1
        with self.storage.lock, self.storage.conn.transaction():
            conn = self.storage.conn
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            row = conn.execute(
                "SELECT version FROM source_versions WHERE repo_id = %s AND source = %s",
                self._key(),
            ).fetchone()
            version = int(row[0]) if row else 0
            if version == built:
                return engine, version
            rowids = {
                int(r[0])
                for r in conn.execute(
                    "SELECT rowid FROM source_items WHERE repo_id = %s AND source = %s",
                    self._key(),
                )
            }
            have = {int(r) for r in engine.held_rowids()}
            new = sorted(rowids - have)
            docs = [
                (int(r[0]), item_document(str(r[1]), str(r[2]), json.loads(r[3])))
                for r in conn.execute(
                    "SELECT rowid, title, text, paths FROM source_items WHERE rowid = ANY(%s) "
                    "ORDER BY rowid",
                    (new,),
                )
            ]
        gone = sorted(have - rowids)
        if docs or gone:
            engine.apply(docs, gone)
        from ragloom.index.atomic import atomic_write_json

        atomic_write_json(state, {"version": version})
        return engine, version

    def close(self) -> None:
        """Nothing to release: the connection is the storage's (closed with it)."""


@contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    try:
        fh = path.open("a+b")
    except OSError as exc:
        raise DbError(f"cannot lock the source BM25 cache at {path}: {exc}") from exc
    with fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
