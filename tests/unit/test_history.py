"""The change-history ranking evidence (``ragloom.retrieve.history``): votes, counts, ranks and
the per-file bonus, as pure functions."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragloom.retrieve.history import (
    CHURN_WEIGHT,
    HISTORY_RRF_K,
    MAX_FILES_PER_CHANGE,
    SIMILAR_WEIGHT,
    CoChange,
    HistoryEvidence,
    churn_ranks,
    file_bonus,
    history_evidence,
    ranks,
    recent_ranks,
    similar_votes,
)


def test_votes_share_each_change_score_among_its_files() -> None:
    votes = similar_votes([(4.0, ["a.py", "b.py"]), (1.0, ["a.py"]), (2.0, ["a.py", "a.py"])])
    assert votes == {"a.py": 2.0 + 1.0 + 2.0, "b.py": 2.0}


def test_sweeps_empty_and_non_positive_changes_do_not_vote() -> None:
    sweep = [f"f{i}.py" for i in range(MAX_FILES_PER_CHANGE + 1)]
    assert similar_votes([(9.0, sweep), (3.0, []), (0.0, ["a.py"]), (-1.0, ["b.py"])]) == {}
    changes = [sweep, [], ["a.py", "a.py"], ["a.py", "b.py"]]
    assert CoChange.of(changes, {"a.py", "b.py", *sweep}).counts == {"a.py": 2, "b.py": 1}


def test_ranks_are_dense_descending_and_stable_on_ties() -> None:
    assert ranks({"b": 1.0, "a": 1.0, "c": 5.0}) == {"c": 1, "a": 2, "b": 3}
    assert ranks({}) == {}


def test_churn_and_similar_ranks_keep_only_live_paths() -> None:
    live = {"a.py", "b.py"}
    table = CoChange.of([["a.py", "gone.py"], ["gone.py"], ["b.py"], ["b.py"]], live)
    assert churn_ranks(table) == {
        "b.py": 1,
        "a.py": 2,
    }
    ev = history_evidence([(5.0, ["gone.py"]), (1.0, ["a.py"])], live, {"a.py": 1})
    assert ev.similar == {"a.py": 1} and ev.churn == {"a.py": 1} and not ev.empty
    assert HistoryEvidence({}, {}).empty


def test_file_bonus_is_the_rrf_terms_times_the_prior() -> None:
    ev = HistoryEvidence({"a.py": 1, "b.py": 3}, {"a.py": 2})
    k = HISTORY_RRF_K
    assert file_bonus("a.py", ev) == pytest.approx(
        SIMILAR_WEIGHT / (k + 1) + CHURN_WEIGHT / (k + 2)
    )
    assert file_bonus("b.py", ev, 0.3) == pytest.approx(0.3 * SIMILAR_WEIGHT / (k + 3))
    assert file_bonus("c.py", ev) == 0.0


@given(
    st.lists(
        st.tuples(
            st.floats(min_value=0.01, max_value=100.0),
            st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, max_size=4),
        ),
        max_size=12,
    )
)
def test_a_better_similar_rank_never_gains_less(changes: list[tuple[float, list[str]]]) -> None:
    ev = HistoryEvidence(ranks(similar_votes(changes)), {})
    order = sorted(ev.similar, key=ev.similar.__getitem__)
    bonuses = [file_bonus(p, ev) for p in order]
    assert bonuses == sorted(bonuses, reverse=True)
    assert all(b > 0 for b in bonuses)


def test_paths_outside_the_indexed_folder_are_dropped_and_the_rest_made_relative() -> None:
    from ragloom.sources.commit_history import _under

    assert _under(["app/a.py", "lib/b.py", "app/x/c.py"], "app/") == ["a.py", "x/c.py"]
    assert _under(["a.py"], "") == ["a.py"]


def test_co_change_tables_and_ranks() -> None:
    from ragloom.retrieve.history import CoChange, co_change_ranks

    live = {"a", "b", "c", "d"}
    changes = [["a", "b"], ["a", "b"], ["a", "c"], ["a", "c", "gone"], ["a", "d"], ["b", "c"]]
    table = CoChange.of(changes, live)
    assert table.counts == {"a": 5, "b": 3, "c": 3, "d": 1}
    assert table.pairs["a"] == {"b": 2, "c": 2, "d": 1}
    # d shared one change with a: chance, no rank; b and c tie on P(. | a) = 2/5
    assert co_change_ranks(["a"], table) == {"b": 1, "c": 2}
    # with b also on top, a gains from b (2/3) and c from a (2/5) only (b-c shared one change)
    assert co_change_ranks(["a", "b"], table) == {"a": 1, "b": 2, "c": 3}
    sweep = [f"f{i}" for i in range(40)]
    assert CoChange.of([sweep], set(sweep)).counts == {}


def test_changes_profile_is_a_strategy_modifier() -> None:
    from ragloom.errors import ConfigError
    from ragloom.retrieve.history import CHANGE_WEIGHTS, DEFAULT_WEIGHTS
    from ragloom.retrieve.search import parse_search_spec

    assert parse_search_spec("hybrid").history is None  # picked per question
    assert parse_search_spec("hybrid+lookup").history == DEFAULT_WEIGHTS
    spec = parse_search_spec("hybrid+changes")
    assert spec.history == CHANGE_WEIGHTS and not spec.history.yields_to_agreement
    assert spec.ranking("history") and spec.name == "hybrid+changes"
    assert parse_search_spec("hybrid+changes+no-history").ranking("history") is False
    with pytest.raises(ConfigError, match=r"\+changes"):
        parse_search_spec("hybrid+chnages")


def test_recent_ranks_follow_the_newest_change_first() -> None:
    newest_first = [["b.py", "a.py"], ["a.py", "c.py"], [f"s{i}" for i in range(40)], ["d.py"]]
    live = {"a.py", "b.py", "c.py", "d.py", "s1"}
    # sweeps take no rank; a file keeps the rank of its newest change; dead paths take none
    assert recent_ranks(newest_first, live) == {"b.py": 1, "a.py": 2, "c.py": 3, "d.py": 4}
    assert recent_ranks([], live) == {}


def test_recency_adds_its_own_rrf_term_only_when_weighted() -> None:
    ev = HistoryEvidence({}, {}, {"a.py": 1})
    assert not ev.empty
    assert file_bonus("a.py", ev) == 0.0
    assert file_bonus("a.py", ev, 0.5, recent_weight=0.75, recent_k=5.0) == pytest.approx(
        0.5 * 0.75 / 6.0
    )
    assert history_evidence([], {"a.py"}, {}, {"a.py": 1}).recent == {"a.py": 1}


@given(
    st.lists(
        st.tuples(st.integers(1, 50), st.floats(0, 10)), max_size=30, unique_by=lambda t: t[0]
    ),
    st.lists(st.integers(1, 50), max_size=5, unique=True),
)
def test_pinned_hits_lead_in_their_order_and_scores_never_rise_down_the_list(
    ranked: list[tuple[int, float]], first: list[int]
) -> None:
    from ragloom.retrieve.stages.history import pin_first as _pin_first

    ranked = sorted(ranked, key=lambda it: -it[1])
    out = _pin_first(ranked, first)
    present = [r for r in first if r in dict(ranked)]
    assert [r for r, _ in out[: len(present)]] == present
    assert sorted(r for r, _ in out) == sorted(r for r, _ in ranked)
    scores = [s for _, s in out]
    assert all(a >= b for a, b in itertools.pairwise(scores))
