"""Change history as ranking evidence: files that similar past changes touched, and files that
change often (issue 11, docs/ranking.md "Change history").

A question about a codebase is very often a change to make ("make the proxy honour X-Forwarded-
Proto"), and the history of the repository holds the changes made before: the commits whose
messages resemble the question touched the files this one will touch, and a file many commits
touched is more likely to be touched again than one no commit has changed since it was written.
Both are old results of bug localisation (BugLocator's "similar bug reports", change-proneness
priors); here they are two file rankings added to the fused chunk scores, RRF style, like a third
and fourth modality that speaks only of files:

    bonus(f) = role(f) * (W_SIMILAR / (K + rank_similar(f)) + W_CHURN / (K + rank_churn(f)))

where ``rank_similar`` ranks files by the votes of the :data:`SIMILAR_COMMITS` commits most
similar to the question (BM25 over the commits source; each commit gives ``score / n_files`` to
each file it changed), ``rank_churn`` ranks files by how many commits changed them, and ``role``
is the role prior of the file (a test or a doc gains less, unless the question asks for it).
Every chunk of a file gains the same amount, so the order inside a file is kept.

The evidence comes from a :class:`ChangeHistory`: ``ragloom.sources.commit_history.CommitHistory``
reads the ``commits`` source an index keeps (synced by ``ragloom index`` in a git work tree);
an index without one ranks as before. This module holds the protocol and the arithmetic (pure
functions); the storage lives with the sources.
"""

from __future__ import annotations

import logging
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = [
    "CHANGE_WEIGHTS",
    "CHURN_WEIGHT",
    "CO_CHANGE_MIN",
    "CO_CHANGE_TOP",
    "CO_CHANGE_WEIGHT",
    "DEFAULT_WEIGHTS",
    "HISTORY_PROFILES",
    "HISTORY_RRF_K",
    "MAX_FILES_PER_CHANGE",
    "SIMILAR_COMMITS",
    "SIMILAR_WEIGHT",
    "ChangeHistory",
    "CoChange",
    "HistoryEvidence",
    "HistoryWeights",
    "churn_ranks",
    "co_change_ranks",
    "file_bonus",
    "history_evidence",
    "ranks",
    "similar_votes",
]

log = logging.getLogger("ragloom")

SIMILAR_COMMITS = 20
"""Commits most similar to the question that vote for the files they changed. Issue-11 tune
split (700 commit-message questions, 7 repositories, history as of each question, depth 150,
weights 0.5 / 0.5; file R@10 / MRR@10): 20 -> 0.862 / 0.706, 30 -> 0.863 / 0.708: 20."""
SIMILAR_WEIGHT = 0.7
"""RRF weight of the similar-changes file ranking. Chosen with :data:`CHURN_WEIGHT` and
:data:`CO_CHANGE_WEIGHT` on two tune sets at once: the git questions (change requests) and
lookup questions on two of the same repositories with their history (a docstring's first
sentence asking for its function), keeping lookups at least where they are without history.
Stronger weights (similar 1.0, churn 0.5, co-change 0.5: git tune R@10 0.874) cost lookups up
to 0.12 file MRR@10 (docs/ranking.md, "Change history")."""
CHURN_WEIGHT = 0.1
"""RRF weight of the change-count file ranking (query-independent: kept small)."""
CO_CHANGE_WEIGHT = 0.2
"""RRF weight of the co-change file ranking: files that past commits changed together with the
best files of the ranking so far."""
CO_CHANGE_TOP = 3
"""Best files of the ranking whose co-changed files are ranked (git tune, strong weights: 1 ->
R@10 0.873 / MRR@10 0.712, 3 -> 0.874 / 0.718, 5 -> 0.871 / 0.718)."""
CO_CHANGE_MIN = 2
"""Commits two files must share to count as co-changed (one shared commit is chance)."""


@dataclass(frozen=True, slots=True)
class HistoryWeights:
    """The weights of the three file rankings, and whether the step yields when BM25 and dense
    agree on the best file."""

    similar: float = SIMILAR_WEIGHT
    churn: float = CHURN_WEIGHT
    co_change: float = CO_CHANGE_WEIGHT
    yields_to_agreement: bool = True
    """The step adds nothing when BM25 and dense put the same file first: the question then
    names its answer, and evidence about what tends to change only pulls other files above it.
    Tune halves, similar commits at 0.5 alone (git file R@10 / MRR@10; lookups on rich and
    starlette with their whole history, file / symbol MRR@10): without the rule git 0.843 /
    0.689, lookup 0.846 / 0.635; with it git 0.836 / 0.685, lookup 0.864 / 0.645 (no history:
    lookup 0.860 / 0.638)."""


DEFAULT_WEIGHTS = HistoryWeights()
"""The default ``hybrid``: chosen on change requests and lookups together (docs/ranking.md)."""
CHANGE_WEIGHTS = HistoryWeights(similar=1.0, churn=0.5, co_change=0.5, yields_to_agreement=False)
"""``hybrid+changes``: chosen on change requests alone (git tune split R@10 0.874 against 0.855
for the default; held-back 0.897 / 0.720 R@10 / MRR@10 against 0.876 / 0.722). It costs
lookups up to 0.12 file MRR@10, so it is for callers whose questions are changes to make
(issue titles, bug reports, task descriptions)."""
HISTORY_PROFILES: dict[str, HistoryWeights] = {
    "default": DEFAULT_WEIGHTS,
    "changes": CHANGE_WEIGHTS,
}
"""Profile name (``+changes`` picks ``changes``) -> weights."""
HISTORY_RRF_K = 10.0
"""RRF constant of both file rankings: the fused list's own (k=30 lost 0.02 R@10 in the first
file-level simulation on tune)."""
MAX_FILES_PER_CHANGE = 30
"""A commit that changed more files is a sweep (a rename, a reformat, a licence header): it
neither votes nor counts as a change of its files (10 and 30 measured alike on tune)."""


