"""A serving engine that follows its work tree (issue 23, items 1, 2 and 5): edits reach
answers without a re-index request, a ``git checkout`` under running queries never shows a
half-applied state, and answers say when an edit was pending.

Real files, the real watcher (``watchfiles``), a real ``git``; the hashing embedder. Every wait
is a poll with a generous deadline.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import ragloom
from ragloom.embed.base import HashingEmbedder
from ragloom.server.engine import ServingEngine
from ragloom.settings import Settings

pytestmark = pytest.mark.integration

DEADLINE_S = 30.0
EMB = HashingEmbedder(64)


def wait_for(cond: Callable[[], bool], what: str, timeout: float = DEADLINE_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def git(root: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    out = subprocess.run(
        ["git", "-C", str(root), *args], check=True, capture_output=True, text=True, env=env
    )
    return out.stdout


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[ServingEngine]:
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "mod.py").write_text("def original_helper(x):\n    return x + 1\n")
    with ragloom.Index(root, root / ".ragloom", embedder=EMB) as idx:
        idx.index(history=False)
    eng = ServingEngine.open(root, Settings(), embedder=EMB)
    try:
        yield eng
    finally:
        eng.close()


def symbols(eng: ServingEngine, query: str) -> set[str]:
    return {h["symbol"] for h in eng.search(query, top_k=10, strategy="sparse")["hits"]}


def test_an_edit_reaches_answers_and_answers_say_pending(engine: ServingEngine) -> None:
    assert engine.start_watching(debounce_ms=100)
    wait_for(lambda: engine.watch_state()["ready"], "the update at start")
    first = engine.search("original_helper", top_k=5)
    assert first["pending_changes"] is False
    (engine.root / "pkg" / "mod.py").write_text(
        "def original_helper(x):\n    return x + 1\n\ndef freshly_added_walrus():\n    pass\n"
    )
    wait_for(lambda: "freshly_added_walrus" in symbols(engine, "freshly_added_walrus"), "the edit")
    # the batch is published before the watcher counts it: wait for the count too
    wait_for(lambda: engine.watch_state()["batches"] >= 1, "the batch to be counted")
    state = engine.watch_state()
    assert state["watching"] and state["batches"] >= 1
    assert state["last_batch"]["paths"] == ["pkg/mod.py"]
    assert engine.status()["watch"]["watching"] is True
    # an answer read from a generation older than the watcher's last publication says so
    assert engine._may_miss_a_change(state["generation"] - 1)
    assert not engine._may_miss_a_change(state["generation"])
    engine.stop_watching()
    assert engine.watch_state()["watching"] is False


def test_a_checkout_under_queries_shows_one_generation_per_answer(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    git(root.parent, "init", "-q", "-b", "main", str(root))
    for i in range(40):
        (root / "pkg" / f"m{i}.py").write_text(f"def main_function_{i}():\n    return {i}\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "main")
    git(root, "checkout", "-q", "-b", "other")
    for i in range(40):
        (root / "pkg" / f"m{i}.py").write_text(f"def other_function_{i}():\n    return {i}\n")
    git(root, "commit", "-q", "-am", "other")
    git(root, "checkout", "-q", "main")
    with ragloom.Index(root, root / ".ragloom", embedder=EMB) as idx:
        idx.index(history=False)
    eng = ServingEngine.open(root, Settings(), embedder=EMB)
    errors: list[BaseException] = []
    mixed: list[tuple[int, set[str]]] = []
    stop = threading.Event()

    def ask() -> None:
        while not stop.is_set():
            try:
                ans = eng.search("function return", top_k=80, strategy="sparse")
            except BaseException as exc:  # any error fails the test
                errors.append(exc)
                return
            kinds = {h["symbol"].split("_")[0] for h in ans["hits"]}
            if len(kinds) > 1:  # both branches in one answer: a half-applied state
                mixed.append((ans["generation"], kinds))

    try:
        assert eng.start_watching(debounce_ms=200)
        wait_for(lambda: eng.watch_state()["ready"], "the update at start")
        threads = [threading.Thread(target=ask) for _ in range(2)]
        for t in threads:
            t.start()

        def branches() -> set[str]:
            hits = eng.search("function return", top_k=80, strategy="sparse")["hits"]
            return {h["symbol"].split("_")[0] for h in hits}

        git(root, "checkout", "-q", "other")
        wait_for(lambda: branches() == {"other"}, "the checkout to be applied")
        git(root, "checkout", "-q", "main")
        wait_for(lambda: branches() == {"main"}, "the checkout back to be applied")
        stop.set()
        for t in threads:
            t.join(DEADLINE_S)
        assert not errors, errors
        assert not mixed, mixed[:3]
        assert eng.watch_state()["batches"] <= 6, "two checkouts are a few batches"
    finally:
        stop.set()
        eng.close()


def test_a_postgres_like_target_is_not_watched_and_no_watch_setting(engine: ServingEngine) -> None:
    s = Settings()
    assert s.server.watch is True  # on by default for a folder index
    engine.close()
    assert engine.start_watching() is False  # a closed engine starts nothing


def test_after_a_rebuild_the_new_reader_shares_its_vectors(
    engine: ServingEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rebuild from nothing (of a database it could not read) makes a new reader."""
    from ragloom.index.vectors import live_vectors

    monkeypatch.setattr(ragloom.Index, "_rebuildable", lambda self: False)

    assert engine.start_watching(debounce_ms=100)
    wait_for(lambda: engine.watch_state()["ready"], "the update at start")
    vec_dir = engine.index_dir / "vectors"
    assert live_vectors(vec_dir, EMB.dim) is engine._reader.retriever.vectors
    engine.stop_watching()  # a rebuild from another handle needs the write lock
    with ragloom.Index(engine.root, engine.index_dir, embedder=EMB) as idx:
        idx.index(rebuild=True, history=False)
    # the watcher was stopped, not forgotten: a new reader still takes over the sharing
    wait_for(lambda: engine.status()["epoch"] >= 2, "a new reader epoch for the rebuilt file")
    assert live_vectors(vec_dir, EMB.dim) is engine._reader.retriever.vectors


