"""Content-addressed document vectors shared across indexes, branches and work trees (issue 23,
item 3; docs/embedding.md "The vector cache").

Embedding is the slowest thing ragloom does (45-95 chunks/s on 2 cores). An index keeps the
vectors of the texts its chunks have now and drops the others when their chunks go, so a branch
switch and back re-embedded every text the switch had removed. :class:`VectorCache` keeps every
document vector the indexer computes, keyed by (the embedding key: model and text format, the
SHA-256 of the exact text the model saw), in one SQLite file per user
(:func:`default_cache_path`): any text embedded once, by any index of any work tree, is never
embedded again while it is in the cache.

- **Bounded.** At most ``max_bytes`` of vectors (:data:`DEFAULT_MAX_MB`, ``RAGLOOM_VECTOR_CACHE_MB``);
  beyond it the least recently used go first (a read counts as a use), down to
  :data:`EVICT_TO` of the bound.
- **Crash-safe.** Every write is one SQLite transaction (WAL): a kill leaves the cache as it was
  before or after it. A cache that cannot be opened or read is skipped with a warning: indexing
  goes on, embedding what it must.
- **Shared.** Several processes (work trees, servers) may read and write it at once; SQLite's
  locking serialises the writes.
- **Pruned by a command**: ``ragloom cache prune [--max-mb N]``, ``ragloom cache clear``,
  ``ragloom cache stats``.

``RAGLOOM_VECTOR_CACHE`` names another file, or ``off`` to keep none.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

__all__ = [
    "CACHE_ENV",
    "CACHE_MB_ENV",
    "DEFAULT_MAX_MB",
    "EVICT_TO",
    "VectorCache",
    "default_cache_path",
    "open_default_cache",
]

log = logging.getLogger("ragloom")

CACHE_ENV = "RAGLOOM_VECTOR_CACHE"
"""A file path for the cache, or ``off``."""
CACHE_MB_ENV = "RAGLOOM_VECTOR_CACHE_MB"
"""The cache's bound in MiB."""
DEFAULT_MAX_MB = 2048
"""1.4 million 384-d vectors (the shipped MiniLM): about 28 copies of the CPython standard
library's chunks."""
EVICT_TO = 0.9
"""An over-full cache is cut to this share of its bound (so eviction is not paid on every
write)."""
_IN_BATCH = 500

_SCHEMA = """
CREATE TABLE IF NOT EXISTS vec (
    key TEXT PRIMARY KEY,
    v BLOB NOT NULL,
    used REAL NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS vec_used ON vec(used);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT OR IGNORE INTO meta VALUES ('bytes', 0);
"""


def default_cache_path() -> Path | None:
    """``RAGLOOM_VECTOR_CACHE`` (None when ``off``), else ``vectors.sqlite`` in the user's cache
    folder (``$XDG_CACHE_HOME/ragloom``, by default ``~/.cache/ragloom``)."""
    asked = os.environ.get(CACHE_ENV, "").strip()
    if asked:
        return None if asked.lower() in ("off", "none", "0", "false") else Path(asked).expanduser()
    base = os.environ.get("XDG_CACHE_HOME", "").strip() or str(Path.home() / ".cache")
    return Path(base) / "ragloom" / "vectors.sqlite"


def _max_bytes() -> int:
    raw = os.environ.get(CACHE_MB_ENV, "").strip()
    try:
        mb = float(raw) if raw else float(DEFAULT_MAX_MB)
    except ValueError:
        log.warning("%s=%r is not a number: using %d MiB", CACHE_MB_ENV, raw, DEFAULT_MAX_MB)
        mb = float(DEFAULT_MAX_MB)
    return max(0, int(mb * 1024 * 1024))


def open_default_cache() -> VectorCache | None:
    """The user's cache (:func:`default_cache_path`), or None when it is off or cannot be
    opened (with a warning: indexing goes on without it)."""
    path = default_cache_path()
    if path is None:
        return None
    try:
        return VectorCache(path, _max_bytes())
    except (OSError, sqlite3.Error) as exc:
        log.warning("vector cache %s unavailable, embedding without it: %s", path, exc)
        return None


