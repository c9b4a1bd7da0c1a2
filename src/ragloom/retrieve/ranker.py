"""A learned ranking model, evaluated with numpy alone (issue 22; docs/ranking.md "Learned
ranking").

Training (``scripts/train_ranker.py``) uses LightGBM's LambdaRank, an optional dependency
(``pip install ragloom[learn]``); what ships is this module's JSON form of the fitted model, so
ranking needs no LightGBM at run time. Two kinds of model have the one interface:

- ``trees``: a sum of regression trees (LightGBM's dump, flattened into arrays and scored for
  every candidate and every tree at once by the leaves' bit masks, :class:`LeafMasks`);
- ``linear``: a weighted sum of standardised features.

Every model names the feature set it was fitted on (:data:`~ragloom.retrieve.stages.features.
FEATURES_VERSION`) and its columns; :func:`load_model` refuses a model of another feature set
with :class:`RankerModelError`, so nothing ranks with garbage. :meth:`RankerModel.contributions`
gives each feature's share of a candidate's score (exact for ``linear``; for ``trees``, the
change in the node's mean value at each split the candidate passed, which sums to its score
minus the ensemble's mean, "Saabas" attribution), for ``--explain``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ragloom.errors import ConfigError

__all__ = [
    "RankerModel",
    "RankerModelError",
    "Scorer",
    "from_lightgbm_dump",
    "load_model",
    "model_from_dict",
]

MODEL_FORMAT = "ragloom-ranker-1"


class RankerModelError(ConfigError):
    """A ranking model that cannot be used: unreadable, of another format, or fitted on
    features other than the ones this ragloom computes."""


class Scorer(Protocol):
    """What the learned stage ranks with: the global :class:`RankerModel` or a repository's
    :class:`~ragloom.retrieve.adapt.AdaptedModel`."""

    @property
    def kind(self) -> str: ...
    @property
    def digest(self) -> str: ...
    @property
    def names(self) -> tuple[str, ...]: ...
    @property
    def level(self) -> str: ...
    def predict(self, x: np.ndarray) -> np.ndarray: ...
    def contributions(self, x: np.ndarray) -> np.ndarray: ...


@dataclass(frozen=True, slots=True)
class RankerModel:
    """A fitted scorer of feature rows (higher ranks first)."""

    kind: str
    """``trees`` or ``linear``."""
    features: str
    """The feature set it was fitted on."""
    names: tuple[str, ...]
    """Its columns, in order."""
    meta: Mapping[str, Any]
    """Provenance: training data, seed, counts, figures."""
    # trees: (T, N) arrays of the nodes of every tree, padded; leaves have feature -1
    feature: np.ndarray
    threshold: np.ndarray
    left: np.ndarray
    right: np.ndarray
    value: np.ndarray
    """The output of a leaf; the mean output of the node's leaves for an inner node."""
    depth: int
    # linear: score = sum(weight * (x - mean) / scale) + bias
    weight: np.ndarray
    mean: np.ndarray
    scale: np.ndarray
    bias: float
    masks: LeafMasks | None = None
    """Trees: the leaves' bit masks, for :meth:`predict` (built by :meth:`trees`; None for a
    tree too big for them, which is walked)."""

    @classmethod
    def linear(
        cls,
        features: str,
        names: Sequence[str],
        meta: Mapping[str, Any],
        weight: np.ndarray,
        mean: np.ndarray,
        scale: np.ndarray,
        bias: float = 0.0,
    ) -> RankerModel:
        """A linear model: ``sum(weight * (x - mean) / scale) + bias``."""
        none_i, none_f = np.zeros((0, 1), dtype=np.int32), np.zeros((0, 1), dtype=np.float64)
        return cls("linear", features, tuple(names), dict(meta), none_i, none_f, none_i,
                   none_i, none_f, 0, np.asarray(weight, dtype=np.float64),
                   np.asarray(mean, dtype=np.float64), np.asarray(scale, dtype=np.float64),
                   float(bias))  # fmt: skip

    @classmethod
    def trees(
        cls,
        features: str,
        names: Sequence[str],
        meta: Mapping[str, Any],
        nodes: Sequence[Any],
        depth: int,
    ) -> RankerModel:
        """A tree ensemble from its ``(feature, threshold, left, right, value)`` node arrays,
        each of shape ``(trees, nodes)``."""
        feature, threshold, left, right, value = nodes
        n = len(names)
        model = cls("trees", features, tuple(names), dict(meta),
                   np.asarray(feature, dtype=np.int32), np.asarray(threshold, dtype=np.float64),
                   np.asarray(left, dtype=np.int32), np.asarray(right, dtype=np.int32),
                   np.asarray(value, dtype=np.float64), int(depth),
                   np.zeros(n), np.zeros(n), np.ones(n), 0.0)  # fmt: skip
        return dataclasses.replace(model, masks=LeafMasks.of(model))

    @property
    def level(self) -> str:
        """What it was fitted to rank: ``chunk`` (every candidate) or ``file`` (each file's first
        candidate, whose score its file's other candidates share)."""
        return str(self.meta.get("level", "chunk"))

    @property
    def digest(self) -> str:
        """A short hash of the model's content (shown by ``status`` and in explain)."""
        h = hashlib.sha256()
        for a in (self.feature, self.threshold, self.left, self.right, self.value, self.weight):
            h.update(np.ascontiguousarray(a).tobytes())
        h.update(self.kind.encode())
        return h.hexdigest()[:12]

    def predict(self, x: np.ndarray) -> np.ndarray:
        """One score per row of ``x`` (rows of :attr:`names`)."""
        if x.ndim != 2 or x.shape[1] != len(self.names):
            raise RankerModelError(
                f"the model takes {len(self.names)} features, got a matrix of shape {x.shape}"
            )
        if self.kind == "linear":
            return np.asarray(((x - self.mean) / self.scale) @ self.weight + self.bias)
        if self.masks is not None:
            return self.masks.predict(x)
        node = self._walk(x)[-1]
        base = (np.arange(self.value.shape[0], dtype=np.intp) * self.value.shape[1])[None, :]
        return np.asarray(self.value.ravel().take(base + node).sum(axis=1))

    def contributions(self, x: np.ndarray) -> np.ndarray:
        """Each feature's share of each row's score, shape ``(rows, features)``."""
        if self.kind == "linear":
            return np.asarray(((x - self.mean) / self.scale) * self.weight)
        out = np.zeros(x.shape, dtype=np.float64)
        path = self._walk(x)
        trees = np.arange(self.value.shape[0])[None, :]
        rows = np.arange(x.shape[0])[:, None]
        for before, after in itertools.pairwise(path):
            moved = after != before
            if not moved.any():
                break
            feat = self.feature[trees, before]
            delta = self.value[trees, after] - self.value[trees, before]
            np.add.at(out, (np.broadcast_to(rows, feat.shape)[moved], feat[moved]), delta[moved])
        return out

    def _walk(self, x: np.ndarray) -> list[np.ndarray]:
        """The node every row is at in every tree, level by level: ``depth + 1`` arrays of
        shape ``(rows, trees)``, the root first and the leaves last. Flat ``take`` look-ups
        (a tree's node ``j`` at ``tree * width + j``, a row's feature ``f`` at
        ``row * columns + f``) rather than two-dimensional fancy indexing (1.3 -> 0.7 ms for 100
        rows and 300 trees). Scores come from :class:`LeafMasks`; the walk serves
        :meth:`contributions` (explain), which needs every node a row passed."""
        n, t = x.shape[0], self.feature.shape[0]
        width = self.feature.shape[1]
        base = (np.arange(t, dtype=np.intp) * width)[None, :]
        feature, threshold = self.feature.ravel(), self.threshold.ravel()
        left, right = self.left.ravel(), self.right.ravel()
        xs = np.ascontiguousarray(x).ravel()
        row_base = (np.arange(n, dtype=np.intp) * x.shape[1])[:, None]
        node = np.zeros((n, t), dtype=np.int32)
        path = [node]
        for _ in range(self.depth):
            at = base + node
            feat = feature.take(at)
            inner = feat >= 0
            if not inner.any():
                break
            xv = xs.take(row_base + np.maximum(feat, 0))
            go_left = xv <= threshold.take(at)
            nxt = np.where(go_left, left.take(at), right.take(at))
            node = np.where(inner, nxt, node).astype(np.int32)
            path.append(node)
        return path

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "format": MODEL_FORMAT,
            "kind": self.kind,
            "features": self.features,
            "names": list(self.names),
            "meta": dict(self.meta),
        }
        if self.kind == "linear":
            out["linear"] = {
                "weight": [float(v) for v in self.weight],
                "mean": [float(v) for v in self.mean],
                "scale": [float(v) for v in self.scale],
                "bias": float(self.bias),
            }
        else:
            out["trees"] = {
                "feature": self.feature.tolist(),
                "threshold": [[float(v) for v in r] for r in self.threshold],
                "left": self.left.tolist(),
                "right": self.right.tolist(),
                "value": [[float(v) for v in r] for r in self.value],
                "depth": self.depth,
            }
        return out


