"""A repository's own ranking model: the shipped global model plus a bounded linear correction
fitted on this repository's history and its users' feedback (issue 22, items 3 and 4;
docs/ranking.md "Per-repository adaptation").

The global model (:mod:`ragloom.retrieve.ranker`, fitted on 35 outside repositories) is kept as
it is; the adaptation adds ``z . delta`` to its score, where ``z`` is a candidate's standardised
feature row. Two corrections are summed: ``history`` (fitted on questions mined from the
repository's own commits, :mod:`ragloom.learn.adapt`) and ``feedback`` (fitted afterwards, on
top of the first, from recorded ratings). Each is a pairwise logistic (RankNet) fit from zero
with an L2 pull towards zero, and its length is capped (:data:`HISTORY_MAX_NORM`,
:data:`FEEDBACK_MAX_NORM`, the latter in proportion to the ratings up to :data:`FEEDBACK_FULL`):
a handful of examples can move the ranking only a bounded step, and none moves it at all below
:data:`MIN_EXAMPLES` (:data:`MIN_FEEDBACK` for ratings).

Everything here is pure numpy and deterministic (full-batch gradient descent from zero), so the
same examples give the same model bytes. :class:`AdaptedModel` scores like a
:class:`~ragloom.retrieve.ranker.RankerModel` and names the global model it was fitted on; one
fitted on another global model (an upgrade shipped a new one) is refused with
:class:`~ragloom.retrieve.ranker.RankerModelError`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ragloom.retrieve.ranker import RankerModel, RankerModelError, Scorer
from ragloom.retrieve.stages.features import file_first_rows

__all__ = [
    "ADAPTED_FORMAT",
    "ADAPTED_MODEL_NAME",
    "FEEDBACK_FROZEN",
    "FEEDBACK_FULL",
    "FEEDBACK_MAX_NORM",
    "FEEDBACK_PAIRS",
    "FROZEN_SETS",
    "HISTORY_MAX_NORM",
    "HISTORY_PAIRS",
    "MIN_EXAMPLES",
    "MIN_FEEDBACK",
    "PAIRS",
    "PAIR_WEIGHTINGS",
    "TEXT_COLUMNS",
    "AdaptedModel",
    "Example",
    "FileModelStore",
    "ModelRows",
    "ModelStore",
    "RepositoryRanker",
    "RowModelStore",
    "adapted_from_dict",
    "describe",
    "example_losses",
    "feedback_window",
    "fit_aged_correction",
    "fit_correction",
    "fit_rows",
    "load_adapted",
    "load_stored",
    "pairwise_mrr",
    "repository_model",
    "repository_model_state",
    "standardisation",
    "trimmed",
]

ADAPTED_FORMAT = "ragloom-adapted-1"
ADAPTED_MODEL_NAME = "ranker-adapted.json"
"""The file in the index folder that holds the repository's model."""
MIN_EXAMPLES = 20
"""Questions mined from the repository's history below which no correction is fitted (the
global model is used as it is)."""
MIN_FEEDBACK = 20
"""Rated answers below which feedback changes nothing."""
HISTORY_L2 = 1.0
"""L2 pull of the history correction towards zero."""
HISTORY_MAX_NORM = 1.0
"""Length cap of the history correction, in standardised-feature units (the global model's
weight vector is about 1.2 long). L2 and cap were chosen (seventh session) on the 35 mined
repositories, each adapted from a global model fitted without it (``scripts/tune_adapt.py``,
docs/ranking.md "Per-repository adaptation, chosen on the mined repositories"): mean held-back
file MRR@10 0.7369 for the global model; L2 / cap 0.1 / 0.5 (the earlier setting, chosen on the
commit evaluation's tune split, which the global model now trains on) 0.7373, raising 16
repositories and lowering 16; 1.0 / 1.0 **0.7414**, 19 and 12; 0.1 / 0.25 0.7401, 20 and 12;
3.0 / 1.0 0.7392, 15 and 9; 10.0 / 1.0 0.7375."""
HISTORY_FROZEN: tuple[str, ...] = ("file_bm25_ratio", "file_bm25_log_rank", "file_bm25_log")
"""Columns the history correction leaves alone: a history question is asked of the tree as it
stands, whose files already hold the words its commit added, so their whole-file scores are
inflated in those examples and not in the questions to come."""
TEXT_COLUMNS: tuple[str, ...] = (
    *HISTORY_FROZEN,
    "log_rank",
    "score_ratio",
    "in_bm25",
    "log_bm25_rank",
    "bm25_ratio",
    "in_dense",
    "log_dense_rank",
    "dense_score",
    "dense_gap",
    "note_exact_match",
    "file_log_chunks",
    "file_log_best_rank",
    "file_log_best_bm25",
    "file_log_best_dense",
    "file_rr_sum",
)
"""Every column that reads the candidates' text (a frozen set an evaluation can measure:
``--frozen text``)."""
FROZEN_SETS: dict[str, tuple[str, ...]] = {
    "none": (),
    "file": HISTORY_FROZEN,
    "text": TEXT_COLUMNS,
}
"""Named column sets a correction can leave alone (the evaluation scripts' ``--frozen`` and
``--feedback-frozen``): the history correction ships with ``file``, the feedback's with
``none``."""
FEEDBACK_FULL = 400
"""Rated answers from which the feedback correction may take its whole length cap; with fewer,
the cap shrinks in proportion (``FEEDBACK_MAX_NORM * n / FEEDBACK_FULL``), so that the step
grows with the evidence. 0: the whole cap from :data:`MIN_FEEDBACK` answers on (until the
fourteenth session). Chosen on a bed that reads no test question (``scripts/eval_adapt.py
--scored mined --trees eval-out/ltr/work --mined-split train --feedback``: 35 repositories, about
37 ratings each, docs/ranking.md "The production protocol"): 10 adversarial ratings on top
lowered a repository by up to 0.029 with 0, 0.026 with 100, 0.013 with 200 and not at all with
400, where the loop raised 4 repositories and lowered none."""
FEEDBACK_FROZEN: tuple[str, ...] = ()
"""Columns the feedback correction leaves alone."""
FEEDBACK_L2 = 1.0
FEEDBACK_MAX_NORM = 0.1
"""Length cap of the feedback correction: ratings nudge, they do not re-learn. 0.25 until the
thirteenth session; chosen on a bed that reads no test question (``scripts/eval_adapt.py
--feedback-bed tune``: each evaluation repository's older tune questions rated, its newer ones
scored; docs/ranking.md "A BM25 over whole files"): with the model that reads whole files, 10
adversarial ratings lowered a repository by 0.012 at 0.25, at most 0.010 at 0.1 and 0.001 at
0.05; the loop raised 2, 3 and 3 repositories of 7 over the adapted model."""
DECIMALS = 12
"""Digits the model file keeps."""
STEPS = 300
LEARNING_RATE = 0.0
"""Gradient step; 0: the inverse of the loss's curvature bound (a step that cannot diverge,
whatever the L2)."""
PAIR_WEIGHTINGS = ("all", "static", "lambda")
PAIRS = "all"
"""How the corrections weigh an example's pairs (:func:`fit_correction`)."""
HISTORY_PAIRS = PAIRS
"""The history correction's pair weighting."""
FEEDBACK_PAIRS = PAIRS
"""The feedback correction's pair weighting."""
UNRATED_OVER_NEGATIVE = 0.5
"""Weight of the pairs "an unrated candidate above one rated not helpful" against "a helpful
one above the rest" (1.0)."""


