"""What a learned ranker sees of each candidate (issue 22; docs/ranking.md "Learned ranking").

:func:`candidate_features` turns a query's :class:`~ragloom.retrieve.stages.base.RankState`,
at the place the learned stage runs (after the hand-set stages that add evidence, before heads
and MMR), into one row of :data:`FEATURE_NAMES` per candidate among the first
:data:`MAX_CANDIDATES`: the candidate's own evidence (its place and score after the hand-set
stages, each modality's rank and score, role, declaration, what each stage added), its file's
evidence (how many of its chunks are candidates and their best places), how its path meets the
question's words, what kind of question it is, its file's change history (similar past
changes, churn, recency and co-change, each apart: ``hist_*``) and the whole file's BM25 score
for the question (``file_bm25_*``: :mod:`ragloom.index.file_bm25`). The same function builds the
training data (:mod:`ragloom.eval.mining`, through :func:`tap_features`) and scores at query
time, so a model and the ranking it is used in see the same numbers. :data:`FEATURES_VERSION`
names this set: a model fitted on another refuses to load.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import numpy as np

from ragloom.retrieve.history import CO_CHANGE_TOP, CoChange, HistoryEvidence, co_change_ranks
from ragloom.retrieve.roles import change_request
from ragloom.retrieve.stages.base import RankState, StageBase, issue_reading
from ragloom.retrieve.stages.history import history_query

__all__ = [
    "BASE_FEATURES_VERSION",
    "BASE_FEATURE_NAMES",
    "FEATURES_VERSION",
    "FEATURE_NAMES",
    "MAX_CANDIDATES",
    "TapStage",
    "candidate_features",
    "file_first_rows",
    "tap_features",
    "tapped",
]

FEATURES_VERSION = "ragloom-ltr-features-7"
"""The name of this feature set; bump it whenever a feature is added, removed or changed."""
MAX_CANDIDATES = 100
"""Candidates the learned stage scores (the rest keep their order, after them)."""
_ROLE_FEATURES = ("implementation", "test", "documentation", "example", "declaration")
_NOTE_FEATURES = ("prior", "history", "co_change", "issue", "exact_match", "language_boost")
_MISSING_RANK = 1000
"""A modality that did not return the candidate counts it at this rank."""
_WORD_RE = re.compile(r"[A-Za-z][A-Za-z0-9]+")

FEATURE_NAMES: tuple[str, ...] = (
    "log_rank",
    "score_ratio",
    "in_bm25",
    "log_bm25_rank",
    "bm25_ratio",
    "in_dense",
    "log_dense_rank",
    "dense_score",
    "dense_gap",
    *(f"role_{r}" for r in _ROLE_FEATURES),
    "declaration",
    *(f"note_{n}" for n in _NOTE_FEATURES),
    "file_log_chunks",
    "file_log_best_rank",
    "file_log_best_bm25",
    "file_log_best_dense",
    "file_rr_sum",
    "file_first_chunk",
    "path_depth",
    "path_stem_in_query",
    "path_word_share",
    "query_issue",
    "query_log_words",
    "query_change",
    "hist_known",
    "hist_similar",
    "hist_churn",
    "hist_recent",
    "hist_similar_share",
    "hist_co_change",
    "file_bm25_ratio",
    "file_bm25_log_rank",
    "file_bm25_log",
)
"""The columns of :func:`candidate_features`, in order."""

BASE_FEATURES_VERSION = "ragloom-ltr-features-3"
"""The feature set before the whole-file BM25 columns: the model for an index without a file
BM25 (one made before it) reads it."""
BASE_FEATURE_NAMES: tuple[str, ...] = FEATURE_NAMES[: FEATURE_NAMES.index("file_bm25_ratio")]
"""The columns of :data:`BASE_FEATURES_VERSION`: the first columns of :data:`FEATURE_NAMES`."""


_LOG1P = tuple(math.log1p(i) for i in range(_MISSING_RANK + 1))
"""``log1p`` of every rank up to :data:`_MISSING_RANK`, looked up instead of computed."""
_ROLE_ROWS = {r: tuple(r == role for role in _ROLE_FEATURES) for r in _ROLE_FEATURES}
_NO_ROLE = tuple(False for _ in _ROLE_FEATURES)
_NO_NOTES = tuple(0.0 for _ in _NOTE_FEATURES)


def _log_rank(rank: int | None) -> float:
    if rank is None:
        return _LOG1P[_MISSING_RANK]
    return _LOG1P[rank] if rank <= _MISSING_RANK else math.log1p(rank)


def _note(v: object) -> float:
    return float(v) if isinstance(v, (int, float)) else 0.0


_NOTE_INDEX = {n: i for i, n in enumerate(_NOTE_FEATURES)}


def _notes(notes: dict[str, Any]) -> Sequence[float]:
    """The :data:`_NOTE_FEATURES` columns of a candidate's notes (0.0 where a note is absent
    or not a number): a pass over the few notes it has, not a look-up per column."""
    if not notes:
        return _NO_NOTES
    out = list(_NO_NOTES)
    for key, value in notes.items():
        i = _NOTE_INDEX.get(key)
        if i is not None:
            out[i] = _note(value)
    return out


def _first_places(
    items: Sequence[tuple[int, float]], wanted: set[int]
) -> dict[int, tuple[int, float]]:
    """(1-based rank, score) of each of ``wanted`` at its first place in ``items``."""
    out: dict[int, tuple[int, float]] = {}
    for rank, (r, s) in enumerate(items, 1):
        if r in wanted and r not in out:
            out[r] = (rank, s)
    return out


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD_RE.findall(text)}


@functools.lru_cache(maxsize=65_536)
def _path_words(path: str) -> tuple[tuple[str, ...], str]:
    parts = path.lower().replace("\\", "/").split("/")
    stem = parts[-1].rsplit(".", 1)[0]
    words: list[str] = []
    for p in [*parts[:-1], stem]:
        words.extend(w for w in re.split(r"[^a-z0-9]+", p) if len(w) > 1)
    return tuple(words), stem


def candidate_features(
    state: RankState, limit: int = MAX_CANDIDATES, *, first_only: bool = False
) -> tuple[list[int], np.ndarray]:
    """The rowids of the first ``limit`` candidates of ``state.ranked`` and their feature
    matrix (``float32``, one row each, columns :data:`FEATURE_NAMES`). With ``first_only``
    only each file's first candidate gets its row (what a model of files scores:
    :func:`file_first_rows`); the others' rows are zeros, ``file_first_chunk`` 0 included."""
    head = state.ranked[:limit]
    rowids = [r for r, _ in head]
    x = np.zeros((len(head), len(FEATURE_NAMES)), dtype=np.float32)
    if not head:
        return rowids, x
    # what ``state.evidence`` gives a candidate, read straight from the lists (no record per
    # candidate): each modality's first place, and the row facts of ``chunk_info``
    wanted = set(rowids)
    bm25_at = _first_places(state.modalities.get("bm25", ()), wanted)
    dense_at = _first_places(state.modalities.get("dense", ()), wanted)
    info = state.source.chunk_info(rowids)
    issue, text = issue_reading(state)
    qwords = _words(
        state.query if issue is None else text + " " + " ".join(t for t, _ in issue.terms[:32])
    )
    top = head[0][1] if head[0][1] > 0 else 1.0
    bm25_top = max(bm25_at[r][1] if r in bm25_at else 0.0 for r in rowids) or 1.0
    dense_top = max(dense_at[r][1] if r in dense_at else -1.0 for r in rowids)
    paths = [info[r][0] if r in info else None for r in rowids]
    keys = [p or f"#{r}" for p, r in zip(paths, rowids, strict=True)]
    files: dict[str, list[int]] = {}
    for i, key in enumerate(keys):
        files.setdefault(key, []).append(i)
    query = (
        1.0 if issue is not None else 0.0,
        math.log1p(len(state.query.split())),
        1.0 if change_request(text) else 0.0,
    )
    b_rank = [bm25_at[r][0] if r in bm25_at else None for r in rowids]
    d_rank = [dense_at[r][0] if r in dense_at else None for r in rowids]
    aggs: dict[str, tuple[float, float, float, float, float]] = {}
    for key, members in files.items():
        first = members[0]  # members ascend: the file's best place is its first
        if len(members) == 1:  # most files: the same floats without the loops
            aggs[key] = (_LOG1P[1], _log_rank(first + 1), _log_rank(b_rank[first]),
                         _log_rank(d_rank[first]), 1.0 / (11 + first))  # fmt: skip
            continue
        ranks = [i + 1 for i in members]
        aggs[key] = (
            math.log1p(len(members)),
            math.log1p(ranks[0]),
            _log_rank(min((v for i in members if (v := b_rank[i]) is not None), default=None)),
            _log_rank(min((v for i in members if (v := d_rank[i]) is not None), default=None)),
            sum(1.0 / (10 + k) for k in ranks),
        )
    # how each file's path meets the question's words (the same for all its chunks)
    path_feats: dict[str, tuple[int, bool, float]] = {}
    for key, members in files.items():
        path = paths[members[0]] or ""
        words, stem = _path_words(path)
        share = sum(w in qwords for w in words) / len(words) if words else 0.0
        path_feats[key] = (path.count("/"), stem in qwords, share)
    hist = _history_features(state, paths, files)
    whole = _file_bm25_features(state, paths, files)
    notes = state.notes
    rows: list[Sequence[float]] = []
    skipped = (0.0,) * len(FEATURE_NAMES)
    for i, r in enumerate(rowids):
        key = keys[i]
        is_first = files[key][0] == i
        if first_only and not is_first:
            rows.append(skipped)
            continue
        bp = bm25_at.get(r)
        dp = dense_at.get(r)
        b, d = b_rank[i], d_rank[i]
        ds = dp[1] if dp is not None else None
        meta = info.get(r)
        rows.append(
            [
                math.log1p(i + 1),
                head[i][1] / top,
                b is not None,
                _log_rank(b),
                (bp[1] if bp is not None else 0.0) / bm25_top,
                d is not None,
                _log_rank(d),
                ds if ds is not None else 0.0,
                (dense_top - ds) if ds is not None else 1.0,
                *_ROLE_ROWS.get(meta[1] if meta else "", _NO_ROLE),
                bool(meta[2]) if meta else False,
                *_notes(notes.get(r) or {}),
                *aggs[key],
                is_first,
                *path_feats[key],
                *query,
                *hist[key],
                *whole[key],
            ]
        )
    x = np.asarray(rows, dtype=np.float32)
    return rowids, x


