"""The query log is bounded in bytes as well as rows (``feedback.query_log_max_mb``): a server
logged 38 MB in 20 minutes in a user trial, and questions of whole issues are up to 64 KiB each.
Past the bound the oldest unrated answers go first; rated ones stay (the adaptation learns from
them); 0 keeps no log, and feedback then says why it cannot name an answer. Both stores: the
folder's SQLite and PostgreSQL."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ragloom.errors import UnknownIdError
from ragloom.server.feedback import FeedbackBase, FeedbackStore, QueryLogEntry, log_bytes
from ragloom.settings import Settings, load_settings

BOUND = 64_000
"""Bytes: the log is pruned once a twentieth of it is written, to 90 % of it."""
QUESTION = 1000
"""Characters of each question (a short issue text)."""


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[FeedbackBase]:
    if request.param == "sqlite":
        made: FeedbackBase = FeedbackStore(tmp_path)
    else:
        from ragloom.index.postgres import PostgresBackend
        from ragloom.server.feedback_pg import PgFeedbackStore

        dsn = request.getfixturevalue("pg_dsn")
        PostgresBackend(dsn, "repo", create=True).close()
        made = PgFeedbackStore(dsn, "repo")
    made.max_log_bytes = BOUND
    try:
        yield made
    finally:
        made.close()


def _answer(i: int) -> QueryLogEntry:
    return QueryLogEntry(
        f"q{i:04d}", "search", f"{i:04d} " + "x" * QUESTION, "hybrid", 1, ("c1", "c2"), 1e9 + i
    )


def test_the_log_stays_within_its_bytes_and_keeps_rated_answers(store: FeedbackBase) -> None:
    store.log_queries([_answer(0)])
    store.record_feedback("q0000", "c1", "helpful")
    for i in range(1, 400):  # 400 KB of questions into a 64 KB log, a batch at a time
        store.log_queries([_answer(i)])
    kept = [i for i in range(400) if store.query(f"q{i:04d}") is not None]
    held = sum(_answer(i).size() for i in kept)
    assert held <= BOUND, f"{held} bytes kept, the bound is {BOUND}"
    assert held >= BOUND * 0.5, "pruned far below the bound"
    assert 0 in kept, "a rated answer was pruned"
    newest = [i for i in kept if i]
    assert newest == list(range(newest[0], 400)), "not the oldest unrated answers that went"


def test_zero_keeps_no_log_and_feedback_says_why(store: FeedbackBase) -> None:
    store.max_log_bytes = 0
    store.log_queries([_answer(1)])
    assert store.query("q0001") is None
    with pytest.raises(UnknownIdError, match="query log is off"):
        store.record_feedback("q0001", "c1", "helpful")


def test_the_setting(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert log_bytes(Settings()) == 256 * 2**20
    monkeypatch.setenv("RAGLOOM_FEEDBACK__QUERY_LOG_MAX_MB", "0.5")
    assert log_bytes(load_settings(tmp_path).settings) == 2**19
    monkeypatch.setenv("RAGLOOM_FEEDBACK__QUERY_LOG_MAX_MB", "-1")
    with pytest.raises(Exception, match="query_log_max_mb"):
        load_settings(tmp_path)


def test_the_cli_logs_nothing_when_the_log_is_off(tmp_path: Path) -> None:
    from tests.conftest import copy_stdlib_packages, run_cli

    root = copy_stdlib_packages(tmp_path / "repo", ["json"])
    run_cli("index", str(root), "--model", "hashing:64", check=True)
    on = run_cli("search", "decode json", "--index-dir", str(root / ".ragloom"), "--json")
    assert '"query_id"' in on.stdout
    (root / "ragloom.toml").write_text("[feedback]\nquery_log_max_mb = 0\n")
    t0 = time.time()
    off = run_cli("search", "decode json", "--index-dir", str(root / ".ragloom"), "--json")
    assert off.returncode == 0, off.stderr
    # the field stays, null (a script reads the same keys whatever the setting)
    assert all(h["query_id"] is None for h in json.loads(off.stdout))
    ctx = run_cli("context", "decode json", "--index-dir", str(root / ".ragloom"), "--json")
    assert json.loads(ctx.stdout)["query_id"] is None
    store = FeedbackStore(root / ".ragloom")
    try:
        assert not [a for a in store.rated_answers() if a["ts"] >= t0]
        n = store._db.execute("SELECT count(*) FROM query_log WHERE ts >= ?", (t0,)).fetchone()
        assert n == (0,)
    finally:
        store.close()
