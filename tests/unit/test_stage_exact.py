"""ExactStage: a named symbol goes first; one retrieval missed is fetched from the store."""

from __future__ import annotations

from ragloom.retrieve.config import Sparse
from ragloom.retrieve.query import Entity, ProcessedQuery, QueryConfig
from ragloom.retrieve.stages.exact import ExactStage
from tests.unit.stage_fixtures import FakeSource, FakeStore, row, state

ROWS = [row(1, "a.py", symbol="other"), row(2, "b.py", symbol="parse_header")]


def _pq(ids: tuple[str, ...]) -> ProcessedQuery:
    e = Entity("symbol", "parse_header", 1.0, ids)
    return ProcessedQuery("`parse_header`", "q", "q", entities=(e,))


def test_named_symbol_first() -> None:
    st = state([(1, 0.9), (2, 0.1)], ROWS, pq=_pq((ROWS[1].id,)), strategy=Sparse())
    assert ExactStage().applies(st)
    ExactStage().apply(st)
    assert st.ranked[0][0] == 2 and st.notes[2]["exact_match"] == st.ranked[0][1]


def test_missed_symbol_is_fetched() -> None:
    src = FakeSource(FakeStore({r.rowid: r for r in ROWS}))
    st = state([(1, 0.9)], ROWS[:1], pq=_pq((ROWS[1].id,)), source=src)
    ExactStage().apply(st)
    assert [r for r, _ in st.ranked] == [2, 1] and 2 in (st.rows or {})


def test_off_without_a_sure_entity_or_the_query_step() -> None:
    st = state([(1, 0.9)], ROWS, pq=_pq(()), qc=QueryConfig(exact_boost=False))
    assert not ExactStage().applies(st)
