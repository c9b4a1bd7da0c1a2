"""Rerank: an optional :class:`~ragloom.retrieve.rerank.Reranker` (ploke-rag-plan.md section 4:
a reranker trait with a no-op default; docs/ranking.md "Rerankers") re-scores the candidates
from their text.

Runs when the retriever was given a reranker; it sees the first ``depth`` candidates and the
question's dense text, and its scores replace the fused ones. No constants of its own (a
cross-encoder's batch size is ``CROSS_ENCODER_BATCH_SIZE`` in ``ragloom.retrieve.rerank``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ragloom.retrieve.stages.base import RankState, StageBase

if TYPE_CHECKING:
    from ragloom.retrieve.rerank import Reranker

__all__ = ["RerankStage"]


class RerankStage(StageBase):
    """Replace the candidates' scores and order by the reranker's."""

    name: str = "rerank"
    reads: frozenset[str] = frozenset({"text", "rows"})
    needs_rows: bool = True

    def __init__(self, reranker: Reranker) -> None:
        self.reranker = reranker

    def __repr__(self) -> str:
        return f"RerankStage({self.reranker!r})"

    def apply(self, state: RankState) -> None:
        rows = state.rows or {}
        ranked = state.ranked[: state.depth]
        with state.telemetry.span("rerank"):
            texts = state.source.store.texts_by_rowids([r for r, _ in ranked])
            by_id = {rows[r].id: r for r, _ in ranked}
            reranked = self.reranker.rerank(
                state.pq.dense_text, [(rows[r].id, texts.get(r, "")) for r, _ in ranked]
            )
        state.ranked = [(by_id[cid], s) for cid, s in reranked]
