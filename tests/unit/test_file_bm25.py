"""BM25 over whole files (ragloom.index.file_bm25): keys, documents, the sync with both
generations, the reader's scores, and an engine that must be rebuilt."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import ragloom
from ragloom.index.bm25 import TantivyBm25
from ragloom.index.file_bm25 import (
    FILE_BM25_DIR,
    FileBm25Reader,
    add_pending_files,
    file_document,
    file_key,
    open_file_bm25,
    sync_file_bm25,
    sync_file_bm25_or_rebuild,
)
from ragloom.index.store import Store
from ragloom.index.tokenize import code_tokens
from tests.unit.test_store import mk


def _put(
    store: Store, path: str, texts: list[str], digest: str, *, generation: int | None = None
) -> None:
    chunks = [mk(path, f"f{i}", t, line=1 + 10 * i, fh=digest[0]) for i, t in enumerate(texts)]
    with store.transaction() as conn:
        store.replace_file(
            conn, path, chunks, file_hash=digest, size=1, mtime=0.0, language="python",
            source="code", generation=generation,
        )  # fmt: skip


@given(st.text(min_size=1), st.text(min_size=1), st.text(min_size=1))
def test_file_key_is_a_positive_63_bit_function_of_path_and_hash(
    path: str, h1: str, h2: str
) -> None:
    k = file_key(path, h1)
    assert 0 <= k < 2**63 and k == file_key(path, h1)
    if h1 != h2:
        assert k != file_key(path, h2)


def test_file_document_is_the_code_tokens_of_path_and_texts() -> None:
    doc = file_document("pkg/http_client.py", ["def parseHeader(): pass", "class Pool: ..."])
    words = doc.split()
    assert {"pkg", "http", "client", "parse", "header", "pool"} <= set(words)
    assert file_document("a.py", []) == " ".join(code_tokens("a.py"))


def test_sync_holds_one_document_per_file_and_is_idempotent(tmp_path: Path) -> None:
    store = Store(tmp_path / "db.sqlite")
    _put(store, "net/pool.py", ["def acquire(): pass", "def release_connection(): pass"], "a" * 32)
    _put(store, "net/dns.py", ["def resolve(host): pass"], "b" * 32)
    engine = TantivyBm25(tmp_path / FILE_BM25_DIR, create=True, fields=("body",))
    assert sync_file_bm25(store, engine) == 2
    assert sync_file_bm25(store, engine) == 0
    keys = {p: file_key(p, h) for p, h in store.file_hashes().items()}
    # the words of two chunks meet in one file document
    scores = engine.scores_of("acquire release connection", list(keys.values()))
    assert scores[keys["net/pool.py"]] > 0.0 == scores[keys["net/dns.py"]]
    with store.transaction() as conn:
        store.remove_file(conn, "net/dns.py")
    sync_file_bm25(store, engine)
    assert engine.doc_count() == 1 and engine.held_rowids().tolist() == [keys["net/pool.py"]]


def test_a_pending_generation_adds_its_versions_until_published(tmp_path: Path) -> None:
    store = Store(tmp_path / "db.sqlite")
    _put(store, "m.py", ["def vintage(): pass"], "a" * 32)
    engine = TantivyBm25(tmp_path / FILE_BM25_DIR, create=True, fields=("body",))
    sync_file_bm25(store, engine)
    with store.transaction() as conn:
        pending = store.begin_generation(conn)
    _put(store, "m.py", ["def modern(): pass"], "c" * 32, generation=pending)
    published, pend = store.file_versions()
    assert published == {"m.py": "a" * 32} and pend == {"m.py": "c" * 32}
    assert sync_file_bm25(store, engine) == 1
    old, new = file_key("m.py", "a" * 32), file_key("m.py", "c" * 32)
    assert set(engine.held_rowids().tolist()) == {old, new}
    # each version is the text its generation shows
    assert (
        engine.scores_of("vintage", [old, new])[new]
        == 0.0
        < engine.scores_of("vintage", [old])[old]
    )
    assert engine.scores_of("modern", [new])[new] > 0.0
    store.publish()
    sync_file_bm25(store, engine)
    assert engine.held_rowids().tolist() == [new]


def test_the_indexer_keeps_the_file_engine_and_the_reader_scores_files(tmp_path: Path) -> None:
    (tmp_path / "pool.py").write_text(
        "def acquire():\n    return 1\n\n\ndef release_connection():\n    return 2\n"
    )
    (tmp_path / "dns.py").write_text("def resolve(host):\n    return host\n")
    index = ragloom.open(tmp_path, embedder="hashing")
    index.index(history=False)
    retriever = index.retriever
    scores = retriever.file_bm25_scores("acquire release", ["pool.py", "dns.py", "gone.py"])
    assert scores is not None and set(scores) == {"pool.py", "dns.py"}
    assert scores["pool.py"] > 0.0 == scores["dns.py"]
    (tmp_path / "dns.py").write_text("def resolve(host):\n    return acquire(host)\n")
    index.index(history=False)
    again = index.retriever.file_bm25_scores("acquire", ["pool.py", "dns.py"])
    assert again is not None and again["dns.py"] > 0.0
    engine = open_file_bm25(tmp_path / ".ragloom")
    assert engine is not None and engine.doc_count() == 2
    index.close()


def test_an_unusable_engine_is_rebuilt_from_the_store(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = Store(tmp_path / "db.sqlite")
    _put(store, "a.py", ["def alpha(): pass"], "a" * 32)
    sync_file_bm25_or_rebuild(store, tmp_path)
    meta = tmp_path / FILE_BM25_DIR / "engine" / "meta.json"
    meta.write_text("{ not json")
    with caplog.at_level(logging.WARNING, logger="ragloom.index"):
        assert sync_file_bm25_or_rebuild(store, tmp_path) == 1
    assert "rebuilding" in caplog.text
    engine = open_file_bm25(tmp_path)
    assert engine is not None and engine.doc_count() == 1


def test_the_reader_reads_the_keys_once_per_generation(tmp_path: Path) -> None:
    store = Store(tmp_path / "db.sqlite")
    _put(store, "a.py", ["def alpha(): pass"], "a" * 32)
    sync_file_bm25_or_rebuild(store, tmp_path)
    engine = open_file_bm25(tmp_path)
    assert engine is not None
    calls = []

    def files() -> dict[str, str]:
        calls.append(1)
        return store.file_hashes()

    reader = FileBm25Reader(engine, files)
    assert reader.scores("alpha", ["a.py"], 1)["a.py"] > 0
    assert reader.scores("beta", ["a.py"], 1) == {"a.py": 0.0}
    assert len(calls) == 1
    reader.scores("alpha", ["a.py"], 2)
    assert len(calls) == 2


def test_an_index_without_the_file_engine_has_no_scores(tmp_path: Path) -> None:
    assert open_file_bm25(tmp_path) is None
    (tmp_path / "a.py").write_text("def alpha():\n    return 1\n")
    index = ragloom.open(tmp_path, embedder="hashing")
    index.index(history=False)
    index.close()
    import shutil

    shutil.rmtree(tmp_path / ".ragloom" / FILE_BM25_DIR)
    index = ragloom.open(tmp_path, embedder="hashing")
    assert index.retriever.file_bm25_scores("alpha", ["a.py"]) is None
    index.close()


def test_a_watchers_batch_reads_its_files_only_and_ends_as_a_full_sync(tmp_path: Path) -> None:
    store = Store(tmp_path / "db.sqlite")
    _put(store, "a.py", ["def alpha(): pass"], "a" * 32)
    _put(store, "b.py", ["def beta(): pass"], "b" * 32)
    _put(store, "c.py", ["def gamma(): pass"], "c" * 32)
    engine = TantivyBm25(tmp_path / FILE_BM25_DIR, create=True, fields=("body",))
    sync_file_bm25(store, engine)
    with store.transaction() as conn:
        pending = store.begin_generation(conn)
        store.remove_file(conn, "b.py", generation=pending)
    _put(store, "a.py", ["def alpha(): return 2"], "d" * 32, generation=pending)
    _put(store, "e.py", ["def epsilon(): pass"], "e" * 32, generation=pending)
    stale = add_pending_files(store, engine, ["a.py", "b.py", "e.py"])
    assert sorted(stale) == sorted([file_key("a.py", "a" * 32), file_key("b.py", "b" * 32)])
    held = set(engine.held_rowids().tolist())
    assert {file_key("a.py", "d" * 32), file_key("e.py", "e" * 32)} <= held
    assert set(stale) <= held  # readers of the published generation still find theirs
    store.publish()
    engine.apply([], stale)
    full = TantivyBm25(tmp_path / "full", create=True, fields=("body",))
    sync_file_bm25(store, full)
    assert sorted(engine.held_rowids().tolist()) == sorted(full.held_rowids().tolist())
    assert sync_file_bm25(store, engine) == 0


def test_the_watcher_path_of_the_indexer_keeps_the_engine_exact(tmp_path: Path) -> None:
    from ragloom.index.indexer import update_index

    (tmp_path / "a.py").write_text("def alpha():\n    return 1\n")
    (tmp_path / "b.py").write_text("def beta():\n    return 2\n")
    index = ragloom.open(tmp_path, embedder="hashing")
    index.index(history=False)
    index.close()
    (tmp_path / "a.py").write_text("def alpha():\n    return widget_total\n")
    (tmp_path / "b.py").unlink()
    idx_dir = tmp_path / ".ragloom"
    store = Store(idx_dir / "index.sqlite")
    update_index(tmp_path, idx_dir, store, None, recent_only=True)
    engine = open_file_bm25(idx_dir)
    assert engine is not None
    want = {file_key(p, h) for p, h in store.file_hashes().items()}
    assert set(engine.held_rowids().tolist()) == want and engine.doc_count() == 1
    (key,) = want
    assert engine.scores_of("widget total", [key])[key] > 0  # the new text of a.py
    store.close()


def test_the_sync_reports_its_progress(tmp_path: Path) -> None:
    store = Store(tmp_path / "db.sqlite")
    for i in range(3):
        _put(store, f"m{i}.py", [f"def f{i}(): pass"], f"{i}" * 32)
    seen: list[tuple[str, int, int]] = []
    assert sync_file_bm25_or_rebuild(store, tmp_path, lambda *a: seen.append(a)) == 3
    assert seen[0] == ("bm25-files", 0, 3) and seen[-1] == ("bm25-files", 3, 3)


def test_a_batch_without_a_pending_generation_replaces_nothing(tmp_path: Path) -> None:
    store = Store(tmp_path / "db.sqlite")
    _put(store, "a.py", ["def alpha(): pass"], "a" * 32)
    engine = TantivyBm25(tmp_path / FILE_BM25_DIR, create=True, fields=("body",))
    sync_file_bm25(store, engine)
    assert add_pending_files(store, engine, ["a.py"]) == []
    assert engine.held_rowids().tolist() == [file_key("a.py", "a" * 32)]
