"""A serving engine follows a model switch made by another process (docs/serving.md, "A model
switch by another process"): ``ragloom index --model OTHER`` beside a running server.

Before, the server kept embedding its queries with the model it loaded and compared them with
the new model's vectors: hnswlib loaded a file of 128-d vectors as 64-d ones and answered every
dense query with nonsense, while ``status`` named the new model. The watching case is in
``test_serving_watch.py``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import ragloom
from ragloom.api import open_postgres
from ragloom.embed.base import HashingEmbedder
from ragloom.index.pg_embedded import EmbeddedPostgres
from ragloom.server.engine import ServingEngine
from ragloom.settings import Settings

pytestmark = pytest.mark.integration

OLD, NEW = "hashing:64", "hashing:128"
QUERIES = ["parse the header line", "join words with a separator", "count the tokens"]


def _tree(root: Path) -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "text.py").write_text(
        "def join_words(words, sep):\n    return sep.join(words)\n\n"
        "def count_tokens(text):\n    return len(text.split())\n"
    )
    (root / "pkg" / "headers.py").write_text(
        "def parse_header_line(line):\n    name, _, value = line.partition(':')\n"
        "    return name.strip(), value.strip()\n"
    )
    return root


def _dense(eng: ServingEngine, query: str) -> list[tuple[str, float]]:
    hits = eng.search(query, top_k=5, strategy="dense")["hits"]
    return [(h["id"], round(h["score"], 5)) for h in hits]


def _wait(cond: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_a_served_index_re_embedded_by_another_process_is_searched_with_its_new_model(
    tmp_path: Path,
) -> None:
    root = _tree(tmp_path / "repo")
    with ragloom.Index(root, root / ".ragloom", embedder=OLD) as idx:
        idx.index(history=False)
    with ServingEngine.open(root, Settings()) as eng:
        assert eng.switch_state()["query_model"] == HashingEmbedder(64).model_id
        assert _dense(eng, QUERIES[0])
        with ragloom.Index(root, root / ".ragloom", embedder=NEW) as idx:
            assert idx.index(history=False).model_changed
        after = {q: _dense(eng, q) for q in QUERIES}
        state = eng.status()["model_switch"]
        assert state["switches"] == 1 and state["error"] is None
        assert state["query_model"] == HashingEmbedder(128).model_id and state["dim"] == 128
    with ServingEngine.open(root, Settings()) as fresh:
        assert after == {q: _dense(fresh, q) for q in QUERIES}
        assert all(after.values())


def test_a_configured_model_that_is_not_the_index_s_any_more_is_reported(
    tmp_path: Path,
) -> None:
    """``embedding.model`` names the old model. A server starting now would refuse the index;
    a running one serves with the index's new model (its answers stay right) and says the
    settings disagree."""
    root = _tree(tmp_path / "repo")
    with ragloom.Index(root, root / ".ragloom", embedder=OLD) as idx:
        idx.index(history=False)
    settings = Settings()
    settings.embedding.model = OLD
    with ServingEngine.open(root, settings) as eng:
        with ragloom.Index(root, root / ".ragloom", embedder=NEW) as idx:
            idx.index(history=False)
        after = _dense(eng, QUERIES[0])
        state = eng.status()["model_switch"]
        assert state["query_model"] == HashingEmbedder(128).model_id
        assert "embedding.model hashing:64" in state["error"]
        assert "a restart with these settings would refuse" in state["error"]
    with ServingEngine.open(root, Settings()) as fresh:
        assert after == _dense(fresh, QUERIES[0]) and after


def test_a_model_that_cannot_be_loaded_turns_dense_off(tmp_path: Path) -> None:
    """The index's new model cannot be loaded here (a model folder this machine lacks): the
    server answers from BM25 alone and says why, rather than compare the old model's queries
    with the new model's vectors."""
    root = _tree(tmp_path / "repo")
    with ragloom.Index(root, root / ".ragloom", embedder=OLD) as idx:
        idx.index(history=False)
    with ServingEngine.open(root, Settings()) as eng:
        with ragloom.Index(root, root / ".ragloom", embedder=NEW) as idx:
            idx.index(history=False)
        manifest = root / ".ragloom" / "manifest.json"
        raw = json.loads(manifest.read_text())
        raw["embedding_spec"] = str(tmp_path / "gone-model")  # as if built elsewhere
        manifest.write_text(json.dumps(raw))
        assert eng.search(QUERIES[0], top_k=5, strategy="dense")["hits"] == []
        hybrid = eng.search(QUERIES[0], top_k=5)
        assert hybrid["hits"][0]["symbol"] == "parse_header_line"
        state = eng.status()["model_switch"]
        assert state["query_model"] is None and "cannot load" in state["error"]


def test_a_postgres_repository_re_embedded_by_another_process(
    tmp_path: Path, pg_server: EmbeddedPostgres
) -> None:
    root = _tree(tmp_path / "repo")
    dsn = pg_server.create_database("modelswitch")
    with open_postgres(root, dsn=dsn, repository="r", embedder=OLD, create=True) as idx:
        idx.index(history=False)
    eng = ServingEngine.open_postgres(dsn, "r", root, Settings(), cache_dir=tmp_path / "cache")
    try:
        assert _dense(eng, QUERIES[1])
        with open_postgres(root, dsn=dsn, repository="r", embedder=NEW) as idx:
            assert idx.index(history=False).model_changed
        _wait(lambda: bool(_dense(eng, QUERIES[1])) and eng.switch_state()["switches"] == 1,
              "the switch to be followed")  # fmt: skip
        assert eng.switch_state()["query_model"] == HashingEmbedder(128).model_id
        after = _dense(eng, QUERIES[1])
    finally:
        eng.close()
    fresh = ServingEngine.open_postgres(dsn, "r", root, Settings(), cache_dir=tmp_path / "c2")
    try:
        assert after == _dense(fresh, QUERIES[1])
    finally:
        fresh.close()


def test_an_open_index_says_it_was_re_embedded_by_another_process(tmp_path: Path) -> None:
    """The Python API's ``Index`` has no engine to follow the switch: its dense side finds
    nothing (rather than nonsense) and the answer says to open the index again."""
    root = _tree(tmp_path / "repo")
    with ragloom.Index(root, root / ".ragloom", embedder=OLD) as held:
        held.index(history=False)
        assert held.search(QUERIES[0], top_k=3, strategy="dense").hits
        with ragloom.Index(root, root / ".ragloom", embedder=NEW) as other:
            other.index(history=False)
        held.search(QUERIES[1], top_k=3)  # the seqlock's first attempt reads the old view
        res = held.search(QUERIES[2], top_k=3)
        assert any("re-embedded with another model" in n for n in res.notes)
        assert res.hits and held.search(QUERIES[0], top_k=3, strategy="dense").hits == []