@dataclass(frozen=True, slots=True)
class Example:
    """One asked question: its candidates' feature rows and their labels (1 a right answer,
    -1 one rated not helpful, 0 the rest), weighted in the fit."""

    x: np.ndarray
    labels: np.ndarray
    weight: float = 1.0
    id: str = ""
    paths: tuple[str, ...] = ()
    """The candidates' files (scores then count files, as the evaluations do)."""
    since: int = -1
    """Commits in the indexed tree's history since this question's commit (-1: not known): its
    age, for :func:`fit_aged_correction`."""


def fit_rows(base: RankerModel, examples: Sequence[Example]) -> list[Example]:
    """The rows a correction of ``base`` is fitted on: every candidate, or each file's first
    candidate (``file_first_chunk``) when ``base`` was fitted on files (its ``level``), so the
    correction learns the same ranking of files its base did."""
    if base.level != "file" or "file_first_chunk" not in base.names:
        return list(examples)
    out: list[Example] = []
    for e in examples:
        x = np.asarray(e.x)
        keep = file_first_rows(x, base.names)
        paths = tuple(e.paths[int(i)] for i in keep) if e.paths else ()
        out.append(Example(x[keep], np.asarray(e.labels)[keep], e.weight, e.id, paths, e.since))
    return out


def _standardisation(base: RankerModel, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if base.kind == "linear":
        return base.mean.copy(), base.scale.copy()
    # float64 whatever the rows' type: the model file keeps float64, and its digest the bytes
    rows = np.asarray(rows, dtype=np.float64)
    mean = rows.mean(axis=0) if len(rows) else np.zeros(len(base.names))
    scale = rows.std(axis=0) if len(rows) else np.ones(len(base.names))
    scale[scale < 1e-9] = 1.0
    return mean, scale


def _pairs(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(higher, lower, weight) index arrays of the ordered pairs a group's labels state."""
    pos = np.flatnonzero(labels > 0)
    rest = np.flatnonzero(labels <= 0)
    neg = np.flatnonzero(labels < 0)
    unrated = np.flatnonzero(labels == 0)
    hi = [np.repeat(pos, len(rest)), np.repeat(unrated, len(neg))]
    lo = [np.tile(rest, len(pos)), np.tile(neg, len(unrated))]
    w = [np.ones(len(pos) * len(rest)), np.full(len(unrated) * len(neg), UNRATED_OVER_NEGATIVE)]
    return np.concatenate(hi), np.concatenate(lo), np.concatenate(w)


def example_losses(examples: Sequence[Example], scores: Sequence[np.ndarray]) -> np.ndarray:
    """Each example's pairwise logistic loss at ``scores`` (its pairs' weighted mean; 0 for an
    example that states no pair): how strongly the ranking disagrees with what it says."""
    out = np.zeros(len(examples))
    for k, (ex, s) in enumerate(zip(examples, scores, strict=True)):
        hi, lo, w = _pairs(np.asarray(ex.labels))
        if len(hi):
            margin = np.asarray(s, dtype=np.float64)[hi] - np.asarray(s, dtype=np.float64)[lo]
            out[k] = float(np.average(np.logaddexp(0.0, -margin), weights=w))
    return out


def trimmed(
    examples: Sequence[Example], scores: Sequence[np.ndarray], share: float
) -> tuple[list[Example], list[np.ndarray]]:
    """``examples`` (and their ``scores``) without the ``share`` of them the ranking at
    ``scores`` disagrees with most (:func:`example_losses`; ties: the later ones go first)."""
    if not 0.0 <= share < 1.0:
        raise ValueError(f"the share of examples set aside must be in [0, 1), got {share}")
    drop = int(np.floor(share * len(examples) + 1e-9))
    if drop <= 0:
        return list(examples), list(scores)
    losses = example_losses(examples, scores)
    order = np.lexsort((-np.arange(len(examples)), -losses))  # highest loss, then the later
    gone = set(int(i) for i in order[:drop])
    keep = [i for i in range(len(examples)) if i not in gone]
    return [examples[i] for i in keep], [scores[i] for i in keep]


def _capped(delta: np.ndarray, max_norm: float) -> np.ndarray:
    """``delta`` shortened to ``max_norm`` when longer (a cap of 0: no cap)."""
    norm = float(np.linalg.norm(delta))
    return np.asarray(delta * (max_norm / norm) if norm > max_norm > 0 else delta)


def fit_correction(
    examples: Sequence[Example],
    base_scores: Sequence[np.ndarray],
    mean: np.ndarray,
    scale: np.ndarray,
    *,
    l2: float,
    max_norm: float,
    steps: int = STEPS,
    lr: float = LEARNING_RATE,
    frozen: Sequence[int] = (),
    pairs: str = PAIRS,
) -> np.ndarray:
    """The correction ``delta`` (standardised-feature weights) that, added to ``base_scores``,
    best orders each example's labelled pairs (pairwise logistic loss, each example weighing its
    ``weight`` whatever its pair count, plus ``l2 / 2 * |delta|^2``), by ``steps`` of
    full-batch gradient descent from zero; its length capped at ``max_norm``. Zero when no
    example states a pair; always zero on the ``frozen`` columns.

    ``pairs`` weighs each example's pairs (:data:`PAIRS`): ``all`` alike; ``static`` by how much
    swapping the two would move a reciprocal rank at 10 at the base ranks
    (``|d(r_a) - d(r_b)|``, ``d(r) = 1/r`` up to 10, else 0); ``lambda`` the same, recomputed
    from the corrected scores at every step (LambdaRank for MRR@10)."""
    if pairs not in PAIR_WEIGHTINGS:
        raise ValueError(f"unknown pair weighting {pairs!r}: one of {', '.join(PAIR_WEIGHTINGS)}")
    diffs: list[np.ndarray] = []
    offsets: list[np.ndarray] = []
    weights: list[np.ndarray] = []
    # per example: its pairs' slice in the stacked pairs, its standardised rows, its base scores,
    # its pairs, and their weights before the swap weights
    groups: list[_Group] = []
    start = 0
    for ex, b in zip(examples, base_scores, strict=True):
        hi, lo, w = _pairs(np.asarray(ex.labels))
        if not len(hi):
            continue
        w0 = w
        z = (np.asarray(ex.x, dtype=np.float64) - mean) / scale
        bs = np.asarray(b, dtype=np.float64)
        diffs.append(z[hi] - z[lo])
        offsets.append(bs[hi] - bs[lo])
        if pairs == "static":
            w = w * _swap_weights(bs, hi, lo)
        weights.append(ex.weight * w / max(float(w.sum()), 1e-12))
        if pairs == "lambda":  # what the weights are recomputed from at each step
            sl = slice(start, start + len(hi))
            groups.append((sl, z, bs, hi, lo, ex.weight * w0 / w0.sum()))
        start += len(hi)
    delta = np.zeros(len(mean))
    if not diffs or max_norm <= 0:
        return delta
    d = np.vstack(diffs)
    if len(frozen):
        d[:, list(frozen)] = 0.0
        for _, z, *_rest in groups:
            z[:, list(frozen)] = 0.0
    off = np.concatenate(offsets)
    w = np.concatenate(weights)
    w = w / max(float(w.sum()), 1e-12)
    fixed_lr = lr

    def step_size(w: np.ndarray) -> float:
        # 1 / (the loss's curvature bound): the logistic loss curves at most 1/4 per pair
        if fixed_lr > 0:
            return fixed_lr
        return 1.0 / (0.25 * float(np.linalg.eigvalsh((d.T * w) @ d)[-1]) + l2 + 1e-12)

    lr = step_size(w)
    for _ in range(steps):
        if pairs == "lambda":
            # the weights move with the ranks: so does the bound
            w = _lambda_weights(groups, delta, len(off))
            lr = step_size(w)
        margin = off + d @ delta
        # d/d(delta) of log(1 + exp(-margin)) is -sigmoid(-margin) * d
        g = -(d.T @ (w * 0.5 * (1.0 - np.tanh(margin / 2.0)))) + l2 * delta
        delta = delta - lr * g
    return _capped(delta, max_norm)


def fit_aged_correction(
    examples: Sequence[Example],
    base_scores: Sequence[np.ndarray],
    mean: np.ndarray,
    scale: np.ndarray,
    *,
    at: float,
    l2: float,
    max_norm: float,
    frozen: Sequence[int] = (),
    pairs: str = PAIRS,
    ages: str = "tree",
) -> np.ndarray:
    """A correction that may change with a question's age: :func:`fit_correction` over each
    standardised row ``z`` and ``a * z``, so that ``delta(a) = d0 + a * d1``; returned at
    ``a = at``, its length capped at ``max_norm``. ``a`` is, with ``ages`` ``tree``, the
    example's commits since (:attr:`Example.since`) over the oldest example's (0: the indexed
    tree's own time; every example must know it, else ``rank``), with ``rank`` its place among
    ``examples`` (newest first: 0 the newest, 1 the oldest). A history question is asked of
    today's tree, which has moved on from its commit the more the older it is; ``at`` 0 takes
    the correction where a user's next question is asked. An evaluation's option
    (``scripts/eval_adapt.py --history-age``); docs/ranking.md "An age-aware correction"."""
    if ages not in ("tree", "rank"):
        raise ValueError(f"unknown ages {ages!r}: tree or rank")
    n, k = len(examples), len(mean)
    since = np.array([e.since for e in examples], dtype=np.float64)
    if ages == "tree" and n and (since >= 0).all() and since.max() > 0:
        age = since / since.max()
    else:
        age = np.arange(n) / max(n - 1, 1)
    aged: list[Example] = []
    for a, e in zip(age, examples, strict=True):
        x = np.asarray(e.x, dtype=np.float64)
        aged.append(
            Example(np.hstack([x, a * (x - mean) / scale]), e.labels, e.weight, e.id, e.paths)
        )
    both = fit_correction(
        aged,
        base_scores,
        np.concatenate([mean, np.zeros(k)]),
        np.concatenate([scale, np.ones(k)]),
        l2=l2,
        max_norm=max_norm,
        frozen=[*frozen, *(k + i for i in frozen)],
        pairs=pairs,
    )
    delta = both[:k] + at * both[k:]
    return _capped(delta, max_norm)


def _discount(ranks: np.ndarray) -> np.ndarray:
    """``1/r`` for ranks up to 10 (1-based), else 0: what a candidate's place is worth to a
    reciprocal rank at 10."""
    return np.where(ranks <= 10, 1.0 / ranks, 0.0)


def _ranks(scores: np.ndarray) -> np.ndarray:
    """1-based ranks of ``scores``, best first, ties in their order."""
    order = np.lexsort((np.arange(len(scores)), -scores))
    ranks = np.empty(len(scores))
    ranks[order] = np.arange(1, len(scores) + 1)
    return ranks


def _swap_weights(scores: np.ndarray, hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """How much swapping each pair would move a reciprocal rank at 10, at ``scores``' ranks."""
    disc = _discount(_ranks(scores))
    return np.asarray(np.abs(disc[hi] - disc[lo]))


_Group = tuple[slice, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _lambda_weights(groups: Sequence[_Group], delta: np.ndarray, n: int) -> np.ndarray:
    """The pairs' swap weights at the corrected scores, each example summing to its weight,
    the whole to 1."""
    out = np.zeros(n)
    for sl, z, bs, hi, lo, w0 in groups:
        sw = w0 * _swap_weights(bs + z @ delta, hi, lo)
        out[sl] = float(w0.sum()) * sw / max(float(sw.sum()), 1e-12)
    return out / max(float(out.sum()), 1e-12)


def pairwise_mrr(examples: Sequence[Example], scores: Sequence[np.ndarray]) -> float:
    """Mean reciprocal rank (at 10) of the first right answer of each example that has one,
    candidates ordered by ``scores`` (ties keep their order); counted in distinct files when the
    example names its candidates' files, else in candidates. How a correction is checked."""
    rr: list[float] = []
    for ex, s in zip(examples, scores, strict=True):
        lab = np.asarray(ex.labels)
        if not (lab > 0).any():
            continue
        order = np.lexsort((np.arange(len(s)), -np.asarray(s)))
        if ex.paths:
            files: dict[str, bool] = {}
            for i in order:
                files.setdefault(ex.paths[int(i)], bool(lab[int(i)] > 0))
            first = next(k for k, good in enumerate(files.values()) if good)
        else:
            first = int(np.flatnonzero(lab[order] > 0)[0])
        rr.append(1.0 / (first + 1) if first < 10 else 0.0)
    return float(np.mean(rr)) if rr else 0.0


@dataclass(frozen=True, slots=True)
class AdaptedModel:
    """The global model plus the repository's corrections (:func:`fit_correction`)."""

    base: RankerModel
    mean: np.ndarray
    scale: np.ndarray
    history: np.ndarray
    feedback: np.ndarray
    meta: Mapping[str, Any] = field(default_factory=dict)
    """What it was fitted on: example counts, newest commit, seconds, figures."""

    kind = "adapted"

    @property
    def names(self) -> tuple[str, ...]:
        return self.base.names

    @property
    def level(self) -> str:
        return self.base.level

    @property
    def features(self) -> str:
        return self.base.features

    @property
    def delta(self) -> np.ndarray:
        return np.asarray(self.history + self.feedback)

    @property
    def digest(self) -> str:
        h = hashlib.sha256(self.base.digest.encode())
        for a in (self.mean, self.scale, self.history, self.feedback):
            # rounded as the file keeps them: a model and its reloaded copy share a digest
            h.update(np.ascontiguousarray(np.round(a, DECIMALS), dtype=np.float64).tobytes())
        return h.hexdigest()[:12]

    def _z(self, x: np.ndarray) -> np.ndarray:
        return np.asarray((x - self.mean) / self.scale)

    def predict(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(self.base.predict(x) + self._z(x) @ self.delta)

    def contributions(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(self.base.contributions(x) + self._z(x) * self.delta)

    def without_feedback(self) -> AdaptedModel:
        meta = {k: v for k, v in self.meta.items() if not k.startswith("feedback")}
        return AdaptedModel(
            self.base, self.mean, self.scale, self.history, np.zeros_like(self.feedback), meta
        )

    def feedback_changes(self) -> list[tuple[str, float]]:
        """The feedback correction's weights by feature, largest first (``ragloom adapt
        --show``)."""
        order = np.argsort(-np.abs(self.feedback), kind="stable")
        return [(self.names[int(i)], float(self.feedback[int(i)])) for i in order]

    def to_dict(self) -> dict[str, Any]:
        def floats(a: np.ndarray) -> list[float]:
            return [round(float(v), DECIMALS) for v in a]

        return {
            "format": ADAPTED_FORMAT,
            "features": self.features,
            "names": list(self.names),
            "base_digest": self.base.digest,
            "mean": floats(self.mean),
            "scale": floats(self.scale),
            "history": floats(self.history),
            "feedback": floats(self.feedback),
            "meta": dict(self.meta),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, sort_keys=True) + "\n"


def adapted_from_dict(data: Mapping[str, Any], base: RankerModel) -> AdaptedModel:
    """The repository's model of ``data`` over ``base``; refused
    (:class:`~ragloom.retrieve.ranker.RankerModelError`) when it was fitted over another global
    model or feature set."""
    if data.get("format") != ADAPTED_FORMAT:
        raise RankerModelError(f"not a repository ranking model (format {data.get('format')!r})")
    if data.get("features") != base.features or tuple(data.get("names", ())) != base.names:
        raise RankerModelError(
            "the repository's ranking model was fitted on other features: run `ragloom adapt`"
        )
    if data.get("base_digest") != base.digest:
        raise RankerModelError(
            f"the repository's ranking model adapts global model {data.get('base_digest')}, "
            f"but this ragloom ships {base.digest}: run `ragloom adapt`"
        )
    n = len(base.names)
    arrays = [
        np.asarray(data[k], dtype=np.float64) for k in ("mean", "scale", "history", "feedback")
    ]
    if any(a.shape != (n,) for a in arrays):
        raise RankerModelError("the repository's ranking model is damaged: run `ragloom adapt`")
    mean, scale, hist, fb = arrays
    return AdaptedModel(base, mean, scale, hist, fb, dict(data.get("meta", {})))


def load_adapted(path: Path, base: RankerModel) -> AdaptedModel | None:
    """The model at ``path`` over ``base``; None when there is none; refused
    (:class:`~ragloom.retrieve.ranker.RankerModelError`) when unreadable or stale."""
    return load_stored(FileModelStore(path.parent, path.name), base)


def load_stored(store: ModelStore, base: RankerModel) -> AdaptedModel | None:
    """The model ``store`` holds, over ``base``; None when it holds none; refused
    (:class:`~ragloom.retrieve.ranker.RankerModelError`) when unreadable or stale."""
    text = store.read()
    if text is None:
        return None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise RankerModelError(
            f"cannot read the repository's ranking model {store.where}: {exc}"
        ) from exc
    if not isinstance(data, dict):
        raise RankerModelError(f"the repository's ranking model {store.where} is damaged")
    return adapted_from_dict(data, base)


class ModelStore(Protocol):
    """Where one repository's model is kept: a file in its index folder
    (:class:`FileModelStore`) or a row of its database (:class:`RowModelStore`)."""

    @property
    def where(self) -> str:
        """Where it is, for messages and reports: a path, or ``postgres:<repository>``."""
        ...

    @property
    def recheck_s(self) -> float:
        """How long a ranker may go on with the model it read before asking :meth:`stamp`
        again (0: at every use)."""
        ...

    def stamp(self) -> object | None:
        """A cheap value that changes whenever the model is written or removed (None: no
        model)."""
        ...

    def read(self) -> str | None:
        """The model's JSON, or None when there is none; unreadable: RankerModelError."""
        ...

    def write(self, model: AdaptedModel) -> None:
        """Replace the model at once (a reader sees the old one or the new one, never a
        part)."""
        ...

    def remove(self) -> bool:
        """Delete the model; whether there was one."""
        ...


class FileModelStore:
    """``<index folder>/ranker-adapted.json``, written atomically; its stamp is one
    ``stat``."""

    recheck_s = 0.0

    def __init__(self, index_dir: Path, name: str = ADAPTED_MODEL_NAME) -> None:
        self.path = Path(index_dir) / name

    @property
    def where(self) -> str:
        return str(self.path)

    def stamp(self) -> object | None:
        try:
            st = self.path.stat()
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size)

    def read(self) -> str | None:
        if not self.path.is_file():
            return None
        try:
            return self.path.read_text(encoding="utf-8")
        except (OSError, ValueError) as exc:
            raise RankerModelError(
                f"cannot read the repository's ranking model {self.path}: {exc}"
            ) from exc

    def write(self, model: AdaptedModel) -> None:
        from ragloom.index.atomic import atomic_write_bytes

        atomic_write_bytes(self.path, model.to_json().encode())

    def remove(self) -> bool:
        existed = self.path.exists()
        self.path.unlink(missing_ok=True)
        return existed


class ModelRows(Protocol):
    """A database that keeps one ranking model per repository
    (:class:`ragloom.index.postgres.PostgresBackend`, migration 6)."""

    repository: str

    def ranking_model_stamp(self) -> object | None: ...

    def ranking_model_text(self) -> str | None: ...

    def set_ranking_model(self, text: str, digest: str, base_digest: str) -> None: ...

    def remove_ranking_model(self) -> bool: ...


ROW_RECHECK_S = 2.0
"""Seconds a server ranks with the repository model it read from the database before asking
whether it changed (one indexed lookup): ``ragloom adapt`` on any machine reaches every server
of the team within this."""


class RowModelStore:
    """The repository's row of the database's ``ranking_models`` table (the postgres backend:
    every server of a team ranks with the one model, and ``ragloom adapt`` from any machine
    replaces it in one statement)."""

    recheck_s = ROW_RECHECK_S

    def __init__(self, rows: ModelRows) -> None:
        self.rows = rows

    @property
    def where(self) -> str:
        return f"postgres:{self.rows.repository}"

    def stamp(self) -> object | None:
        return self.rows.ranking_model_stamp()

    def read(self) -> str | None:
        return self.rows.ranking_model_text()

    def write(self, model: AdaptedModel) -> None:
        self.rows.set_ranking_model(model.to_json(), model.digest, model.base.digest)

    def remove(self) -> bool:
        return self.rows.remove_ranking_model()


def standardisation(
    base: RankerModel, examples: Sequence[Example]
) -> tuple[np.ndarray, np.ndarray]:
    """The (mean, scale) a correction over ``base`` works in: the global model's own for a
    linear model, else the examples' rows'."""
    rows = np.vstack([e.x for e in examples if len(e.x)]) if examples else np.zeros((0, 0))
    return _standardisation(base, rows)


def _as_store(where: Path | ModelStore) -> ModelStore:
    return FileModelStore(where) if isinstance(where, Path) else where


def repository_model_state(
    where: Path | ModelStore,
) -> tuple[AdaptedModel | None, str | None]:
    """The repository model ``where`` holds (an index folder, or a :class:`ModelStore`) and,
    when it is there but cannot be used (fitted over another global model or feature set,
    damaged), why it is set aside: ``(None, None)`` when there is none."""
    from ragloom.retrieve.stages.learned import default_model

    try:
        return load_stored(_as_store(where), default_model()), None
    except RankerModelError as exc:
        return None, str(exc)


def repository_model(where: Path | ModelStore) -> AdaptedModel | None:
    """The repository model ``where`` holds (an index folder, or a :class:`ModelStore`) for
    the learned stage; None when there is none, or (with a warning) when it cannot be used:
    ranking then uses the global model."""
    import logging

    model, set_aside = repository_model_state(where)
    if set_aside is not None:
        logging.getLogger("ragloom").warning("repository ranking model not used: %s", set_aside)
    return model


def feedback_window(model: AdaptedModel) -> tuple[float, int]:
    """(since, counted): the ratings recorded from ``since`` on are the ones the model's next
    fit learns from (an earlier ``--reset-feedback`` set it), and ``counted`` of them were there
    when it was fitted; the difference is what arrived since."""
    meta = model.meta
    since = float(meta.get("feedback_since", 0.0))
    return since, int(meta.get("rated_answers", meta.get("feedback_answers", 0)))


def describe(model: AdaptedModel | None, set_aside: str | None = None) -> dict[str, object]:
    """``status``'s ``ranking_model``: which model ``+learned`` ranks with; with ``set_aside``
    (no model in use), why the repository's model file is not used."""
    if model is None:
        out: dict[str, object] = {"model": "global"}
        if set_aside is not None:
            out["set_aside"] = set_aside
        return out
    meta = model.meta
    return {
        "model": "repository",
        "digest": model.digest,
        "base_digest": model.base.digest,
        "examples": meta.get("examples", 0),
        "feedback_answers": meta.get("feedback_answers", 0),
        "feedback_used": bool(np.any(model.feedback != 0)),
        "newest_commit": meta.get("newest_commit", ""),
    }


class RepositoryRanker:
    """The learned stage's model for one repository: its own model while its store
    (:class:`ModelStore`; an index folder means its ``ranker-adapted.json``) holds a usable
    one, else the shipped one. The store's stamp is checked when the model is used (a file:
    one ``stat`` each time; the database: at most every :data:`ROW_RECHECK_S`), and the model
    read again when it changed, so a running server picks up ``ragloom adapt`` (or the refit of
    ``ragloom index``) without a restart."""

    def __init__(self, where: Path | ModelStore) -> None:
        import threading

        self.store = _as_store(where)
        self._lock = threading.Lock()
        self._stamp: object | None = None
        self._checked = -float("inf")
        self._model: AdaptedModel | None = None
        self._digest: tuple[Scorer, str] | None = None

    def current(self) -> Scorer:
        """The model to rank with now."""
        import time

        from ragloom.retrieve.stages.learned import default_model

        wait = self.store.recheck_s
        now = time.monotonic() if wait > 0 else 0.0
        if wait <= 0 or now - self._checked >= wait:
            stamp = self._stamp_now()
            self._checked = now
            if stamp != self._stamp:
                with self._lock:
                    if stamp != self._stamp:
                        self._model = repository_model(self.store) if stamp is not None else None
                        self._stamp = stamp
        return self._model if self._model is not None else default_model()

    def _stamp_now(self) -> object | None:
        """The store's stamp; where it cannot be read (the database is away), the last one:
        the model in use goes on until the store answers again."""
        import logging

        try:
            return self.store.stamp()
        except Exception as exc:  # a ranking never fails on the model's bookkeeping
            logging.getLogger("ragloom").warning(
                "cannot check the repository ranking model %s: %s", self.store.where, exc
            )
            return self._stamp

    @property
    def repository(self) -> AdaptedModel | None:
        """The repository model in use, if any."""
        self.current()
        return self._model

    @property
    def kind(self) -> str:
        return self.current().kind

    @property
    def digest(self) -> str:
        """The digest of the model in use; computed once per model (hashing the arrays takes
        about 0.1 ms, and a server keys every cached answer by it)."""
        model = self.current()
        known = self._digest
        if known is not None and known[0] is model:
            return known[1]
        digest = model.digest
        self._digest = (model, digest)
        return digest

    @property
    def level(self) -> str:
        return self.current().level

    @property
    def names(self) -> tuple[str, ...]:
        return self.current().names

    def predict(self, x: np.ndarray) -> np.ndarray:
        return self.current().predict(x)

    def contributions(self, x: np.ndarray) -> np.ndarray:
        return self.current().contributions(x)
