"""RankerModel: the numpy walk of a tree ensemble, the linear form, attribution, refusal of a
model fitted on other features, and (where LightGBM is installed) agreement with LightGBM."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragloom.retrieve.ranker import (
    MAX_MASK_LEAVES,
    RankerModel,
    RankerModelError,
    from_lightgbm_dump,
    load_model,
    model_from_dict,
)

NAMES = ("a", "b", "c")


def _leaf(v: float) -> dict[str, float]:
    return {"leaf_value": v}


def _split(f: int, thr: float, left: dict, right: dict, value: float) -> dict:  # type: ignore[type-arg]
    return {"split_feature": f, "threshold": thr, "decision_type": "<=", "internal_value": value,
            "left_child": left, "right_child": right}  # fmt: skip


DUMP = {
    "tree_info": [
        # a <= 0.5 ? (b <= 1 ? 1 : 2) : 3
        {"tree_structure": _split(0, 0.5, _split(1, 1.0, _leaf(1.0), _leaf(2.0), 1.5), _leaf(3.0), 2.0)},
        # c <= 0 ? -1 : 1
        {"tree_structure": _split(2, 0.0, _leaf(-1.0), _leaf(1.0), 0.0)},
        {"tree_structure": _leaf(0.25)},
    ]
}  # fmt: skip


def _by_hand(x: np.ndarray) -> np.ndarray:
    t1 = np.where(x[:, 0] <= 0.5, np.where(x[:, 1] <= 1.0, 1.0, 2.0), 3.0)
    t2 = np.where(x[:, 2] <= 0.0, -1.0, 1.0)
    return t1 + t2 + 0.25


def _model() -> RankerModel:
    return from_lightgbm_dump(DUMP, features="f1", names=NAMES, meta={})


def test_trees_predict_as_walked_by_hand() -> None:
    x = np.array([[0.0, 0.0, 0.0], [0.0, 2.0, 1.0], [1.0, 0.0, -1.0], [0.5, 1.0, 0.0]])
    assert np.allclose(_model().predict(x), _by_hand(x))


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(*[st.floats(-3, 3, allow_nan=False)] * 3), min_size=1, max_size=20))
def test_trees_and_attribution_agree(rows: list[tuple[float, float, float]]) -> None:
    x = np.array(rows, dtype=np.float64)
    m = _model()
    p = m.predict(x)
    assert np.allclose(p, _by_hand(x))
    # the shares of the features add up to the score minus the ensemble's root values
    base = m.value[:, 0].sum()
    assert np.allclose(m.contributions(x).sum(axis=1) + base, p)


def test_linear_model_and_its_exact_shares() -> None:
    data = {"format": "ragloom-ranker-1", "kind": "linear", "features": "f1", "names": list(NAMES),
            "meta": {}, "linear": {"weight": [1.0, -2.0, 0.0], "mean": [0.0, 1.0, 0.0],
                                   "scale": [1.0, 2.0, 1.0], "bias": 0.5}}  # fmt: skip
    m = model_from_dict(data)
    x = np.array([[1.0, 3.0, 7.0]])
    assert m.predict(x)[0] == pytest.approx(1.0 - 2.0 * (3.0 - 1.0) / 2.0 + 0.5)
    assert np.allclose(m.contributions(x), [[1.0, -2.0, 0.0]])


def test_json_round_trip_is_exact(tmp_path: Path) -> None:
    m = _model()
    p = tmp_path / "m.json"
    p.write_text(json.dumps(m.to_dict()))
    back = load_model(p, features="f1", names=NAMES)
    assert back.digest == m.digest
    x = np.random.default_rng(0).normal(size=(30, 3))
    assert np.array_equal(back.predict(x), m.predict(x))


def test_a_model_of_other_features_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "m.json"
    p.write_text(json.dumps(_model().to_dict()))
    with pytest.raises(RankerModelError, match="fitted on features 'f1'"):
        load_model(p, features="f2", names=NAMES)
    with pytest.raises(RankerModelError, match="columns differ"):
        load_model(p, features="f1", names=("a", "b"))
    with pytest.raises(RankerModelError, match="takes 3 features"):
        _model().predict(np.zeros((2, 4)))
    p.write_text("{not json")
    with pytest.raises(RankerModelError, match="cannot read"):
        load_model(p)
    p.write_text(json.dumps({"format": "other"}))
    with pytest.raises(RankerModelError, match="not a ragloom ranking model"):
        load_model(p)


def test_agrees_with_lightgbm() -> None:
    lgb = pytest.importorskip("lightgbm")
    rng = np.random.default_rng(7)
    x = rng.normal(size=(400, 3))
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).astype(float)
    params = {"objective": "lambdarank", "num_leaves": 7, "min_data_in_leaf": 5, "verbose": -1,
              "seed": 1, "deterministic": True, "num_threads": 1}  # fmt: skip
    booster = lgb.train(params, lgb.Dataset(x, label=y, group=[20] * 20), num_boost_round=15)
    m = from_lightgbm_dump(booster.dump_model(), features="f1", names=NAMES, meta={})
    assert np.allclose(m.predict(x), booster.predict(x), atol=1e-9)
    base = m.value[:, 0].sum()  # the trees' root values: what the shares are measured from
    assert np.allclose(m.contributions(x).sum(axis=1) + base, booster.predict(x), atol=1e-9)


def _walked(m: RankerModel, x: np.ndarray) -> np.ndarray:
    """The score by the level-by-level walk (what ``contributions`` uses), summed tree by tree."""
    node = m._walk(x)[-1]
    return np.asarray(m.value[np.arange(m.value.shape[0])[None, :], node].sum(axis=1))


@settings(max_examples=40, deadline=None)
@given(
    st.integers(2, 31),
    st.integers(1, 12),
    st.integers(0, 2**31 - 1),
    st.lists(
        st.tuples(*[st.floats(-3, 3, allow_nan=False, width=32)] * 3), min_size=1, max_size=30
    ),
)
def test_leaf_masks_give_the_walks_floats(
    leaves: int, rounds: int, seed: int, rows: list[tuple[float, float, float]]
) -> None:
    """Every split tested once and the leaves' bit masks ANDed (:class:`LeafMasks`) give bit
    for bit what walking every tree gives, for trees of any shape, on float32 rows (what the
    stage passes), NaN included."""
    lgb = pytest.importorskip("lightgbm")
    rng = np.random.default_rng(seed)
    train = rng.normal(size=(200, 3))
    y = (train[:, 0] + rng.normal(size=200) * 0.5 > 0).astype(float)
    params = {"objective": "lambdarank", "num_leaves": leaves, "min_data_in_leaf": 3,
              "verbose": -1, "seed": seed % 1000, "deterministic": True, "num_threads": 1}  # fmt: skip
    booster = lgb.train(
        params, lgb.Dataset(train, label=y, group=[20] * 10), num_boost_round=rounds
    )
    m = from_lightgbm_dump(booster.dump_model(), features="f1", names=NAMES, meta={})
    assert m.masks is not None
    x = np.array(rows, dtype=np.float32)
    if len(x) > 1:
        x[-1, int(seed % 3)] = np.nan  # a missing value goes right, as in the walk
    assert np.array_equal(m.masks.predict(x), _walked(m, x))
    assert np.array_equal(m.predict(x), _walked(m, x))
    # a model read back from its JSON has its masks too
    back = model_from_dict(m.to_dict())
    assert back.masks is not None and np.array_equal(back.predict(x), m.predict(x))


def test_a_tree_too_big_for_the_masks_is_walked() -> None:
    """A tree of more leaves than :data:`MAX_MASK_LEAVES` has no masks; ``predict`` walks it
    and gives the walk's floats."""
    lgb = pytest.importorskip("lightgbm")
    rng = np.random.default_rng(5)
    train = rng.normal(size=(2000, 3))
    y = np.minimum((train[:, 0] * 2 + train[:, 1] + 4).astype(int), 30).clip(0).astype(float)
    params = {"objective": "lambdarank", "num_leaves": 2 * MAX_MASK_LEAVES, "min_data_in_leaf": 2,
              "verbose": -1, "seed": 1, "deterministic": True, "num_threads": 1,
              "label_gain": list(range(32))}  # fmt: skip
    booster = lgb.train(params, lgb.Dataset(train, label=y, group=[100] * 20), num_boost_round=2)
    m = from_lightgbm_dump(booster.dump_model(), features="f1", names=NAMES, meta={})
    assert int((m.feature >= 0).sum(axis=1).max()) + 1 > MAX_MASK_LEAVES
    assert m.masks is None
    x = rng.normal(size=(50, 3)).astype(np.float32)
    assert np.array_equal(m.predict(x), _walked(m, x))
    assert np.allclose(m.predict(x), booster.predict(x), atol=1e-9)


