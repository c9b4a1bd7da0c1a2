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
refused with a clear message. ``+learned`` runs the stage; ``+handset`` (the default until the
learned model wins on held-back data, :data:`LEARNED_DEFAULT`) does not.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from ragloom.retrieve.ranker import RankerModel, RankerModelError, Scorer, load_model
from ragloom.retrieve.roles import change_request
from ragloom.retrieve.stages.base import RankState, StageBase, issue_reading
from ragloom.retrieve.stages.features import FEATURE_NAMES, FEATURES_VERSION, candidate_features

__all__ = [
    "DEFAULT_MODEL",
    "EXPLAIN_FEATURES",
    "LEARNED_DEFAULT",
    "LEARNED_QUESTIONS",
    "LearnedStage",
    "default_model",
]

DEFAULT_MODEL = Path(__file__).resolve().parent.parent / "models" / "ranker.json"
"""The shipped model (``scripts/train_ranker.py --write``)."""
LEARNED_DEFAULT = False
"""Whether plain ``hybrid`` runs the learned stage. Off: held-back, it wins on commit messages
(MRR@10 0.749 against 0.727) and on SWE-bench issues (file Acc@1 48.2 against 39.8), but it is
slightly below on the look-up sets (symbol MRR@10: sym10k 0.422 against 0.432, stdlib
identifiers 0.705 against 0.716; docs/ranking.md, "Learned ranking"); ``+learned`` turns it
on."""
LEARNED_QUESTIONS = "changes"
"""Which questions the stage re-orders: ``changes`` (an issue, or a question that reads as a
change request, :func:`~ragloom.retrieve.roles.change_request` of its title) or ``all``. The
model was fitted on commit messages, which ask where a change goes; on look-ups (a docstring, a
symbol's description) it ranks files over functions and loses (docs/ranking.md, "Learned
ranking": sym10k symbol MRR@10 0.432 -> 0.392 with ``all``), so those keep the hand-set order."""
EXPLAIN_FEATURES = 5
"""Features named per hit in the explain record, largest share first."""

_lock = threading.Lock()
_cache: dict[Path, RankerModel] = {}


def default_model(path: Path = DEFAULT_MODEL) -> RankerModel:
    """The model at ``path``, loaded once per process (:class:`RankerModelError` when it is
    missing, unreadable or fitted on other features)."""
    with _lock:
        model = _cache.get(path)
        if model is None:
            if not path.is_file():
                raise RankerModelError(
                    f"no ranking model at {path}: train one (scripts/train_ranker.py --write) "
                    "or use +handset"
                )
            model = load_model(path, features=FEATURES_VERSION, names=FEATURE_NAMES)
            _cache[path] = model
        return model


class LearnedStage(StageBase):
    """Re-order the first candidates by the learned model's score."""

    name: str = "learned"
    reads: frozenset[str] = frozenset({"query", "modalities", "role", "path", "notes"})
    group: str = "priors"
    needs_rows: bool = True
    """Every candidate's row is loaded before the stages: otherwise the exact stage, which
    runs before this one, keeps only the top ``top_k`` rows it has (a question naming a symbol
    would give the model a shorter list than one that names none)."""

    def __init__(self, model: Scorer | None = None) -> None:
        self.model: Scorer = model if model is not None else default_model()

    def __repr__(self) -> str:
        return f"LearnedStage({self.model.kind}, {self.model.digest})"

    def applies(self, state: RankState) -> bool:
        if LEARNED_QUESTIONS == "all":
            return True
        issue, text = issue_reading(state)
        return issue is not None or change_request(text)

    def apply(self, state: RankState) -> None:
        rowids, x = candidate_features(state)
        if len(rowids) < 2:
            return
        scores = self.model.predict(x)
        order = np.lexsort((np.arange(len(rowids)), -scores))
        places = sorted((s for _, s in state.ranked[: len(rowids)]), reverse=True)
        head = [(rowids[int(i)], places[k]) for k, i in enumerate(order)]
        state.ranked = head + list(state.ranked[len(rowids) :])
        for i, r in enumerate(rowids):
            state.note(r, "learned", round(float(scores[i]), 6))
        if state.explain:
            contrib = self.model.contributions(x)
            for i, r in enumerate(rowids):
                top = np.argsort(-np.abs(contrib[i]), kind="stable")[:EXPLAIN_FEATURES]
                state.note(
                    r,
                    "learned_features",
                    {FEATURE_NAMES[int(j)]: round(float(contrib[i, j]), 6) for j in top},
                )
