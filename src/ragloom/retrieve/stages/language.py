"""Language boost: hits in the language the question names rise (tamma phase 2 "language
detection"; docs/ranking.md "The search pipeline", step 5).

A hit whose chunk is in ``ProcessedQuery.language`` gains ``w_bm25 * LANGUAGE_BOOST_RRF_RANKS /
(k + 1)`` of the strategy's RRF settings. Hybrid strategies only (a single modality's scores
are on another scale). ``+no-language`` turns the detection off, and with it this stage.
Explain record: ``language_boost``.
"""

from __future__ import annotations

import math

from ragloom.retrieve.config import Hybrid
from ragloom.retrieve.stages.base import Ranked, RankState, StageBase, by_score

__all__ = ["LANGUAGE_BOOST_RRF_RANKS", "LanguageStage", "boost"]

LANGUAGE_BOOST_RRF_RANKS = 1.0
"""A hit in the language the question names gains ``w / (k + 1)`` per unit, i.e. as much as one
extra first place in one modality (ragloom's choice: strong enough to lift a same-language hit
over a near tie, never over a hit both modalities ranked much higher)."""


class LanguageStage(StageBase):
    """Add the language bonus to hits in the language the question names, then sort."""

    name: str = "language"
    reads: frozenset[str] = frozenset({"language", "rows", "strategy"})
    needs_rows: bool = True

    def applies(self, state: RankState) -> bool:
        return bool(state.pq.language) and isinstance(state.strategy, Hybrid)

    def apply(self, state: RankState) -> None:
        strat, rows = state.strategy, state.rows or {}
        assert isinstance(strat, Hybrid)
        bonus = strat.rrf.weight_bm25 * LANGUAGE_BOOST_RRF_RANKS / (strat.rrf.k + 1)
        which = {r for r in rows if rows[r].language == state.pq.language}
        state.ranked = boost(state.ranked, which, bonus)
        for r in which:
            state.note(r, "language_boost", bonus)


def boost(ranked: Ranked, which: set[int], bonus: float) -> Ranked:
    """``bonus`` added to the rows of ``which``, re-sorted (unchanged when none or not finite)."""
    if not which or not math.isfinite(bonus):
        return ranked
    return by_score([(r, s + bonus if r in which else s) for r, s in ranked])
