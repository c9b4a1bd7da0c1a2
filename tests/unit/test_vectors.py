"""The HNSW vector index: search, in-memory vector reads, removal, recorded embedding key."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ragloom.index.vectors import HnswVectors


def _unit(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    m = rng.normal(size=(n, dim)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def test_get_returns_stored_unit_vectors_of_present_rowids(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    vecs = _unit(rng, 20, 16)
    index = HnswVectors(tmp_path / "v", 16, "model+ctx1")
    index.apply(np.arange(1, 21), vecs * 3.0, [])  # stored normalised (cosine space)
    got = index.get([1, 5, 999])
    assert sorted(got) == [1, 5]
    np.testing.assert_allclose(got[5], vecs[4], atol=1e-5)
    index.apply(np.zeros(0, dtype=np.int64), np.zeros((0, 16), dtype=np.float32), [5])
    assert sorted(index.get([1, 5])) == [1]
    assert index.search(vecs[0], 1)[0][0] == 1
    assert HnswVectors.stored_key(tmp_path / "v") == "model+ctx1"
    reopened = HnswVectors(tmp_path / "v", 16)
    np.testing.assert_allclose(reopened.get([1])[1], vecs[0], atol=1e-5)


def test_the_same_vectors_give_the_same_graph_and_answers(tmp_path: Path) -> None:
    """Built twice from the same vectors (with deletions and slot reuse between), the graph is
    the same file and a deep search gives the same list: insertion does not race (the learned
    ranking's training data is mined from such searches and must be reproducible)."""
    rng = np.random.default_rng(11)
    vecs = _unit(rng, 4000, 32)
    extra = _unit(rng, 300, 32)
    queries = _unit(rng, 10, 32)

    def build(where: Path) -> HnswVectors:
        index = HnswVectors(where, 32, "k")
        index.apply(np.arange(1, 4001), vecs, [])
        index.apply(np.arange(5001, 5301), extra, list(range(1, 301)))  # reuse deleted slots
        return index

    a, b = build(tmp_path / "a"), build(tmp_path / "b")
    assert (tmp_path / "a" / "vectors.hnsw").read_bytes() == (
        tmp_path / "b" / "vectors.hnsw"
    ).read_bytes()
    for q in queries:
        assert a.search(q, 300) == b.search(q, 300)


def test_a_file_of_another_dimension_is_not_searched(tmp_path: Path) -> None:
    """A vector file re-written by another model (``ragloom index --model OTHER`` by another
    process) while a reader holds the old model's dimension: hnswlib loads it anyway and
    compares only the first ``dim`` floats of each vector, answering with nonsense. The reader
    now reads the file's own dimension from its header and searches nothing."""
    from ragloom.index.vectors import file_dim

    rng = np.random.default_rng(3)
    wide = _unit(rng, 50, 24)
    HnswVectors(tmp_path / "v", 24).apply(np.arange(1, 51), wide, [])
    assert file_dim(tmp_path / "v" / "vectors.hnsw") == 24
    assert file_dim(tmp_path / "missing.hnsw") is None
    narrow = HnswVectors(tmp_path / "v", 16)
    assert narrow.foreign_dim == 24
    assert narrow.count() == 0 and narrow.search(_unit(rng, 1, 16)[0], 5) == []
    same = HnswVectors(tmp_path / "v", 24)
    assert same.foreign_dim is None and same.search(wide[7], 1)[0][0] == 8


def test_a_damaged_file_is_searched_as_empty_and_written_again(tmp_path: Path) -> None:
    """A truncated ``vectors.hnsw`` raised on every open: search (BM25 too), ``status`` and
    ``index --rebuild`` all failed (a user trial). It is derived data: now it reads as empty,
    and the next writer replaces it."""
    rng = np.random.default_rng(5)
    vecs = _unit(rng, 40, 16)
    HnswVectors(tmp_path / "v", 16).apply(np.arange(1, 41), vecs, [])
    path = tmp_path / "v" / "vectors.hnsw"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    damaged = HnswVectors(tmp_path / "v", 16)
    assert damaged.damaged and damaged.count() == 0 and damaged.search(vecs[0], 3) == []
    damaged.apply(np.arange(1, 41), vecs, [])  # what the next `ragloom index` does
    assert HnswVectors(tmp_path / "v", 16).search(vecs[3], 1)[0][0] == 4


def test_files_written_atomically_get_a_plain_mode(tmp_path: Path) -> None:
    """Files written through a temporary file were 0600 (``mkstemp``) while the database
    beside them was 0644: an index shared with another account could not read its manifest
    or vectors."""
    import os
    import stat

    from ragloom.index.atomic import atomic_write_json

    mask = os.umask(0o022)
    try:
        atomic_write_json(tmp_path / "m.json", {"a": 1})
        HnswVectors(tmp_path / "v", 4).apply(np.arange(1, 3), np.eye(2, 4, dtype=np.float32), [])
    finally:
        os.umask(mask)
    for f in (tmp_path / "m.json", tmp_path / "v" / "vectors.hnsw"):
        assert stat.S_IMODE(f.stat().st_mode) == 0o644, f


def test_a_change_that_replaces_most_vectors_builds_the_graph_again(tmp_path: Path) -> None:
    """A batch that deletes REBUILD_SHARE of the vectors or more builds a new graph of what stays
    and what comes (no deleted slots left); its answers equal brute force on what is held, and
    the same change twice gives the same file (a live-index trial: a batch that rewrote most of
    a tree left dense recall@10 at 0.39, a fresh build's 0.96)."""
    from ragloom.index.vectors import REBUILD_SHARE

    rng = np.random.default_rng(5)
    old, new = _unit(rng, 1000, 16), _unit(rng, 600, 16)
    gone = list(range(1, int(1000 * REBUILD_SHARE) + 101))

    def build(where: Path) -> HnswVectors:
        index = HnswVectors(where, 16, "k")
        index.apply(np.arange(1, 1001), old, [])
        index.apply(np.arange(2001, 2601), new, gone)
        return index

    index = build(tmp_path / "a")
    held = index.rowids()
    assert len(held) == 1000 - len(gone) + 600
    assert index._index.get_current_count() == len(held)  # nothing deleted left in the graph
    vectors = np.concatenate([old[len(gone) :], new])
    for q in _unit(rng, 20, 16):
        want = held[np.argsort(-(vectors @ q))[:5]].tolist()
        assert [r for r, _ in index.search(q, 5)] == want
    assert (tmp_path / "a" / "vectors.hnsw").read_bytes() == (
        build(tmp_path / "b").directory / "vectors.hnsw"
    ).read_bytes()
    # a small change keeps the graph and reuses the deleted slots
    index.apply(np.arange(3001, 3011), _unit(rng, 10, 16), [2001, 2002])
    assert index._index.get_current_count() == len(held) + 10 - 2  # two slots reused
    # a copied folder (its label list cannot be matched with the file by identity: every label
    # of the file is read, deleted ones too) is rebuilt as well, without the deleted labels
    import shutil

    shutil.copytree(tmp_path / "a", tmp_path / "copy")
    copy = HnswVectors(tmp_path / "copy", 16, "k")
    assert not copy._verified
    live = copy.rowids()
    copy.apply(np.arange(4001, 4101), _unit(rng, 100, 16), live[: len(live) // 2].tolist())
    assert copy._verified and copy._index.get_current_count() == len(copy.rowids())
    assert set(copy.rowids().tolist()) == set(live[len(live) // 2 :].tolist()) | set(
        range(4001, 4101)
    )
