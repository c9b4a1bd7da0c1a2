"""HeadsStage: a named split symbol's first part takes its best part's place."""

from __future__ import annotations

from ragloom.retrieve.query import Entity, ProcessedQuery
from ragloom.retrieve.stages.heads import HeadsStage
from tests.unit.stage_fixtures import FakeSource, FakeStore, row, state

HEAD = row(1, "big.py", cid="big.py#f", symbol="f")
PART = row(2, "big.py", cid="big.py#f#part2", symbol="f")
OTHER = row(3, "x.py", symbol="g")
PQ = ProcessedQuery("f", "f", "f", entities=(Entity("symbol", "f", 1.0, (HEAD.id,)),))


def test_first_part_takes_the_place_of_a_later_part() -> None:
    st = state([(2, 0.9), (3, 0.5), (1, 0.1)], [HEAD, PART, OTHER], pq=PQ)
    assert HeadsStage().applies(st)
    HeadsStage().apply(st)
    assert st.ranked == [(1, 0.9), (2, 0.9), (3, 0.5)]
    assert st.notes[1]["first_part"] == 1


def test_missing_head_is_fetched() -> None:
    src = FakeSource(FakeStore({1: HEAD, 2: PART, 3: OTHER}))
    st = state([(3, 0.9), (2, 0.5)], [PART, OTHER], pq=PQ, source=src)
    HeadsStage().apply(st)
    assert [r for r, _ in st.ranked] == [3, 1, 2]


def test_asks_for_all_rows_only_when_the_top_holds_a_part() -> None:
    st = state([], [], pq=PQ)
    assert not HeadsStage().wants_all_rows(st, None)
    assert HeadsStage().wants_all_rows(st, {2: PART})
    assert not HeadsStage().wants_all_rows(st, {3: OTHER})
