"""MmrStage: diverse picks from the pool; scores kept; the pool's vectors handed on."""

from __future__ import annotations

import numpy as np

from ragloom.retrieve.config import Hybrid, MmrConfig, RrfConfig
from ragloom.retrieve.stages.mmr import MmrStage
from tests.unit.stage_fixtures import FakeSource, FakeStore, row, state

ROWS = [row(1, "a.py"), row(2, "b.py"), row(3, "c.py")]
VECS = {1: np.array([1.0, 0.0]), 2: np.array([1.0, 0.01]), 3: np.array([0.0, 1.0])}


def test_near_duplicate_falls_behind() -> None:
    src = FakeSource(FakeStore({r.rowid: r for r in ROWS}), vectors=VECS)
    strat = Hybrid(rrf=RrfConfig(), mmr=MmrConfig(lambda_=0.5))
    st = state([(1, 0.9), (2, 0.85), (3, 0.6)], ROWS, source=src, strategy=strat, top_k=2)
    assert MmrStage().applies(st)
    MmrStage().apply(st)
    assert st.ranked == [(1, 0.9), (3, 0.6)]
    assert set(st.notes[3]["mmr"]) == {"relevance", "objective", "max_sim"}
    assert set(st.vectors) == {1, 2, 3}


def test_only_with_an_mmr_strategy() -> None:
    assert not MmrStage().applies(state([(1, 0.9)], ROWS))
