"""A model switch (``ragloom index --model OTHER``) builds the new model's vectors beside the
old ones and switches at the end (docs/embedding.md "Switching models"). The old vectors used
to be deleted at its start: every reader answered from BM25 alone for the whole re-embed (half
an hour for the standard library on two cores), and a kill left the index so until a run
completed."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

import ragloom
from ragloom.embed.base import HashingEmbedder
from ragloom.index.sync import NEXT_VECTORS_DIR
from tests.conftest import copy_stdlib_packages

QUESTION = "decode a JSON document"


class Interrupted(Exception):
    """Stands for a kill in the middle of the re-embed."""


class SlowModel(HashingEmbedder):
    """A hashing model under its own id that calls ``during`` before each batch it embeds
    (what a reader sees while the switch runs) and can be stopped after ``stop_after``."""

    def __init__(self, dim: int, during: object = None, stop_after: int | None = None) -> None:
        super().__init__(dim)
        self.spec = f"hashing:{dim}"
        self.during = during
        self.stop_after = stop_after
        self.batches = 0

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        self.batches += 1
        if callable(self.during):
            self.during()
        if self.stop_after is not None and self.batches > self.stop_after:
            raise Interrupted
        return super().embed_documents(texts)


def _dense(root: Path) -> tuple[str, list[str], bool]:
    with ragloom.open(root) as idx:
        res = idx.search(QUESTION, top_k=5, strategy="dense")
        return idx.status(freshness=False).model, [h.id for h in res.hits], res.fallback_used


def test_readers_answer_with_the_old_model_until_the_switch(tmp_path: Path) -> None:
    root = copy_stdlib_packages(tmp_path / "repo", ["json", "textwrap"])
    with ragloom.open(root, embedder="hashing:64") as idx:
        idx.index(history=False)
    before = _dense(root)
    assert "@64d" in before[0] and before[1] and not before[2]
    seen: list[tuple[str, list[str], bool]] = []
    new = SlowModel(128, during=lambda: seen.append(_dense(root)))
    with ragloom.open(root, embedder=new) as idx:
        stats = idx.index(history=False)
    assert stats.model_changed and stats.chunks_embedded == stats.chunks_total
    assert stats.embeddings_pending == 0
    assert seen and all(s == before for s in seen), "a reader lost the old model's vectors"
    model, hits, fallback = _dense(root)
    assert "@128d" in model and hits and not fallback
    assert not (root / ".ragloom" / NEXT_VECTORS_DIR).exists()
    with ragloom.open(root) as idx:
        st = idx.status(freshness=False)
        assert st.vectors == st.chunks and st.vectors_ready and st.dim == 128


def test_a_switch_stopped_midway_leaves_the_old_index_and_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ragloom.index.sync as sync

    monkeypatch.setattr(sync, "EMBED_COMMIT_BATCH", 16)  # batches to be stopped between
    root = copy_stdlib_packages(tmp_path / "repo", ["json", "textwrap", "csv"])
    with ragloom.open(root, embedder="hashing:64") as idx:
        first = idx.index(history=False)
    before = _dense(root)
    stopped = SlowModel(128, stop_after=3)
    with pytest.raises(Interrupted), ragloom.open(root, embedder=stopped) as idx:
        idx.index(history=False)
    assert _dense(root) == before  # the old model, whole, answers
    with ragloom.open(root) as idx:
        assert idx.status(freshness=False).vectors_ready
    again = SlowModel(128)
    with ragloom.open(root, embedder=again) as idx:
        stats = idx.index(history=False)
    # what the stopped run embedded is not embedded again (in the store, or the vector cache)
    assert stats.model_changed and stats.chunks_embedded < first.chunks_total
    assert again.batches <= (first.chunks_total + 15) // 16 - 3  # three batches were kept
    model, hits, fallback = _dense(root)
    assert "@128d" in model and hits and not fallback


def test_a_repository_in_postgres_switches_in_one_transaction(
    tmp_path: Path, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The PostgreSQL backend dropped every vector of the repository at the start of a switch
    (readers had BM25 alone until the re-embed ended). The new vectors are now cached beside
    the old ones and put in the chunks, with the repository's model, in one transaction."""
    import ragloom.index.backend_index as backend_index
    from ragloom.api import open_postgres

    monkeypatch.setattr(backend_index, "EMBED_COMMIT_BATCH", 16)
    root = copy_stdlib_packages(tmp_path / "repo", ["json", "textwrap"])

    def dense() -> tuple[str, list[str], bool]:
        reader = open_postgres(root, dsn=pg_dsn, cache_dir=tmp_path / "reader")
        try:
            res = reader.search(QUESTION, top_k=5, strategy="dense")
            return reader.status(freshness=False).model, [h.id for h in res.hits], res.fallback_used
        finally:
            reader.close()

    writer = open_postgres(root, dsn=pg_dsn, embedder="hashing:64", create=True)
    first = writer.index(history=False)
    writer.close()
    before = dense()
    assert "@64d" in before[0] and before[1] and not before[2]
    stopped = SlowModel(128, stop_after=2)
    writer = open_postgres(root, dsn=pg_dsn, embedder=stopped, create=True)
    with pytest.raises(Interrupted):
        writer.index(history=False)
    writer.close()
    assert dense() == before  # stopped: the old model, whole
    seen: list[tuple[str, list[str], bool]] = []
    again = SlowModel(128, during=lambda: seen.append(dense()))
    writer = open_postgres(root, dsn=pg_dsn, embedder=again, create=True)
    stats = writer.index(history=False)
    writer.close()
    assert stats.model_changed and stats.embeddings_pending == 0
    assert stats.chunks_embedded < first.chunks_total  # what the stopped run cached is kept
    assert seen and all(s == before for s in seen), "a reader lost the old model's vectors"
    model, hits, fallback = dense()
    assert "@128d" in model and hits and not fallback
    reader = open_postgres(root, dsn=pg_dsn, cache_dir=tmp_path / "reader")
    try:
        st = reader.status(freshness=False)
        assert st.vectors == st.chunks and st.dim == 128
    finally:
        reader.close()


