"""Relevance feedback and the query log in PostgreSQL (the postgres backend, docs/postgres.md).

The same operations and checks as the folder's ``feedback.sqlite``
(:class:`ragloom.server.feedback.FeedbackBase`), kept in the database's ``query_log``,
``feedback`` and ``context_usage`` tables (migration 3), keyed by repository. Every ragloom
server of a team writes to the same tables, so an answer given by one server can be rated
through another (a load balancer does not send a client back to the same node), and the
ratings outlive any node.

One autocommit connection of its own, guarded by a lock: feedback writes are single short
statements and never wait behind an indexer's update transaction (which touches other tables).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from ragloom.errors import DbError, IndexNotFoundError
from ragloom.server.feedback import (
    LOGGED_COLS,
    QUERY_LOG_MAX_ROWS,
    FeedbackBase,
    NewRating,
    QueryLogEntry,
)

__all__ = ["PgFeedbackStore"]

SIGNALS: Final[dict[str, int]] = {"helpful": 1, "partially_helpful": 0, "not_helpful": -1}
"""Migration 2's ``feedback.signal`` column (+1 / -1) for a rating."""


class PgFeedbackStore(FeedbackBase):
    """Feedback of one repository in a PostgreSQL database."""

    def __init__(self, dsn: str, repository: str) -> None:
        import psycopg

        from ragloom.index.postgres import connect
        from ragloom.server.feedback import QUERY_LOG_GATHER_S

        self.repository = repository
        super().__init__()
        # every other server (or worker) on the database logs its answers up to a gathering
        # interval late: a rating through this one of an answer it did not give waits for
        # them, whatever this server's own worker count (`--workers 1` answered 404)
        self.lookup_wait_s = 3 * QUERY_LOG_GATHER_S
        self._conn = connect(dsn, app="ragloom-feedback")
        try:
            row = self._conn.execute(
                "SELECT id FROM repositories WHERE name = %s", (repository,)
            ).fetchone()
        except psycopg.Error as exc:
            self._conn.close()
            raise DbError(f"cannot open feedback in PostgreSQL: {exc}") from exc
        if row is None:
            self._conn.close()
            raise IndexNotFoundError(f"no repository {repository!r} in this PostgreSQL database")
        self.repo_id = int(row[0])

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def _db_error(self) -> type[Exception]:
        import psycopg

        return psycopg.Error

    def _run(self, what: str, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        with self._guarded(what):
            cur = self._conn.execute(sql, params)
            return cur.fetchall() if cur.description else []

    # -- query log ----------------------------------------------------------------------
    def _insert_log(self, entries: Sequence[QueryLogEntry]) -> None:
        with self._conn.transaction(), self._conn.cursor() as cur:
            cur.executemany(
                f"INSERT INTO query_log(repo_id, {LOGGED_COLS}, hits, latency_ms) VALUES "
                "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (repo_id, query_id) WHERE query_id IS NOT NULL DO NOTHING",
                [
                    (self.repo_id, *e.logged(list(e.hit_ids)), len(e.hit_ids), e.latency_ms)
                    for e in entries
                ],
            )

    def _prune(self) -> None:
        size = "octet_length(q.query) + octet_length(q.hit_ids::text)"
        row = self._conn.execute(
            f"SELECT count(*), coalesce(sum({size}), 0) FROM query_log q WHERE q.repo_id = %s",
            (self.repo_id,),
        ).fetchone()
        extra = int(row[0]) - QUERY_LOG_MAX_ROWS if row else 0
        free = self._bytes_to_free(int(row[1])) if row else 0
        unrated = (
            "q.repo_id = %s AND NOT EXISTS (SELECT 1 FROM feedback f WHERE f.repo_id = q.repo_id "
            "AND f.query_id = q.query_id)"
        )
        if extra > 0:
            self._conn.execute(
                f"DELETE FROM query_log WHERE id IN (SELECT q.id FROM query_log q WHERE {unrated} "
                "ORDER BY q.ts LIMIT %s)",
                (self.repo_id, extra),
            )
        if free > 0:  # the oldest unrated answers whose sizes add up to ``free``
            self._conn.execute(
                "DELETE FROM query_log WHERE id IN (SELECT id FROM (SELECT q.id, "
                f"{size} AS size, sum({size}) OVER (ORDER BY q.ts, q.id ROWS UNBOUNDED "
                f"PRECEDING) AS run FROM query_log q WHERE {unrated}) t WHERE run - size < %s)",
                (self.repo_id, free),
            )

    def _query_row(self, query_id: str) -> tuple[Any, ...] | None:
        rows = self._run(
            "read the query log",
            f"SELECT {LOGGED_COLS} FROM query_log WHERE repo_id = %s AND query_id = %s",
            (self.repo_id, query_id),
        )
        if not rows:
            return None
        r = rows[0]
        return (*r[:5], int(r[5]), list(r[6]), r[7])

    # -- feedback -----------------------------------------------------------------------
    def _insert_feedback(self, new: NewRating) -> int:
        logged = self.query(new.query_id)
        rows = self._run(
            "store feedback",
            "INSERT INTO feedback(repo_id, query, chunk_id, signal, query_id, rating, comment, "
            "in_results, ts) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
            (
                self.repo_id,
                logged["query"] if logged else "",
                new.chunk_id,
                SIGNALS[new.rating],
                new.query_id,
                new.rating,
                new.comment,
                new.in_results,
                new.ts,
            ),
        )
        return int(rows[0][0])

    def _feedback_rows(self, query_id: str) -> list[tuple[Any, ...]]:
        return self._run(
            "read feedback",
            "SELECT id, chunk_id, rating, comment, ts, in_results FROM feedback "
            "WHERE repo_id = %s AND query_id = %s ORDER BY id",
            (self.repo_id, query_id),
        )

    def _insert_usage(self, query_id: str, chunk_ids: Sequence[str], ts: float) -> None:
        with (
            self._guarded("store context usage"),
            self._conn.transaction(),
            self._conn.cursor() as cur,
        ):
            cur.executemany(
                "INSERT INTO context_usage(repo_id, query_id, chunk_id, ts) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
                [(self.repo_id, query_id, c, ts) for c in chunk_ids],
            )

    def _used(self, query_id: str) -> list[str]:
        rows = self._run(
            "read context usage",
            "SELECT chunk_id FROM context_usage WHERE repo_id = %s AND query_id = %s "
            "ORDER BY ts, chunk_id",
            (self.repo_id, query_id),
        )
        return [str(r[0]) for r in rows]

    def _rating_counts(self, query_id: str) -> dict[str, int]:
        rows = self._run(
            "read feedback",
            "SELECT rating, count(*) FROM feedback WHERE repo_id = %s AND query_id = %s "
            "AND rating IS NOT NULL GROUP BY rating",
            (self.repo_id, query_id),
        )
        return {str(r): int(n) for r, n in rows}

    def _totals(self) -> tuple[int, int, dict[str, int]]:
        key = (self.repo_id,)
        logged = self._run("read the query log",
                           "SELECT count(*) FROM query_log WHERE repo_id = %s", key)  # fmt: skip
        used = self._run("read context usage",
                         "SELECT count(*) FROM context_usage WHERE repo_id = %s", key)  # fmt: skip
        rows = self._run(
            "read feedback",
            "SELECT rating, count(*) FROM feedback WHERE repo_id = %s AND rating IS NOT NULL "
            "GROUP BY rating",
            key,
        )
        return int(logged[0][0]), int(used[0][0]), {str(r): int(n) for r, n in rows}

    def _rated_query_ids(self, since: float) -> list[str]:
        rows = self._run(
            "read rated answers",
            "SELECT q.query_id FROM query_log q WHERE q.repo_id = %s AND (EXISTS (SELECT 1 FROM "
            "feedback f WHERE f.repo_id = q.repo_id AND f.query_id = q.query_id AND f.ts >= %s "
            "AND f.rating IS NOT NULL) OR EXISTS (SELECT 1 FROM context_usage u WHERE "
            "u.repo_id = q.repo_id AND u.query_id = q.query_id AND u.ts >= %s)) "
            "ORDER BY q.ts, q.query_id",
            (self.repo_id, since, since),
        )
        return [str(r[0]) for r in rows]