MAX_MASK_LEAVES = 64
"""Trees of up to this many leaves are scored by :class:`LeafMasks` (a leaf per bit of a
``uint64``); a model with a bigger tree is walked level by level (:meth:`RankerModel._walk`).
LightGBM's ``num_leaves`` here is 3 to 7."""


@dataclass(frozen=True, slots=True)
class LeafMasks:
    """A tree ensemble scored as QuickScorer does (Lucchese et al., SIGIR 2015): each tree's
    leaves are numbered left to right and every split carries a bit mask of the leaves that
    stay reachable when a row goes right at it (its left subtree's leaves cleared). A row's
    leaf in a tree is the lowest bit left after the masks of the splits it goes right at are
    ANDed together, so every split is tested once for every row and no tree is walked: the
    cost grows with the splits, not with their depth. Each row's score is its leaves' values
    summed tree by tree, as the walk sums them, so both give the same floats."""

    split_feature: np.ndarray
    """(trees * width,) the feature each split tests: tree ``i``'s splits at ``i * width``
    on, padded with splits that keep every leaf."""
    split_threshold: np.ndarray
    """(trees * width,) its threshold: a row goes left when ``x[feature] <= threshold``."""
    split_mask: np.ndarray
    """(trees * width,) the tree's leaves still reachable after going right here, a bit each
    (the narrowest unsigned type that holds the biggest tree's leaves; every bit for padding)."""
    width: int
    """The splits of the biggest tree (at least 1)."""
    leaf_value: np.ndarray
    """(trees * leaves,) the value of leaf ``j`` (left to right) of tree ``i`` at
    ``i * leaves + j`` (0 for padding, which no row reaches)."""
    n_leaves: int
    """The leaves of the biggest tree (the stride of :attr:`leaf_value`)."""

    @classmethod
    def of(cls, model: RankerModel) -> LeafMasks | None:
        """The masks of ``model``'s trees; None when a tree has more than
        :data:`MAX_MASK_LEAVES` leaves."""
        every = (1 << MAX_MASK_LEAVES) - 1
        per_tree: list[tuple[list[tuple[int, float, int]], list[float]]] = []
        for i in range(model.feature.shape[0]):
            splits: list[tuple[int, float, int]] = []
            leaves: list[float] = []

            def visit(
                j: int, i: int = i, splits: list[tuple[int, float, int]] = splits,
                leaves: list[float] = leaves,
            ) -> tuple[int, int]:  # fmt: skip
                """Number the leaves under node ``j`` left to right; (first, end) of theirs."""
                if int(model.feature[i, j]) < 0:
                    leaves.append(float(model.value[i, j]))
                    return len(leaves) - 1, len(leaves)
                k = len(splits)
                splits.append((int(model.feature[i, j]), float(model.threshold[i, j]), every))
                first, mid = visit(int(model.left[i, j]))
                _, end = visit(int(model.right[i, j]))
                splits[k] = (*splits[k][:2], every & ~(((1 << (mid - first)) - 1) << first))
                return first, end

            visit(0)
            if len(leaves) > MAX_MASK_LEAVES:
                return None
            per_tree.append((splits, leaves))
        t = len(per_tree)
        width = max((len(sp) for sp, _ in per_tree), default=0) or 1
        n_leaves = max((len(lv) for _, lv in per_tree), default=1)
        dtype = next(d for d in (np.uint8, np.uint16, np.uint32, np.uint64)
                     if np.iinfo(d).bits >= n_leaves)  # fmt: skip
        top = int(np.iinfo(dtype).max)
        feature = np.zeros((t, width), dtype=np.intp)
        threshold = np.full((t, width), np.inf, dtype=np.float64)
        mask = np.full((t, width), top, dtype=dtype)
        values = np.zeros((t, n_leaves), dtype=np.float64)
        for i, (splits, leaves) in enumerate(per_tree):
            for k, (f, thr, m) in enumerate(splits):
                feature[i, k], threshold[i, k], mask[i, k] = f, thr, m & top
            values[i, : len(leaves)] = leaves
        return cls(feature.ravel(), threshold.ravel(), mask.ravel(), width, values.ravel(),
                   n_leaves)  # fmt: skip

    def predict(self, x: np.ndarray) -> np.ndarray:
        """One score per row of ``x``: the same floats as walking every tree."""
        n, t = x.shape[0], len(self.split_feature) // self.width
        if t == 0:
            return np.zeros(n)
        went_left = x[:, self.split_feature] <= self.split_threshold  # (rows, splits)
        # a split gone left keeps every leaf: its mask with every bit set (0 - 1 wraps)
        kept = (self.split_mask | (~went_left.astype(self.split_mask.dtype) + 1)).reshape(
            n, t, self.width
        )
        reach = kept[:, :, 0]
        for k in range(1, self.width):
            reach = reach & kept[:, :, k]  # (rows, trees)
        if self.split_mask.dtype.itemsize <= 2:
            leaf = _LOWEST_BIT.take(reach)
        else:
            lowest = reach & (~reach + 1)
            leaf = np.log2(lowest.astype(np.float64)).astype(np.intp)  # exact: powers of two
        at = (np.arange(t, dtype=np.intp) * self.n_leaves)[None, :] + leaf
        return np.asarray(self.leaf_value.take(at).sum(axis=1))


