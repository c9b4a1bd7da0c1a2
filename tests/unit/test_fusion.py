"""Ranking primitives: normalisation, weighted RRF, MMR, recency, and their config objects."""

from __future__ import annotations

import dataclasses
import itertools
import math
import random
import time
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragloom.errors import ConfigError
from ragloom.retrieve.config import (
    STRATEGY_NAMES,
    Dense,
    Hybrid,
    MmrConfig,
    RecencyConfig,
    RrfConfig,
    ScoreNorm,
    Sparse,
    parse_strategy,
    strategy_name,
)
from ragloom.retrieve.fusion import (
    NonFiniteScoreError,
    apply_recency,
    mmr_select,
    mmr_select_explain,
    normalize_scores,
    recency_boost,
    rrf_fuse,
    rrf_fuse2,
    rrf_fuse_explain,
    rrf_fuse_with,
)

# ---------------------------------------------------------------------------------------------
# strategies for hypothesis
# ---------------------------------------------------------------------------------------------

ids = st.sampled_from([f"id{i:02d}" for i in range(30)])
finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)
any_finite = st.floats(allow_nan=False, allow_infinity=False)
ranked_list = st.lists(st.tuples(ids, finite), max_size=15)
unique_ranked_list = st.lists(ids, max_size=15, unique=True).map(
    lambda xs: [(x, 1.0 / (i + 1)) for i, x in enumerate(xs)]
)
weight = st.floats(min_value=0.0, max_value=5.0, allow_nan=False)


# ---------------------------------------------------------------------------------------------
# config objects
# ---------------------------------------------------------------------------------------------


def test_seed_defaults_exact() -> None:
    rrf = RrfConfig()
    assert (rrf.k, rrf.weight_bm25, rrf.weight_dense) == (60.0, 1.0, 1.0)
    mmr = MmrConfig()
    assert (mmr.lambda_, mmr.sim_metric, mmr.candidate_pool) == (0.7, "cosine", 50)
    rec = RecencyConfig()
    assert (rec.boost, rec.decay_days) == (0.1, 30.0)
    norm = ScoreNorm()
    assert norm.method == "minmax" and norm.clamp and norm.epsilon == 1e-9


@pytest.mark.parametrize(
    "build",
    [
        lambda: RrfConfig(k=0.0),
        lambda: RrfConfig(k=-1.0),
        lambda: RrfConfig(k=math.nan),
        lambda: RrfConfig(weight_bm25=-0.1),
        lambda: RrfConfig(weight_dense=math.inf),
        lambda: RrfConfig(extra_weights={"docs": -1.0}),
        lambda: RrfConfig(extra_weights={"bm25": 1.0}),
        lambda: MmrConfig(lambda_=1.01),
        lambda: MmrConfig(lambda_=-0.01),
        lambda: MmrConfig(candidate_pool=0),
        lambda: MmrConfig(candidate_pool=True),
        lambda: MmrConfig(sim_metric="euclid"),  # type: ignore[arg-type]
        lambda: ScoreNorm(method="rank"),  # type: ignore[arg-type]
        lambda: ScoreNorm(epsilon=-1e-3),
        lambda: ScoreNorm(degenerate=2.0),
        lambda: ScoreNorm(bounds=(1.0, 1.0)),
        lambda: ScoreNorm(logistic_scale=0.0),
        lambda: RecencyConfig(boost=-0.1),
        lambda: RecencyConfig(decay_days=0.0),
    ],
)
def test_invalid_config_raises(build: object) -> None:
    with pytest.raises(ConfigError):
        build()  # type: ignore[operator]


def test_configs_are_frozen_and_hashable() -> None:
    cfg = RrfConfig(extra_weights={"docs": 0.3})
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.k = 10.0  # type: ignore[misc]
    assert hash(cfg) == hash(RrfConfig(extra_weights={"docs": 0.5}))  # weights not hashed
    assert cfg == RrfConfig(extra_weights={"docs": 0.3})
    assert cfg.weights == {"bm25": 1.0, "dense": 1.0, "docs": 0.3}
    with pytest.raises(TypeError):
        cfg.extra_weights["docs"] = 9.0  # type: ignore[index]
    with pytest.raises(ConfigError, match="issues"):
        cfg.weights_for(["bm25", "issues"])


