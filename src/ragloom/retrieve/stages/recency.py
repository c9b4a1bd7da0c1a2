"""Recency: newer files rise (tamma phase 5 ``recencyBoost`` / ``recencyDecayDays``;
docs/ranking.md "Recency").

Runs when the retriever was given a :class:`~ragloom.retrieve.config.RecencyConfig` (off by
default). Scores are min-max normalised first (the boost is on a [0, 1] scale), then each hit
gains ``boost * exp(-age / decay_days)`` by its file's mtime. The constants are the config's
(``RecencyConfig.boost`` 0.1, ``decay_days`` 30, tamma phase 5 defaults).
"""

from __future__ import annotations

import time
from datetime import datetime

from ragloom.retrieve.config import RecencyConfig
from ragloom.retrieve.fusion import apply_recency, normalize_scores
from ragloom.retrieve.stages.base import RankState, StageBase

__all__ = ["RecencyStage"]


class RecencyStage(StageBase):
    """Normalise the scores and add each file's recency boost."""

    name: str = "recency"
    reads: frozenset[str] = frozenset({"mtime", "rows"})
    needs_rows: bool = True

    def __init__(self, config: RecencyConfig) -> None:
        self.config = config

    def __repr__(self) -> str:
        return f"RecencyStage({self.config!r})"

    def apply(self, state: RankState) -> None:
        rows = state.rows or {}
        files = state.source.store.files()
        dates: dict[int, datetime | float] = {}
        for r, _ in state.ranked:
            f = files.get(rows[r].path)
            if f is not None:
                dates[r] = float(f.mtime)
        state.ranked = apply_recency(
            normalize_scores(state.ranked), dates, time.time(), self.config
        )