def test_a_graph_in_use_is_built_again_after_a_batch(engine: ServingEngine) -> None:
    assert engine.start_watching(debounce_ms=100)
    wait_for(lambda: engine.watch_state()["ready"], "the update at start")
    retriever = engine._reader.retriever
    assert retriever.cached_graph is None  # nobody asked: nothing is built in the background
    before = engine.graph("defs", "original_helper")
    assert before["definitions"] and retriever.cached_graph is not None
    (engine.root / "pkg" / "caller.py").write_text(
        "from pkg.mod import original_helper\n\ndef uses_it():\n    return original_helper(1)\n"
    )
    wait_for(lambda: engine.watch_state()["batches"] >= 1, "the batch")
    # the new generation's graph is made without a question asking for it
    wait_for(
        lambda: (
            retriever.cached_graph is not None
            and retriever.cached_graph.generation == engine.watch_state()["generation"]
        ),
        "the graph of the new generation",
    )
    callers = engine.graph("callers", "original_helper")["callers"]
    assert [c["symbol"] for c in callers] == ["uses_it"]
    engine.stop_watching()


def test_a_model_switch_by_another_process_is_followed(engine: ServingEngine) -> None:
    """``ragloom index --model OTHER`` while a watching server runs. The server's next batch
    used to switch the index back to its own model (deleting the new vectors), and its save
    at close wrote its old vectors over the new ones; the index was left with none. Later the
    batch was refused and the server kept its old model until restarted, comparing queries of
    one model with vectors of the other. Now it follows: it loads the new model, opens a new
    reader, and watches again with it, so the edit that met the refused batch is applied."""
    assert engine.start_watching(debounce_ms=100)
    wait_for(lambda: engine.watch_state()["ready"], "the update at start")
    other = HashingEmbedder(128)
    with ragloom.Index(engine.root, engine.index_dir, embedder=other) as idx:
        switched = idx.index(history=False)
    assert switched.model_changed
    (engine.root / "pkg" / "mod.py").write_text("def renamed_helper(x):\n    return x + 2\n")
    wait_for(lambda: engine.switch_state()["switches"] == 1, "the switch to be followed")
    state = engine.switch_state()
    assert state["query_model"] == other.model_id and state["dim"] == 128
    assert state["error"] is None
    wait_for(lambda: "renamed_helper" in symbols(engine, "renamed_helper"), "the edit")
    assert engine.watch_state()["watching"] and engine.watch_state()["error"] is None
    dense = engine.search("renamed_helper", top_k=3, strategy="dense")
    assert dense["hits"] and dense["hits"][0]["symbol"] == "renamed_helper"
    engine.close()
    with ragloom.Index(engine.root, engine.index_dir) as idx:
        st = idx.status(freshness=False)
        assert st.model == other.model_id and st.vectors == st.chunks > 0
        assert idx.search("renamed_helper", top_k=3, strategy="dense").hits
