"""Score normalisation, weighted reciprocal rank fusion, MMR and recency: pure functions.

Formulas and defaults follow ``shared/seeds/ploke-rag-plan.md`` section 1 (fusion and score
handling) and ``shared/seeds/tamma-rag-pipeline-plan.md`` phase 5 (ranking); ``docs/ranking.md``
derives each one. Nothing here does I/O, and every function is deterministic: equal inputs give
equal outputs, ties are broken by id ascending.

Ids may be ``str`` (chunk ids) or ``int`` (store rowids), but one call uses one kind.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from operator import itemgetter
from typing import Generic, TypeVar

import numpy as np

from ragloom.errors import ConfigError
from ragloom.retrieve.config import (
    RECENCY_BOOST_DEFAULT,
    RECENCY_DECAY_DAYS_DEFAULT,
    RRF_K_DEFAULT,
    MmrConfig,
    RecencyConfig,
    RrfConfig,
    ScoreNorm,
)

__all__ = [
    "SECONDS_PER_DAY",
    "FusedItem",
    "MmrPick",
    "NonFiniteScoreError",
    "apply_recency",
    "file_evidence",
    "file_scores",
    "mmr_select",
    "mmr_select_explain",
    "normalize_scores",
    "recency_boost",
    "rrf_fuse",
    "rrf_fuse2",
    "rrf_fuse_explain",
    "rrf_fuse_with",
    "sort_by_score",
    "tied_by_row",
]

IdT = TypeVar("IdT", str, int)
"""A hit id: a chunk id (``str``) or a store rowid (``int``)."""

SECONDS_PER_DAY = 86_400.0
"""Seconds in a day, to turn ``decay_days`` into seconds (tamma phase 5 counts decay in days)."""
_LOGISTIC_Z_LIMIT = 700.0
"""z is clipped to [-700, 700] so exp(-z) cannot overflow float64 (exp(709.78) is the largest
finite value); there the sigmoid is already 1.0 exactly, or below 1e-304."""


class NonFiniteScoreError(ConfigError):
    """A score, weight or vector component was NaN or infinite.

    A subclass of :class:`ragloom.errors.ConfigError` (proposed for ``ragloom.errors``); raised
    before any arithmetic so a NaN can never reorder results silently.
    """


def _check_finite(values: np.ndarray, what: str) -> None:
    if values.size and not bool(np.isfinite(values).all()):
        bad = values[~np.isfinite(values)][0]
        raise NonFiniteScoreError(f"{what} must be finite, got {float(bad)!r}")


# --------------------------------------------------------------------------------------------
# Score normalisation (ploke section 1)
# --------------------------------------------------------------------------------------------


def normalize_scores(
    scores: Sequence[tuple[IdT, float]], method: ScoreNorm | None = None
) -> list[tuple[IdT, float]]:
    """Map one modality's scores to a comparable scale; ids and order are kept as given.

    ``method`` defaults to ``ScoreNorm()`` (min-max, clamped, epsilon 1e-9). See
    :class:`ragloom.retrieve.config.ScoreNorm` for the three formulas and their degenerate
    cases: a single score or all-equal scores give ``degenerate`` (1.0) under min-max and 0.0
    under z-score, never a division by zero. NaN or infinite scores raise
    :class:`NonFiniteScoreError`. An empty list gives an empty list.
    """
    cfg = method if method is not None else ScoreNorm()
    if not scores:
        return []
    ids = [uid for uid, _ in scores]
    vals = np.asarray([s for _, s in scores], dtype=np.float64)
    _check_finite(vals, "scores")
    if cfg.method == "minmax":
        out = _minmax(vals, cfg)
    elif cfg.method == "zscore":
        out = _zscore(vals, cfg)
    else:
        out = _logistic(vals, cfg)
    return [(uid, float(v)) for uid, v in zip(ids, out.tolist(), strict=True)]


def _minmax(vals: np.ndarray, cfg: ScoreNorm) -> np.ndarray:
    if cfg.bounds is not None:
        lo, hi = cfg.bounds
    else:
        lo, hi = float(vals.min()), float(vals.max())
    span = hi - lo  # Python floats: an overflow gives inf, not a numpy warning
    if not math.isfinite(span):
        # Scores near +-1.8e308: halve everything (min-max is invariant to scaling).
        vals, lo, hi = vals / 2.0, lo / 2.0, hi / 2.0
        span = hi - lo
    if span <= cfg.epsilon:
        return np.full(vals.shape, cfg.degenerate, dtype=np.float64)
    out = (vals - lo) / span
    if cfg.clamp:
        out = np.clip(out, 0.0, 1.0)
    return out


def _zscore(vals: np.ndarray, cfg: ScoreNorm) -> np.ndarray:
    # z-scores are scale invariant: divide by max |x| first so mean/std cannot overflow.
    scale = float(np.abs(vals).max())
    if scale == 0.0:
        return np.zeros(vals.shape, dtype=np.float64)
    scaled = vals / scale
    mean = float(scaled.mean())
    std = float(scaled.std())
    if std * scale <= cfg.epsilon:
        return np.zeros(vals.shape, dtype=np.float64)
    out: np.ndarray = (scaled - mean) / std
    return out


def _logistic(vals: np.ndarray, cfg: ScoreNorm) -> np.ndarray:
    with np.errstate(over="ignore"):
        z = (vals - cfg.logistic_center) / cfg.logistic_scale
    z = np.clip(z, -_LOGISTIC_Z_LIMIT, _LOGISTIC_Z_LIMIT)
    out: np.ndarray = 1.0 / (1.0 + np.exp(-z))
    if cfg.clamp:
        out = np.clip(out, 0.0, 1.0)
    return out


# --------------------------------------------------------------------------------------------
# Weighted reciprocal rank fusion (ploke section 1, generalised to N lists as tamma phase 5)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FusedItem(Generic[IdT]):
    """One fused result with the 1-based rank each input list gave it (for ``--explain``).

    ``ranks`` is keyed by list name (the mapping key, or ``"0"``, ``"1"``, ... for a sequence of
    lists); a list that does not contain the id has no entry.
    """

    id: IdT
    score: float
    ranks: Mapping[str, int] = field(default_factory=dict)


def _named(
    lists: Sequence[Sequence[tuple[IdT, float]]] | Mapping[str, Sequence[tuple[IdT, float]]],
    weights: Sequence[float] | Mapping[str, float] | None,
) -> list[tuple[str, Sequence[tuple[IdT, float]], float]]:
    if isinstance(lists, Mapping):
        names = [str(n) for n in lists]
        seqs = list(lists.values())
        if weights is None:
            ws = [1.0] * len(names)
        elif isinstance(weights, Mapping):
            missing = [n for n in names if n not in weights]
            if missing:
                raise ConfigError(f"no RRF weight for list(s) {', '.join(map(repr, missing))}")
            ws = [weights[n] for n in names]
        else:
            raise ConfigError("named lists need weights as a mapping of list name -> weight")
    else:
        names = [str(i) for i in range(len(lists))]
        seqs = list(lists)
        if weights is None:
            ws = [1.0] * len(names)
        elif isinstance(weights, Mapping):
            raise ConfigError("a sequence of lists needs weights as a sequence (one per list)")
        else:
            ws = list(weights)
            if len(ws) != len(names):
                raise ConfigError(f"{len(ws)} RRF weights given for {len(names)} lists")
    out: list[tuple[str, Sequence[tuple[IdT, float]], float]] = []
    for name, seq, w in zip(names, seqs, ws, strict=True):
        if isinstance(w, bool) or not isinstance(w, int | float | np.floating | np.integer):
            raise ConfigError(f"RRF weight for list {name!r} must be a number, got {w!r}")
        wf = float(w)
        if not math.isfinite(wf):
            raise NonFiniteScoreError(f"RRF weight for list {name!r} must be finite, got {wf!r}")
        if wf < 0:
            raise ConfigError(f"RRF weight for list {name!r} must be >= 0, got {wf!r}")
        out.append((name, seq, wf))
    return out


def rrf_fuse_explain(
    lists: Sequence[Sequence[tuple[IdT, float]]] | Mapping[str, Sequence[tuple[IdT, float]]],
    weights: Sequence[float] | Mapping[str, float] | None = None,
    k: float = RRF_K_DEFAULT,
) -> list[FusedItem[IdT]]:
    """Weighted RRF over N lists, keeping each id's per-list rank.

    ``fused(u) = sum_m w_m / (k + rank_m(u))`` (ploke section 1) where ``rank_m`` is the 1-based
    position of ``u`` in list ``m`` as given (lists are assumed sorted best first; their scores
    are ignored), a list without ``u`` contributes 0, and an id repeated inside one list counts
    once, at its best (first) rank. Weights default to 1.0 each; k must be > 0. The sum is
    computed with :func:`math.fsum`, so it is exactly the same whatever the order of the lists.
    Output: by fused score descending, then id ascending.
    """
    kf = _rrf_k(k)
    named = _named(lists, weights)
    contribs: dict[IdT, list[float]] = {}
    ranks: dict[IdT, dict[str, int]] = {}
    for name, items, w in named:
        seen: set[IdT] = set()
        for rank, (uid, _score) in enumerate(items, 1):
            if uid in seen:
                continue
            seen.add(uid)
            contribs.setdefault(uid, []).append(w / (kf + rank))
            ranks.setdefault(uid, {})[name] = rank
    fused = [FusedItem(uid, _exact_sum(parts), ranks[uid]) for uid, parts in contribs.items()]
    fused.sort(key=lambda it: (-it.score, it.id))
    return fused


def _exact_sum(parts: list[float]) -> float:
    """``math.fsum(parts)``; one or two parts need no fsum: a single IEEE addition is already
    the correctly rounded sum (and commutative), and most candidates have one or two."""
    n = len(parts)
    if n == 1:
        return parts[0]
    if n == 2:
        return parts[0] + parts[1]
    return math.fsum(parts)


def _rrf_k(k: float) -> float:
    if isinstance(k, bool) or not isinstance(k, int | float | np.floating | np.integer):
        raise ConfigError(f"RRF k must be a number, got {k!r}")
    kf = float(k)
    if not math.isfinite(kf) or kf <= 0:
        raise ConfigError(f"RRF k must be finite and > 0, got {k!r}")
    return kf


def rrf_fuse(
    lists: Sequence[Sequence[tuple[IdT, float]]] | Mapping[str, Sequence[tuple[IdT, float]]],
    weights: Sequence[float] | Mapping[str, float] | None = None,
    k: float = RRF_K_DEFAULT,
) -> list[tuple[IdT, float]]:
    """Weighted RRF over N lists as ``(id, fused score)``: exactly the ids and scores of
    :func:`rrf_fuse_explain`, without its per-list ranks (the ranking's hot path: one dict per
    list, then one addition per id found in two lists)."""
    kf = _rrf_k(k)
    named = _named(lists, weights)
    per_list: list[dict[IdT, float]] = []
    for _name, items, w in named:
        contrib: dict[IdT, float] = {}
        for rank, (uid, _score) in enumerate(items, 1):
            if uid not in contrib:  # an id repeated inside one list counts at its first rank
                contrib[uid] = w / (kf + rank)
        per_list.append(contrib)
    if len(per_list) <= 2:
        # one or two parts: a single IEEE addition, in list order, as ``_exact_sum`` does
        fused: dict[IdT, float] = dict(per_list[0]) if per_list else {}
        for uid, c in per_list[1].items() if len(per_list) == 2 else ():
            first = fused.get(uid)
            fused[uid] = c if first is None else first + c
        out = list(fused.items())
    else:
        parts: dict[IdT, list[float]] = {}
        for contrib in per_list:
            for uid, c in contrib.items():
                parts.setdefault(uid, []).append(c)
        out = [(uid, _exact_sum(p)) for uid, p in parts.items()]
    return sort_by_score(out)


def sort_by_score(items: list[tuple[IdT, float]]) -> list[tuple[IdT, float]]:
    """Sort ``items`` in place by score descending, then id ascending, and return it: by id,
    then stably by score (two C-keyed passes; half the time of one pass whose key builds a
    tuple per item). Ids must be unique for the order to be total."""
    items.sort(key=_ID)
    items.sort(key=_SCORE, reverse=True)  # reverse keeps equal scores in id order (stable)
    return items


_ID = itemgetter(0)
_SCORE = itemgetter(1)


def rrf_fuse_with(
    lists: Mapping[str, Sequence[tuple[IdT, float]]], cfg: RrfConfig
) -> list[FusedItem[IdT]]:
    """Weighted RRF over named lists (``bm25``, ``dense``, extra sources) with ``cfg``'s k and
    weights; a list name without a configured weight is a ConfigError."""
    return rrf_fuse_explain(lists, cfg.weights_for(lists), cfg.k)


def rrf_fuse2(
    bm25: Sequence[tuple[IdT, float]],
    dense: Sequence[tuple[IdT, float]],
    cfg: RrfConfig | None = None,
) -> list[tuple[IdT, float]]:
    """The two-list form of ploke section 1:
    ``fused(u) = w_bm25 / (k + rank_bm25(u)) + w_dense / (k + rank_dense(u))``."""
    c = cfg if cfg is not None else RrfConfig()
    return rrf_fuse(
        {"bm25": bm25, "dense": dense},
        {"bm25": c.weight_bm25, "dense": c.weight_dense},
        c.k,
    )


# --------------------------------------------------------------------------------------------
# Maximal marginal relevance (ploke section 1; tamma phase 5 applyMMR)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MmrPick(Generic[IdT]):
    """One MMR selection: relevance as given, the MMR objective when it was picked, and its
    highest similarity to the items picked before it (0.0 for the first)."""

    id: IdT
    relevance: float
    mmr_score: float
    max_sim: float


def mmr_select_explain(
    candidates: Sequence[tuple[IdT, float]],
    k: int,
    embeddings: Mapping[IdT, np.ndarray],
    cfg: MmrConfig | None = None,
) -> list[MmrPick[IdT]]:
    """Greedy MMR with the objective and similarity of every pick; see :func:`mmr_select`."""
    c = cfg if cfg is not None else MmrConfig()
    if isinstance(k, bool) or not isinstance(k, int | np.integer):
        raise ConfigError(f"MMR k must be an int, got {k!r}")
    if k < 0:
        raise ConfigError(f"MMR k must be >= 0, got {k!r}")
    if k == 0 or not candidates:
        return []
    rel_all = np.asarray([s for _, s in candidates], dtype=np.float64)
    _check_finite(rel_all, "MMR relevance")
    # Pool: distinct ids, best relevance first, ties id ascending; then the top candidate_pool.
    best: dict[IdT, float] = {}
    for uid, s in candidates:
        prev = best.get(uid)
        if prev is None or s > prev:
            best[uid] = float(s)
    pool = sorted(best.items(), key=lambda kv: (-kv[1], kv[0]))[: c.candidate_pool]
    n = len(pool)
    ids = [uid for uid, _ in pool]
    rel = np.asarray([s for _, s in pool], dtype=np.float64)
    vecs = _pool_vectors(ids, embeddings, c)
    # id_order[i] = position of ids[i] in ascending id order, for "ties by id asc".
    id_order = np.empty(n, dtype=np.int64)
    id_order[sorted(range(n), key=ids.__getitem__)] = np.arange(n)

    lam = c.lambda_
    take = min(k, n)
    picks: list[MmrPick[IdT]] = []
    chosen = np.zeros(n, dtype=bool)
    max_sim = np.zeros(n, dtype=np.float64)
    # First pick: highest relevance, ties id ascending (= pool order), whatever lambda is.
    first = 0
    picks.append(MmrPick(ids[first], float(rel[first]), float(lam * rel[first]), 0.0))
    chosen[first] = True
    np.maximum(max_sim, vecs @ vecs[first], out=max_sim)
    lam_rel = lam * rel
    for _ in range(take - 1):
        obj = lam_rel - (1.0 - lam) * max_sim
        obj[chosen] = -np.inf
        top = obj.max()
        tied = np.flatnonzero(obj == top)
        pick = int(tied[0]) if tied.size == 1 else int(tied[np.argmin(id_order[tied])])
        picks.append(MmrPick(ids[pick], float(rel[pick]), float(top), float(max_sim[pick])))
        chosen[pick] = True
        np.maximum(max_sim, vecs @ vecs[pick], out=max_sim)
    return picks


def mmr_select(
    candidates: Sequence[tuple[IdT, float]],
    k: int,
    embeddings: Mapping[IdT, np.ndarray],
    cfg: MmrConfig | None = None,
) -> list[tuple[IdT, float]]:
    """Pick up to ``k`` results balancing relevance and diversity; returns ``(id, relevance)``
    in pick order.

    ploke section 1: only the top ``cfg.candidate_pool`` candidates by relevance (ties id asc;
    a repeated id keeps its best relevance) are considered; the first pick is the most relevant;
    each next pick maximises ``lambda * rel(x) - (1 - lambda) * max_{y in S} sim(x, y)`` over
    the unpicked, ties id ascending. ``sim`` is cosine on L2-normalised vectors (or the raw dot
    product with ``sim_metric="dot"``); an id without an embedding is a zero vector, similar 0.0
    to everything. Relevance is used as given, so pass relevance on the same scale as the
    similarity, e.g. :func:`normalize_scores` output in [0, 1] (raw RRF scores near 1/60 would
    let similarity dominate). Returns ``min(k, pool size)`` distinct ids; ``k = 0`` gives ``[]``.
    NaN relevance or vector components raise :class:`NonFiniteScoreError`; vectors of different
    lengths raise ConfigError.
    """
    return [(p.id, p.relevance) for p in mmr_select_explain(candidates, k, embeddings, cfg)]


def _pool_vectors(
    ids: Sequence[IdT], embeddings: Mapping[IdT, np.ndarray], cfg: MmrConfig
) -> np.ndarray:
    """The pool's vectors as one ``n x dim`` float64 matrix (L2-normalised for cosine; a
    missing embedding is a zero row, similar 0.0 to everything).

    MMR needs only the similarity columns of the ``k`` picked ids, so each is one
    matrix-vector product (``vecs @ vecs[pick]``) instead of the full ``n x n`` Gram matrix:
    15 products for a 50 x 384 pool take ~0.05 ms against ~0.4 ms for the single-threaded
    Gram matrix, and a small gemv stays on the calling thread, so a loaded machine does not
    stall it the way a threaded BLAS gemm did (26 ms p50 once; docs/ranking.md).
    """
    n = len(ids)
    rows: list[np.ndarray] = []
    present: list[int] = []
    dim: int | None = None
    for i, uid in enumerate(ids):
        vec = embeddings.get(uid)
        if vec is None:
            continue
        arr = np.asarray(vec)
        if arr.ndim != 1:
            raise ConfigError(f"embedding for {uid!r} must be 1-D, got shape {arr.shape}")
        if dim is None:
            dim = arr.shape[0]
        elif arr.shape[0] != dim:
            raise ConfigError(f"embedding for {uid!r} has {arr.shape[0]} dims, others have {dim}")
        rows.append(arr)
        present.append(i)
    if not rows or dim is None:
        return np.zeros((n, 1), dtype=np.float64)
    mat = np.stack(rows).astype(np.float64)  # one conversion for the whole pool
    _check_finite(mat, "embedding components")
    if cfg.sim_metric == "cosine":
        norms = np.sqrt(np.einsum("ij,ij->i", mat, mat))
        # a zero vector stays zero: similarity 0 to everything
        mat /= np.where(norms > 0.0, norms, 1.0)[:, None]
    if len(present) == n:
        return mat
    full = np.zeros((n, dim), dtype=np.float64)
    full[np.asarray(present, dtype=np.intp)] = mat
    return full


# --------------------------------------------------------------------------------------------
# Recency (tamma phase 5: recencyBoost 0.1, recencyDecayDays 30)
# --------------------------------------------------------------------------------------------


def recency_boost(
    age_seconds: float,
    boost: float = RECENCY_BOOST_DEFAULT,
    decay_days: float = RECENCY_DECAY_DAYS_DEFAULT,
) -> float:
    """``boost * exp(-age / (decay_days * 86400))``: ``boost`` for brand-new content, ``boost/e``
    after ``decay_days``. A negative age (a date in the future, clock skew) counts as 0.
    NaN or infinite age raises :class:`NonFiniteScoreError`; invalid boost / decay ConfigError.
    """
    cfg = RecencyConfig(boost=boost, decay_days=decay_days)
    age = float(age_seconds)
    if not math.isfinite(age):
        raise NonFiniteScoreError(f"age_seconds must be finite, got {age_seconds!r}")
    return cfg.boost * math.exp(-max(age, 0.0) / (cfg.decay_days * SECONDS_PER_DAY))


def _epoch(value: datetime | float, what: str) -> float:
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ConfigError(f"{what} must be timezone-aware, got naive {value!r}")
        return value.timestamp()
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{what} must be a datetime or epoch seconds, got {value!r}")
    f = float(value)
    if not math.isfinite(f):
        raise NonFiniteScoreError(f"{what} must be finite, got {value!r}")
    return f


def apply_recency(
    scores: Sequence[tuple[IdT, float]],
    dates: Mapping[IdT, datetime | float],
    now: datetime | float,
    cfg: RecencyConfig | None = None,
) -> list[tuple[IdT, float]]:
    """Add :func:`recency_boost` of each item's age to its score and re-sort.

    ``dates`` maps ids to a timezone-aware datetime or epoch seconds (e.g. file mtime); an id
    without a date gets no boost. Add the boost to normalised scores (it is on a [0, 1] scale;
    tamma phase 5 applies it after normalisation). Output: score descending, then id ascending.
    """
    c = cfg if cfg is not None else RecencyConfig()
    now_s = _epoch(now, "now")
    vals = np.asarray([s for _, s in scores], dtype=np.float64)
    _check_finite(vals, "scores")
    out: list[tuple[IdT, float]] = []
    for uid, s in scores:
        when = dates.get(uid)
        bonus = 0.0
        if when is not None:
            bonus = recency_boost(now_s - _epoch(when, f"date of {uid!r}"), c.boost, c.decay_days)
        out.append((uid, float(s) + bonus))
    out.sort(key=lambda kv: (-kv[1], kv[0]))
    return out


def file_scores(
    ranked: Sequence[tuple[IdT, float]],
    paths: Mapping[IdT, str],
    weight: float,
    decay: float,
    top: int,
) -> dict[str, float]:
    """Score of each file from its chunks' scores ``s_1 >= s_2 >= ...``:

        file(f) = s_1 + weight * sum_{j=1..top} decay**(j-1) * s_{j+1}

    the best chunk plus a decaying share of the file's further hits (at most ``top`` of them).
    An id without a path is its own file (keyed by ``repr(id)``).
    """
    _check_params(weight, decay, top)
    by_file: dict[str, list[float]] = {}
    for cid, score in ranked:
        if not math.isfinite(score):
            raise NonFiniteScoreError(f"score of {cid!r} must be finite, got {score!r}")
        by_file.setdefault(paths.get(cid, repr(cid)), []).append(score)
    out: dict[str, float] = {}
    for f, scores in by_file.items():
        scores.sort(reverse=True)
        extra = math.fsum(decay**j * s for j, s in enumerate(scores[1 : top + 1]))
        out[f] = scores[0] + weight * extra
    return out


def file_evidence(
    ranked: Sequence[tuple[IdT, float]],
    paths: Mapping[IdT, str],
    weight: float,
    decay: float,
    top: int,
) -> list[tuple[IdT, float]]:
    """Add to each hit its file's further evidence, ``file(f) - s_1`` of :func:`file_scores`,
    and re-sort (score descending, then id ascending).

    Every chunk of a file gains the same amount, so the order inside a file is kept, and the
    best chunk of each file scores its file's :func:`file_scores`: the first-seen order of the
    files of the result is the file ranking. ``weight = 0`` only re-sorts.
    """
    if weight == 0.0:
        # no further evidence: every hit gains file(f) - s_1 = 0.0 exactly, so only re-sort
        _check_params(weight, decay, top)
        for cid, score in ranked:
            if not math.isfinite(score):
                raise NonFiniteScoreError(f"score of {cid!r} must be finite, got {score!r}")
        zero = [(cid, s + 0.0) for cid, s in ranked]  # + 0.0 as below (turns -0.0 into 0.0)
        return sort_by_score(zero)
    files = file_scores(ranked, paths, weight, decay, top)
    best: dict[str, float] = {}
    for cid, score in ranked:
        f = paths.get(cid, repr(cid))
        best[f] = max(best.get(f, score), score)
    out = [
        (cid, s + (files[paths.get(cid, repr(cid))] - best[paths.get(cid, repr(cid))]))
        for cid, s in ranked
    ]
    return sort_by_score(out)


def _check_params(weight: float, decay: float, top: int) -> None:
    if not (math.isfinite(weight) and weight >= 0.0):
        raise ConfigError(f"file evidence weight must be finite and >= 0, got {weight!r}")
    if not (math.isfinite(decay) and 0.0 <= decay <= 1.0):
        raise ConfigError(f"file evidence decay must be in [0, 1], got {decay!r}")
    if isinstance(top, bool) or not isinstance(top, int) or top < 0:
        raise ConfigError(f"file evidence top must be an int >= 0, got {top!r}")


def tied_by_row(hits: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """``hits`` (best first) with exactly tied scores in row order. Chunks of identical text
    share one vector, so their scores tie exactly, and hnswlib and pgvector return such ties
    in different orders; in row order (the order both backends stored the chunks in) the
    folder index and PostgreSQL rank them alike (docs/postgres.md, "Sources and change
    history"). A list without ties comes back as it is."""
    ties = [i for i in range(len(hits) - 1) if hits[i][1] == hits[i + 1][1]]
    if not ties:
        return hits
    out = list(hits)
    n = len(hits)
    k = 0
    while k < len(ties):
        i = ties[k]  # a run of equal scores starts at i
        j = i + 1
        while j < n and hits[j][1] == hits[i][1]:
            j += 1
        out[i:j] = sorted(hits[i:j])  # the run, by row
        while k < len(ties) and ties[k] < j:
            k += 1
    return out