class Renamed(HashingEmbedder):
    """Another model of the same dimension (the hashing vectors under another name)."""

    def __init__(self, dim: int) -> None:
        super().__init__(dim)
        self.spec = f"test-renamed:{dim}"

    @property
    def model_id(self) -> str:
        return f"test/renamed@{self.dim}d"


def test_vectors_of_another_model_of_the_same_dimension_are_not_searched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A switch killed between its manifest and its vector files left the manifest naming the
    new model over the old model's vectors. Of another dimension they were not loaded; of the
    same one, dense answers compared the new model's queries with the old model's vectors,
    at random and without a word (a user trial). They are now not searched, with a note, and
    the next `index` rebuilds them from the stored embeddings."""
    import ragloom.index.sync as sync

    root = copy_stdlib_packages(tmp_path / "repo", ["json"])
    with ragloom.open(root, embedder="hashing:64") as idx:
        idx.index(history=False)

    def killed(*_: object) -> None:
        raise Interrupted

    monkeypatch.setattr(sync, "switch_vectors", killed)
    with pytest.raises(Interrupted), ragloom.open(root, embedder=Renamed(64)) as idx:
        idx.index(history=False)
    monkeypatch.undo()
    with ragloom.open(root, embedder=Renamed(64)) as idx:
        res = idx.search(QUESTION, top_k=5, strategy="dense")
        assert not res.hits
        assert any("made with another model" in n for n in res.notes), res.notes
        assert idx.search(QUESTION, top_k=5, strategy="hybrid").hits  # BM25 still answers
        st = idx.status(freshness=False)
        assert not st.vectors_current and not st.vectors_ready
        stats = idx.index(history=False)
        assert stats.embeddings_computed == 0  # rebuilt from the store, nothing re-embedded
        res = idx.search(QUESTION, top_k=5, strategy="dense")
        assert res.hits and not any("another model" in n for n in res.notes)
