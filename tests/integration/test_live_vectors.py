"""A live vector index (issue 23, item 2): a watching server's updates change the readers'
HNSW index in memory, without rewriting the file per edit or making readers load it again;
the file is written when the server saves it, and a file written by another process wins."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import ragloom
from ragloom.embed.base import HashingEmbedder
from ragloom.index.vectors import (
    HnswVectors,
    is_live,
    live_vectors,
    persist_live,
    share_live,
    unshare_live,
)

pytestmark = pytest.mark.integration
EMB = HashingEmbedder(32)


def _ident(path: Path) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_ino, st.st_mtime_ns


def test_updates_change_the_shared_index_in_memory_then_persist(tmp_path: Path) -> None:
    root = tmp_path / "r"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "a.py").write_text("def first_function():\n    return 1\n")
    vec_dir = root / ".ragloom" / "vectors"
    with ragloom.Index(root, root / ".ragloom", embedder=EMB) as idx:
        idx.index(history=False)
        reader = HnswVectors(vec_dir, EMB.dim)
        before = set(reader.rowids().tolist())
        file_before = _ident(vec_dir / "vectors.hnsw")
        share_live(reader)
        try:
            assert is_live(reader) and live_vectors(vec_dir, EMB.dim) is reader
            (root / "pkg" / "b.py").write_text("def second_function():\n    return 2\n")
            idx.index(history=False)
            # the reader's own object has the new vector; the file was not rewritten
            assert len(set(reader.rowids().tolist()) - before) == 1
            assert reader.dirty and _ident(vec_dir / "vectors.hnsw") == file_before
            assert reader.refreshed() is reader
            assert idx.status().vectors == reader.count()
            q = EMB.embed_query("second_function")
            assert reader.search(np.asarray(q, dtype=np.float32), 1)
            assert persist_live(vec_dir) is True
            assert not reader.dirty and reader.refreshed() is reader  # its own save
            assert _ident(vec_dir / "vectors.hnsw") != file_before
            on_disk = HnswVectors(vec_dir, EMB.dim)
            assert set(on_disk.rowids().tolist()) == set(reader.rowids().tolist())
        finally:
            unshare_live(vec_dir, persist=False)
        assert live_vectors(vec_dir, EMB.dim) is None


def test_a_file_written_elsewhere_replaces_the_live_index(tmp_path: Path) -> None:
    root = tmp_path / "r"
    root.mkdir()
    (root / "a.py").write_text("def alpha():\n    return 1\n")
    vec_dir = root / ".ragloom" / "vectors"
    with ragloom.Index(root, root / ".ragloom", embedder=EMB) as idx:
        idx.index(history=False)
        reader = HnswVectors(vec_dir, EMB.dim)
        share_live(reader)
        try:
            unshare_live(vec_dir, persist=False)  # another writer: not sharing, writes the file
            (root / "b.py").write_text("def beta():\n    return 2\n")
            idx.index(history=False)
            share_live(reader)
            fresh = live_vectors(vec_dir, EMB.dim)  # the file is newer: loaded, re-shared
            assert fresh is not None and fresh is not reader and is_live(fresh)
            assert fresh.count() == reader.count() + 1
        finally:
            unshare_live(vec_dir, persist=False)


def test_recent_only_updates_leave_nothing_for_a_full_check(tmp_path: Path) -> None:
    from ragloom.embed.document import embedding_key
    from ragloom.index.indexer import sync_vectors
    from ragloom.index.store import Store

    root = tmp_path / "r"
    root.mkdir()
    (root / "a.py").write_text("def alpha():\n    return 1\n\ndef keep():\n    return 0\n")
    (root / "b.py").write_text("def beta():\n    return 2\n")
    with ragloom.Index(root, root / ".ragloom", embedder=EMB) as idx:
        idx.index(history=False)
        (root / "a.py").write_text("def alpha_two():\n    return 1\n\ndef keep():\n    return 0\n")
        (root / "c.py").write_text("def gamma():\n    return 3\n")
        idx.index(history=False, verify={"a.py", "c.py"}, recent_only=True)
        (root / "b.py").unlink()
        st = idx.index(history=False, verify={"b.py"}, recent_only=True)
        assert st.embeddings_pending == 0
    vec_dir = root / ".ragloom" / "vectors"
    store = Store(root / ".ragloom" / "index.sqlite")
    try:
        vectors = HnswVectors(vec_dir, EMB.dim)
        assert set(vectors.held_rowids().tolist()) == set(store.all_rowids().tolist())
        assert sync_vectors(store, vectors, embedding_key(EMB.model_id)) == 0
        from ragloom.index.bm25 import TantivyBm25

        bm25 = TantivyBm25(root / ".ragloom" / "bm25")
        assert set(bm25.held_rowids().tolist()) == set(store.wanted_rowids().tolist())
        hits = {str(h) for h in bm25.search("alpha_two", 5)}
        assert hits, "the scoped BM25 delta holds the new row"
        assert not store.missing_embeddings(embedding_key(EMB.model_id))
    finally:
        store.close()