def test_parse_strategy_names_and_round_trip() -> None:
    assert STRATEGY_NAMES == ("dense", "sparse", "hybrid", "hybrid-mmr")
    assert parse_strategy("dense") == Dense()
    assert parse_strategy(" Sparse ") == Sparse()
    assert parse_strategy("hybrid") == Hybrid(RrfConfig(), None)
    assert parse_strategy("hybrid-mmr") == Hybrid(RrfConfig(), MmrConfig())
    custom = parse_strategy("hybrid-mmr", rrf=RrfConfig(k=10.0), mmr=MmrConfig(lambda_=0.5))
    assert custom == Hybrid(RrfConfig(k=10.0), MmrConfig(lambda_=0.5))
    for name in STRATEGY_NAMES:
        assert strategy_name(parse_strategy(name)) == name


def test_parse_strategy_unknown_lists_registry() -> None:
    with pytest.raises(ConfigError) as err:
        parse_strategy("bm25")
    for name in STRATEGY_NAMES:
        assert name in str(err.value)


# ---------------------------------------------------------------------------------------------
# normalisation
# ---------------------------------------------------------------------------------------------


def test_minmax_worked_example() -> None:
    out = normalize_scores([("a", 1.0), ("b", 3.0), ("c", 2.0)], ScoreNorm())
    assert out == [("a", 0.0), ("b", 1.0), ("c", 0.5)]


def test_minmax_degenerate_cases() -> None:
    assert normalize_scores([("a", 7.5)]) == [("a", 1.0)]
    assert normalize_scores([("a", 2.0), ("b", 2.0)]) == [("a", 1.0), ("b", 1.0)]
    # a spread at or below epsilon is constant
    assert normalize_scores([("a", 1.0), ("b", 1.0 + 1e-12)]) == [("a", 1.0), ("b", 1.0)]
    assert normalize_scores([("a", 2.0), ("b", 2.0)], ScoreNorm(degenerate=0.5)) == [
        ("a", 0.5),
        ("b", 0.5),
    ]
    assert normalize_scores([]) == []


def test_minmax_fixed_bounds_and_clamp() -> None:
    scores = [("a", -2.0), ("b", 0.0), ("c", 0.5)]
    assert normalize_scores(scores, ScoreNorm(bounds=(-1.0, 1.0))) == [
        ("a", 0.0),
        ("b", 0.5),
        ("c", 0.75),
    ]
    unclamped = normalize_scores(scores, ScoreNorm(bounds=(-1.0, 1.0), clamp=False))
    assert unclamped == [("a", -0.5), ("b", 0.5), ("c", 0.75)]


def test_zscore_worked_example() -> None:
    out = normalize_scores([("a", 1.0), ("b", 2.0), ("c", 3.0)], ScoreNorm(method="zscore"))
    z = math.sqrt(1.5)  # population std of 1,2,3 is sqrt(2/3); (3-2)/sqrt(2/3) = sqrt(1.5)
    assert [uid for uid, _ in out] == ["a", "b", "c"]
    assert [v for _, v in out] == pytest.approx([-z, 0.0, z])
    assert normalize_scores([("a", 4.0), ("b", 4.0)], ScoreNorm(method="zscore")) == [
        ("a", 0.0),
        ("b", 0.0),
    ]


def test_logistic_worked_example() -> None:
    plain = normalize_scores([("a", 0.0), ("b", 2.0)], ScoreNorm(method="logistic"))
    assert plain[0] == ("a", 0.5)
    assert plain[1][1] == pytest.approx(1.0 / (1.0 + math.exp(-2.0)))
    calibrated = ScoreNorm(method="logistic", logistic_center=2.0, logistic_scale=0.5)
    assert normalize_scores([("x", 3.0)], calibrated)[0][1] == pytest.approx(0.8807970779778823)
    extreme = normalize_scores([("a", -1e308), ("b", 1e308)], ScoreNorm(method="logistic"))
    assert extreme[0][1] < 1e-300 and extreme[1] == ("b", 1.0)  # no overflow warning either


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("method", ["minmax", "zscore", "logistic"])
def test_non_finite_scores_raise(bad: float, method: str) -> None:
    with pytest.raises(NonFiniteScoreError) as err:
        normalize_scores([("a", 1.0), ("b", bad)], ScoreNorm(method=method))  # type: ignore[arg-type]
    assert isinstance(err.value, ConfigError)


