"""Fusion: the modality lists become one ranked candidate list (the first stage of every
strategy).

- ``hybrid``: weighted reciprocal rank fusion of BM25 and dense (``rrf_fuse`` with the
  strategy's :class:`~ragloom.retrieve.config.RrfConfig`; ploke-rag-plan.md section 1, tamma
  phase 5; docs/ranking.md "Weighted reciprocal rank fusion");
- ``sparse`` / ``dense``: the one list as retrieved;
- a compound question: each sub-query's lists are fused the same way, then the question's list
  and the sub-queries' lists are fused with unweighted RRF at the strategy's k (docs/ranking.md
  "The search pipeline", step 3).

The result is cut to ``max(depth, top_k)``. Its constants are the RRF settings of the strategy
(``PROSE_RRF`` / ``KEYWORD_RRF`` in ``ragloom.retrieve.search``); this stage holds none.
"""

from __future__ import annotations

from collections.abc import Mapping

from ragloom.retrieve.config import Dense, RetrievalStrategy, Sparse
from ragloom.retrieve.fusion import rrf_fuse
from ragloom.retrieve.stages.base import Ranked, RankState, StageBase

__all__ = ["FusionStage", "fuse"]


def fuse(
    strategy: RetrievalStrategy, lists: Mapping[str, Ranked]
) -> tuple[Ranked, dict[str, Ranked]]:
    """One question's fused list and the modality lists it came from, by name."""
    bm25 = list(lists.get("bm25", []))
    dense = list(lists.get("dense", []))
    if isinstance(strategy, Sparse):
        return list(bm25), {"bm25": bm25}
    if isinstance(strategy, Dense):
        return list(dense), {"dense": dense}
    named = {"bm25": bm25, "dense": dense}
    return rrf_fuse(named, strategy.rrf.weights_for(named), strategy.rrf.k), named


class FusionStage(StageBase):
    """Modality lists (``state.lists``, ``state.sub_lists``) -> ``state.ranked`` and
    ``state.modalities``."""

    name: str = "fusion"
    reads: frozenset[str] = frozenset({"lists", "sub_lists", "strategy"})
    group: str = "fusion"

    def apply(self, state: RankState) -> None:
        subs: dict[str, Ranked] = {}
        for i, sub in enumerate(state.sub_lists, 1):
            subs[f"sub{i}"], _ = fuse(state.strategy, sub)
        with state.telemetry.span("fusion") as span:
            fused, state.modalities = fuse(state.strategy, state.lists)
            if subs:
                strat = state.strategy
                k = strat.rrf.k if not isinstance(strat, Sparse | Dense) else state.sub_rrf_k
                fused = rrf_fuse({"query": fused, **subs}, None, k)
            span.set_attribute("bm25_results", len(state.lists.get("bm25", [])))
            span.set_attribute("dense_results", len(state.lists.get("dense", [])))
            span.set_attribute("fallback_used", state.fallback_used)
        state.ranked = fused[: max(state.depth, state.top_k)]