class VectorCache:
    """Document vectors by (embedding key, text); see the module docstring."""

    def __init__(self, path: Path | str, max_bytes: int = DEFAULT_MAX_MB * 1024 * 1024) -> None:
        path = Path(path)
        self.path = path
        self.max_bytes = max_bytes
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, timeout=60)
        if not self._db.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall():
            # a new file: pages that hold a vector row inline (on 4 KiB pages a 1.5 KB row
            # spilled to a mostly empty overflow page: 4x the vectors' size on disk)
            self._db.execute("PRAGMA page_size=8192")
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)

    @staticmethod
    def key(embedding_key: str, text: str) -> str:
        """The cache key of ``text`` embedded under ``embedding_key``."""
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        return f"{embedding_key}:{digest}"

    def get(self, keys: Sequence[str], dim: int) -> dict[str, np.ndarray]:
        """The vectors of ``keys`` the cache has (of dimension ``dim``; others are ignored), each
        marked as used now."""
        found: dict[str, np.ndarray] = {}
        now = time.time()
        with self._lock:
            try:
                for i in range(0, len(keys), _IN_BATCH):
                    part = list(keys[i : i + _IN_BATCH])
                    marks = ",".join("?" * len(part))
                    for k, blob in self._db.execute(
                        f"SELECT key, v FROM vec WHERE key IN ({marks})", part
                    ):
                        if len(blob) == dim * 4:
                            found[str(k)] = np.frombuffer(blob, dtype=np.float32)
                if found:
                    with self._db:
                        self._db.executemany(
                            "UPDATE vec SET used = ? WHERE key = ?", [(now, k) for k in found]
                        )
            except sqlite3.Error as exc:
                log.warning("vector cache %s unreadable, embedding without it: %s", self.path, exc)
                return {}
        return found

    def put(self, items: Iterable[tuple[str, np.ndarray]]) -> None:
        """Keep ``items`` (key, vector); then cut the cache to its bound if it is over."""
        now = time.time()
        rows = [(k, np.asarray(v, dtype=np.float32).tobytes(), now) for k, v in items]
        if not rows:
            return
        with self._lock:
            try:
                with self._db:
                    added = 0
                    for k, blob, ts in rows:
                        cur = self._db.execute(
                            "INSERT OR IGNORE INTO vec(key, v, used) VALUES (?, ?, ?)",
                            (k, blob, ts),
                        )
                        added += len(blob) if cur.rowcount == 1 else 0
                    self._db.execute(
                        "UPDATE meta SET value = value + ? WHERE key = 'bytes'", (added,)
                    )
                if self._bytes() > self.max_bytes:
                    self._evict(int(self.max_bytes * EVICT_TO))
            except sqlite3.Error as exc:
                log.warning("vector cache %s not written: %s", self.path, exc)

    def _bytes(self) -> int:
        row = self._db.execute("SELECT value FROM meta WHERE key = 'bytes'").fetchone()
        return int(row[0]) if row else 0

    def _evict(self, target: int) -> int:
        """Drop the least recently used vectors until at most ``target`` bytes are kept;
        returns how many went. Call with the lock held."""
        removed = 0
        with self._db:
            size = self._bytes()
            while size > target:
                rows = self._db.execute(
                    "SELECT key, length(v) FROM vec ORDER BY used LIMIT ?", (_IN_BATCH,)
                ).fetchall()
                if not rows:
                    size = 0
                    break
                drop: list[str] = []
                for k, n in rows:
                    if size <= target:
                        break
                    drop.append(str(k))
                    size -= int(n)
                self._db.executemany("DELETE FROM vec WHERE key = ?", [(k,) for k in drop])
                removed += len(drop)
            self._db.execute("UPDATE meta SET value = ? WHERE key = 'bytes'", (max(size, 0),))
        return removed

    def prune(self, max_bytes: int | None = None) -> int:
        """Cut the cache to ``max_bytes`` (default: its bound), least recently used first, and
        give the freed space back to the disk; returns the vectors removed."""
        with self._lock:
            removed = self._evict(self.max_bytes if max_bytes is None else max(0, max_bytes))
            if removed:
                self._compact()
            return removed

    def clear(self) -> int:
        """Empty the cache and give its space back to the disk; returns the vectors removed."""
        with self._lock:
            with self._db:
                n = int(self._db.execute("DELETE FROM vec").rowcount)
                self._db.execute("UPDATE meta SET value = 0 WHERE key = 'bytes'")
            self._compact()
        return n

    def _compact(self) -> None:
        """VACUUM (the file kept its size after ``prune`` and ``clear`` before: deleted rows
        only free pages inside it); skipped, with the space kept, while another process
        holds the file. Call with the lock held."""
        try:
            self._db.execute("VACUUM")
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.OperationalError as exc:
            log.info("vector cache not compacted now: %s", exc)

    def stats(self) -> dict[str, object]:
        """``path``, ``entries``, ``bytes``, ``max_bytes``."""
        with self._lock:
            (n,) = self._db.execute("SELECT count(*) FROM vec").fetchone()
            size = self._bytes()
        return {
            "path": str(self.path),
            "entries": int(n),
            "bytes": size,
            "max_bytes": self.max_bytes,
        }

    def close(self) -> None:
        with self._lock:
            self._db.close()
