"""FusionStage on hand-built lists: RRF for hybrid, the one list for sparse/dense, sub-queries."""

from __future__ import annotations

from ragloom.retrieve.config import Dense, Hybrid, RrfConfig, Sparse
from ragloom.retrieve.fusion import rrf_fuse
from ragloom.retrieve.stages.fusion import FusionStage
from tests.unit.stage_fixtures import state


def test_hybrid_is_weighted_rrf_cut_to_depth() -> None:
    st = state([], [], strategy=Hybrid(rrf=RrfConfig(k=60.0)), depth=3, top_k=2)
    st.lists = {"bm25": [(1, 9.0), (2, 8.0), (3, 7.0)], "dense": [(3, 0.9), (1, 0.8), (4, 0.7)]}
    FusionStage().apply(st)
    assert [r for r, _ in st.ranked] == [1, 3, 2]
    assert st.ranked[0][1] == 1 / 61 + 1 / 62
    assert set(st.modalities) == {"bm25", "dense"}


def test_single_modalities_pass_their_list_through() -> None:
    for strategy, name in ((Sparse(), "bm25"), (Dense(), "dense")):
        st = state([], [], strategy=strategy)
        st.lists = {"bm25": [(1, 3.0), (2, 1.0)], "dense": [(2, 0.5)]}
        FusionStage().apply(st)
        assert st.ranked == st.lists[name] and list(st.modalities) == [name]


def test_sub_queries_are_fused_with_the_question() -> None:
    st = state([], [], strategy=Sparse(), sub_rrf_k=10.0)
    st.lists = {"bm25": [(1, 3.0), (2, 1.0)]}
    st.sub_lists = [{"bm25": [(2, 5.0), (3, 1.0)]}]
    FusionStage().apply(st)
    want = rrf_fuse({"query": [(1, 3.0), (2, 1.0)], "sub1": [(2, 5.0), (3, 1.0)]}, None, 10.0)
    assert st.ranked == want
