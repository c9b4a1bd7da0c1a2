"""What a search returns: :class:`SearchResult`, hits built from stored rows, and the JSON of a
hit that ``ragloom search --json``, the servers and the framework adapters hand out (a contract:
fields are only ever added)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ragloom.index.store import ChunkRow
from ragloom.retrieve.config import RrfConfig
from ragloom.retrieve.query import ProcessedQuery
from ragloom.types import Hit

__all__ = [
    "RetrievedLists",
    "SearchResult",
    "build_hits",
    "hit_from_row",
    "hit_to_json",
    "query_info",
]


def hit_to_json(hit: Hit, *, explain: bool = False) -> dict[str, Any]:
    """One hit as ``ragloom search --json`` prints it; the servers and the framework adapters
    hand out the same fields (a contract: fields are only ever added). With ``explain``:
    ``scores``, ``explain`` and ``stages`` (what each ranking stage did to the hit)."""
    out: dict[str, Any] = {
        "id": hit.id,
        "path": hit.path,
        "start_line": hit.start_line,
        "end_line": hit.end_line,
        "kind": hit.kind,
        "symbol": hit.symbol,
        "part": hit.part,
        "language": hit.language,
        "score": hit.score,
        "ranks": dict(hit.ranks),
    }
    if explain:
        out["scores"] = dict(hit.scores)
        out["explain"] = hit.explain
        out["stages"] = [dict(s) for s in hit.stages]
    return out


@dataclass(slots=True)
class SearchResult:
    """Hits plus what a caller should know about how they were found."""

    hits: list[Hit]
    strategy: str
    notes: list[str] = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=dict)
    vectors_complete: bool = True
    fallback_used: bool = False
    bm25_timed_out: bool = False
    """BM25 missed ``Retriever.bm25_timeout_ms``: a hybrid answer from dense alone."""
    query: dict[str, object] = field(default_factory=dict)
    embeddings: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    """Stored vectors of the hits by chunk id, when a stage already read them (MMR); context
    assembly reuses them for near-duplicate detection instead of reading them again."""
    generation: int = 0
    """The index generation every hit comes from (docs/consistency.md)."""
    rowids: dict[str, int] = field(default_factory=dict, repr=False)
    """Each hit's row in the index by chunk id (not in any answer): what
    :meth:`~ragloom.retrieve.search.Retriever.embeddings_for_hits` looks vectors up by."""


@dataclass(slots=True)
class RetrievedLists:
    """One (sub-)question's modality lists as retrieved, best first, and what each took."""

    bm25: list[tuple[int, float]]
    dense: list[tuple[int, float]]
    bm25_ms: float = 0.0
    dense_ms: float = 0.0
    bm25_timed_out: bool = False
    dense_error: str = ""
    """Why the dense side failed (the query model raised): hybrid answers from BM25 alone."""


def build_hits(
    ranked: Sequence[tuple[int, float]],
    rows: Mapping[int, ChunkRow],
    texts: Mapping[int, str],
    lists: Mapping[str, Sequence[tuple[int, float]]],
    rrf: RrfConfig,
    explains: Mapping[int, Mapping[str, Any]] | None = None,
    stages: Callable[[int], list[dict[str, Any]]] | None = None,
) -> list[Hit]:
    """Turn (rowid, score) into hits with each modality's rank and score (from ``lists``);
    rows gone since are dropped. With ``explains``, each hit's explain record plus the RRF
    contribution of each modality (``rrf``), and ``stages(rowid)`` as its stage records."""
    wanted = {rowid for rowid, _ in ranked}  # only the hits' places are looked up
    positions: dict[str, dict[int, tuple[int, float]]] = {}
    for name, items in lists.items():
        pos: dict[int, tuple[int, float]] = {}
        for rank, (rowid, score) in enumerate(items, 1):
            if rowid in wanted and rowid not in pos:
                pos[rowid] = (rank, score)
        positions[name] = pos
    hits: list[Hit] = []
    for rowid, score in ranked:
        row = rows.get(rowid)
        if row is None:
            continue
        hit = hit_from_row(row, score, texts.get(rowid, ""))
        for name, pos in positions.items():
            if rowid in pos:
                hit.ranks[name] = pos[rowid][0]
                hit.scores[name] = pos[rowid][1]
        if explains is not None:
            info = dict(explains.get(rowid, {}))
            if len(lists) > 1:
                info["rrf"] = {
                    name: rrf.weights.get(name, 1.0) / (rrf.k + rank)
                    for name, rank in hit.ranks.items()
                }
            hit.explain = info
            if stages is not None:
                hit.stages = stages(rowid)
        hits.append(hit)
    return hits


def query_info(pq: ProcessedQuery) -> dict[str, object]:
    """What query processing made of the question (``SearchResult.query``)."""
    return {
        "dense_text": pq.dense_text,
        "sparse_text": pq.sparse_text,
        "language": pq.language,
        "steps": list(pq.steps),
        "entities": [
            {"kind": e.kind, "value": e.value, "confidence": e.confidence} for e in pq.entities
        ],
        "sub_queries": [s.dense_text for s in pq.sub_queries],
    }


def hit_from_row(row: ChunkRow, score: float, text: str) -> Hit:
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
