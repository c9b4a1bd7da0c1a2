"""The learned ranking stage (issue 22; docs/ranking.md "Learned ranking").

A model fitted on questions mined from outside repositories' history
(:mod:`ragloom.eval.mining`, ``scripts/train_ranker.py``) scores the first
:data:`~ragloom.retrieve.stages.features.MAX_CANDIDATES` candidates from their
:func:`~ragloom.retrieve.stages.features.candidate_features`; they are re-ordered by that score
(ties keep their order) and take the scores the hand-set stages gave to those places, best
first, so that the stages after this one (heads, MMR) see scores on the scale they expect. The
candidates after them keep their places. Explain records: ``learned`` (the model's score) and
``learned_features`` (the features that moved it most, with their shares).

The model ships with the package (:data:`DEFAULT_MODEL`); one fitted on another feature set is
refused with a clear message. Plain ``hybrid`` runs it on the questions
:data:`LEARNED_DEFAULT` names (every one); ``+learned`` on :data:`LEARNED_QUESTIONS` (the same);
``+handset`` never.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import numpy as np

from ragloom.retrieve.ranker import RankerModel, RankerModelError, Scorer, load_model
from ragloom.retrieve.roles import change_request
from ragloom.retrieve.stages.base import RankState, StageBase, issue_reading
from ragloom.retrieve.stages.features import (
    BASE_FEATURE_NAMES,
    BASE_FEATURES_VERSION,
    FEATURE_NAMES,
    FEATURES_VERSION,
    candidate_features,
    file_first_rows,
)

__all__ = [
    "BASE_MODEL",
    "DEFAULT_MODEL",
    "EXPLAIN_FEATURES",
    "LEARNED_DEFAULT",
    "LEARNED_QUESTIONS",
    "QUESTION_KINDS",
    "WITHIN_FILE",
    "LearnedStage",
    "default_model",
    "keep_file_order",
    "keep_shape",
    "keep_slots",
]

DEFAULT_MODEL = Path(__file__).resolve().parent.parent / "models" / "ranker.json"
"""The shipped model (``scripts/train_ranker.py --write``)."""
BASE_MODEL = DEFAULT_MODEL.with_name("ranker-features3.json")
"""The model for an index without a BM25 over whole files (an index folder made before it, or
a PostgreSQL serving node's BM25 folder built before it): the model shipped before it
(``5a82a48d15f7``), fitted on :data:`~ragloom.retrieve.stages.features.BASE_FEATURES_VERSION`,
whose columns are the first of the full set."""
QUESTION_KINDS = ("off", "issues", "changes", "all")
LEARNED_DEFAULT = "all"
"""Which questions plain ``hybrid`` re-orders with the model (one of :data:`QUESTION_KINDS`).
``all`` since the seventh session, when the model was fitted on look-up questions too (docstring
look-ups mined from the Python training repositories, :func:`ragloom.eval.mining.mine_lookups`)
and laid out by :func:`keep_slots`. Chosen on the mined test groups and the sym10k tune set
(docs/ranking.md, "Look-up groups, every question and the slots layout"): the model gains as
much on the commit questions that do not read as change requests as on those that do, and on
the mined look-ups (file MRR@10 0.804 -> 0.826); sym10k tune: file MRR@10 0.771 -> 0.791,
symbol MRR@10 0.524 -> 0.536, symbol recall@10 0.772 -> 0.764. ``changes`` (an issue, or a
title that reads as a change request, :func:`~ragloom.retrieve.roles.change_request`) was the
default before: a model fitted on commit messages alone lost symbol recall@10 on look-ups
(0.012-0.016)."""
LEARNED_QUESTIONS = "all"
"""Which questions ``+learned`` re-orders (as plain ``hybrid`` does)."""
EXPLAIN_FEATURES = 5
"""Features named per hit in the explain record, largest share first."""

WITHIN_FILE = "slots"
"""How the model's order is laid out: ``slots`` (the model decides which file comes first,
second, ...; each file's other chunks stay where the hand-set order had them, or follow right
behind the file's first when it moved down: :func:`keep_slots`), ``shape`` (the model's file
order in the hand-set shape: :func:`keep_shape`, the default until the seventh session),
``handset`` (the model's order, each file's chunks put back in the hand-set order:
:func:`keep_file_order`) or ``model``. The model ranks files (commit messages name files); in
its own order a file with several strong chunks fills the top. ``shape`` and ``slots`` give the
same file order; with ``shape`` a promoted file took over the passed file's slots, pulling its
own weaker chunks up and pushing the passed file's second and third chunks out of the top ten.
On the SWE-bench tune half (docs/ranking.md, "Look-up groups, every question and the slots
layout") they have the same file figures, ``slots`` function Acc@5 / @10 47.1 / 60.8 against
49.0 / 58.8, context recall at 4k / 8k / 13k / 27k 45.7 / 58.6 / 66.9 / 71.2 against
43.7 / 61.6 / 66.0 / 69.2; sym10k tune symbol recall@10 0.764 against 0.768."""

log = logging.getLogger("ragloom.retrieve")

_lock = threading.Lock()
_cache: dict[Path, RankerModel] = {}


def default_model(
    path: Path = DEFAULT_MODEL,
    features: str = FEATURES_VERSION,
    names: tuple[str, ...] = FEATURE_NAMES,
) -> RankerModel:
    """The model at ``path``, loaded once per process (:class:`RankerModelError` when it is
    missing, unreadable or fitted on other features than ``features`` / ``names``)."""
    with _lock:
        model = _cache.get(path)
        if model is None:
            if not path.is_file():
                raise RankerModelError(
                    f"no ranking model at {path}: train one (scripts/train_ranker.py --write) "
                    "or use +handset"
                )
            model = load_model(path, features=features, names=names)
            _cache[path] = model
        return model


class LearnedStage(StageBase):
    """Re-order the first candidates by the learned model's score."""

    name: str = "learned"
    reads: frozenset[str] = frozenset({"query", "modalities", "role", "path", "notes"})
    group: str = "priors"
    keeps_candidates: bool = True
    """The list is kept whole when rows are loaded for an earlier stage (the exact stage):
    otherwise it would keep only the top ``top_k`` candidates whose rows it loads (a question
    naming a symbol would give the model a shorter list than one that names none). The model
    reads ``chunk_info`` and the modality lists, never a row, so only the hits' rows are
    loaded in the end."""

    def __init__(self, model: Scorer | None = None, questions: str = LEARNED_QUESTIONS) -> None:
        if questions not in QUESTION_KINDS:
            raise ValueError(f"questions must be one of {QUESTION_KINDS}, got {questions!r}")
        self.model: Scorer = model if model is not None else default_model()
        self.questions = questions

    def __repr__(self) -> str:
        return f"LearnedStage({self.model.kind}, {self.model.digest})"

    def applies(self, state: RankState) -> bool:
        if self.questions in ("all", "off"):
            return self.questions == "all"
        issue, text = issue_reading(state)
        return issue is not None or (self.questions == "changes" and change_request(text))

    def apply(self, state: RankState) -> None:
        model = self.model
        if state.source.file_bm25_scores(state.query, ()) is None:
            base = _base_model()
            if base is None:
                return
            model = base
        rowids, x = candidate_features(state, first_only=model.level == "file")
        if len(rowids) < 2:
            return
        x = x[:, : len(model.names)]  # the base model reads the first columns only
        info = state.source.chunk_info(rowids)
        paths = [info[r][0] if r in info else f"#{r}" for r in rowids]
        scored, share = _scored_rows(model, x, paths)
        scores = model.predict(x[scored])[share]
        order = [int(i) for i in np.lexsort((np.arange(len(rowids)), -scores))]
        if WITHIN_FILE != "model":
            keep = {"handset": keep_file_order, "slots": keep_slots}.get(WITHIN_FILE, keep_shape)
            order = keep(order, paths)
        places = sorted((s for _, s in state.ranked[: len(rowids)]), reverse=True)
        head = [(rowids[i], places[k]) for k, i in enumerate(order)]
        state.ranked = head + list(state.ranked[len(rowids) :])
        for i, r in enumerate(rowids):
            state.note(r, "learned", round(float(scores[i]), 6))
        if state.explain:
            contrib = model.contributions(x[scored])[share]
            for i, r in enumerate(rowids):
                top = np.argsort(-np.abs(contrib[i]), kind="stable")[:EXPLAIN_FEATURES]
                state.note(
                    r,
                    "learned_features",
                    {FEATURE_NAMES[int(j)]: round(float(contrib[i, j]), 6) for j in top},
                )


_warned = threading.Event()


def _base_model() -> RankerModel | None:
    """The model for an index without a BM25 over whole files (:data:`BASE_MODEL`), said once
    per process; None (the hand-set order stays) when it cannot be loaded. The shipped model
    reads each file's whole-file BM25 score, which an index made before it lacks: made-up
    zeros would rank worse than either."""
    if not _warned.is_set():
        _warned.set()
        log.warning(
            "the index has no BM25 over whole files (`ragloom index` adds it to an index "
            "folder): ranking with the model that does not read it"
        )
    try:
        return default_model(BASE_MODEL, BASE_FEATURES_VERSION, BASE_FEATURE_NAMES)
    except RankerModelError as exc:
        log.warning("learned ranking off: %s", exc)
        return None


def _scored_rows(model: Scorer, x: np.ndarray, paths: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(the rows ``model`` scores, and for each candidate the index among them of the row whose
    score it takes). A model of candidates scores every one; a model of files (``level``
    ``file``, fitted on each file's first candidate) scores each file's first candidate, and
    the file's other candidates share its score."""
    n = len(paths)
    if model.level != "file":
        every = np.arange(n)
        return every, every
    first: dict[str, int] = {}
    rows: list[int] = []
    for i in file_first_rows(x).tolist():
        if paths[i] not in first:
            first[paths[i]] = len(rows)
            rows.append(i)
    for i, p in enumerate(paths):  # a file whose first candidate was not marked: its first
        if p not in first:
            first[p] = len(rows)
            rows.append(i)
    return np.asarray(rows, dtype=np.intp), np.asarray([first[p] for p in paths], dtype=np.intp)


def keep_file_order(order: list[int], files: list[str]) -> list[int]:
    """``order`` (candidate indices, best first) with each file's candidates put back in their
    original (index) order: a file keeps the places ``order`` gives it, and its best-placed
    slot goes to its first candidate in the input, and so on."""
    queues: dict[str, list[int]] = {}
    for i in sorted(order):
        queues.setdefault(files[i], []).append(i)
    taken: dict[str, int] = {}
    out = []
    for i in order:
        f = files[i]
        k = taken.get(f, 0)
        out.append(queues[f][k])
        taken[f] = k + 1
    return out


def keep_shape(order: list[int], files: list[str]) -> list[int]:
    """The files in the order ``order`` gives them (by their best candidate), laid out in the
    input's shape: where the input has the ``j``-th candidate of its ``k``-th file, the output
    has the ``j``-th candidate (input order) of the ``k``-th file of ``order``; candidates left
    over (a file with more candidates than the slot pattern holds) follow in ``order``. Which
    file comes first is the model's; how many candidates of the first files stand at the top,
    and which of a file's candidates comes first, stay as the input had them."""
    by_file: dict[str, list[int]] = {}
    for i in range(len(files)):
        by_file.setdefault(files[i], []).append(i)
    model_files = list(dict.fromkeys(files[i] for i in order))
    input_files = {f: k for k, f in enumerate(by_file)}
    seen: dict[str, int] = {}
    out: list[int] = []
    used: set[int] = set()
    for i in range(len(files)):
        f = files[i]
        j = seen.get(f, 0)
        seen[f] = j + 1
        chunks = by_file[model_files[input_files[f]]]
        if j < len(chunks):
            out.append(chunks[j])
            used.add(chunks[j])
    # the rest in the model's order, each file's in the input's
    out.extend(keep_file_order([i for i in order if i not in used], files))
    return out


def keep_slots(order: list[int], files: list[str]) -> list[int]:
    """The files in the order ``order`` gives them (by their best candidate), each file's other
    candidates kept where they were. The places where the input first shows a file are the
    files' slots, handed out in the model's order; every other candidate keeps its place, or,
    when its file now starts later, follows right behind its file's first candidate. Which file
    comes first is the model's (as with :func:`keep_shape`); no candidate moves up but a file's
    first, none moves down but behind its own file's first, and each file's candidates keep the
    input's order. With :func:`keep_shape` a promoted file took over the slots of the file it
    passed, pulling its weaker candidates up and pushing a passed file's second and third out of
    the top ten (docs/ranking.md, "Look-up groups")."""
    first: dict[str, int] = {}
    for i, f in enumerate(files):
        first.setdefault(f, i)
    slots = sorted(first.values())
    model_files = list(dict.fromkeys(files[i] for i in order))
    # files the order leaves out keep their own slots, after the ordered ones
    model_files += [f for f in first if f not in set(model_files)]
    slot = {f: slots[k] for k, f in enumerate(model_files)}
    keys = [
        (slot[f], 0, i) if i == first[f] else (max(i, slot[f]), 1, i) for i, f in enumerate(files)
    ]
    return sorted(range(len(files)), key=keys.__getitem__)
