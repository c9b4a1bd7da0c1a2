"""The service's dense backend over an index folder: query embedding and HNSW search through
the index's :class:`~ragloom.retrieve.search.Retriever`, hydration of ``(rowid, score)`` hits
and the stored embeddings MMR needs.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ragloom.embed.document import embedding_key
from ragloom.index.store import Store
from ragloom.retrieve.reader import DB_NAME, index_manifest, index_root, open_retriever
from ragloom.service.config import Hits
from ragloom.types import Hit

if TYPE_CHECKING:
    from ragloom.retrieve.search import Retriever

__all__ = ["IndexDense"]


class IndexDense:
    """Dense search over an index folder through :class:`ragloom.retrieve.search.Retriever`
    (opened on first use, so building the service does not load the embedding model)."""

    def __init__(self, index_dir: Path) -> None:
        self.index_dir = index_dir
        self._lock = threading.Lock()
        self._opened: Retriever | None = None

    def _retriever(self) -> Retriever:
        with self._lock:
            if self._opened is None:
                root = index_root(self.index_dir)
                self._opened = open_retriever(
                    self.index_dir,
                    index_manifest(self.index_dir, root),
                    lambda: Store(self.index_dir / DB_NAME, readonly=True),
                    root=root,
                )
            return self._opened

    def __call__(self, query: str, k: int) -> Hits:
        """Top ``k`` dense hits (empty when the index has no vectors)."""
        hits: Hits = self._retriever().dense(query, k)
        return hits

    def hydrate(self, hits: Hits) -> list[Hit]:
        """``(rowid, score)`` -> :class:`ragloom.types.Hit` with path, lines, symbol and text;
        rows deleted since are left out."""
        out: list[Hit] = self._retriever().hydrate(hits, {})
        return out

    def embeddings(self, rowids: Sequence[int]) -> Mapping[int, np.ndarray]:
        """Stored embeddings of ``rowids`` (rows without one are left out), for MMR."""
        retriever = self._retriever()
        emb = retriever.embedder
        if emb is None or not rowids:
            return {}
        vecs = retriever.store.vectors_for_rowids(
            embedding_key(emb.model_id), list(rowids), emb.dim
        )
        return {int(r): vecs[i] for i, r in enumerate(rowids) if float(np.abs(vecs[i]).sum()) > 0}
