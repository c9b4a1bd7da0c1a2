"""Relevance feedback (tamma phase 7): the query log, explicit ratings and context usage.

Where it lives: ``<index folder>/feedback.sqlite``, a SQLite database of its own beside the
index's ``index.sqlite``, not tables inside it. Three reasons, each checked against
``ragloom.index.store``:

- **A rebuild keeps it.** ``ragloom index --rebuild`` deletes ``index.sqlite`` (and its WAL),
  the manifest, ``bm25/`` and ``vectors/``; ratings of past answers are the users' work and
  outlive the chunks they rated (chunk ids are stable across rebuilds when the code did not
  change, so old ratings still name the same chunks).
- **Queries never wait for the indexer.** An update holds the index database's write lock for
  a whole transaction (seconds on a large change); a query-log insert in the same database
  would wait behind it. Here writes wait only for other feedback writes (milliseconds).
- **Readers keep their fast path.** Every commit to ``index.sqlite`` by any connection bumps
  ``PRAGMA data_version`` for every reader, which sends the next query of each
  :class:`~ragloom.retrieve.search.Retriever` through a fresh generation pin
  (docs/consistency.md); logging every query there would do that on every query.

The store's own code never looks at tables it does not own, so both placements are safe for the
index; the file is simply not deleted by a rebuild (it is in the index folder, so ``ragloom
status`` counts its bytes in ``disk_bytes``).

Schema (``PRAGMA user_version`` 1)::

    query_log(query_id TEXT PRIMARY KEY, ts REAL, route TEXT, query TEXT, strategy TEXT,
              generation INTEGER, hit_ids TEXT /* JSON list */, source TEXT)
    feedback(id INTEGER PRIMARY KEY, query_id TEXT, chunk_id TEXT, rating TEXT, comment TEXT,
             ts REAL, in_results INTEGER)
    context_usage(query_id TEXT, chunk_id TEXT, ts REAL, PRIMARY KEY (query_id, chunk_id))

Feedback names a ``query_id`` an answer carried; one the log does not know is an
:class:`~ragloom.errors.InputError` (a typo, or an answer of another index). The chunk need not
be among the answer's hits (an agent may rate a chunk it found another way);
``in_results`` records whether it was.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import sqlite3
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ragloom.errors import DbError, FeedbackUnavailableError, InputError, UnknownIdError

if TYPE_CHECKING:
    from ragloom.settings import Settings

log = logging.getLogger("ragloom")

__all__ = [
    "FEEDBACK_DB_NAME",
    "RATINGS",
    "RATING_VALUES",
    "FeedbackBase",
    "FeedbackStore",
    "NewRating",
    "QueryLogEntry",
    "QueryLogger",
    "log_bytes",
]

FEEDBACK_DB_NAME: Final = "feedback.sqlite"
RATING_VALUES: Final[dict[str, float]] = {
    "helpful": 1.0,
    "partially_helpful": 0.5,
    "not_helpful": 0.0,
}
"""A rating's value in ``avg_rating`` (tamma ``FeedbackStats.avgRating``: ragloom's scale)."""
RATINGS: Final = tuple(RATING_VALUES)
MAX_COMMENT_CHARS: Final = 4000
MAX_USED_CHUNKS: Final = 1000
QUERY_LOG_MAX_ROWS: Final = 1_000_000
"""The query log keeps at most this many answers (oldest without feedback go first); checked
every :data:`_PRUNE_EVERY` inserts."""
QUERY_LOG_MAX_BYTES: Final = 256 * 2**20
"""... and at most this many bytes of questions and hit lists (``feedback.query_log_max_mb``):
a user trial's server logged 38 MB in 20 minutes (870 bytes an answer), and questions of whole
issues are up to 64 KiB each. Pruned to 90 % of it."""
_PRUNE_EVERY: Final = 10_000
_PRUNE_FRACTION: Final = 20
"""The log is also pruned once a twentieth of its byte bound was written since the last time."""
_LOGGED: Final = ("query_id", "ts", "route", "query", "strategy", "generation", "hit_ids", "source")
"""The query log's columns of an answer, in the order :meth:`FeedbackBase._query_row` gives
them (and :meth:`FeedbackBase.query` names them)."""
LOGGED_COLS: Final = ", ".join(_LOGGED)
_SQLITE_SIZE: Final = "length(CAST(query AS BLOB)) + length(hit_ids)"
"""The bytes an answer counts for in the query log's bound (its question and hit list)."""

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS query_log (
    query_id TEXT PRIMARY KEY,
    ts REAL NOT NULL,
    route TEXT NOT NULL,
    query TEXT NOT NULL,
    strategy TEXT NOT NULL,
    generation INTEGER NOT NULL,
    hit_ids TEXT NOT NULL,
    source TEXT NOT NULL DEFAULT 'server'
);
CREATE INDEX IF NOT EXISTS query_log_ts ON query_log(ts);
CREATE TABLE IF NOT EXISTS feedback (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    query_id TEXT NOT NULL,
    chunk_id TEXT NOT NULL,
    rating TEXT NOT NULL CHECK (rating IN ('helpful', 'not_helpful', 'partially_helpful')),
    comment TEXT,
    ts REAL NOT NULL,
    in_results INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS feedback_query ON feedback(query_id);
CREATE TABLE IF NOT EXISTS context_usage (
    query_id TEXT NOT NULL,
    chunk_id TEXT NOT NULL,
    ts REAL NOT NULL,
    PRIMARY KEY (query_id, chunk_id)
);
PRAGMA user_version = 1;
"""


def storable(text: str) -> str:
    """``text`` as UTF-8 can hold it: a lone surrogate written as its escape (``\\udcff``)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def _valid_text(value: str, what: str) -> str:
    """InputError for text a database cannot store (a lone surrogate)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(f"{what} is not valid Unicode text ({exc.reason} at {exc.start})") from exc
    return value


@dataclass(frozen=True, slots=True)
class QueryLogEntry:
    """One answer, as the query log keeps it."""

    query_id: str
    route: str
    query: str
    strategy: str
    generation: int
    hit_ids: tuple[str, ...]
    ts: float
    source: str = "server"
    latency_ms: float = 0.0

    def logged(self, hit_ids: object) -> tuple[Any, ...]:
        """The values of :data:`LOGGED_COLS`, with ``hit_ids`` as the database keeps them (a
        question that is not valid Unicode, a lone surrogate from ``os.fsdecode``, is kept
        with that character written as ``\\udcff``: a database takes UTF-8 only)."""
        return (
            self.query_id,
            self.ts,
            self.route,
            storable(self.query),
            storable(self.strategy),
            self.generation,
            hit_ids,
            self.source,
        )

    def size(self) -> int:
        """About the bytes it counts for in the query log's bound (its question and hit
        list; the question's characters, close to its UTF-8 bytes for code questions)."""
        return len(self.query) + sum(len(h) + 3 for h in self.hit_ids) + 2


@dataclass(frozen=True, slots=True)
class NewRating:
    """One rating to store (:meth:`FeedbackBase.record_feedback`)."""

    query_id: str
    chunk_id: str
    rating: str
    comment: str | None
    ts: float
    in_results: bool


class FeedbackBase(ABC):
    """The feedback operations and their checks, over a few storage primitives: the SQLite
    store (:class:`FeedbackStore`, the embedded backend) and the PostgreSQL one
    (``ragloom.server.feedback_pg.PgFeedbackStore``) answer the same calls the same way.
    One connection each, guarded by :attr:`_lock`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._inserted = 0
        """Answers logged since the query log was last pruned."""
        self._inserted_bytes = 0
        """Bytes of questions and hit lists logged since then."""
        self.max_log_bytes = QUERY_LOG_MAX_BYTES
        """The query log's byte bound (0: nothing is logged, and feedback cannot name an
        answer); the engine sets it from ``feedback.query_log_max_mb``."""
        self.lookup_wait_s = 0.0
        """How long a lookup of an unknown ``query_id`` waits for it to appear: with several
        worker processes the answer may come from another worker, whose query-log writer
        stores it up to :data:`QUERY_LOG_GATHER_S` later (the engine sets it; 0: one
        process, whose own log is flushed before the lookup)."""

    # -- storage primitives ---------------------------------------------------------------
    @abstractmethod
    def _db_error(self) -> type[Exception]:
        """The database driver's error class."""

    @abstractmethod
    def _insert_log(self, entries: Sequence[QueryLogEntry]) -> None:
        """Insert answers into the query log in one transaction (a known query_id is kept);
        the caller holds the lock."""

    @abstractmethod
    def _prune(self) -> None:
        """Keep at most :data:`QUERY_LOG_MAX_ROWS` answers and :attr:`max_log_bytes` bytes of
        them (oldest without feedback go first: :meth:`_bytes_to_free`); the caller holds the
        lock."""

    def _bytes_to_free(self, held: int) -> int:
        """How many bytes of answers to delete when the log holds ``held`` (0: none); past the
        bound it is pruned to 90 % of it, so it is not pruned again at the next insert."""
        if held <= self.max_log_bytes:
            return 0
        return held - self.max_log_bytes * 9 // 10

    @abstractmethod
    def _query_row(self, query_id: str) -> tuple[Any, ...] | None:
        """The :data:`LOGGED_COLS` of the logged answer ``query_id`` (``hit_ids`` as a list),
        or None."""

    @abstractmethod
    def _insert_feedback(self, new: NewRating) -> int:
        """Store one rating; its id."""

    @abstractmethod
    def _feedback_rows(self, query_id: str) -> list[tuple[Any, ...]]:
        """(id, chunk_id, rating, comment, ts, in_results) of ``query_id``, oldest first."""

    @abstractmethod
    def _insert_usage(self, query_id: str, chunk_ids: Sequence[str], ts: float) -> None:
        """Record used chunks (a chunk already recorded for the query is kept)."""

    @abstractmethod
    def _used(self, query_id: str) -> list[str]:
        """Chunk ids recorded as used for ``query_id``, in the order they were recorded."""

    @abstractmethod
    def _rating_counts(self, query_id: str) -> dict[str, int]:
        """Rating -> number of ratings of ``query_id``."""

    @abstractmethod
    def _totals(self) -> tuple[int, int, dict[str, int]]:
        """(answers logged, chunks recorded as used, rating -> number of ratings) of the
        whole store."""

    @abstractmethod
    def _rated_query_ids(self, since: float) -> list[str]:
        """Ids of the answers with a rating or a used chunk recorded at or after ``since``,
        oldest answer first."""

    @abstractmethod
    def close(self) -> None: ...

    # -- the operations -------------------------------------------------------------------
    @contextmanager
    def _guarded(self, what: str) -> Iterator[None]:
        """Under the lock; a database error is a :class:`~ragloom.errors.DbError`
        ``cannot <what>: ...``."""
        with self._lock:
            try:
                yield
            except self._db_error() as exc:
                raise DbError(f"cannot {what}: {exc}") from exc

    def log_queries(self, entries: Sequence[QueryLogEntry]) -> None:
        """Insert answers into the query log (one transaction; a known query_id is kept)."""
        if not entries or self.max_log_bytes <= 0:
            return
        with self._guarded("write the query log"):
            self._insert_log(entries)
            self._inserted += len(entries)
            self._inserted_bytes += sum(e.size() for e in entries)
            if (
                self._inserted >= _PRUNE_EVERY
                or self._inserted_bytes >= self.max_log_bytes // _PRUNE_FRACTION
            ):
                self._inserted = self._inserted_bytes = 0
                self._prune()

    def query(self, query_id: str) -> dict[str, Any] | None:
        """The logged answer ``query_id`` (query_id, ts, route, query, strategy, generation,
        hit_ids, source), or None."""
        row = self._query_row(query_id)
        return None if row is None else dict(zip(_LOGGED, row, strict=True))

    def _known(self, query_id: str) -> dict[str, Any]:
        if not isinstance(query_id, str) or not query_id.strip():
            raise InputError("query_id must be a non-empty string")
        logged = self.query(query_id)
        if logged is None and self.lookup_wait_s > 0:
            deadline = time.monotonic() + self.lookup_wait_s
            while logged is None and time.monotonic() < deadline:
                time.sleep(min(0.01, max(0.0, deadline - time.monotonic())))
                logged = self.query(query_id)
        if logged is None:
            off = (
                " (the query log is off here: feedback.query_log_max_mb = 0)"
                if self.max_log_bytes <= 0
                else " (the query log keeps the newest answers up to feedback.query_log_max_mb: "
                "an older unrated one may have been pruned)"
            )
            raise UnknownIdError(
                f"unknown query_id {query_id!r}: feedback must name the query_id of an answer "
                f"this index gave{off}"
            )
        return logged

    # -- feedback -----------------------------------------------------------------------
    def record_feedback(
        self, query_id: str, chunk_id: str, rating: str, comment: str | None = None
    ) -> dict[str, Any]:
        """Store one rating; returns the stored record."""
        if rating not in RATING_VALUES:
            raise InputError(f"rating must be one of {', '.join(RATINGS)}, got {rating!r}")
        if not isinstance(chunk_id, str) or not chunk_id.strip():
            raise InputError("chunk_id must be a non-empty string")
        if comment is not None and not isinstance(comment, str):
            raise InputError("comment must be a string")
        if comment is not None and len(comment) > MAX_COMMENT_CHARS:
            raise InputError(f"comment is longer than {MAX_COMMENT_CHARS} characters")
        _valid_text(chunk_id, "chunk_id")
        if comment is not None:
            _valid_text(comment, "comment")
        logged = self._known(query_id)
        new = NewRating(
            query_id, chunk_id, rating, comment, time.time(), chunk_id in logged["hit_ids"]
        )
        record_id = self._insert_feedback(new)
        return {
            "id": record_id,
            "query_id": query_id,
            "chunk_id": chunk_id,
            "rating": rating,
            "comment": comment,
            "timestamp": new.ts,
            "in_results": new.in_results,
        }

    def query_feedback(self, query_id: str) -> list[dict[str, Any]]:
        """Every rating of ``query_id``, oldest first (tamma ``getQueryFeedback``)."""
        rows = self._feedback_rows(query_id)
        return [
            {
                "id": r[0],
                "query_id": query_id,
                "chunk_id": r[1],
                "rating": r[2],
                "comment": r[3],
                "timestamp": r[4],
                "in_results": bool(r[5]),
            }
            for r in rows
        ]

    def track_context_usage(self, query_id: str, used_chunk_ids: Sequence[str]) -> dict[str, Any]:
        """Record which chunks of an answer were used (tamma ``trackContextUsage``)."""
        if isinstance(used_chunk_ids, str) or not all(
            isinstance(c, str) and c for c in used_chunk_ids
        ):
            raise InputError("used_chunk_ids must be a list of non-empty chunk id strings")
        if len(used_chunk_ids) > MAX_USED_CHUNKS:
            raise InputError(f"used_chunk_ids has more than {MAX_USED_CHUNKS} entries")
        for c in used_chunk_ids:
            _valid_text(c, "a used chunk id")
        self._known(query_id)
        ts = time.time()
        self._insert_usage(query_id, list(dict.fromkeys(used_chunk_ids)), ts)
        return {"query_id": query_id, "used_chunk_ids": self._used(query_id), "timestamp": ts}

    def stats(self, query_id: str) -> dict[str, Any]:
        """Per-query statistics (tamma ``FeedbackStats``), ``avg_rating`` on
        :data:`RATING_VALUES` (None without ratings)."""
        self._known(query_id)
        return {
            "query_id": query_id,
            **_rating_figures(self._rating_counts(query_id)),
            "used_chunk_ids": self._used(query_id),
        }

    def summary(self) -> dict[str, Any]:
        """The whole store's figures (``ragloom feedback stats`` without an answer):
        ``answers`` logged, ``rated_answers`` (rated or with chunks used), the ratings as
        :meth:`stats` counts them, and ``used_chunks`` recorded."""
        logged, used, by_rating = self._totals()
        return {
            "answers": logged,
            "rated_answers": self.rated_count(),
            **_rating_figures(by_rating),
            "used_chunks": used,
        }

    def rated_count(self, since: float = 0.0) -> int:
        """How many answers :meth:`rated_answers` would return (one query, not three per
        answer: what ``ragloom index`` asks to decide whether to fit the repository model
        again)."""
        return len(self._rated_query_ids(since))

    def rated_answers(self, since: float = 0.0) -> list[dict[str, Any]]:
        """Every answer rated (or with chunks recorded as used) at or after ``since``, oldest
        first: ``query_id``, ``query``, ``ts``, ``hit_ids``, ``ratings`` (chunk id -> its last
        rating at or after ``since``) and ``used`` (chunk ids). What the per-repository
        adaptation learns from (:mod:`ragloom.learn.adapt`)."""
        out: list[dict[str, Any]] = []
        for qid in self._rated_query_ids(since):
            logged = self.query(qid)
            if logged is None:
                continue
            ratings = {r[1]: r[2] for r in self._feedback_rows(qid) if r[4] >= since}
            out.append(
                {
                    "query_id": qid,
                    "query": logged["query"],
                    "ts": logged["ts"],
                    "hit_ids": list(logged["hit_ids"]),
                    "ratings": ratings,
                    "used": self._used(qid),
                }
            )
        return out


