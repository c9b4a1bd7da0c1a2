"""The query log's background writer: batches gathered, nothing lost, flush and close prompt."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from ragloom.server.feedback import FeedbackStore, QueryLogEntry, QueryLogger


def _entry(i: int) -> QueryLogEntry:
    return QueryLogEntry(
        query_id=f"q{i}",
        route="search",
        query=f"question {i}",
        strategy="hybrid",
        generation=1,
        hit_ids=(f"c{i}",),
        ts=1000.0 + i,
    )


def test_entries_submitted_together_are_written_in_one_batch(tmp_path: Path) -> None:
    store = FeedbackStore(tmp_path)
    batches: list[int] = []
    write = store.log_queries
    store.log_queries = lambda entries: (batches.append(len(entries)), write(entries))[1]  # type: ignore[method-assign]
    logger = QueryLogger(store)
    try:
        for i in range(20):
            logger.submit(_entry(i))
        logger.flush()
        assert logger.written == 20 and logger.errors == 0
        assert all(store.query(f"q{i}") is not None for i in range(20))
        assert len(batches) <= 2  # gathered, not one write per answer
    finally:
        logger.close()
        store.close()


def test_flush_and_close_end_the_gathering_wait(tmp_path: Path, monkeypatch: object) -> None:
    import ragloom.server.feedback as fb

    fb_any: object = fb
    monkeypatch.setattr(fb_any, "QUERY_LOG_GATHER_S", 60.0)  # type: ignore[attr-defined]
    store = FeedbackStore(tmp_path)
    logger = QueryLogger(store)
    try:
        logger.submit(_entry(1))
        done = threading.Event()
        threading.Thread(target=lambda: (logger.flush(timeout=30.0), done.set())).start()
        assert done.wait(20.0), "flush waited for the whole gathering window"
        assert store.query("q1") is not None
        logger.submit(_entry(2))
        t = time.monotonic()
        logger.close()
        assert time.monotonic() - t < 20.0
        assert store.query("q2") is not None
    finally:
        store.close()
