"""What a serving engine serves: an index folder or a repository in PostgreSQL.

:class:`~ragloom.server.engine.ServingEngine` keeps one warm reader, re-opens it when the
index behind it was replaced, runs re-index jobs and stores feedback. Those few operations are
all it needs to know about where the index lives, and they are this module's
:class:`ServingTarget`:

* :class:`FolderTarget`: the embedded backend, a ``.ragloom`` folder. A replaced database
  file (``ragloom index --rebuild`` writes a new one) is a new *identity*; feedback lives in
  the folder's ``feedback.sqlite``.
* :class:`PostgresTarget`: one repository in a PostgreSQL + pgvector database
  (docs/postgres.md). Generations are followed by the reader itself (the retriever's
  generation pin reads the repository row); the identity is the repository's row id, which
  changes only when the repository is dropped and created again; feedback goes to the
  database's tables, shared by every server of the team.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ragloom.index.manifest import MANIFEST_NAME
from ragloom.retrieve.reader import DB_NAME, index_manifest

if TYPE_CHECKING:
    from ragloom.api import Index
    from ragloom.embed.base import Embedder
    from ragloom.index.manifest import Manifest
    from ragloom.server.feedback import FeedbackBase

__all__ = ["FolderTarget", "PostgresTarget", "ServingTarget"]

_IDENT_TTL_S = 1.0
"""A PostgreSQL repository's identity is read at most this often (it is one query)."""


class ServingTarget(Protocol):
    """Where the served index lives (see the module docstring)."""

    root: Path
    """The repository's source tree (context snippets, settings, other sources)."""
    index_dir: Path
    """The folder of the index and of the other sources' item stores."""
    label: str
    """How logs and messages name it."""

    def manifest(self) -> Manifest:
        """What the index was built with (model, dimension); IndexNotFoundError without one."""
        ...

    def open_index(self, embedder: Embedder | None) -> Index:
        """A new handle on the index (a reader, or the writer of a re-index job)."""
        ...

    def ident(self) -> object | None:
        """Changes when the index was replaced as a whole (a new reader is then opened);
        None when it cannot be read right now."""
        ...

    def published_generation(self) -> int:
        """The generation a new reader would see (0: nothing published yet)."""
        ...

    def model_stamp(self) -> object | None:
        """Changes when the index may have been re-embedded with another model (the manifest
        then says which); cheap enough to ask before every query. None when unreadable."""
        ...

    def open_feedback(self, *, readonly: bool = False) -> FeedbackBase:
        """The feedback store (DbError when it cannot be opened); ``readonly``: for reading
        the figures only, where it cannot be opened to write."""
        ...

    def bm25_status(self) -> str:
        """The BM25 engine's state, for ``/metrics``."""
        ...

    def check_reindex(self) -> None:
        """InputError when a re-index job must not run here (see :class:`PostgresTarget`)."""
        ...

    def jobs_dir(self) -> Path:
        """Where the worker processes of one server share their re-index jobs' records."""
        ...


class FolderTarget:
    """An index folder (the embedded backend)."""

    def __init__(self, index_dir: Path, root: Path) -> None:
        self.index_dir = index_dir
        self.root = root
        self.label = str(index_dir)

    def manifest(self) -> Manifest:
        return index_manifest(self.index_dir, self.root)

    def open_index(self, embedder: Embedder | None) -> Index:
        from ragloom.api import Index

        return Index(self.root, self.index_dir, embedder=embedder)

    def ident(self) -> tuple[int, int] | None:
        """(device, inode) of the database file: a rebuild writes a new file."""
        try:
            st = os.stat(self.index_dir / DB_NAME)
        except OSError:
            return None
        return (st.st_dev, st.st_ino)

    def model_stamp(self) -> tuple[int, int, int] | None:
        """(inode, size, mtime) of the manifest: every index run rewrites it (atomically)."""
        try:
            st = os.stat(self.index_dir / MANIFEST_NAME)
        except OSError:
            return None
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    def published_generation(self) -> int:
        """Read without the store's schema checks (a rebuild may be half-way through writing
        the file); 0 when unreadable."""
        try:
            db = sqlite3.connect(f"file:{self.index_dir / DB_NAME}?mode=ro", uri=True, timeout=1)
            try:
                row = db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
            finally:
                db.close()
        except sqlite3.Error:
            return 0
        try:
            return int(row[0]) if row else 0
        except (TypeError, ValueError):
            return 0

    def open_feedback(self, *, readonly: bool = False) -> FeedbackBase:
        from ragloom.server.feedback import FeedbackStore

        return FeedbackStore(self.index_dir, readonly=readonly)

    def bm25_status(self) -> str:
        from ragloom.service.index_state import bm25_state_for_index

        return str(bm25_state_for_index(self.index_dir).get("live_status"))

    def check_reindex(self) -> None:
        return None

    def jobs_dir(self) -> Path:
        return self.index_dir / "jobs"


