"""LanguageStage: hits in the named language gain one first place's RRF share (hybrid only)."""

from __future__ import annotations

from ragloom.retrieve.config import Hybrid, RrfConfig, Sparse
from ragloom.retrieve.query import ProcessedQuery
from ragloom.retrieve.stages.language import LANGUAGE_BOOST_RRF_RANKS, LanguageStage, boost
from tests.unit.stage_fixtures import row, state

ROWS = [row(1, "a.py"), row(2, "b.go", language="go")]
PQ = ProcessedQuery("go code", "go code", "go code", language="go")


def test_named_language_rises() -> None:
    st = state([(1, 0.10), (2, 0.05)], ROWS, pq=PQ, strategy=Hybrid(rrf=RrfConfig(k=10.0)))
    stage = LanguageStage()
    assert stage.applies(st)
    stage.apply(st)
    bonus = 1.0 * LANGUAGE_BOOST_RRF_RANKS / 11
    assert st.ranked == [(2, 0.05 + bonus), (1, 0.10)]
    assert st.notes[2]["language_boost"] == bonus


def test_only_hybrid_and_only_with_a_language() -> None:
    assert not LanguageStage().applies(state([], ROWS, pq=PQ, strategy=Sparse()))
    assert not LanguageStage().applies(state([], ROWS))
    assert boost([(1, 0.5)], set(), 1.0) == [(1, 0.5)]
