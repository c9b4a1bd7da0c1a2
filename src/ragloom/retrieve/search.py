"""Dense, sparse and hybrid retrieval over an open index.

Each modality returns ``(rowid, score)`` best first; hybrid runs both and fuses them with
weighted reciprocal rank fusion (``ragloom.retrieve.fusion``). Every hit keeps the rank and
score each modality gave it, for ``ragloom search --explain``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ragloom.errors import ConfigError
from ragloom.index.bm25 import TantivyBm25
from ragloom.index.store import ChunkRow, Store
from ragloom.index.vectors import HnswVectors
from ragloom.types import Hit

if TYPE_CHECKING:
    from ragloom.embed.base import Embedder

__all__ = ["STRATEGIES", "Retriever", "SearchResult"]

STRATEGIES = ("hybrid", "dense", "sparse")
"""Strategy names accepted by :meth:`Retriever.search`."""

RRF_K = 60.0
"""RRF constant (ploke-rag-plan.md section 1, RrfConfig default)."""
HYBRID_CANDIDATES_MIN = 50
"""Depth of each modality's list before fusion (the MMR candidate_pool default, 50)."""


@dataclass(slots=True)
class SearchResult:
    """Hits plus what a caller should know about how they were found."""

    hits: list[Hit]
    strategy: str
    notes: list[str] = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=dict)
    vectors_complete: bool = True
    fallback_used: bool = False


def rrf_plain(
    lists: Mapping[str, Sequence[tuple[int, float]]], k: float = RRF_K
) -> list[tuple[int, float]]:
    """fused(u) = sum_m 1 / (k + rank_m(u)), ranks 1-based; ties by fused desc, id asc."""
    fused: dict[int, float] = {}
    for items in lists.values():
        seen: set[int] = set()
        for rank, (rowid, _) in enumerate(items, 1):
            if rowid in seen:
                continue
            seen.add(rowid)
            fused[rowid] = fused.get(rowid, 0.0) + 1.0 / (k + rank)
    return sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))


class Retriever:
    """Answers queries from a store, a BM25 engine and a vector index."""

    def __init__(
        self,
        store: Store,
        bm25: TantivyBm25 | None,
        vectors: HnswVectors | None,
        embedder: Callable[[], Embedder] | None,
    ) -> None:
        self.store = store
        self.bm25 = bm25
        self.vectors = vectors
        self._embedder_factory = embedder
        self._embedder: Embedder | None = None

    @property
    def embedder(self) -> Embedder | None:
        if self._embedder is None and self._embedder_factory is not None:
            self._embedder = self._embedder_factory()
        return self._embedder

    def vectors_complete(self) -> bool:
        n = self.vectors.count() if self.vectors is not None else 0
        return n >= self.store.chunk_count()

    def sparse(self, query: str, k: int) -> list[tuple[int, float]]:
        if self.bm25 is None:
            return []
        return self.bm25.search(query, k)

    def embed_query(self, query: str) -> np.ndarray | None:
        emb = self.embedder
        if emb is None or self.vectors is None or self.vectors.count() == 0:
            return None
        vec: np.ndarray = emb.embed_query(query)
        return vec

    def dense(
        self, query: str, k: int, vector: np.ndarray | None = None
    ) -> list[tuple[int, float]]:
        if self.vectors is None:
            return []
        if vector is None:
            vector = self.embed_query(query)
        if vector is None:
            return []
        return self.vectors.search(vector, k)

    def search(self, query: str, *, top_k: int = 10, strategy: str = "hybrid") -> SearchResult:
        if strategy not in STRATEGIES:
            raise ConfigError(f"unknown strategy {strategy!r}; choose from {', '.join(STRATEGIES)}")
        if top_k < 1:
            raise ConfigError(f"top_k must be >= 1, got {top_k}")
        result = SearchResult(hits=[], strategy=strategy)
        result.vectors_complete = self.vectors_complete()
        if not result.vectors_complete:
            n = self.vectors.count() if self.vectors is not None else 0
            result.notes.append(
                f"embeddings incomplete: {n} of {self.store.chunk_count()} chunks have vectors; "
                "dense results cover only those (run `ragloom index` to finish)"
            )
        lists: dict[str, list[tuple[int, float]]] = {}
        depth = max(top_k, HYBRID_CANDIDATES_MIN) if strategy == "hybrid" else top_k
        if strategy in ("sparse", "hybrid"):
            t = time.perf_counter()
            lists["bm25"] = self.sparse(query, depth)
            result.timings_ms["bm25"] = (time.perf_counter() - t) * 1000
        if strategy in ("dense", "hybrid"):
            t = time.perf_counter()
            lists["dense"] = self.dense(query, depth)
            result.timings_ms["dense"] = (time.perf_counter() - t) * 1000
            if strategy == "hybrid" and not lists["dense"]:
                result.fallback_used = True
                result.notes.append("no vectors available: hybrid answered from BM25 alone")
        if strategy == "hybrid":
            t = time.perf_counter()
            fused = rrf_plain(lists)[:top_k]
            result.timings_ms["fusion"] = (time.perf_counter() - t) * 1000
        else:
            fused = lists[strategy if strategy == "dense" else "bm25"][:top_k]
        result.hits = self.hydrate(fused, lists)
        return result

    def hydrate(
        self,
        ranked: Sequence[tuple[int, float]],
        lists: dict[str, list[tuple[int, float]]],
    ) -> list[Hit]:
        """Turn (rowid, score) into hits with per-modality ranks; rows gone since are dropped."""
        rows = self.store.chunks_by_rowids([r for r, _ in ranked])
        texts = self.store.texts_by_rowids([r for r, _ in ranked])
        positions: dict[str, dict[int, tuple[int, float]]] = {
            name: {
                rowid: (rank, score) for rank, (rowid, score) in reversed(list(enumerate(items, 1)))
            }
            for name, items in lists.items()
        }
        hits: list[Hit] = []
        for rowid, score in ranked:
            row = rows.get(rowid)
            if row is None:
                continue
            hit = _hit(row, score, texts.get(rowid, ""))
            for name, pos in positions.items():
                if rowid in pos:
                    hit.ranks[name] = pos[rowid][0]
                    hit.scores[name] = pos[rowid][1]
            hits.append(hit)
        return hits


def _hit(row: ChunkRow, score: float, text: str) -> Hit:
    return Hit(
        id=row.id,
        path=row.path,
        start_line=row.start_line,
        end_line=row.end_line,
        kind=row.kind,
        symbol=row.symbol,
        language=row.language,
        score=score,
        text=text,
        node_hash=row.node_hash,
        file_hash=row.file_hash,
        start_byte=row.start_byte,
        end_byte=row.end_byte,
        source=row.source,
    )
