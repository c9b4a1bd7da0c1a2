"""Agreement: the chunk BM25 and dense both rank first stays first (docs/ranking.md,
"Documentation questions").

The tuned default demotes documentation (the role prior, and the learned stage, which learned
from commits whose answers are implementation files). A question that names a documented
topic in the words of its section title ("Accepting the connection") then lost the section
both modalities had found first: on 258 such questions of six repositories, the default
reached file MRR@10 0.121 where BM25 alone reached 0.726 and dense alone 0.764. When the two
independent modalities agree on their first chunk, that chunk is put first again, whatever the
stages between made of it. Hybrid strategies only. Explain record: ``agree``.
"""

from __future__ import annotations

from ragloom.retrieve.config import Hybrid
from ragloom.retrieve.stages.base import RankState, StageBase
from ragloom.retrieve.stages.history import pin_first

__all__ = ["AgreeStage"]


AGREE_MIN_DENSE = 0.0
"""The least dense score (cosine) of the chunk both modalities ranked first for the stage to
put it first."""


class AgreeStage(StageBase):
    """Put first the chunk both modalities ranked first (when it is in the list and its dense
    score is at least ``min_dense``)."""

    name: str = "agree"
    reads: frozenset[str] = frozenset({"modalities", "strategy"})

    def __init__(self, min_dense: float = AGREE_MIN_DENSE) -> None:
        self.min_dense = min_dense

    def applies(self, state: RankState) -> bool:
        return isinstance(state.strategy, Hybrid)

    def apply(self, state: RankState) -> None:
        bm25 = state.lists.get("bm25") or []
        dense = state.lists.get("dense") or []
        if not bm25 or not dense or bm25[0][0] != dense[0][0] or dense[0][1] < self.min_dense:
            return
        top = bm25[0][0]
        if state.ranked and state.ranked[0][0] != top and any(r == top for r, _ in state.ranked):
            state.ranked = pin_first(state.ranked, [top])
            state.note(top, "agree", True)
