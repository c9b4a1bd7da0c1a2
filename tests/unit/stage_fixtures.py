"""A hand-built :class:`RankState` and a fake :class:`RankingSource` for the stage unit tests:
no index, no model."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ragloom.index.store import ChunkRow
from ragloom.retrieve.config import Hybrid, RetrievalStrategy, RrfConfig
from ragloom.retrieve.history import ChangeHistory, CoChange, HistoryEvidence
from ragloom.retrieve.query import ProcessedQuery, QueryConfig
from ragloom.retrieve.roles import FileRole, file_role
from ragloom.retrieve.stages.base import RankState


def row(rowid: int, path: str, *, cid: str | None = None, symbol: str = "", kind: str = "function",
        language: str = "python") -> ChunkRow:  # fmt: skip
    return ChunkRow(rowid, cid or f"{path}#{rowid}", path, symbol, kind, language, "code", None,
                    0, 10, rowid, rowid + 1, "h", "f")  # fmt: skip


@dataclass
class FakeFile:
    mtime: float


@dataclass
class FakeStore:
    rows: dict[int, ChunkRow] = field(default_factory=dict)
    texts: dict[int, str] = field(default_factory=dict)
    mtimes: dict[str, float] = field(default_factory=dict)

    def chunks_by_rowids(self, rowids: Sequence[int]) -> dict[int, ChunkRow]:
        return {r: self.rows[r] for r in rowids if r in self.rows}

    def chunks_by_ids(self, ids: Sequence[str]) -> dict[str, ChunkRow]:
        by_id = {r.id: r for r in self.rows.values()}
        return {i: by_id[i] for i in ids if i in by_id}

    def texts_by_rowids(self, rowids: Sequence[int]) -> dict[int, str]:
        return {r: self.texts.get(r, "") for r in rowids}

    def files(self) -> dict[str, FakeFile]:
        return {p: FakeFile(m) for p, m in self.mtimes.items()}


@dataclass
class FakeSource:
    store: FakeStore
    decl: set[int] = field(default_factory=set)
    history: ChangeHistory | None = None
    evidence: tuple[HistoryEvidence, CoChange] | None = None
    agrees: bool = False
    vectors: dict[int, np.ndarray] = field(default_factory=dict)
    file_scores: dict[str, float] | None = field(default_factory=dict)
    """Whole-file BM25 scores by path (0.0 for a path it does not name); None: no file BM25."""

    def chunk_info(self, rowids: Sequence[int]) -> dict[int, tuple[str, FileRole, bool]]:
        rows = self.store.rows
        return {r: (rows[r].path, file_role(rows[r].path), r in self.decl) for r in rowids
                if r in rows}  # fmt: skip

    def agree(
        self, lists: Mapping[str, Sequence[tuple[int, float]]] | None, confident: float | None
    ) -> bool:
        return self.agrees

    def history_evidence(
        self, query: str, recent: bool = False
    ) -> tuple[HistoryEvidence, CoChange] | None:
        return self.evidence

    def pool_vectors(self, rowids: Sequence[int]) -> dict[int, np.ndarray]:
        return {r: self.vectors[r] for r in rowids if r in self.vectors}

    def file_bm25_scores(
        self, query: str | Sequence[tuple[str, float]], paths: Sequence[str]
    ) -> dict[str, float] | None:
        if self.file_scores is None:
            return None
        return {p: self.file_scores.get(p, 0.0) for p in paths}


def state(
    ranked: list[tuple[int, float]],
    rows: Sequence[ChunkRow],
    *,
    query: str = "where is it",
    strategy: RetrievalStrategy | None = None,
    pq: ProcessedQuery | None = None,
    loaded: bool = True,
    **kw: Any,
) -> RankState:
    """A state whose candidates are ``ranked``; ``loaded`` gives it every row already."""
    src = kw.pop("source", None) or FakeSource(FakeStore({r.rowid: r for r in rows}))
    return RankState(
        query=query,
        pq=pq or ProcessedQuery(query, query, query),
        qc=kw.pop("qc", QueryConfig()),
        strategy=strategy or Hybrid(rrf=RrfConfig(k=10.0)),
        source=src,  # type: ignore[arg-type]
        top_k=kw.pop("top_k", 10),
        depth=kw.pop("depth", 100),
        ranked=list(ranked),
        rows={r.rowid: r for r in rows} if loaded else None,
        **kw,
    )
