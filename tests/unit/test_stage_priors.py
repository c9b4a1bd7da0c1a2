"""PriorsStage: role and declaration demotions, unless the question asks for that role."""

from __future__ import annotations

from ragloom.retrieve.stages.priors import DECLARATION_PRIOR, ROLE_PRIOR, PriorsStage
from tests.unit.stage_fixtures import FakeSource, FakeStore, row, state

ROWS = [row(1, "tests/test_app.py"), row(2, "app.py"), row(3, "api.py")]


def _state(query: str = "where is the app") -> object:
    src = FakeSource(FakeStore({r.rowid: r for r in ROWS}), decl={3})
    return state([(1, 1.0), (2, 0.5), (3, 0.45)], ROWS, query=query, source=src)


def test_tests_and_declarations_are_demoted_then_sorted() -> None:
    st = _state()
    PriorsStage().apply(st)  # type: ignore[arg-type]
    assert st.ranked == [(2, 0.5), (3, 0.45 * DECLARATION_PRIOR), (1, ROLE_PRIOR["test"])]  # type: ignore[attr-defined]
    assert st.notes[1]["prior"] == ROLE_PRIOR["test"]  # type: ignore[attr-defined]
    assert 2 not in st.notes  # type: ignore[attr-defined]


def test_a_question_asking_for_tests_keeps_them() -> None:
    st = _state("the tests of the app")
    PriorsStage().apply(st)  # type: ignore[arg-type]
    assert st.ranked[0] == (1, 1.0)  # type: ignore[attr-defined]


def test_parts_switch_off() -> None:
    st = _state()
    PriorsStage(roles=False, decl=False).apply(st)  # type: ignore[arg-type]
    assert st.ranked == [(1, 1.0), (2, 0.5), (3, 0.45)] and not st.notes  # type: ignore[attr-defined]
