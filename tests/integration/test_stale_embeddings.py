"""Stale embeddings (issue 10 item 5): vectors left by a model change, an embedding-text format
change or texts no chunk has any more are pruned at the end of ``ragloom index``, and the disk
space they took is given back (reported as ``embeddings_pruned`` and ``bytes_reclaimed``)."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

import ragloom
import ragloom.embed.document as document
from ragloom.embed.base import HashingEmbedder
from tests.conftest import copy_stdlib_packages, run_cli

pytestmark = pytest.mark.integration


class FakeEmbedder(HashingEmbedder):
    """The hashing embedder under another model id (a stand-in for a model change)."""

    def __init__(self, name: str, dim: int = 256) -> None:
        super().__init__(dim)
        self._name = name
        self.spec = f"test-fake-{name}"

    @property
    def model_id(self) -> str:
        return f"test/fake-{self._name}@{self.dim}d"


def _keys(index_dir: Path) -> dict[str, int]:
    db = sqlite3.connect(index_dir / "index.sqlite")
    try:
        return dict(db.execute("SELECT model_id, count(*) FROM embeddings GROUP BY model_id"))
    finally:
        db.close()


def _db_bytes(index_dir: Path) -> int:
    return os.path.getsize(index_dir / "index.sqlite")


def test_model_change_prunes_the_old_models_vectors(tmp_path: Path) -> None:
    root = copy_stdlib_packages(tmp_path / "repo", ["json", "textwrap"])
    index_dir = root / ".ragloom"
    with ragloom.open(root, embedder=FakeEmbedder("a")) as idx:
        first = idx.index()
    old_key = document.embedding_key("test/fake-a@256d")
    assert _keys(index_dir) == {old_key: first.chunks_total}
    size_a = _db_bytes(index_dir)

    with ragloom.open(root, embedder=FakeEmbedder("b")) as idx:
        second = idx.index()
        assert second.model_changed and second.chunks_embedded == first.chunks_total
        assert idx.status(freshness=False).vectors_ready
        assert idx.search("decode a JSON document", top_k=3).hits
    new_key = document.embedding_key("test/fake-b@256d")
    assert _keys(index_dir) == {new_key: second.chunks_total}
    assert second.embeddings_pruned == first.chunks_total
    # the old model's vectors (~1 KB each) are given back, not just marked free
    assert second.bytes_reclaimed >= first.chunks_total * 1024 * 0.8
    assert _db_bytes(index_dir) <= size_a + 64 * 1024


def test_text_format_change_and_edits_prune_what_no_chunk_uses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = copy_stdlib_packages(tmp_path / "repo", ["textwrap"])
    index_dir = root / ".ragloom"
    assert run_cli("index", str(root), "--model", "hashing", "--json").returncode == 0
    (old_key,) = _keys(index_dir)
    # an edit: the old text of one function is no chunk's any more
    target = root / "textwrap.py"
    target.write_text(target.read_text().replace("def dedent(text):", "def dedent(text):  # x", 1))
    proc = run_cli("index", str(root), "--json")
    stats = json.loads(proc.stdout)
    assert stats["chunks_embedded"] >= 1 and stats["embeddings_pruned"] == stats["chunks_embedded"]
    for key in ("embeddings_pruned", "bytes_reclaimed", "generation", "chunks_collected"):
        assert key in stats
    assert _keys(index_dir) == {old_key: stats["chunks_total"]}
    # the embedding-text format changes: every vector is re-made under the new key
    monkeypatch.setattr(document, "EMBED_TEXT_FORMAT", "ctx-test")
    with ragloom.open(root) as idx:
        again = idx.index()
    assert _keys(index_dir) == {
        document.embedding_key("ragloom/hashing-v1@64d"): again.chunks_total
    }
    assert again.embeddings_pruned == stats["chunks_total"] and again.bytes_reclaimed > 0