def test_extreme_finite_scores_do_not_overflow() -> None:
    out = normalize_scores([("a", -1.7e308), ("b", 0.0), ("c", 1.7e308)])
    assert out == [("a", 0.0), ("b", 0.5), ("c", 1.0)]
    z = normalize_scores([("a", -1.7e308), ("b", 1.7e308)], ScoreNorm(method="zscore"))
    assert [v for _, v in z] == pytest.approx([-1.0, 1.0])


@given(st.lists(st.tuples(ids, any_finite), max_size=20))
def test_minmax_in_unit_interval_and_monotone(scores: list[tuple[str, float]]) -> None:
    out = normalize_scores(scores)
    assert [uid for uid, _ in out] == [uid for uid, _ in scores]
    for _, v in out:
        assert 0.0 <= v <= 1.0
    for (_, x), (_, nx) in zip(scores, out, strict=True):
        for (_, y), (_, ny) in zip(scores, out, strict=True):
            if x < y:
                assert nx <= ny


@given(st.lists(st.tuples(ids, finite), max_size=20), st.randoms(use_true_random=False))
def test_normalisation_stable_under_permutation(
    scores: list[tuple[str, float]], rnd: random.Random
) -> None:
    perm = list(range(len(scores)))
    rnd.shuffle(perm)
    for method in ("minmax", "zscore", "logistic"):
        cfg = ScoreNorm(method=method)
        base = normalize_scores(scores, cfg)
        shuffled = normalize_scores([scores[i] for i in perm], cfg)
        if method == "zscore":  # mean/std summation order may differ in the last ulp
            for (u1, v1), (u2, v2) in zip([base[i] for i in perm], shuffled, strict=True):
                assert u1 == u2 and v1 == pytest.approx(v2, abs=1e-9)
        else:
            assert shuffled == [base[i] for i in perm]


@given(st.lists(st.tuples(ids, any_finite), max_size=20))
def test_logistic_in_unit_interval(scores: list[tuple[str, float]]) -> None:
    for _, v in normalize_scores(scores, ScoreNorm(method="logistic")):
        assert 0.0 <= v <= 1.0


# ---------------------------------------------------------------------------------------------
# RRF
# ---------------------------------------------------------------------------------------------

BM25 = [("a", 12.0), ("b", 9.0), ("c", 3.0)]
DENSE = [("c", 0.9), ("a", 0.8), ("d", 0.7)]


def test_rrf_worked_example_k60() -> None:
    # a: 1/61 + 1/62; c: 1/63 + 1/61; b: 1/62; d: 1/63 (hand-computed, k = 60)
    out = rrf_fuse2(BM25, DENSE, RrfConfig())
    assert [uid for uid, _ in out] == ["a", "c", "b", "d"]
    expected = {
        "a": 0.032522474881015336,
        "c": 0.03226645849596669,
        "b": 0.016129032258064516,
        "d": 0.015873015873015872,
    }
    for uid, score in out:
        assert score == pytest.approx(expected[uid], rel=1e-15)


def test_rrf_weights_can_flip_order() -> None:
    # w_bm25 = 0.5: a = 0.5/61 + 1/62 = 0.0243257..., c = 0.5/63 + 1/61 = 0.0243299...
    out = rrf_fuse2(BM25, DENSE, RrfConfig(weight_bm25=0.5))
    assert [uid for uid, _ in out][:2] == ["c", "a"]
    assert out[0][1] == pytest.approx(0.5 / 63 + 1 / 61)
    assert out[1][1] == pytest.approx(0.5 / 61 + 1 / 62)


def test_rrf_explain_ranks() -> None:
    items = rrf_fuse_explain({"bm25": BM25, "dense": DENSE})
    by_id = {it.id: it for it in items}
    assert by_id["a"].ranks == {"bm25": 1, "dense": 2}
    assert by_id["d"].ranks == {"dense": 3}
    seq = rrf_fuse_explain([BM25, DENSE])
    assert {it.id: dict(it.ranks) for it in seq}["c"] == {"0": 3, "1": 1}


