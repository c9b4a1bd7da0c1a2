"""AgreeStage (``+agree``): the chunk BM25 and dense both rank first is put first again, when
its dense score reaches the threshold (docs/ranking.md, "Documentation questions")."""

from __future__ import annotations

import pytest

from ragloom.errors import ConfigError
from ragloom.retrieve.config import Sparse
from ragloom.retrieve.stages.agree import AGREE_MIN_DENSE, AgreeStage
from ragloom.retrieve.stages.pipeline import AGREE_DEFAULT, build_stages, parse_search_spec
from tests.unit.stage_fixtures import row, state

ROWS = [row(1, "src/a.py"), row(2, "src/b.py"), row(3, "docs/guide.md", kind="section")]


def _state(bm25_first: int, dense_first: int, dense_score: float = 0.7):  # type: ignore[no-untyped-def]
    lists = {
        "bm25": [(bm25_first, 12.0), (1, 3.0)],
        "dense": [(dense_first, dense_score), (2, 0.3)],
    }
    return state([(1, 0.30), (2, 0.20), (3, 0.05)], ROWS, lists=lists)


def test_the_agreed_chunk_is_put_first_with_a_monotone_score() -> None:
    st = _state(3, 3)
    AgreeStage().apply(st)
    assert [r for r, _ in st.ranked] == [3, 1, 2]
    scores = [s for _, s in st.ranked]
    assert scores == sorted(scores, reverse=True)
    assert st.notes[3]["agree"] is True


def test_no_agreement_or_a_weak_dense_score_changes_nothing() -> None:
    for st in (_state(3, 2), _state(3, 3, dense_score=0.4)):
        before = list(st.ranked)
        AgreeStage(min_dense=0.5).apply(st)
        assert st.ranked == before
    assert not AgreeStage().applies(state([], ROWS, strategy=Sparse()))


def test_the_modifier() -> None:
    assert AGREE_DEFAULT is False and AGREE_MIN_DENSE == 0.0
    assert not any(isinstance(s, AgreeStage) for s in _stages("hybrid"))
    (stage,) = [s for s in _stages("hybrid+agree=0.6") if isinstance(s, AgreeStage)]
    assert stage.min_dense == 0.6
    assert any(isinstance(s, AgreeStage) for s in _stages("hybrid+handset+agree"))
    assert not any(isinstance(s, AgreeStage) for s in _stages("hybrid+seed+agree"))
    for bad in ("hybrid+agree=2", "hybrid+agree=x"):
        with pytest.raises(ConfigError, match="agree=C"):
            parse_search_spec(bad)


def _stages(name: str) -> list[object]:
    spec = parse_search_spec(name)
    return list(build_stages(spec, spec.strategy))