_LOWEST_BIT = np.array([(v & -v).bit_length() - 1 if v else 0 for v in range(1 << 16)], np.intp)
"""The index of the lowest set bit of every 16-bit value (masks of up to 16 leaves)."""


def model_from_dict(
    data: Mapping[str, Any], *, features: str | None = None, names: Sequence[str] | None = None
) -> RankerModel:
    """A model from its JSON form; with ``features`` / ``names`` (what this ragloom computes),
    a model fitted on another feature set is refused (:class:`RankerModelError`)."""
    if data.get("format") != MODEL_FORMAT:
        raise RankerModelError(f"not a ragloom ranking model (format {data.get('format')!r})")
    model_features = str(data.get("features"))
    model_names = tuple(str(n) for n in data.get("names", ()))
    if features is not None and model_features != features:
        raise RankerModelError(
            f"the ranking model was fitted on features {model_features!r}, but this ragloom "
            f"computes {features!r}: train it again (scripts/train_ranker.py) or use +handset"
        )
    if names is not None and model_names != tuple(names):
        raise RankerModelError(
            "the ranking model's feature columns differ from this ragloom's: train it again"
        )
    kind = str(data.get("kind"))
    meta = dict(data.get("meta", {}))
    if kind == "linear":
        lin = data["linear"]
        return RankerModel.linear(
            model_features, model_names, meta, np.asarray(lin["weight"]),
            np.asarray(lin["mean"]), np.asarray(lin["scale"]), float(lin["bias"]),
        )  # fmt: skip
    if kind == "trees":
        tr = data["trees"]
        nodes = [tr[k] for k in ("feature", "threshold", "left", "right", "value")]
        return RankerModel.trees(model_features, model_names, meta, nodes, int(tr["depth"]))
    raise RankerModelError(f"unknown ranking model kind {kind!r}")