def test_rrf_named_with_config_extra_source() -> None:
    cfg = RrfConfig(extra_weights={"docs": 2.0})
    items = rrf_fuse_with({"bm25": BM25, "docs": [("z", 1.0)]}, cfg)
    assert items[0].id == "z" and items[0].score == pytest.approx(2.0 / 61)
    with pytest.raises(ConfigError):
        rrf_fuse_with({"issues": [("x", 1.0)]}, cfg)


def test_rrf_duplicates_count_once_at_best_rank() -> None:
    out = dict(rrf_fuse([[("a", 1.0), ("a", 0.9), ("b", 0.5)]]))
    assert out["a"] == pytest.approx(1 / 61)
    assert out["b"] == pytest.approx(1 / 63)  # rank = position as given


def test_rrf_ties_by_id_ascending() -> None:
    assert rrf_fuse([[("b", 1.0)], [("a", 1.0)]]) == [("a", 1 / 61), ("b", 1 / 61)]
    assert rrf_fuse([[(5, 1.0)], [(3, 1.0)]]) == [(3, 1 / 61), (5, 1 / 61)]


def test_rrf_boundaries() -> None:
    assert rrf_fuse([]) == []
    assert rrf_fuse([[], []]) == []
    assert rrf_fuse({"bm25": [], "dense": []}) == []
    assert rrf_fuse2([], [("x", 1.0)]) == [("x", 1 / 61)]
    for bad_k in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(ConfigError):
            rrf_fuse([BM25], k=bad_k)
    with pytest.raises(ConfigError):
        rrf_fuse([BM25], weights=[-1.0])
    with pytest.raises(NonFiniteScoreError):
        rrf_fuse([BM25], weights=[math.nan])
    with pytest.raises(ConfigError):
        rrf_fuse([BM25, DENSE], weights=[1.0])
    with pytest.raises(ConfigError):
        rrf_fuse({"bm25": BM25}, weights={"dense": 1.0})
    with pytest.raises(ConfigError):
        rrf_fuse([BM25], weights={"bm25": 1.0})


@given(
    st.lists(st.tuples(unique_ranked_list, weight), max_size=5), st.randoms(use_true_random=False)
)
def test_rrf_order_independent_across_lists(
    lists_w: list[tuple[list[tuple[str, float]], float]], rnd: random.Random
) -> None:
    lists = [lw[0] for lw in lists_w]
    ws = [lw[1] for lw in lists_w]
    base = rrf_fuse(lists, ws)
    perm = list(range(len(lists)))
    rnd.shuffle(perm)
    assert rrf_fuse([lists[i] for i in perm], [ws[i] for i in perm]) == base
    named = {f"m{i}": lst for i, lst in enumerate(lists)}
    named_w = {f"m{i}": w for i, w in enumerate(ws)}
    assert rrf_fuse(dict(reversed(list(named.items()))), named_w) == base


@given(st.lists(ranked_list, max_size=4), st.floats(min_value=0.5, max_value=200.0))
def test_rrf_deterministic_sorted_and_union(lists: list[list[tuple[str, float]]], k: float) -> None:
    out = rrf_fuse(lists, k=k)
    assert out == rrf_fuse(lists, k=k)
    assert [uid for uid, _ in out] == [uid for uid, _ in sorted(out, key=lambda x: (-x[1], x[0]))]
    assert {uid for uid, _ in out} == {uid for lst in lists for uid, _ in lst}
    assert len({uid for uid, _ in out}) == len(out)
    for uid, score in out:
        best_ranks = []
        for lst in lists:
            pos = [i for i, (u, _) in enumerate(lst, 1) if u == uid]
            if pos:
                best_ranks.append(pos[0])
        assert score == pytest.approx(sum(1.0 / (k + r) for r in best_ranks), rel=1e-12)