def test_the_shipped_trees_give_the_walks_floats() -> None:
    from ragloom.retrieve.stages.learned import default_model

    m = default_model()
    if m.kind != "trees":
        pytest.skip("the shipped model is linear")
    rng = np.random.default_rng(3)
    x = (rng.normal(size=(100, len(m.names))) * 2).astype(np.float32)
    assert np.array_equal(m.predict(x), _walked(m, x))


def _random_trees(rng: np.random.Generator, n_trees: int, max_leaves: int) -> RankerModel:
    """Trees of random shapes (1 to ``max_leaves`` leaves: a leaf is split at random until the
    tree has its leaves), random splits on 3 features and random values, in the flattened
    ``(feature, threshold, left, right, value)`` form :meth:`RankerModel.trees` takes."""
    trees = []
    depth = 0
    for _ in range(n_trees):
        feat, thr, left, right = [-1], [0.0], [0], [0]
        level = [0]
        leaves = [0]
        for _ in range(int(rng.integers(0, max_leaves))):
            j = leaves.pop(int(rng.integers(len(leaves))))
            feat[j], thr[j] = int(rng.integers(3)), float(np.float32(rng.normal()))
            for side in (left, right):
                side[j] = len(feat)
                leaves.append(len(feat))
                level.append(level[j] + 1)
                feat.append(-1)
                thr.append(0.0)
                left.append(len(feat) - 1)
                right.append(len(feat) - 1)
        depth = max(depth, max(level))
        trees.append((feat, thr, left, right, [float(v) for v in rng.normal(size=len(feat))]))
    width = max(len(t[0]) for t in trees)

    def pad(k: int, fill: float) -> list[list[float]]:
        return [list(t[k]) + [fill] * (width - len(t[k])) for t in trees]

    nodes = [pad(0, -1), pad(1, 0.0), pad(2, 0), pad(3, 0), pad(4, 0.0)]
    return RankerModel.trees("f1", NAMES, {}, nodes, depth)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40), st.integers(1, 70), st.integers(0, 2**31 - 1))
def test_leaf_masks_give_the_walks_floats_without_lightgbm(
    n_trees: int, max_leaves: int, seed: int
) -> None:
    """The same check as above on trees of random shapes built here (so it runs in the default
    test run, where LightGBM is not installed): the masks' scores are the walk's floats, NaN
    and values on a threshold included, and a tree of more than :data:`MAX_MASK_LEAVES` leaves
    is walked."""
    rng = np.random.default_rng(seed)
    m = _random_trees(rng, n_trees, max_leaves)
    x = rng.normal(size=(25, 3)).astype(np.float32)
    x[0, :] = np.nan
    roots = m.threshold[:3, 0]
    x[1 : 1 + len(roots), :] = roots[:, None]  # on a root's threshold (float32 exact): left
    leaves = int((m.feature >= 0).sum(axis=1).max()) + 1  # one leaf more than splits
    assert (m.masks is None) == (leaves > MAX_MASK_LEAVES)
    assert np.array_equal(m.predict(x), _walked(m, x))
    assert np.array_equal(model_from_dict(m.to_dict()).predict(x), _walked(m, x))