class PostgresTarget:
    """One repository in a PostgreSQL + pgvector database."""

    def __init__(
        self,
        dsn: str,
        repository: str,
        root: Path,
        *,
        cache_dir: Path | None = None,
        ef_search: int | None = None,
        source_tree: bool = True,
        pool_size: int = 1,
    ) -> None:
        from ragloom.api import DEFAULT_INDEX_DIRNAME

        self.source_tree = source_tree
        """False when ``root`` is only a stand-in (the repository's recorded root does not exist
        on this machine and no path was given): re-indexing it would replace the repository's
        files with whatever that folder holds, so jobs are refused."""
        self.dsn = dsn
        self.repository = repository
        self.root = root
        self.index_dir = root / DEFAULT_INDEX_DIRNAME
        self.cache_dir = cache_dir
        self.ef_search = ef_search
        self.pool_size = pool_size
        self.label = f"postgres:{repository}"
        self._ident_lock = threading.Lock()
        self._ident: tuple[float, tuple[int, int, str, int] | None] = (-1e9, None)

    def _read(self) -> tuple[int, int, str, int] | None:
        """(repository id, published generation, embedding model, its dimension), None when
        the repository or the database cannot be read."""
        import psycopg

        from ragloom.index.postgres import connect

        try:
            with connect(self.dsn, app="ragloom-serve") as conn:
                row = conn.execute(
                    "SELECT id, generation, embedding_model, embedding_dim FROM repositories "
                    "WHERE name = %s",
                    (self.repository,),
                ).fetchone()
        except (psycopg.Error, OSError):
            return None
        return (int(row[0]), int(row[1]), str(row[2]), int(row[3])) if row else None

    def manifest(self) -> Manifest:
        from ragloom.index.postgres import PostgresBackend
        from ragloom.retrieve.reader import postgres_manifest

        backend = PostgresBackend(self.dsn, self.repository)
        try:
            return postgres_manifest(backend)
        finally:
            backend.close()

    def open_index(self, embedder: Embedder | None) -> Index:
        from ragloom.api import PostgresIndex

        return PostgresIndex(
            self.root,
            self.dsn,
            self.repository,
            embedder=embedder,
            cache_dir=self.cache_dir,
            ef_search=self.ef_search,
            pool_size=self.pool_size,
        )

    def _row(self) -> tuple[int, int, str, int] | None:
        """:meth:`_read`, at most every :data:`_IDENT_TTL_S` (a query costs a connection)."""
        now = time.monotonic()
        with self._ident_lock:
            stamp, value = self._ident
            if now - stamp < _IDENT_TTL_S:
                return value
            value = self._read()
            self._ident = (now, value)
            return value

    def ident(self) -> object | None:
        """The repository's row id (generations are followed by the reader, not by this)."""
        row = self._row()
        return row[0] if row is not None else None

    def model_stamp(self) -> object | None:
        """The repository's embedding model and dimension, read with its identity."""
        row = self._row()
        return (row[2], row[3]) if row is not None else None

    def published_generation(self) -> int:
        read = self._read()
        return read[1] if read is not None else 0

    def open_feedback(self, *, readonly: bool = False) -> FeedbackBase:
        from ragloom.server.feedback_pg import PgFeedbackStore

        return PgFeedbackStore(self.dsn, self.repository)

    def bm25_status(self) -> str:
        return "rebuilt-from-db"

    def check_reindex(self) -> None:
        if not self.source_tree:
            from ragloom.errors import InputError

            raise InputError(
                f"this server has no source tree of repository {self.repository!r} (its "
                "recorded root does not exist here and none was given): re-index where the tree "
                f"is, with `ragloom index PATH --backend postgres --repo {self.repository}`, or "
                "start the server with the tree's PATH"
            )

    def jobs_dir(self) -> Path:
        """Beside this node's BM25 engines of the repository (the tree's folder may not be
        writable; the jobs are this node's workers' business)."""
        from ragloom.index.pg_search import bm25_cache_dir

        return bm25_cache_dir(self.dsn, self.repository, self.cache_dir) / "jobs"
