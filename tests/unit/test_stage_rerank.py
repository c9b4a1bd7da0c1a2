"""RerankStage: the reranker's order and scores replace the fused ones (first ``depth``)."""

from __future__ import annotations

from collections.abc import Sequence

from ragloom.retrieve.stages.rerank import RerankStage
from tests.unit.stage_fixtures import FakeSource, FakeStore, row, state

ROWS = [row(1, "a.py"), row(2, "b.py"), row(3, "c.py")]


class _ByLength:
    def rerank(self, query: str, candidates: Sequence[tuple[str, str]]) -> list[tuple[str, float]]:
        return sorted(((cid, float(len(text))) for cid, text in candidates), key=lambda c: -c[1])


def test_reranker_order_over_depth() -> None:
    store = FakeStore({r.rowid: r for r in ROWS}, texts={1: "a", 2: "bbb", 3: "cc"})
    st = state([(1, 0.9), (2, 0.5), (3, 0.1)], ROWS, source=FakeSource(store), depth=2)
    RerankStage(_ByLength()).apply(st)
    assert st.ranked == [(2, 3.0), (1, 1.0)]
