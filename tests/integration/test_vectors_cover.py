"""Vectors "ready" means every published chunk has one (a user trial of the live index): a
batch that replaces chunks publishes their new rows before it embeds them, while the label list
still holds the rows they replaced, as many. Counting said "10813/10813 ready" with 9,000
published chunks without a vector, dense search answered ``[]`` with no note, and a server
cached that answer for its whole TTL."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import ragloom
from ragloom.embed.base import HashingEmbedder
from ragloom.index.vectors import HnswVectors
from tests.conftest import copy_stdlib_packages

pytestmark = pytest.mark.integration


def test_a_label_count_that_matches_is_not_enough(tmp_path: Path) -> None:
    root = copy_stdlib_packages(tmp_path / "repo", ["textwrap"])
    index_dir = root / ".ragloom"
    with ragloom.open(root, embedder=HashingEmbedder(256)) as idx:
        idx.index()
        assert idx.status(freshness=False).vectors_ready
    # an edit published without its vectors (as a batch is, before its vector step)
    target = root / "textwrap.py"
    target.write_text(target.read_text().replace("def dedent(text):", "def dedent(text):  # x", 1))
    with ragloom.open(root, embedder=HashingEmbedder(256)) as idx:
        stats = idx.index(embed=False)
        assert stats.files_changed == 1
    # ... while the label list still holds as many rows: the one replaced stands in for it
    vec = HnswVectors(index_dir / "vectors", 256, HnswVectors.stored_key(index_dir / "vectors"))
    gone = int(vec.rowids().max()) + 10_000
    vec.apply(np.array([gone], dtype=np.int64), np.ones((1, 256), dtype=np.float32), [])
    with ragloom.open(root, embedder=HashingEmbedder(256)) as idx:
        status = idx.status(freshness=False)
        assert status.vectors_current
        assert status.vectors == status.chunks - 1 and not status.vectors_ready
        res = idx.search("remove common leading whitespace from every line", top_k=3)
        assert not res.vectors_complete
        note = f"embeddings incomplete: {status.chunks - 1} of {status.chunks} chunks"
        assert any(note in n for n in res.notes), res.notes  # it said "16 of 16"
    # the next update embeds it, and all is ready again
    with ragloom.open(root, embedder=HashingEmbedder(256)) as idx:
        idx.index()
        status = idx.status(freshness=False)
        assert status.vectors == status.chunks and status.vectors_ready
        assert idx.search("remove common leading whitespace", top_k=3).vectors_complete
