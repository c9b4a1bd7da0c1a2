"""Strategy names -> stage lists, +no-NAME for every stage, the runner, explain records and the
per-candidate evidence a feature stage reads."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from ragloom.errors import ConfigError
from ragloom.retrieve.config import RecencyConfig
from ragloom.retrieve.rerank import NoopReranker
from ragloom.retrieve.stages.base import RankState, StageBase
from ragloom.retrieve.stages.pipeline import (
    STAGE_STEPS,
    build_stages,
    parse_search_spec,
)
from ragloom.retrieve.stages.runner import run_stages
from tests.unit.stage_fixtures import FakeSource, FakeStore, row, state


def _names(strategy: str, **kw: object) -> list[str]:
    spec = parse_search_spec(strategy)
    return [s.name for s in build_stages(spec, spec.strategy, **kw)]  # type: ignore[arg-type]


def test_stage_lists_per_strategy() -> None:
    hybrid = ["fusion", "priors", "issue", "history", "filerank", "language", "exact", "learned",
              "name", "heads"]  # fmt: skip
    assert _names("hybrid") == hybrid
    assert _names("hybrid+handset") == [n for n in hybrid if n not in ("learned", "name")]
    assert _names("hybrid-mmr") == [*hybrid, "mmr"]
    assert _names("hybrid+seed") == ["fusion", "language", "exact", "heads"]
    assert _names("sparse") == _names("dense") == ["fusion", "exact", "heads"]
    assert _names("hybrid", reranker=NoopReranker(), recency=RecencyConfig()) == [
        *hybrid[:-1], "recency", "rerank", "heads"]  # fmt: skip


@pytest.mark.parametrize("name", ["priors", "issue", "history", "filerank", "name", "heads", "mmr"])
def test_every_stage_can_be_dropped(name: str) -> None:
    assert name in _names("hybrid-mmr")
    assert name not in _names(f"hybrid-mmr+no-{name}")


def test_roles_and_decl_are_parts_of_priors() -> None:
    assert "priors" in _names("hybrid+no-roles")
    assert "priors" not in _names("hybrid+no-roles+no-decl")
    assert "rerank" not in _names("hybrid+no-rerank", reranker=NoopReranker())
    assert "recency" not in _names("hybrid+no-recency", recency=RecencyConfig())


def test_unknown_and_required_modifiers_are_clear() -> None:
    with pytest.raises(ConfigError, match=r"unknown strategy modifier 'no-foo'.*mmr"):
        parse_search_spec("hybrid+no-foo")
    with pytest.raises(ConfigError, match="fusion stage cannot be turned off"):
        parse_search_spec("hybrid+no-fusion")
    for name in STAGE_STEPS:
        assert parse_search_spec(f"hybrid+no-{name}").ranking_off == {name}


class _Reverse(StageBase):
    name = "reverse"
    reads = frozenset({"ranked"})

    def apply(self, state: RankState) -> None:
        state.ranked = [(r, -s) for r, s in reversed(state.ranked)]


def test_runner_traces_and_loads_rows() -> None:
    rows = [row(1, "a.py"), row(2, "b.py")]
    st = state([(1, 0.9), (2, 0.5)], rows, loaded=False, explain=True)
    run_stages([_Reverse()], st)
    assert st.rows is not None and set(st.rows) == {1, 2}
    assert st.stage_records(1) == [
        {"stage": "reverse", "rank_before": 1, "rank_after": 2, "score_before": 0.9,
         "score_after": -0.9}]  # fmt: skip


def test_evidence_for_a_feature_stage() -> None:
    rows = [row(1, "tests/test_a.py"), row(2, "b.py")]
    src = FakeSource(FakeStore({r.rowid: r for r in rows}), decl={2})
    st = state([(2, 0.5), (1, 0.4)], rows, source=src)
    st.modalities = {"bm25": [(1, 3.0), (2, 2.0)], "dense": [(2, 0.7)]}
    st.note(2, "history", 0.1)
    ev = st.evidence()
    assert ev[2].ranks == {"bm25": 2, "dense": 1} and ev[2].scores["dense"] == 0.7
    assert ev[1].role == "test" and ev[2].declaration and ev[2].notes == {"history": 0.1}
    assert ev[2].rank == 1 and ev[1].rank == 2


class _NeedsRows(StageBase):
    """A row-reading stage that only applies when told to (as the exact stage does)."""

    name = "reads-rows"
    needs_rows = True

    def __init__(self, on: bool) -> None:
        self.on = on

    def applies(self, state: RankState) -> bool:
        return self.on

    def apply(self, state: RankState) -> None:
        assert state.rows is not None
        state.ranked = [(r, s) for r, s in state.ranked if r in state.rows]


class _ReverseAll(_Reverse):
    """Re-orders every candidate without reading rows (as the learned stage does)."""

    keeps_candidates = True


@dataclass
class _CountingStore(FakeStore):
    asked: list[int] = field(default_factory=list)

    def chunks_by_rowids(self, rowids: object) -> dict[int, object]:  # type: ignore[override]
        self.asked.extend(rowids)  # type: ignore[arg-type]
        return super().chunks_by_rowids(rowids)  # type: ignore[arg-type]


@pytest.mark.parametrize("gone", [set(), {7}, {2}])
def test_a_kept_list_loads_only_the_rows_it_returns(gone: set[int]) -> None:
    """A stage that re-orders every candidate without reading rows keeps the whole list when an
    earlier stage loads the top rows; only the returned hits' rows are read in the end, and
    the answer is the one every row loaded gives (a candidate whose row is gone drops out)."""
    rows = [row(i, f"m{i}.py") for i in range(1, 21) if i not in gone]
    ranked = [(i, 1.0 - i / 100) for i in range(1, 21)]

    def run(stages: list[StageBase], explain: bool) -> tuple[list[tuple[int, float]], list[int]]:
        store = _CountingStore({r.rowid: r for r in rows})
        st = state(ranked, rows, loaded=False, top_k=3, explain=explain,
                   source=FakeSource(store))  # fmt: skip
        run_stages(stages, st)
        assert st.rows is not None and all(r in st.rows for r, _ in st.ranked[:3])
        return st.ranked[:3], store.asked

    kept, asked = run([_NeedsRows(False), _ReverseAll(), _NeedsRows(False)], explain=False)
    every, _ = run([_NeedsRows(False), _ReverseAll(), _NeedsRows(False)], explain=True)
    assert kept == every == [(r, -s) for r, s in reversed(ranked) if r not in gone][:3]
    if not gone & {1, 2, 3}:  # (a top row gone means loading every row, as before)
        assert len(asked) <= 6  # the top 3 before the re-order and the 3 returned, not all 20
    # a row-reading stage after the re-order gets every row first
    _, asked_all = run([_NeedsRows(False), _ReverseAll(), _NeedsRows(True)], explain=False)
    assert set(asked_all) >= {r for r, _ in ranked if r not in gone}