_HIST_K = 10.0
"""RRF k of the history features' ranks (the history bonus's own, ``HISTORY_RRF_K``)."""
Hist = dict[str, tuple[float, float, float, float, float, float]]
_NO_HISTORY = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)


def _history_found(state: RankState) -> tuple[HistoryEvidence, CoChange] | None:
    """The history's file rankings for this question: those the history stage read, or read
    here when it yielded (the hand-set weights skip it when BM25 and dense agree). None when
    the strategy runs no history step or the index has no history."""
    if state.history_found is not None:
        return state.history_found
    if "history" not in state.steps:
        return None
    found = state.source.history_evidence(history_query(state), recent=True)
    state.history_found = found
    return found


def _history_features(
    state: RankState,
    paths: Sequence[str | None],
    files: dict[str, list[int]],
) -> Hist:
    """Per file: whether a history is known, and ``1 / (k + rank)`` of the file among the
    files similar past changes touched, by how often it changed, and by how recently (0 where
    it has no rank), its similar-change vote over the best file's, and its co-change with the
    :data:`~ragloom.retrieve.history.CO_CHANGE_TOP` best files: the evidence the history
    bonus sums, kept apart."""
    found = _history_found(state)
    if found is None or found[0].empty:
        return dict.fromkeys(files, _NO_HISTORY)
    ev = found[0]
    # co-change with the best files of the order as it stands (``files`` keeps first places)
    top = [p for p in (paths[m[0]] for m in files.values()) if p is not None][:CO_CHANGE_TOP]
    co_ranks = co_change_ranks(top, found[1])
    out: Hist = {}
    for key, members in files.items():
        path = paths[members[0]]
        if path is None:
            out[key] = (1.0, 0.0, 0.0, 0.0, 0.0, 0.0)
            continue
        sim, churn, rec = ev.similar.get(path), ev.churn.get(path), ev.recent.get(path)
        co = co_ranks.get(path)
        out[key] = (
            1.0,
            1.0 / (_HIST_K + sim) if sim is not None else 0.0,
            1.0 / (_HIST_K + churn) if churn is not None else 0.0,
            1.0 / (_HIST_K + rec) if rec is not None else 0.0,
            ev.similar_share.get(path, 0.0),
            1.0 / (_HIST_K + co) if co is not None else 0.0,
        )
    return out


