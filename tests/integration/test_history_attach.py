"""A reader opened before the repository's first history sync ranks with the history once it
is synced, without a restart (a server started before ``ragloom index`` synced the commits;
docs/postgres.md, "Not done yet" until 2026-11-28). A history set by hand stays as set."""

from __future__ import annotations

from pathlib import Path

import pytest

import ragloom.retrieve.search as search_mod
from ragloom.api import Index, open_postgres
from tests.integration.test_adapt_repo import make_web_repo

pytestmark = pytest.mark.integration

MODEL = "hashing:64"
QUESTION = "Fix the session handling of the cookie"


def _follow(writer_index: object, reader: Index, monkeypatch: pytest.MonkeyPatch) -> None:
    retriever = reader.retriever
    assert retriever.history is None  # no commits synced yet
    monkeypatch.setattr(search_mod, "HISTORY_ATTACH_RECHECK_S", 0.0, raising=False)
    monkeypatch.setattr(search_mod, "HISTORY_ATTACH_MAX_WAIT_S", 0.0, raising=False)
    retriever._history_wait = 0.0
    reader.search(QUESTION, top_k=3)
    assert retriever.history is None  # looked, nothing there yet, no error
    writer_index.index()  # type: ignore[attr-defined]  # syncs the commits
    reader.search(QUESTION, top_k=3)
    assert retriever.history is not None and retriever.history.store.count() > 20
    retriever.history = None  # set by hand (an evaluation's arm): stays as set
    reader.search(QUESTION, top_k=3)
    assert retriever.history is None


def test_a_folder_reader_attaches_the_history_synced_after_it_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_web_repo(tmp_path / "web")
    with Index.at(root, embedder=MODEL) as writer:
        writer.index(history=False)
        with Index.at(root, embedder=MODEL) as reader:
            _follow(writer, reader, monkeypatch)


def test_a_postgres_reader_attaches_the_history_synced_after_it_opened(
    tmp_path: Path, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGLOOM_CACHE_DIR", str(tmp_path / "cache"))
    root = make_web_repo(tmp_path / "web")
    writer = open_postgres(root, dsn=pg_dsn, embedder=MODEL, create=True)
    try:
        writer.index(history=False)
        reader = open_postgres(root, dsn=pg_dsn, cache_dir=tmp_path / "node")
        try:
            _follow(writer, reader, monkeypatch)
        finally:
            reader.close()
    finally:
        writer.close()


def test_each_look_that_finds_no_history_doubles_the_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    now = [1000.0]

    class Clock:
        perf_counter = staticmethod(time.perf_counter)

        @staticmethod
        def monotonic() -> float:
            return now[0]

    root = make_web_repo(tmp_path / "web")
    with Index.at(root, embedder=MODEL) as idx:
        idx.index(history=False)
        retriever = idx.retriever
        monkeypatch.setattr(search_mod, "time", Clock)
        looks: list[float] = []

        def opener() -> None:
            looks.append(now[0])

        retriever.attach_history_later(opener)
        for _ in range(800):  # a query every 2 s for 1,600 s
            now[0] += 2.0
            retriever.search(QUESTION, top_k=1, strategy="sparse")
        waits = [b - a for a, b in zip([1000.0, *looks], looks, strict=False)]
        assert waits[:4] == [6.0, 10.0, 20.0, 40.0]  # 5 s, then doubling (a query every 2 s)
        assert waits[4:] == [80.0, 160.0, 320.0, 600.0]  # at most HISTORY_ATTACH_MAX_WAIT_S