def load_model(
    path: Path, *, features: str | None = None, names: Sequence[str] | None = None
) -> RankerModel:
    """:func:`model_from_dict` of a JSON file (:class:`RankerModelError` when unreadable)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RankerModelError(f"cannot read the ranking model {path}: {exc}") from exc
    return model_from_dict(data, features=features, names=names)


def from_lightgbm_dump(
    dump: Mapping[str, Any], *, features: str, names: Sequence[str], meta: Mapping[str, Any]
) -> RankerModel:
    """The trees of ``Booster.dump_model()`` as a :class:`RankerModel` (numerical splits on
    ``<=`` only, which is all the features here need)."""
    trees = dump["tree_info"]
    flat: list[tuple[list[int], list[float], list[int], list[int], list[float]]] = []
    depth = 0
    for t in trees:
        feat: list[int] = []
        thr: list[float] = []
        left: list[int] = []
        right: list[int] = []
        val: list[float] = []

        def add(
            node: Mapping[str, Any],
            level: int,
            feat: list[int] = feat,
            thr: list[float] = thr,
            left: list[int] = left,
            right: list[int] = right,
            val: list[float] = val,
        ) -> int:
            nonlocal depth
            depth = max(depth, level)
            i = len(feat)
            feat.append(-1)
            thr.append(0.0)
            left.append(i)
            right.append(i)
            if "leaf_value" in node:
                val.append(float(node["leaf_value"]))
                return i
            if node.get("decision_type", "<=") != "<=":
                raise RankerModelError(f"unsupported split {node.get('decision_type')!r}")
            val.append(float(node.get("internal_value", 0.0)))
            feat[i] = int(node["split_feature"])
            thr[i] = float(node["threshold"])
            left[i] = add(node["left_child"], level + 1)
            right[i] = add(node["right_child"], level + 1)
            return i

        add(t["tree_structure"], 0)
        flat.append((feat, thr, left, right, val))
    width = max((len(f[0]) for f in flat), default=1)

    def pad(k: int, fill: float, dtype: Any) -> np.ndarray:
        a = np.full((len(flat), width), fill, dtype=dtype)
        for i, f in enumerate(flat):
            a[i, : len(f[k])] = f[k]
        return a

    nodes = [pad(0, -1, np.int32), pad(1, 0.0, np.float64), pad(2, 0, np.int32),
             pad(3, 0, np.int32), pad(4, 0.0, np.float64)]  # fmt: skip
    return RankerModel.trees(features, names, meta, nodes, depth)
