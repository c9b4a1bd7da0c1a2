"""FileRankStage: file evidence (off by weight by default: a sort), and a pin kept."""

from __future__ import annotations

from ragloom.retrieve.stages.filerank import FILE_EVIDENCE, FileRankStage
from tests.unit.stage_fixtures import row, state

ROWS = [row(1, "a.py"), row(2, "b.py"), row(3, "b.py")]


def test_default_weight_only_sorts() -> None:
    assert FILE_EVIDENCE == 0.0
    st = state([(2, 0.4), (1, 0.5), (3, 0.3)], ROWS)
    FileRankStage().apply(st)
    assert st.ranked == [(1, 0.5), (2, 0.4), (3, 0.3)]


def test_a_file_with_more_hits_rises_with_a_weight() -> None:
    st = state([(1, 0.5), (2, 0.4), (3, 0.3)], ROWS)
    FileRankStage(weight=1.0).apply(st)
    assert [r for r, _ in st.ranked] == [2, 3, 1]  # b.py: 0.4 + 0.3 beats a.py's 0.5


def test_pinned_rows_keep_their_places() -> None:
    st = state([(3, 0.6), (1, 0.6), (2, 0.4)], ROWS, pinned=[3], pre_pin={3: 0.3})
    FileRankStage(weight=1.0).apply(st)
    assert st.ranked[0][0] == 3
