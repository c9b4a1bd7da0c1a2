"""Store generations (docs/consistency.md): an update is written beside the published
generation, readers see it only once published, an unpublished one is rolled back, and replaced
rows are collected with their embeddings."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from ragloom.errors import IncompatibleIndexError
from ragloom.index.bm25 import TantivyBm25
from ragloom.index.indexer import sync_bm25
from ragloom.index.store import MIGRATIONS, SCHEMA_VERSION, Store
from ragloom.retrieve.search import GenerationView, Retriever, _visible_top
from ragloom.types import Chunk
from tests.unit.test_store import mk  # one chunk factory for the store tests


def write_gen(store: Store, files: dict[str, list[Chunk]], removed: tuple[str, ...] = ()) -> int:
    with store.transaction() as conn:
        gen = store.begin_generation(conn)
        for path, chunks in files.items():
            store.replace_file(
                conn,
                path,
                chunks,
                file_hash=chunks[0].file_hash if chunks else "0" * 32,
                size=1,
                mtime=float(gen),
                language="python",
                source="code",
                generation=gen,
            )
        for path in removed:
            store.remove_file(conn, path, generation=gen)
    return gen


def symbols(store: Store) -> set[str]:
    return {s for s, _, _ in store.symbol_table()}


def test_pending_generation_is_invisible_until_published(tmp_path: Path) -> None:
    writer = Store(tmp_path / "db.sqlite")
    alpha = mk("a.py", "alpha", "def alpha(): pass")
    beta = mk("a.py", "beta", "def beta(): pass", 5)
    write_gen(writer, {"a.py": [alpha, beta], "b.py": [mk("b.py", "gone", "def gone(): 1")]})
    assert writer.publish() == 1
    reader = Store(tmp_path / "db.sqlite", readonly=True)
    before = {r.symbol: r for r in reader.chunks_for_path("a.py")}

    # generation 2: alpha moves (same text), beta changes, gamma is new, b.py goes
    moved = mk("a.py", "alpha", "def alpha(): pass", 40, fh="g")
    changed = mk("a.py", "beta", "def beta(): return 2", 5, fh="g")
    gamma = mk("a.py", "gamma", "def gamma(): pass", 60, fh="g")
    gen = write_gen(writer, {"a.py": [changed, moved, gamma]}, removed=("b.py",))
    assert gen == 2 and writer.pending_generation() == 2
    # readers still see generation 1, exactly
    assert reader.published() == (1, 3) and reader.generation() == 1
    assert symbols(reader) == {"alpha", "beta", "gone"} and reader.chunk_count() == 3
    now = {r.symbol: r for r in reader.chunks_for_path("a.py")}
    assert now == before  # alpha's old position, beta's old row
    assert set(reader.files()) == {"a.py", "b.py"}
    assert reader.files()["a.py"].mtime == 1.0
    assert reader.chunks_by_ids([changed.id])[changed.id].rowid == before["beta"].rowid
    assert len(reader.all_rowids()) == 3
    # BM25 must hold both generations meanwhile
    assert len(writer.wanted_rowids()) == 5

    assert writer.publish() == 2
    assert reader.generation() == 2 and reader.chunk_count() == 3
    after = {r.symbol: r for r in reader.chunks_for_path("a.py")}
    assert after["alpha"].rowid == before["alpha"].rowid and after["alpha"].start_line == 40
    assert after["alpha"].file_hash == "g" * 32
    assert after["beta"].rowid != before["beta"].rowid
    assert set(reader.files()) == {"a.py"} and reader.files()["a.py"].mtime == 2.0
    hidden = reader.hidden_rowids(2)
    assert sorted(hidden) == sorted([before["beta"].rowid, 3])
    assert reader.hidden_rowids(1) == []
    assert writer.collect_removed() == (2, 0)
    assert reader.hidden_rowids(2) == [] and len(writer.wanted_rowids()) == 3


def test_unpublished_generation_is_rolled_back(tmp_path: Path) -> None:
    store = Store(tmp_path / "db.sqlite")
    a = mk("a.py", "alpha", "def alpha(): pass")
    write_gen(store, {"a.py": [a]})
    store.publish()
    bm25 = TantivyBm25(tmp_path / "bm25", create=True)
    sync_bm25(store, bm25)
    write_gen(store, {"a.py": [mk("a.py", "alpha", "def alpha(): return 1", fh="g")]})
    sync_bm25(store, bm25)  # the killed run got this far
    assert len(bm25.held_rowids()) == 2
    assert store.rollback_pending() == 1
    assert store.pending_generation() is None and store.generation() == 1
    assert [r.node_hash for r in store.chunks_for_path("a.py")] == [a.node_hash]
    assert store.rollback_pending() == 0
    sync_bm25(store, bm25)
    assert bm25.held_rowids().tolist() == store.all_rowids().tolist()
    # the next update hands out new rowids (never one the engines may still hold)
    write_gen(store, {"a.py": [mk("a.py", "alpha", "def alpha(): return 1", fh="g")]})
    store.publish()
    assert store.all_rowids().tolist() == [3]


def test_bm25_sidecar_out_of_step_is_read_from_the_engine(tmp_path: Path) -> None:
    d = tmp_path / "bm25"
    bm = TantivyBm25.reset(d)
    bm.apply([(i, f"doc {i}") for i in range(1, 4)], [])
    stale = (d / "rowids.npy").read_bytes()
    state = (d / "state.json").read_bytes()
    bm.apply([(9, "doc nine")], [])
    (d / "rowids.npy").write_bytes(stale)  # killed between the engine commit and the sidecar
    (d / "state.json").write_bytes(state)
    again = TantivyBm25(d)
    assert again.rowids().tolist() == [1, 2, 3]
    assert again.held_rowids().tolist() == [1, 2, 3, 9]
    fresh = TantivyBm25(d)
    fresh.apply([], [])
    assert TantivyBm25(d).held_rowids().tolist() == [1, 2, 3, 9]


def test_visible_top_fetches_deeper_past_other_generations() -> None:
    ranked = [(r, 1.0 / r) for r in range(1, 101)]
    calls: list[int] = []

    def search(n: int) -> list[tuple[int, float]]:
        calls.append(n)
        return ranked[:n]

    view = GenerationView(3, 50, frozenset(range(1, 40)))
    assert [r for r, _ in _visible_top(search, 5, view)] == [40, 41, 42, 43, 44]
    assert len(calls) > 1
    calls.clear()
    assert len(_visible_top(search, 5, GenerationView(3, 1000))) == 5 and calls == [5]
    assert [r for r, _ in _visible_top(search, 30, view)] == list(range(40, 51))


def test_retriever_answers_from_the_pinned_generation(tmp_path: Path) -> None:
    store = Store(tmp_path / "db.sqlite")
    write_gen(store, {"a.py": [mk("a.py", "old_parser", "def old_parser(): parse tokens")]})
    store.publish()
    bm25 = TantivyBm25(tmp_path / "bm25", create=True)
    sync_bm25(store, bm25)
    reader = Store(tmp_path / "db.sqlite", readonly=True)
    retriever = Retriever(reader, TantivyBm25(tmp_path / "bm25"), None, None)
    first = retriever.search("parse tokens", strategy="sparse")
    assert [h.symbol for h in first.hits] == ["old_parser"] and first.generation == 1
    write_gen(store, {"a.py": [mk("a.py", "new_parser", "def new_parser(): parse tokens")]})
    sync_bm25(store, bm25)  # BM25 holds both, the store has not published
    mid = retriever.search("parse tokens", strategy="sparse")
    assert [h.symbol for h in mid.hits] == ["old_parser"] and mid.generation == 1
    store.publish()
    sync_bm25(store, bm25)
    store.collect_removed()
    late = retriever.search("parse tokens", strategy="sparse")
    assert [h.symbol for h in late.hits] == ["new_parser"] and late.generation == 2


def _v1_database(path: Path) -> None:
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=WAL")
    db.executescript(MIGRATIONS[0])
    db.execute("PRAGMA user_version=1")
    for i in range(1, 21):
        row = (f"h{i}", "f", f"def s{i}(): pass")
        db.execute(
            "INSERT INTO chunks(id, path, symbol, kind, language, source, parent_id, "
            "start_byte, end_byte, start_line, end_line, node_hash, file_hash, text) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (f"id{i}", "a.py", f"s{i}", "function", "python", "code", None, 0, 1, 1, 2, *row),
        )
        db.execute(
            "INSERT INTO embeddings VALUES (?,?,?)",
            ("m", f"h{i}", np.ones(8, np.float32).tobytes()),
        )
    db.execute("DELETE FROM chunks WHERE rowid > 15")
    db.execute("INSERT INTO meta VALUES ('generation', '4')")
    db.commit()
    db.close()


def test_schema_1_index_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    _v1_database(path)
    with pytest.raises(IncompatibleIndexError, match="run `ragloom index PATH` to migrate"):
        Store(path, readonly=True)
    store = Store(path)
    assert store.schema_version() == SCHEMA_VERSION == 3
    assert store.published() == (4, 15) and store.chunk_count() == 15
    assert store.chunks_by_rowids([3])[3].symbol == "s3"
    assert int(store._db.execute("PRAGMA auto_vacuum").fetchone()[0]) == 2  # incremental
    # rowids 16..20 were handed out before: never again
    write_gen(store, {"b.py": [mk("b.py", "new", "def new(): pass")]})
    store.publish()
    assert store.chunks_for_path("b.py")[0].rowid == 21
    # the first prune sweeps the embeddings no chunk uses
    assert store.prune_stale_embeddings("m") == 5
    assert store.prune_stale_embeddings("m") == 0
    Store(path, readonly=True).close()
