"""``ragloom feedback``: rate the chunks of an answer, record which were used, read the stats.

Feedback names the ``query_id`` of an answer (every answer of ``ragloom serve`` carries one,
and ``ragloom search --json`` / ``ragloom context --json`` log theirs too); it is kept in the
index folder's ``feedback.sqlite`` (:mod:`ragloom.server.feedback`), which a rebuild keeps, or
with ``--backend postgres`` in the database's feedback tables (:mod:`ragloom.server.feedback_pg`),
shared with every ragloom server of that database.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ragloom.cli.app import echo_json, handle_errors
from ragloom.cli.backend import backend_options, open_read
from ragloom.errors import IndexNotFoundError
from ragloom.retrieve.reader import DB_NAME
from ragloom.server.feedback import RATINGS, FeedbackBase, FeedbackStore

__all__ = ["feedback_group"]

_INDEX_DIR = click.option(
    "--index-dir", type=click.Path(path_type=Path), help="Index folder [nearest .ragloom]."
)


def feedback_store(idx: Any, *, reading: bool = False) -> FeedbackBase:
    """The feedback store of an opened index: the database's tables for a
    :class:`~ragloom.api.PostgresIndex`, else the folder's ``feedback.sqlite``; ``reading``
    (statistics): a folder nobody may write (a read-only mount) is read as it is."""
    import os

    from ragloom.api import PostgresIndex

    if isinstance(idx, PostgresIndex):
        return idx.open_feedback()
    if not (idx.index_dir / DB_NAME).exists():
        raise IndexNotFoundError(
            f"no index at {idx.index_dir}; create one with `ragloom index {idx.root}`"
        )
    return FeedbackStore(idx.index_dir, readonly=reading and not os.access(idx.index_dir, os.W_OK))


def _store(
    index_dir: Path | None,
    backend: str | None,
    dsn: str | None,
    repo: str | None,
    *,
    reading: bool = False,
) -> FeedbackBase:
    idx = open_read(index_dir, backend, dsn, repo)
    try:
        return feedback_store(idx, reading=reading)
    finally:
        idx.close()  # the store has its own connection; the index's is not needed


@click.group("feedback")
def feedback_group() -> None:
    """Relevance feedback on answers: add ratings, record used chunks, show statistics."""


@feedback_group.command("add")
@click.argument("query_id")
@click.argument("chunk_id")
@click.option(
    "--rating", required=True, type=click.Choice(list(RATINGS)), help="How useful the chunk was."
)
@click.option("--comment", default=None, help="Free text kept with the rating.")
@_INDEX_DIR
@click.option("--json", "as_json", is_flag=True, help="Print the stored record as JSON.")
@backend_options
@handle_errors
def feedback_add_cmd(
    query_id: str,
    chunk_id: str,
    rating: str,
    comment: str | None,
    index_dir: Path | None,
    as_json: bool,
    backend: str | None = None,
    dsn: str | None = None,
    repo: str | None = None,
) -> None:
    """Rate CHUNK_ID in the answer QUERY_ID."""
    store = _store(index_dir, backend, dsn, repo)
    try:
        record = store.record_feedback(query_id, chunk_id, rating, comment)
    finally:
        store.close()
    if as_json:
        echo_json(record)
        return
    where = "" if record["in_results"] else " (not among the answer's hits)"
    click.echo(f"recorded {rating} for {chunk_id} in {query_id}{where}")


@feedback_group.command("used")
@click.argument("query_id")
@click.argument("chunk_ids", nargs=-1, required=True)
@_INDEX_DIR
@backend_options
@handle_errors
def feedback_used_cmd(
    query_id: str,
    chunk_ids: tuple[str, ...],
    index_dir: Path | None,
    backend: str | None = None,
    dsn: str | None = None,
    repo: str | None = None,
) -> None:
    """Record that CHUNK_IDS of the answer QUERY_ID were used."""
    store = _store(index_dir, backend, dsn, repo)
    try:
        out = store.track_context_usage(query_id, list(chunk_ids))
    finally:
        store.close()
    n = len(out["used_chunk_ids"])
    click.echo(f"{n} chunk{'' if n == 1 else 's'} recorded as used for {query_id}")


@feedback_group.command("stats")
@click.argument("query_id", required=False)
@_INDEX_DIR
@click.option("--json", "as_json", is_flag=True, help="Print the statistics as JSON.")
@backend_options
@handle_errors
def feedback_stats_cmd(
    query_id: str | None,
    index_dir: Path | None,
    as_json: bool,
    backend: str | None = None,
    dsn: str | None = None,
    repo: str | None = None,
) -> None:
    """Statistics of the feedback on the answer QUERY_ID; without one, of all the answers."""
    store = _store(index_dir, backend, dsn, repo, reading=True)
    try:
        stats = store.stats(query_id) if query_id is not None else store.summary()
    finally:
        store.close()
    if as_json:
        echo_json(stats)
        return
    avg = "-" if stats["avg_rating"] is None else f"{stats['avg_rating']:.2f}"
    ratings = (
        f"{stats['total']} ratings, {stats['helpful_count']} helpful, "
        f"{stats['partially_helpful_count']} partially helpful, "
        f"{stats['not_helpful_count']} not helpful, average {avg}"
    )
    if query_id is None:
        click.echo(
            f"{stats['answers']} answers logged, {stats['rated_answers']} rated or used; "
            f"{ratings}; {stats['used_chunks']} chunks used"
        )
        return
    click.echo(f"{query_id}: {ratings}; {len(stats['used_chunk_ids'])} chunks used")


def log_answer(
    idx: Any, route: str, query: str, strategy: str, generation: int, hit_ids: list[str]
) -> str | None:
    """Log a CLI answer in the query log so ``ragloom feedback`` can name it: its new
    ``query_id``, or None when the index folder cannot be written (feedback is optional; the
    answer is printed all the same)."""
    import time
    import uuid

    from ragloom.errors import DbError
    from ragloom.server.feedback import QueryLogEntry, log_bytes
    from ragloom.settings import find_config_root, load_settings

    bound = log_bytes(load_settings(find_config_root(Path(idx.root))).settings)
    if bound <= 0:  # the query log is off (feedback.query_log_max_mb = 0)
        return None
    qid = uuid.uuid4().hex
    entry = QueryLogEntry(
        qid, route, query, strategy, generation, tuple(hit_ids), time.time(), "cli"
    )
    try:
        store = feedback_store(idx)
        store.max_log_bytes = bound
        try:
            store.log_queries([entry])
        finally:
            store.close()
    except (DbError, IndexNotFoundError):
        return None
    return qid
