"""MMR: maximal marginal relevance over the best ``candidate_pool`` candidates
(ploke-rag-plan.md section 1 ``MmrConfig``, tamma phase 5 ``mmrLambda``; docs/ranking.md
"Maximal marginal relevance").

``hybrid-mmr`` only. Relevance is the min-max normalised score; similarity the cosine of the
stored chunk vectors. Picks ``top_k``; each keeps its score from before. The constants are the
config's (``MmrConfig``: lambda 0.7, pool 50, cosine). Explain record: ``mmr`` (relevance,
objective, max_sim).
"""

from __future__ import annotations

from collections.abc import Mapping

from ragloom.index.store import ChunkRow
from ragloom.retrieve.config import Hybrid
from ragloom.retrieve.fusion import mmr_select_explain, normalize_scores
from ragloom.retrieve.stages.base import RankState, StageBase

__all__ = ["MmrStage"]


class MmrStage(StageBase):
    """Pick ``top_k`` diverse candidates from the pool."""

    name: str = "mmr"
    reads: frozenset[str] = frozenset({"vectors", "strategy"})
    group: str = "mmr"
    needs_rows: bool = True

    def applies(self, state: RankState) -> bool:
        strat = state.strategy
        return isinstance(strat, Hybrid) and strat.mmr is not None and bool(state.ranked)

    def wants_all_rows(self, state: RankState, rows: Mapping[int, ChunkRow] | None) -> bool:
        # the pool is chosen among every candidate, even when it turns out empty
        strat = state.strategy
        return rows is None and isinstance(strat, Hybrid) and strat.mmr is not None

    def apply(self, state: RankState) -> None:
        strat = state.strategy
        assert isinstance(strat, Hybrid) and strat.mmr is not None
        cfg = strat.mmr
        with state.telemetry.span("mmr", {"mmr_lambda": cfg.lambda_}):
            pool = state.ranked[: cfg.candidate_pool]
            vecs = state.source.pool_vectors([r for r, _ in pool])
            rel = normalize_scores(pool)
            picks = mmr_select_explain(rel, state.top_k, vecs, cfg)
            original = dict(pool)
            for p in picks:
                state.note(
                    p.id,
                    "mmr",
                    {"relevance": p.relevance, "objective": p.mmr_score, "max_sim": p.max_sim},
                )
        state.ranked = [(p.id, original[p.id]) for p in picks]
        state.vectors = vecs
