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
