import multiprocessing as mp
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from ragloom.errors import IncompatibleIndexError, IndexLockedError
from ragloom.index.bm25 import TantivyBm25
from ragloom.index.indexer import sync_bm25, sync_vectors
from ragloom.index.lock import WriteLock
from ragloom.index.manifest import Manifest, read_manifest, write_manifest
from ragloom.index.store import SCHEMA_VERSION, Store
from ragloom.index.vectors import HnswVectors
from ragloom.ingest.ids import chunk_id, text_hash
from ragloom.types import Chunk


def mk(path: str, symbol: str, text: str, line: int = 1, fh: str = "f") -> Chunk:
    return Chunk(
        id=chunk_id("code", path, symbol, "function"),
        source="code",
        path=path,
        symbol=symbol,
        kind="function",
        language="python",
        parent_id=None,
        start_byte=line * 10,
        end_byte=line * 10 + len(text),
        start_line=line,
        end_line=line + text.count("\n"),
        node_hash=text_hash(text),
        file_hash=fh * 32,
        text=text,
    )


def write(store: Store, path: str, chunks: list[Chunk]) -> tuple[int, int, int, int]:
    with store.transaction() as conn:
        return store.replace_file(
            conn,
            path,
            chunks,
            file_hash="f" * 32,
            size=1,
            mtime=0.0,
            language="python",
            source="code",
        )


def test_replace_file_keeps_rowid_of_unchanged_chunks(tmp_path: Path) -> None:
    store = Store(tmp_path / "db.sqlite")
    a, b = mk("m.py", "alpha", "def alpha(): pass"), mk("m.py", "beta", "def beta(): pass", 5)
    assert write(store, "m.py", [a, b]) == (2, 0, 0, 0)
    rows = {r.symbol: r.rowid for r in store.chunks_for_path("m.py")}
    moved_a = mk("m.py", "alpha", "def alpha(): pass", 40)
    changed_b = mk("m.py", "beta", "def beta(): return 2", 5)
    gamma = mk("m.py", "gamma", "def gamma(): pass", 60)
    assert write(store, "m.py", [changed_b, moved_a, gamma]) == (1, 1, 0, 1)
    after = {r.symbol: r for r in store.chunks_for_path("m.py")}
    assert after["alpha"].rowid == rows["alpha"] and after["alpha"].start_line == 40
    assert after["beta"].rowid != rows["beta"]
    assert write(store, "m.py", [gamma]) == (0, 0, 2, 1)
    assert store.chunk_count() == 1


def test_bm25_sync_is_a_set_difference_and_idempotent(tmp_path: Path) -> None:
    store = Store(tmp_path / "db.sqlite")
    write(
        store,
        "json/decoder.py",
        [mk("json/decoder.py", "JSONDecoder.decode", "def decode(self, s): return json")],
    )
    write(
        store,
        "http/client.py",
        [mk("http/client.py", "parse_headers", "def parse_headers(fp): pass")],
    )
    bm25 = TantivyBm25(tmp_path / "bm25", create=True)
    assert sync_bm25(store, bm25) == 2
    assert sync_bm25(store, bm25) == 0
    hits = bm25.search("parse http headers", 5)
    rows = store.chunks_by_rowids([r for r, _ in hits])
    assert rows[hits[0][0]].symbol == "parse_headers"
    assert bm25.search("?!", 5) == []
    with store.transaction() as conn:
        store.remove_file(conn, "http/client.py")
    sync_bm25(store, bm25)
    assert bm25.doc_count() == 1
    # a fresh handle reads the persisted state
    again = TantivyBm25(tmp_path / "bm25")
    assert again.doc_count() == 1 and len(again.rowids()) == 1


def test_vectors_sync_and_reload(tmp_path: Path) -> None:
    store = Store(tmp_path / "db.sqlite")
    chunks = [mk("a.py", f"f{i}", f"def f{i}(): return {i}", i * 3 + 1) for i in range(50)]
    write(store, "a.py", chunks)
    rng = np.random.default_rng(0)
    vecs = rng.normal(size=(50, 16)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    store.put_embeddings("m", ((c.node_hash, vecs[i]) for i, c in enumerate(chunks)))
    vectors = HnswVectors(tmp_path / "vec", 16)
    assert sync_vectors(store, vectors, "m") == 50
    top = vectors.search(vecs[7], 3)
    row = store.chunks_by_rowids([top[0][0]])[top[0][0]]
    assert row.symbol == "f7" and top[0][1] == pytest.approx(1.0, abs=1e-5)
    write(store, "a.py", chunks[:10])
    sync_vectors(store, vectors, "m")
    reloaded = HnswVectors(tmp_path / "vec", 16)
    assert reloaded.count() == 10
    assert all(store.chunks_by_rowids([r]) for r, _ in reloaded.search(vecs[3], 10))


def _hold_lock(index_dir: str, ready: "mp.synchronize.Event", stop: "mp.synchronize.Event") -> None:
    with WriteLock(Path(index_dir)):
        ready.set()
        stop.wait(10)


def test_second_writer_gets_index_locked(tmp_path: Path) -> None:
    ctx = mp.get_context("spawn")
    ready, stop = ctx.Event(), ctx.Event()
    proc = ctx.Process(target=_hold_lock, args=(str(tmp_path), ready, stop))
    proc.start()
    try:
        assert ready.wait(20)
        with pytest.raises(IndexLockedError, match="index is locked"):
            WriteLock(tmp_path).acquire()
    finally:
        stop.set()
        proc.join(10)
    with WriteLock(tmp_path):
        pass


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    Store(tmp_path / "db.sqlite").close()
    db = sqlite3.connect(tmp_path / "db.sqlite")
    db.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    db.close()
    with pytest.raises(IncompatibleIndexError, match="rebuild"):
        Store(tmp_path / "db.sqlite")


def test_manifest_roundtrip_and_incompatible_format(tmp_path: Path) -> None:
    m = Manifest.new("..", "model", 384, "default")
    write_manifest(tmp_path, m)
    assert read_manifest(tmp_path) == m
    assert (tmp_path / ".gitignore").read_text() == "*\n"
    raw = (
        (tmp_path / "manifest.json")
        .read_text()
        .replace('"format_version": 1', '"format_version": 99')
    )
    (tmp_path / "manifest.json").write_text(raw)
    with pytest.raises(IncompatibleIndexError, match="ragloom index PATH --rebuild"):
        read_manifest(tmp_path)
