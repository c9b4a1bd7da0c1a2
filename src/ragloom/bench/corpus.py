"""ragloom's chunks as peers see them, read from an index (``ragloom bench-scale``).

The peers (:mod:`ragloom.bench.peers`) and the synthetic scale (:mod:`ragloom.bench.scale`)
are built on the very chunks and stored embeddings ragloom searches, so the comparison is of
retrieval alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import click
import numpy as np

from ragloom.embed.document import embedding_key

__all__ = ["DB_NAME", "EMBED_BATCH", "ChunkCorpus", "load_corpus"]

DB_NAME = "index.sqlite"
"""The store file inside an index folder (ragloom.api.DB_NAME)."""
EMBED_BATCH = 4096
"""Rows per batch when reading stored embeddings or adding synthetic vectors (memory bound)."""


@dataclass(slots=True)
class ChunkCorpus:
    """ragloom's chunks as peers see them: text, path, symbol and the stored embedding."""

    rowids: list[int]
    texts: list[str]
    paths: list[str]
    symbols: list[str]
    vectors: np.ndarray
    model_spec: str

    def __len__(self) -> int:
        return len(self.rowids)

    def document(self, i: int) -> str:
        """The text given to peers' BM25: the same fields ragloom's BM25 indexes."""
        return f"{self.symbols[i]} {self.paths[i]}\n{self.texts[i]}"


def load_corpus(
    index_dir: Path, *, limit: int | None = None, with_vectors: bool = True
) -> ChunkCorpus:
    """Read every chunk (text, path, symbol) and its stored embedding from an index (the
    vectors stay zero with ``with_vectors=False``; their shape is still the index's)."""
    from ragloom.index.manifest import read_manifest
    from ragloom.index.store import Store

    manifest = read_manifest(index_dir)
    if manifest is None:
        raise click.ClickException(f"no index at {index_dir}")
    store = Store(index_dir / DB_NAME, readonly=True)
    try:
        rowids: list[int] = []
        texts: list[str] = []
        for batch in store.iter_chunk_texts():
            for rowid, text, _ in batch:
                rowids.append(rowid)
                texts.append(text)
            if limit is not None and len(rowids) >= limit:
                break
        if limit is not None:
            rowids, texts = rowids[:limit], texts[:limit]
        rows = store.chunks_by_rowids(rowids)
        vecs = np.zeros((len(rowids), manifest.embedding_dim), dtype=np.float32)
        for start in range(0, len(rowids) if with_vectors else 0, EMBED_BATCH):
            part = rowids[start : start + EMBED_BATCH]
            vecs[start : start + len(part)] = store.vectors_for_rowids(
                embedding_key(manifest.embedding_model), part, manifest.embedding_dim
            )
        return ChunkCorpus(
            rowids=rowids,
            texts=texts,
            paths=[rows[r].path for r in rowids],
            symbols=[rows[r].symbol for r in rowids],
            vectors=vecs,
            model_spec=manifest.embedding_spec,
        )
    finally:
        store.close()