_FILE_QUERY_TERMS = 32
"""An issue's weighted terms, strongest first, that the whole-file BM25 is asked with: half of
what its BM25 list reads (64 tokens), for time (docs/benchmarks.md, "A BM25 over whole
files": +2.01 ms p50 at 100k chunks with 64, +1.87 with 32)."""


def _file_bm25_features(
    state: RankState, paths: Sequence[str | None], files: dict[str, list[int]]
) -> dict[str, tuple[float, float, float]]:
    """Per file: its whole-file BM25 score for the question (:mod:`ragloom.index.file_bm25`)
    over the best among the candidate files, its rank among them by that score (ties keep
    the candidates' order), and ``log1p`` of the score. An index without a file BM25 gives
    every file a score of 0 (the learned stage then ranks with a model that does not read
    these columns: :data:`~ragloom.retrieve.stages.learned.BASE_MODEL`)."""
    named = [p for p in (paths[m[0]] for m in files.values()) if p is not None]
    issue, _ = issue_reading(state)
    # an issue asks with its weighted terms, strongest first, as its BM25 list does (its raw
    # text, tracebacks and all, would cost a millisecond to tokenise; docs/benchmarks.md)
    query = state.query if issue is None else list(issue.terms[:_FILE_QUERY_TERMS])
    got = state.source.file_bm25_scores(query, named) if named else None
    scores = {
        key: (got.get(p, 0.0) if got is not None and (p := paths[m[0]]) is not None else 0.0)
        for key, m in files.items()
    }
    order = sorted(scores, key=lambda k: -scores[k])  # stable: the candidates' order on ties
    best = scores[order[0]] if order else 0.0
    return {
        key: (
            scores[key] / best if best > 0 else 0.0,
            _log_rank(rank),
            math.log1p(max(scores[key], 0.0)),
        )
        for rank, key in enumerate(order, 1)
    }