SET_UP_WAIT_S: Final = 30.0
"""How long opening the feedback file retries a lock met while setting it up."""


def _rating_figures(by_rating: dict[str, int]) -> dict[str, Any]:
    """``total``, the count of each rating and ``avg_rating`` (on :data:`RATING_VALUES`;
    None without ratings) of rating -> number of ratings."""
    counts = {r: int(by_rating.get(r, 0)) for r in RATINGS}
    total = sum(counts.values())
    avg = sum(RATING_VALUES[r] * n for r, n in counts.items()) / total if total else None
    return {
        "total": total,
        "helpful_count": counts["helpful"],
        "not_helpful_count": counts["not_helpful"],
        "partially_helpful_count": counts["partially_helpful"],
        "avg_rating": avg,
    }


class FeedbackStore(FeedbackBase):
    """``<index folder>/feedback.sqlite``: one connection, one lock (writes are short)."""

    def __init__(self, index_dir: Path, *, readonly: bool = False) -> None:
        """``readonly``: for reading only (``status``, the adaptation): no schema or journal
        set-up, so it takes no write lock beside the servers and CLI runs writing to it (a
        folder without the file reads as holding nothing)."""
        self.path = Path(index_dir) / FEEDBACK_DB_NAME
        super().__init__()
        try:
            if readonly and not self.path.exists():  # nothing logged there: read as empty
                self._db = sqlite3.connect(":memory:", check_same_thread=False)
                self._db.executescript(_SCHEMA)
                return
            if readonly:  # on a read-only folder too (read as immutable there)
                from ragloom.index.store import open_readonly

                self._db = open_readonly(self.path.resolve())
                self._db.execute("PRAGMA busy_timeout=30000")
                return
            self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
            self._set_up()
        except sqlite3.Error as exc:
            if not readonly and not os.access(self.path.parent, os.W_OK):
                raise FeedbackUnavailableError(
                    f"cannot record feedback: the index folder {self.path.parent} is read-only "
                    f"({exc}); its ratings can be read, not added"
                ) from exc
            raise DbError(f"cannot open the feedback database {self.path}: {exc}") from exc

    def _set_up(self) -> None:
        """WAL, and the tables. Two processes opening a new file at once (the workers of
        ``serve http --workers N``, each with its own store) can meet "database is locked" at
        once, without SQLite's busy wait, while one of them switches the file to WAL: that is
        retried for up to :data:`SET_UP_WAIT_S`."""
        deadline = time.monotonic() + SET_UP_WAIT_S
        while True:
            try:
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=NORMAL")
                self._db.execute("PRAGMA busy_timeout=30000")
                self._db.executescript(_SCHEMA)
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _db_error(self) -> type[Exception]:
        return sqlite3.Error

    # -- query log ----------------------------------------------------------------------
    def _insert_log(self, entries: Sequence[QueryLogEntry]) -> None:
        with self._db:
            self._db.executemany(
                f"INSERT OR IGNORE INTO query_log({LOGGED_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [e.logged(json.dumps(list(e.hit_ids))) for e in entries],
            )

    def _prune(self) -> None:
        n, held = self._db.execute(
            f"SELECT count(*), coalesce(sum({_SQLITE_SIZE}), 0) FROM query_log"
        ).fetchone()
        extra = int(n) - QUERY_LOG_MAX_ROWS
        free = self._bytes_to_free(int(held))
        unrated = "NOT EXISTS (SELECT 1 FROM feedback f WHERE f.query_id = q.query_id)"
        with self._db:
            if extra > 0:
                self._db.execute(
                    "DELETE FROM query_log WHERE query_id IN (SELECT query_id FROM query_log q "
                    f"WHERE {unrated} ORDER BY ts LIMIT ?)",
                    (extra,),
                )
            if free > 0:  # the oldest unrated answers whose sizes add up to ``free``
                self._db.execute(
                    "DELETE FROM query_log WHERE query_id IN (SELECT query_id FROM (SELECT "
                    f"query_id, {_SQLITE_SIZE} AS size, sum({_SQLITE_SIZE}) OVER (ORDER BY ts, "
                    "query_id ROWS UNBOUNDED PRECEDING) AS run FROM query_log q "
                    f"WHERE {unrated}) WHERE run - size < ?)",
                    (free,),
                )

    def _query_row(self, query_id: str) -> tuple[Any, ...] | None:
        with self._lock:
            row = self._db.execute(
                f"SELECT {LOGGED_COLS} FROM query_log WHERE query_id = ?", (query_id,)
            ).fetchone()
        return None if row is None else (*row[:6], json.loads(row[6]), row[7])

    def _insert_feedback(self, new: NewRating) -> int:
        with self._guarded("store feedback"), self._db:
            cur = self._db.execute(
                "INSERT INTO feedback(query_id, chunk_id, rating, comment, ts, in_results)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (
                    new.query_id,
                    new.chunk_id,
                    new.rating,
                    new.comment,
                    new.ts,
                    int(new.in_results),
                ),
            )
        return int(cur.lastrowid or 0)

    def _feedback_rows(self, query_id: str) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._db.execute(
                "SELECT id, chunk_id, rating, comment, ts, in_results FROM feedback "
                "WHERE query_id = ? ORDER BY id",
                (query_id,),
            ).fetchall()

    def _insert_usage(self, query_id: str, chunk_ids: Sequence[str], ts: float) -> None:
        with self._guarded("store context usage"), self._db:
            self._db.executemany(
                "INSERT OR IGNORE INTO context_usage(query_id, chunk_id, ts) VALUES (?, ?, ?)",
                [(query_id, c, ts) for c in chunk_ids],
            )

    def _used(self, query_id: str) -> list[str]:
        with self._lock:
            rows = self._db.execute(
                "SELECT chunk_id FROM context_usage WHERE query_id = ? ORDER BY ts, chunk_id",
                (query_id,),
            ).fetchall()
        return [str(r[0]) for r in rows]

    def _rating_counts(self, query_id: str) -> dict[str, int]:
        with self._lock:
            rows = self._db.execute(
                "SELECT rating, count(*) FROM feedback WHERE query_id = ? GROUP BY rating",
                (query_id,),
            ).fetchall()
        return {str(r): int(n) for r, n in rows}

    def _totals(self) -> tuple[int, int, dict[str, int]]:
        with self._lock:
            logged = self._db.execute("SELECT count(*) FROM query_log").fetchone()[0]
            used = self._db.execute("SELECT count(*) FROM context_usage").fetchone()[0]
            rows = self._db.execute("SELECT rating, count(*) FROM feedback GROUP BY rating")
            return int(logged), int(used), {str(r): int(n) for r, n in rows.fetchall()}

    def _rated_query_ids(self, since: float) -> list[str]:
        with self._lock:
            rows = self._db.execute(
                "SELECT q.query_id FROM query_log q WHERE EXISTS (SELECT 1 FROM feedback f "
                "WHERE f.query_id = q.query_id AND f.ts >= ?) OR EXISTS (SELECT 1 FROM "
                "context_usage u WHERE u.query_id = q.query_id AND u.ts >= ?) ORDER BY q.ts, "
                "q.query_id",
                (since, since),
            ).fetchall()
        return [str(r[0]) for r in rows]


