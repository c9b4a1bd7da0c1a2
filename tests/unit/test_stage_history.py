"""HistoryStage: the file bonus, yielding and pinning on agreement, sorting without a history."""

from __future__ import annotations

from ragloom.retrieve.history import CHANGE_WEIGHTS, DEFAULT_WEIGHTS, CoChange, HistoryEvidence
from ragloom.retrieve.stages.history import HistoryStage, modalities_agree, pin_first
from tests.unit.stage_fixtures import FakeSource, FakeStore, row, state

ROWS = [row(1, "a.py"), row(2, "b.py"), row(3, "b.py"), row(4, "c.py")]
RANKED = [(1, 0.10), (2, 0.08), (3, 0.079), (4, 0.05)]


class _History:
    pass


def _source(agrees: bool = False) -> FakeSource:
    ev = HistoryEvidence(similar={"c.py": 1, "b.py": 2}, churn={})
    return FakeSource(
        FakeStore({r.rowid: r for r in ROWS}),
        history=_History(),  # type: ignore[arg-type]
        evidence=(ev, CoChange.of([], frozenset())),
        agrees=agrees,
    )


def test_without_a_history_the_stage_only_sorts() -> None:
    st = state(list(reversed(RANKED)), ROWS)
    HistoryStage().apply(st)
    assert st.ranked == RANKED and not st.notes


def test_similar_changes_lift_their_files() -> None:
    st = state(RANKED, ROWS, source=_source(), history_weights=DEFAULT_WEIGHTS)
    HistoryStage().apply(st)
    assert [r for r, _ in st.ranked[:3]] == [2, 3, 4]  # b.py, c.py pass a.py (no history)
    assert st.notes[4]["history"] > st.notes[2]["history"] > 0
    assert st.notes[3]["history"] == st.notes[2]["history"]  # every chunk of b.py (lookups)


def test_change_weights_give_the_best_chunk_only_and_pin_on_agreement() -> None:
    st = state(RANKED, ROWS, source=_source(), history_weights=CHANGE_WEIGHTS)
    HistoryStage().apply(st)
    assert "history" in st.notes[2] and "history" not in st.notes.get(3, {})
    pinned = state(RANKED, ROWS, source=_source(agrees=True), history_weights=CHANGE_WEIGHTS)
    HistoryStage().apply(pinned)
    assert [r for r, _ in pinned.ranked[:3]] == [1, 2, 3] == pinned.pinned
    assert pinned.pre_pin == {1: 0.10, 2: 0.08, 3: 0.079}


def test_lookup_weights_yield_to_agreement() -> None:
    st = state(RANKED, ROWS, source=_source(agrees=True), history_weights=DEFAULT_WEIGHTS)
    HistoryStage().apply(st)
    assert st.ranked == RANKED and not st.notes


def test_agreement_and_pin_helpers() -> None:
    info = {1: ("a.py", "implementation", False), 2: ("a.py", "implementation", False)}
    get = lambda rowids: {r: info[r] for r in rowids if r in info}  # noqa: E731
    assert modalities_agree({"bm25": [(1, 1.0)], "dense": [(2, 0.1)]}, get)  # type: ignore[arg-type]
    assert not modalities_agree({"bm25": [], "dense": [(2, 0.1)]}, get)  # type: ignore[arg-type]
    assert modalities_agree({"dense": [(9, 0.6)]}, get, 0.55)  # type: ignore[arg-type]
    assert pin_first([(1, 0.5), (2, 0.9)], [1]) == [(1, 0.9), (2, 0.9)]
