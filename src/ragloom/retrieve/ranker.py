"""A learned ranking model, evaluated with numpy alone (issue 22; docs/ranking.md "Learned
ranking").

Training (``scripts/train_ranker.py``) uses LightGBM's LambdaRank, an optional dependency
(``pip install ragloom[learn]``); what ships is this module's JSON form of the fitted model, so
ranking needs no LightGBM at run time. Two kinds of model have the one interface:

- ``trees``: a sum of regression trees (LightGBM's dump, flattened into arrays and walked for
  every candidate and every tree at once, one level per step);
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
    leaves: LeafPaths | None = None
    """Trees: every leaf's path, for :meth:`predict` (built by :meth:`trees`)."""

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
        return dataclasses.replace(model, leaves=LeafPaths.of(model))

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
        if self.depth > LEAF_PATHS_MAX_DEPTH:
            node = self._walk(x)[-1]
            base = (np.arange(self.value.shape[0], dtype=np.intp) * self.value.shape[1])[None, :]
            return np.asarray(self.value.ravel().take(base + node).sum(axis=1))
        leaves = self.leaves if self.leaves is not None else LeafPaths.of(self)
        return leaves.predict(x)

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
        rows and 300 trees). Scores come from :class:`LeafPaths`; the walk serves
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


LEAF_PATHS_MAX_DEPTH = 2
"""Trees up to this depth are scored by :class:`LeafPaths`; deeper ones by the level-by-level
walk (:meth:`RankerModel._walk`), whose cost grows with the depth where the leaves' paths grow
with leaves x depth. On 400 mined groups' file rows (25 a question): 300 trees of 3 leaves
(depth 2) 0.22 ms by their paths, 0.18 walked; 300 of 7 leaves (depth 6) 0.76 against 0.50;
600 of 7 leaves 1.49 against 0.99; the same floats every time."""


@dataclass(frozen=True, slots=True)
class LeafPaths:
    """A tree ensemble as its leaves' paths: which split each leaf's path passes, which way,
    and the leaf's value, padded to the same count per tree and the same length per path.
    :meth:`predict` tests every split once for every row, then finds each tree's one leaf whose
    path every test agrees with: no level-by-level walk. Each row's score is its leaves' values
    summed tree by tree, as the walk sums them, so both give the same floats."""

    split_feature: np.ndarray
    """(splits,) the feature each inner node tests."""
    split_threshold: np.ndarray
    """(splits,) its threshold: a row goes left when ``x[feature] <= threshold``."""
    path_split: np.ndarray
    """(trees, leaves, depth) the split of each step of each leaf's path (0 past its end)."""
    path_left: np.ndarray
    """(trees, leaves, depth) whether that step goes left (True past the end)."""
    path_pad: np.ndarray
    """(trees, leaves, depth) True past the end of the path (the step always agrees)."""
    leaf_value: np.ndarray
    """(trees, leaves) each leaf's value (0 for padding, which no row reaches)."""
    leaf_real: np.ndarray
    """(trees, leaves) False for padding."""

    @classmethod
    def of(cls, model: RankerModel) -> LeafPaths:
        t = model.feature.shape[0]
        splits: dict[tuple[int, int], int] = {}
        per_tree: list[list[tuple[list[tuple[int, bool]], float]]] = []
        for i in range(t):
            leaves: list[tuple[list[tuple[int, bool]], float]] = []
            stack: list[tuple[int, list[tuple[int, bool]]]] = [(0, [])]
            while stack:
                j, path = stack.pop()
                if int(model.feature[i, j]) < 0:
                    leaves.append((path, float(model.value[i, j])))
                    continue
                k = splits.setdefault((i, j), len(splits))
                stack.append((int(model.right[i, j]), [*path, (k, False)]))
                stack.append((int(model.left[i, j]), [*path, (k, True)]))
            per_tree.append(leaves)
        n_leaves = max((len(v) for v in per_tree), default=1)
        depth = max((len(p) for v in per_tree for p, _ in v), default=1) or 1
        path_split = np.zeros((t, n_leaves, depth), dtype=np.intp)
        path_left = np.ones((t, n_leaves, depth), dtype=bool)
        path_pad = np.ones((t, n_leaves, depth), dtype=bool)
        leaf_value = np.zeros((t, n_leaves), dtype=np.float64)
        leaf_real = np.zeros((t, n_leaves), dtype=bool)
        for i, leaves in enumerate(per_tree):
            for li, (path, value) in enumerate(leaves):
                leaf_value[i, li] = value
                leaf_real[i, li] = True
                for d, (k, left) in enumerate(path):
                    path_split[i, li, d] = k
                    path_left[i, li, d] = left
                    path_pad[i, li, d] = False
        order = sorted(splits, key=splits.__getitem__)
        feat = np.array([int(model.feature[i, j]) for i, j in order], dtype=np.intp)
        thr = np.array([float(model.threshold[i, j]) for i, j in order], dtype=np.float64)
        return cls(feat, thr, path_split, path_left, path_pad, leaf_value, leaf_real)

    def predict(self, x: np.ndarray) -> np.ndarray:
        """One score per row of ``x``: the same floats as walking every tree."""
        n, t = x.shape[0], self.leaf_value.shape[0]
        if t == 0:
            return np.zeros(n)
        if len(self.split_feature):
            went_left = x[:, self.split_feature] <= self.split_threshold  # (rows, splits)
            agree = (went_left[:, self.path_split] == self.path_left) | self.path_pad
        else:
            agree = np.ones((n, *self.path_split.shape), dtype=bool)
        reached = agree.all(axis=3) & self.leaf_real  # (rows, trees, leaves): one True per tree
        leaf = reached.argmax(axis=2)
        values = np.take_along_axis(self.leaf_value[None, :, :], leaf[:, :, None], axis=2)
        return np.asarray(values[:, :, 0].sum(axis=1))


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