@runtime_checkable
class ChangeHistory(Protocol):
    """Where the evidence comes from: past changes, searchable by text."""

    def similar(self, query: str, k: int) -> list[tuple[float, Sequence[str]]]:
        """The ``k`` past changes most similar to ``query``, best first: (score, paths)."""
        ...

    def changes(self) -> Iterable[Sequence[str]]:
        """The paths of every past change (one sequence per change)."""
        ...

    def version(self) -> str:
        """Changes whenever the history does (the change counts are cached by it)."""
        ...


def similar_votes(
    similar: Iterable[tuple[float, Sequence[str]]],
    max_files: int = MAX_FILES_PER_CHANGE,
) -> dict[str, float]:
    """Path -> sum over the similar changes that touched it of ``score / n_files``.

    A change with no path, more than ``max_files`` paths or a score <= 0 does not vote."""
    votes: dict[str, float] = {}
    for score, paths in similar:
        unique = list(dict.fromkeys(paths))
        if score <= 0 or not unique or len(unique) > max_files:
            continue
        share = score / len(unique)
        for p in unique:
            votes[p] = votes.get(p, 0.0) + share
    return votes


def ranks(scores: Mapping[str, float]) -> dict[str, int]:
    """Path -> 1-based rank by score, descending (ties by path, so the ranking is stable)."""
    order = sorted(scores, key=lambda p: (-scores[p], p))
    return {p: i for i, p in enumerate(order, 1)}


@dataclass(frozen=True, slots=True)
class HistoryEvidence:
    """The two file rankings of one question."""

    similar: dict[str, int]
    """Path -> rank among the files the similar changes voted for."""
    churn: dict[str, int]
    """Path -> rank by change count."""

    @property
    def empty(self) -> bool:
        return not self.similar and not self.churn


def file_bonus(
    path: str,
    evidence: HistoryEvidence,
    prior: float = 1.0,
    *,
    similar_weight: float = SIMILAR_WEIGHT,
    churn_weight: float = CHURN_WEIGHT,
    k: float = HISTORY_RRF_K,
) -> float:
    """What every chunk of ``path`` gains: the RRF terms of its two ranks, times ``prior``."""
    bonus = 0.0
    r = evidence.similar.get(path)
    if r is not None:
        bonus += similar_weight / (k + r)
    r = evidence.churn.get(path)
    if r is not None:
        bonus += churn_weight / (k + r)
    return bonus * prior


@dataclass(frozen=True, slots=True)
class CoChange:
    """How often files changed, and changed together, in the past changes."""

    counts: dict[str, int]
    """Path -> changes that touched it."""
    pairs: dict[str, dict[str, int]]
    """Path -> other path -> changes that touched both."""

    @classmethod
    def of(
        cls,
        changes: Iterable[Sequence[str]],
        live: Container[str],
        max_files: int = MAX_FILES_PER_CHANGE,
    ) -> CoChange:
        """The tables over the paths of ``live`` (sweeps of more than ``max_files`` left out)."""
        counts: dict[str, int] = {}
        pairs: dict[str, dict[str, int]] = {}
        for paths in changes:
            unique = set(paths)
            if not unique or len(unique) > max_files:
                continue
            kept = sorted(p for p in unique if p in live)
            for a in kept:
                counts[a] = counts.get(a, 0) + 1
                row = pairs.setdefault(a, {})
                for b in kept:
                    if b != a:
                        row[b] = row.get(b, 0) + 1
        return cls(counts, pairs)


def co_change_ranks(
    top: Sequence[str], table: CoChange, min_shared: int = CO_CHANGE_MIN
) -> dict[str, int]:
    """Rank of each file by its co-change with the files of ``top``: the sum over them of
    ``P(file changed | top file changed)``, counting pairs that shared ``min_shared`` changes
    or more. A file of ``top`` ranks too when another top file changes with it: the best
    files that change together confirm each other (tune split: MRR@10 0.718 this way, 0.712
    when they take no rank)."""
    scores: dict[str, float] = {}
    for t in top:
        n = table.counts.get(t, 0)
        for other, shared in table.pairs.get(t, {}).items():
            if shared >= min_shared:
                scores[other] = scores.get(other, 0.0) + shared / n
    return ranks(scores)


def churn_ranks(table: CoChange) -> dict[str, int]:
    """Rank of each path the past changes touched, by change count (the churn ranking)."""
    return ranks({p: float(c) for p, c in table.counts.items()})


def history_evidence(
    similar: Iterable[tuple[float, Sequence[str]]],
    live: Container[str],
    churn: dict[str, int],
) -> HistoryEvidence:
    """Both rankings of one question from its similar changes and the churn ranks; ``live``
    holds the paths that can still be answered (the files of the code index): a file since
    deleted or renamed takes no rank."""
    votes = similar_votes(similar)
    return HistoryEvidence(ranks({p: v for p, v in votes.items() if p in live}), churn)