_FIRST_CHUNK = FEATURE_NAMES.index("file_first_chunk")


def file_first_rows(x: np.ndarray, names: Sequence[str] = FEATURE_NAMES) -> np.ndarray:
    """The indices of the rows of ``x`` (columns ``names``) that are their file's first
    candidate (``file_first_chunk``): the rows a model of files is fitted on and scores."""
    if x.ndim != 2 or not len(x):
        return np.zeros(0, dtype=np.intp)
    col = _FIRST_CHUNK if names is FEATURE_NAMES else list(names).index("file_first_chunk")
    return np.flatnonzero(x[:, col] == 1)


# -- the tap: the features of every query run inside ``tapped`` ---------------------------------

Tap = Callable[[RankState, list[int], np.ndarray], None]
_TAP: ContextVar[Tap | None] = ContextVar("ragloom_feature_tap", default=None)


def tap_features() -> Tap | None:
    """The callback :func:`tapped` installed in this context, if any."""
    return _TAP.get()


@contextmanager
def tapped(callback: Tap) -> Iterator[None]:
    """Within the block, every hybrid query's pipeline hands ``callback`` its state and
    :func:`candidate_features` at the learned stage's place (what training data is mined
    from), whether or not a learned stage runs."""
    token = _TAP.set(callback)
    try:
        yield
    finally:
        _TAP.reset(token)


class TapStage(StageBase):
    """Hands the candidates' features to the :func:`tapped` callback; changes nothing."""

    name: str = "tap"
    reads: frozenset[str] = frozenset({"query", "modalities", "role", "path"})
    group: str = "priors"

    def __init__(self, callback: Tap) -> None:
        self.callback = callback

    def apply(self, state: RankState) -> None:
        rowids, x = candidate_features(state)
        self.callback(state, rowids, x)