@given(ranked_list, ids)
def test_rrf_duplicates_appended_change_nothing(lst: list[tuple[str, float]], extra: str) -> None:
    if not lst:
        return
    dup = lst[len(lst) // 2][0]
    assert rrf_fuse([[*lst, (dup, 0.0)]]) == rrf_fuse([lst])


@given(unique_ranked_list, unique_ranked_list, st.data())
def test_rrf_monotone_in_rank(
    a: list[tuple[str, float]], b: list[tuple[str, float]], data: st.DataObject
) -> None:
    if len(a) < 2:
        return
    i = data.draw(st.integers(min_value=1, max_value=len(a) - 1))
    promoted = list(a)
    promoted[i - 1], promoted[i] = promoted[i], promoted[i - 1]
    up, down = a[i][0], a[i - 1][0]
    before = dict(rrf_fuse([a, b]))
    after = dict(rrf_fuse([promoted, b]))
    assert after[up] > before[up]
    assert after[down] < before[down]


# ---------------------------------------------------------------------------------------------
# MMR
# ---------------------------------------------------------------------------------------------

E2 = {
    "a": np.array([1.0, 0.0]),
    "b": np.array([4.0, 3.0]),  # cosine 0.8 with a, 0.6 with c (not unit length on purpose)
    "c": np.array([0.0, 1.0]),
}
CANDS = [("a", 0.9), ("b", 0.8), ("c", 0.6)]


def test_mmr_worked_example_lambda_07() -> None:
    # pick a (top relevance); then b: 0.7*0.8 - 0.3*0.8 = 0.32, c: 0.7*0.6 - 0.3*0 = 0.42 -> c;
    # then b: 0.7*0.8 - 0.3*max(0.8, 0.6) = 0.32.
    picks = mmr_select_explain(CANDS, 3, E2, MmrConfig(lambda_=0.7))
    assert [p.id for p in picks] == ["a", "c", "b"]
    assert [p.mmr_score for p in picks] == pytest.approx([0.63, 0.42, 0.32])
    assert [p.max_sim for p in picks] == pytest.approx([0.0, 0.0, 0.8])
    assert mmr_select(CANDS, 3, E2, MmrConfig()) == [("a", 0.9), ("c", 0.6), ("b", 0.8)]


def test_mmr_worked_example_lambda_09() -> None:
    # b: 0.9*0.8 - 0.1*0.8 = 0.64 beats c: 0.9*0.6 = 0.54; then c: 0.54 - 0.1*0.6 = 0.48
    picks = mmr_select_explain(CANDS, 3, E2, MmrConfig(lambda_=0.9))
    assert [p.id for p in picks] == ["a", "b", "c"]
    assert [p.mmr_score for p in picks] == pytest.approx([0.81, 0.64, 0.48])


def test_mmr_dot_metric_uses_raw_vectors() -> None:
    # dot: sim(a, b) = 4, so b: 0.7*0.8 - 0.3*4 < c: 0.42
    out = mmr_select(CANDS, 2, E2, MmrConfig(sim_metric="dot"))
    assert [uid for uid, _ in out] == ["a", "c"]


def test_mmr_missing_embedding_is_zero_vector() -> None:
    emb = {"a": np.array([1.0, 0.0]), "b": np.array([1.0, 0.0])}
    # c has no vector: similarity 0, so it beats the duplicate b (0.7*0.8 - 0.3 = 0.26 < 0.35)
    out = mmr_select([("a", 0.9), ("b", 0.8), ("c", 0.5)], 3, emb, MmrConfig())
    assert [uid for uid, _ in out] == ["a", "c", "b"]
    zero = {"a": np.zeros(2), "b": np.array([1.0, 0.0])}
    assert [u for u, _ in mmr_select([("a", 0.9), ("b", 0.8)], 2, zero)] == ["a", "b"]


def test_mmr_ties_by_id_ascending() -> None:
    assert mmr_select([("b", 0.5), ("a", 0.5), ("c", 0.5)], 3, {}) == [
        ("a", 0.5),
        ("b", 0.5),
        ("c", 0.5),
    ]
    # lambda = 0: every later objective is -max_sim = 0 with no vectors -> id order
    out = mmr_select([("z", 0.9), ("y", 0.1), ("x", 0.5)], 3, {}, MmrConfig(lambda_=0.0))
    assert [uid for uid, _ in out] == ["z", "x", "y"]


def test_mmr_pool_limits_candidates() -> None:
    cands = [("a", 0.9), ("b", 0.8), ("c", 0.1)]
    out = mmr_select(cands, 3, {}, MmrConfig(candidate_pool=2))
    assert [uid for uid, _ in out] == ["a", "b"]


def test_mmr_boundaries() -> None:
    assert mmr_select(CANDS, 0, E2) == []
    assert mmr_select([], 5, E2) == []
    assert mmr_select([("only", 0.3)], 5, {}) == [("only", 0.3)]
    assert mmr_select([("a", 0.2), ("a", 0.9), ("b", 0.5)], 5, {}) == [("a", 0.9), ("b", 0.5)]
    with pytest.raises(ConfigError):
        mmr_select(CANDS, -1, E2)
    with pytest.raises(NonFiniteScoreError):
        mmr_select([("a", math.nan)], 1, {})
    with pytest.raises(NonFiniteScoreError):
        mmr_select(CANDS, 2, {**E2, "c": np.array([math.nan, 0.0])})
    with pytest.raises(ConfigError):
        mmr_select(CANDS, 2, {**E2, "c": np.array([1.0, 0.0, 0.0])})


def test_mmr_int_ids() -> None:
    out = mmr_select([(3, 0.9), (1, 0.9), (2, 0.1)], 2, {})
    assert out == [(1, 0.9), (3, 0.9)]


@st.composite
def mmr_inputs(
    draw: st.DrawFn,
) -> tuple[list[tuple[str, float]], dict[str, np.ndarray], int, float, int]:
    cands = draw(st.lists(st.tuples(ids, st.floats(0.0, 1.0)), max_size=25))
    dim = 3
    emb: dict[str, np.ndarray] = {}
    for uid in {u for u, _ in cands}:
        if draw(st.booleans()):
            vec = draw(st.lists(st.floats(-1.0, 1.0), min_size=dim, max_size=dim))
            emb[uid] = np.asarray(vec)
    k = draw(st.integers(0, 30))
    lam = draw(st.floats(0.0, 1.0))
    pool = draw(st.integers(1, 30))
    return cands, emb, k, lam, pool


@settings(max_examples=150)
@given(mmr_inputs(), st.randoms(use_true_random=False))
def test_mmr_properties(
    inp: tuple[list[tuple[str, float]], dict[str, np.ndarray], int, float, int], rnd: random.Random
) -> None:
    cands, emb, k, lam, pool = inp
    cfg = MmrConfig(lambda_=lam, candidate_pool=pool)
    out = mmr_select(cands, k, emb, cfg)
    best: dict[str, float] = {}
    for uid, s in cands:
        best[uid] = max(s, best.get(uid, -1.0))
    ranked = sorted(best.items(), key=lambda kv: (-kv[1], kv[0]))
    out_ids = [uid for uid, _ in out]
    assert len(set(out_ids)) == len(out_ids)  # distinct
    assert len(out) == min(k, pool, len(best))  # size min(k, pool)
    assert set(out_ids) <= {uid for uid, _ in ranked[:pool]}  # only from the pool
    assert all(best[uid] == s for uid, s in out)  # relevance as given
    if out:
        assert out[0] == ranked[0]  # first = top relevance, ties id asc
    shuffled = list(cands)
    rnd.shuffle(shuffled)
    assert mmr_select(shuffled, k, emb, cfg) == out  # deterministic, input order irrelevant
    lam1 = mmr_select(cands, k, emb, MmrConfig(lambda_=1.0, candidate_pool=pool))
    assert lam1 == ranked[: min(k, pool)]  # lambda = 1 is relevance order


def test_mmr_speed_k15_pool50_dim384() -> None:
    rng = np.random.default_rng(7)
    cands = [(f"c{i:02d}", float(rng.random())) for i in range(50)]
    emb = {uid: rng.standard_normal(384).astype(np.float32) for uid, _ in cands}
    cfg = MmrConfig()
    mmr_select(cands, 15, emb, cfg)
    best = math.inf
    for _ in range(20):
        t = time.perf_counter()
        out = mmr_select(cands, 15, emb, cfg)
        best = min(best, time.perf_counter() - t)
    assert len(out) == 15
    assert best < 1e-3, f"mmr_select took {best * 1e3:.3f} ms"


# ---------------------------------------------------------------------------------------------
# recency
# ---------------------------------------------------------------------------------------------


def test_recency_boost_formula() -> None:
    assert recency_boost(0.0) == 0.1
    assert recency_boost(30 * 86400.0) == pytest.approx(0.1 / math.e)
    assert recency_boost(60 * 86400.0, boost=0.2, decay_days=60.0) == pytest.approx(0.2 / math.e)
    assert recency_boost(-5.0) == 0.1  # future dates count as now
    with pytest.raises(NonFiniteScoreError):
        recency_boost(math.nan)
    with pytest.raises(ConfigError):
        recency_boost(1.0, decay_days=0.0)
    with pytest.raises(ConfigError):
        recency_boost(1.0, boost=-1.0)


@given(st.floats(0.0, 1e10), st.floats(0.0, 1e10))
def test_recency_boost_decreases_with_age(a: float, b: float) -> None:
    lo, hi = sorted((a, b))
    assert 0.0 <= recency_boost(hi) <= recency_boost(lo) <= 0.1


def test_apply_recency() -> None:
    now = datetime(2026, 1, 31, tzinfo=UTC)
    dates = {"old": now - timedelta(days=300), "new": now - timedelta(days=1)}
    out = apply_recency([("old", 0.5), ("new", 0.5), ("undated", 0.5)], dates, now)
    assert [uid for uid, _ in out] == ["new", "old", "undated"]
    assert dict(out)["new"] == pytest.approx(0.5 + 0.1 * math.exp(-1 / 30))
    assert dict(out)["undated"] == 0.5
    epoch = apply_recency([("x", 0.2)], {"x": 1000.0}, 1000.0 + 86400.0 * 30, RecencyConfig())
    assert epoch[0][1] == pytest.approx(0.2 + 0.1 / math.e)
    with pytest.raises(ConfigError):
        apply_recency([("x", 0.2)], {"x": datetime(2026, 1, 1)}, now)
    with pytest.raises(NonFiniteScoreError):
        apply_recency([("x", math.nan)], {}, now)


# -- file evidence (issue 11) ---------------------------------------------------------------
def test_file_scores_formula() -> None:
    from ragloom.retrieve.fusion import file_scores

    ranked = [(1, 0.5), (2, 0.4), (3, 0.3), (4, 0.2)]
    paths = {1: "a.py", 2: "b.py", 3: "b.py", 4: "b.py"}
    out = file_scores(ranked, paths, weight=0.5, decay=0.5, top=4)
    assert out["a.py"] == pytest.approx(0.5)
    assert out["b.py"] == pytest.approx(0.4 + 0.5 * (0.3 + 0.5 * 0.2))
    assert file_scores(ranked, paths, weight=0.5, decay=0.5, top=1)["b.py"] == pytest.approx(
        0.4 + 0.5 * 0.3
    )


def test_file_evidence_lifts_file_with_support() -> None:
    from ragloom.retrieve.fusion import file_evidence

    ranked = [(1, 0.5), (2, 0.4), (3, 0.3)]
    paths = {1: "a.py", 2: "b.py", 3: "b.py"}
    assert [i for i, _ in file_evidence(ranked, paths, 1.0, 0.5, 4)] == [2, 3, 1]
    assert [i for i, _ in file_evidence(ranked, paths, 0.0, 0.5, 4)] == [1, 2, 3]


def test_file_evidence_rejects_bad_params() -> None:
    from ragloom.retrieve.fusion import file_evidence

    with pytest.raises(ConfigError):
        file_evidence([(1, 1.0)], {}, -1.0, 0.5, 4)
    with pytest.raises(ConfigError):
        file_evidence([(1, 1.0)], {}, 1.0, 1.5, 4)
    with pytest.raises(ConfigError):
        file_evidence([(1, float("nan"))], {}, 1.0, 0.5, 4)


@given(
    st.lists(
        st.tuples(st.integers(0, 30), st.floats(0, 1), st.sampled_from("abcd")),
        unique_by=lambda t: t[0],
        max_size=25,
    ),
    st.floats(0, 2),
    st.floats(0, 1),
    st.integers(0, 6),
)
def test_file_evidence_properties(
    items: list[tuple[int, float, str]], weight: float, decay: float, top: int
) -> None:
    """Same ids; sorted; order inside a file kept; first-seen file order = file_scores order."""
    from ragloom.retrieve.fusion import file_evidence, file_scores

    ranked = sorted(((i, s) for i, s, _ in items), key=lambda it: (-it[1], it[0]))
    paths = {i: p for i, _, p in items}
    out = file_evidence(ranked, paths, weight, decay, top)
    assert sorted(i for i, _ in out) == sorted(i for i, _ in ranked)
    assert out == sorted(out, key=lambda it: (-it[1], it[0]))
    old, new = dict(ranked), dict(out)
    for i in old:
        for j in old:
            if paths[i] == paths[j] and old[i] > old[j]:
                assert new[i] >= new[j]  # a file's own order is kept (ties may form)
    fs = file_scores(ranked, paths, weight, decay, top)
    seen = [fs[f] for f in dict.fromkeys(paths[i] for i, _ in out)]
    assert all(a >= b - 1e-9 for a, b in itertools.pairwise(seen))


def test_dense_ties_come_in_row_order_and_nothing_else_moves() -> None:
    from ragloom.retrieve.search import tied_by_row

    hits = [(9, 0.9), (7, 0.8), (3, 0.8), (5, 0.8), (1, 0.7), (8, 0.6), (2, 0.6)]
    assert tied_by_row(hits) == [
        (9, 0.9),
        (3, 0.8),
        (5, 0.8),
        (7, 0.8),
        (1, 0.7),
        (2, 0.6),
        (8, 0.6),
    ]
    untied = [(4, 0.9), (1, 0.5), (3, 0.1)]
    assert tied_by_row(untied) is untied
    assert tied_by_row([]) == []


@given(
    st.lists(st.tuples(ranked_list, weight), max_size=5),
    st.floats(min_value=0.5, max_value=200.0),
)
def test_rrf_fuse_is_exactly_the_explained_fusion(
    lists_w: list[tuple[list[tuple[str, float]], float]], k: float
) -> None:
    """The hot path (dicts per list, one addition for two parts) gives the very ids and float
    scores of ``rrf_fuse_explain`` (fsum of every part), for any number of lists."""
    lists = {f"m{i}": lw[0] for i, lw in enumerate(lists_w)}
    ws = {f"m{i}": lw[1] for i, lw in enumerate(lists_w)}
    explained = [(it.id, it.score) for it in rrf_fuse_explain(lists, ws, k)]
    fast = rrf_fuse(lists, ws, k)
    assert [(i, s.hex()) for i, s in fast] == [(i, s.hex()) for i, s in explained]


def _file_evidence_reference(
    ranked: list[tuple[int, float]], paths: dict[int, str], weight: float, decay: float, top: int
) -> list[tuple[int, float]]:
    """The general formula of ``file_evidence`` written out (what its weight-0 path skips)."""
    from ragloom.retrieve.fusion import file_scores

    files = file_scores(ranked, paths, weight, decay, top)
    best: dict[str, float] = {}
    for cid, score in ranked:
        f = paths.get(cid, repr(cid))
        best[f] = max(best.get(f, score), score)
    out = [(c, s + (files[paths.get(c, repr(c))] - best[paths.get(c, repr(c))])) for c, s in ranked]
    return sorted(out, key=lambda it: (-it[1], it[0]))


@given(
    st.lists(
        st.tuples(st.integers(0, 30), st.floats(-1, 1), st.sampled_from("abcd")),
        unique_by=lambda t: t[0],
        max_size=25,
    ),
    st.floats(0, 1),
    st.integers(0, 6),
)
def test_file_evidence_at_weight_zero_only_resorts(
    items: list[tuple[int, float, str]], decay: float, top: int
) -> None:
    from ragloom.retrieve.fusion import file_evidence

    ranked = [(i, s) for i, s, _ in items]  # any order, -0.0 included
    paths = {i: p for i, _, p in items[::2]}  # some ids without a path
    out = file_evidence(ranked, paths, 0.0, decay, top)
    ref = _file_evidence_reference(ranked, paths, 0.0, decay, top)
    assert [(i, s.hex()) for i, s in out] == [(i, s.hex()) for i, s in ref]


@given(st.lists(st.tuples(st.integers(0, 40), st.sampled_from([0.1, 0.2, 0.3, 0.4])), max_size=30))
def test_tied_by_row_sorts_each_run_of_equal_scores(hits: list[tuple[int, float]]) -> None:
    from ragloom.retrieve.search import tied_by_row

    hits = sorted(hits, key=lambda h: -h[1])  # best first, ties in any order
    out = tied_by_row(hits)
    expected = [h for _, run in itertools.groupby(hits, key=lambda h: h[1]) for h in sorted(run)]
    assert out == expected