QUERY_LOG_GATHER_S: Final = 0.05
"""How long the query-log writer gathers entries after the first before writing them (a
flush or close ends the wait at once)."""


def log_bytes(settings: Settings) -> int:
    """The query log's byte bound ``feedback.query_log_max_mb`` asks for."""
    return int(settings.feedback.query_log_max_mb * 2**20)


class QueryLogger:
    """Writes query-log entries from a background thread, in batches, so an answer never waits
    for a database write; :meth:`flush` makes everything submitted so far visible (feedback
    calls it before looking a query up)."""

    def __init__(self, store: FeedbackBase) -> None:
        self.store = store
        self._queue: queue.SimpleQueue[QueryLogEntry | threading.Event | None] = queue.SimpleQueue()
        self.errors = 0
        self.written = 0
        self._urgent = threading.Event()
        """Set by :meth:`flush` and :meth:`close`: the writer stops gathering at once."""
        self._thread = threading.Thread(target=self._loop, name="ragloom-query-log", daemon=True)
        self._thread.start()

    def submit(self, entry: QueryLogEntry) -> None:
        self._queue.put(entry)

    def flush(self, timeout: float = 10.0) -> None:
        done = threading.Event()
        self._queue.put(done)
        self._urgent.set()
        done.wait(timeout)

    def close(self) -> None:
        self._queue.put(None)
        self._urgent.set()
        self._thread.join(timeout=10.0)

    def _loop(self) -> None:
        stop = False
        while not stop:
            item = self._queue.get()
            items = [item]
            if isinstance(item, QueryLogEntry):
                # gather what comes next while asleep: a put to a queue nobody waits on wakes
                # no thread, so answers stop handing the GIL to this writer one by one
                self._urgent.wait(QUERY_LOG_GATHER_S)
            self._urgent.clear()
            while True:
                try:
                    items.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            entries = [i for i in items if isinstance(i, QueryLogEntry)]
            try:
                self.store.log_queries(entries)
                self.written += len(entries)
            except DbError:
                self.errors += len(entries)
            except Exception:  # never the writer's end: answers would queue with no reader
                self.errors += len(entries)
                log.exception("query log entries not written")
            for i in items:
                if isinstance(i, threading.Event):
                    i.set()
                elif i is None:
                    stop = True
