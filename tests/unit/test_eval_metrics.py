"""Retrieval metrics: hand-computed examples and properties."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragloom.eval import metrics as m


@dataclass
class H:
    path: str
    start_line: int
    end_line: int
    node_hash: str = ""


RANKED = ["a.py", "b.py", "a.py", "c.py", "d.py"]


def test_recall_at_k_hand_computed() -> None:
    gold = ["a.py", "c.py", "z.py"]
    assert m.recall_at_k(RANKED, gold, 1) == pytest.approx(1 / 3)
    assert m.recall_at_k(RANKED, gold, 3) == pytest.approx(1 / 3)
    assert m.recall_at_k(RANKED, gold, 4) == pytest.approx(2 / 3)
    assert m.recall_at_k(RANKED, gold, 20) == pytest.approx(2 / 3)
    assert m.recall_at_k(RANKED, [], 5) == 0.0
    assert m.recall_at_k([], gold, 5) == 0.0


def test_mrr_hand_computed() -> None:
    assert m.mrr_at_k(RANKED, ["c.py"], 10) == pytest.approx(1 / 4)
    assert m.mrr_at_k(RANKED, ["c.py", "b.py"], 10) == pytest.approx(1 / 2)
    assert m.mrr_at_k(RANKED, ["c.py"], 3) == 0.0
    assert m.mrr_at_k(RANKED, ["a.py"], 1) == 1.0


def test_ndcg_hand_computed() -> None:
    # gold c.py at rank 4 only: DCG = 1/log2(5); ideal = 1/log2(2) = 1
    assert m.ndcg_at_k(RANKED, ["c.py"], 10) == pytest.approx(1 / math.log2(5))
    # gold a, b: ranks 1 and 2 (the repeat of a.py at rank 3 gains nothing) -> perfect
    assert m.ndcg_at_k(RANKED, ["a.py", "b.py"], 10) == pytest.approx(1.0)
    # gold b, d: DCG = 1/log2(3) + 1/log2(6); ideal = 1 + 1/log2(3)
    expected = (1 / math.log2(3) + 1 / math.log2(6)) / (1 + 1 / math.log2(3))
    assert m.ndcg_at_k(RANKED, ["b.py", "d.py"], 10) == pytest.approx(expected)
    assert m.ndcg_at_k(RANKED, ["z.py"], 10) == 0.0


def test_symbol_matching_rules() -> None:
    assert m.symbol_matches("JSONDecoder.decode", "JSONDecoder.decode")
    assert m.symbol_matches("json.decoder.JSONDecoder.decode", "JSONDecoder.decode")
    assert m.symbol_matches("decode", "JSONDecoder.decode")
    assert m.symbol_matches("JSONDecoder.decode.inner", "JSONDecoder.decode")
    assert not m.symbol_matches("JSONDecoder", "JSONDecoder.decode")  # enclosing scope
    assert not m.symbol_matches("raw_decode", "JSONDecoder.decode")  # not a dotted suffix
    assert not m.symbol_matches("", "decode")


def test_symbol_recall_and_mrr_require_gold_file() -> None:
    ranked = [("x.py", "decode"), ("a.py", "Other.f"), ("a.py", "JSONDecoder.decode")]
    gold_syms = ["JSONDecoder.decode"]
    assert m.symbol_recall_at_k(ranked, gold_syms, ["a.py"], 1) == 0.0
    assert m.symbol_recall_at_k(ranked, gold_syms, ["a.py"], 3) == 1.0
    assert m.symbol_mrr_at_k(ranked, gold_syms, ["a.py"], 10) == pytest.approx(1 / 3)
    # without gold files any path counts: the bare "decode" at rank 1 matches
    assert m.symbol_mrr_at_k(ranked, gold_syms, [], 10) == 1.0
    two = ["JSONDecoder.decode", "Missing.f"]
    assert m.symbol_recall_at_k(ranked, two, ["a.py"], 10) == pytest.approx(0.5)


def test_diversity_and_duplication() -> None:
    hits = [
        H("a.py", 1, 10, "h1"),
        H("a.py", 5, 12, "h2"),  # overlaps hit 1 (same file, lines 5-10)
        H("b.py", 1, 3, "h1"),  # identical text to hit 1
        H("a.py", 11, 20, "h4"),  # overlaps hit 2 (11-12)
        H("c.py", 1, 2, "h5"),
    ]
    assert m.diversity_at_k([h.path for h in hits], 10) == 3
    assert m.diversity_at_k([h.path for h in hits], 2) == 1
    assert m.duplication_ratio(hits, 10) == pytest.approx(3 / 5)
    assert m.duplication_ratio(hits, 1) == 0.0
    assert m.duplication_ratio([], 10) == 0.0
    adjacent = [H("a.py", 1, 4), H("a.py", 5, 9)]  # touching, not overlapping; empty hashes
    assert m.duplication_ratio(adjacent, 10) == 0.0
    nested = [H("a.py", 1, 100), H("a.py", 5, 9), H("a.py", 1, 100)]  # class, method, class again
    assert m.duplication_ratio(nested, 10) == pytest.approx(1 / 3)


def test_assembly_coverage() -> None:
    assert m.assembly_coverage(["a.py", "b.py"], ["a.py", "c.py"]) == pytest.approx(0.5)
    assert m.assembly_coverage([], ["a.py"]) == 0.0
    assert m.assembly_coverage(["a.py"], []) == 0.0


def test_unique_files_keeps_rank_order() -> None:
    assert m.unique_files(RANKED) == ["a.py", "b.py", "c.py", "d.py"]


def test_k_must_be_positive() -> None:
    with pytest.raises(ValueError):
        m.recall_at_k(RANKED, ["a.py"], 0)


paths = st.lists(st.sampled_from(["a", "b", "c", "d", "e", "f"]), max_size=25)
golds = st.lists(st.sampled_from(["a", "b", "c", "x", "y"]), min_size=1, max_size=4)


@given(paths, golds)
def test_recall_monotone_in_k(ranked: list[str], gold: list[str]) -> None:
    values = [m.recall_at_k(ranked, gold, k) for k in (1, 5, 10, 20)]
    assert values == sorted(values)
    assert all(0.0 <= v <= 1.0 for v in values)


@given(paths, golds, st.integers(min_value=1, max_value=30))
def test_mrr_and_ndcg_in_unit_interval(ranked: list[str], gold: list[str], k: int) -> None:
    mrr = m.mrr_at_k(ranked, gold, k)
    ndcg = m.ndcg_at_k(ranked, gold, k)
    assert 0.0 <= mrr <= 1.0
    assert 0.0 <= ndcg <= 1.0 + 1e-12
    # a hit in the top k makes both positive, none makes both zero
    hit = any(p in set(gold) for p in ranked[:k])
    assert (mrr > 0) == hit == (ndcg > 0)


@given(golds)
def test_perfect_ranking_scores_one(gold: list[str]) -> None:
    ranked = list(dict.fromkeys(gold))
    assert m.ndcg_at_k(ranked, gold, 10) == pytest.approx(1.0)
    assert m.mrr_at_k(ranked, gold, 10) == 1.0
    assert m.recall_at_k(ranked, gold, 10) == 1.0


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b"]),
            st.integers(1, 30),
            st.integers(0, 10),
            st.sampled_from(["", "h1", "h2"]),
        ),
        max_size=15,
    )
)
def test_duplication_ratio_bounds(raw: list[tuple[str, int, int, str]]) -> None:
    hits = [H(p, s, s + n, h) for p, s, n, h in raw]
    ratio = m.duplication_ratio(hits, 10)
    assert 0.0 <= ratio <= 1.0
    top = hits[:10]
    if top:
        # the first hit never duplicates anything, so at most (n - 1) / n are duplicates
        assert ratio <= (len(top) - 1) / len(top)
