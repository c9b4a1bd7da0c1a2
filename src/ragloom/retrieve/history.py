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
from dataclasses import dataclass, field
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
    "LOOKUP_WEIGHTS",
    "MAX_FILES_PER_CHANGE",
    "RECENT_COMMITS",
    "RECENT_RRF_K",
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
    "recent_ranks",
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
RECENT_COMMITS = 20
"""Newest commits whose files make the recency ranking (a change request is very often the
next step of the work the last commits did). Issue-11 tune split, ``changes`` weights: 5 ->
R@10 0.881, 10 -> 0.882, 20 -> 0.885, 40 -> 0.884."""
RECENT_RRF_K = 5.0
"""RRF constant of the recency ranking: steeper than the others, the newest commits count most
(tune, ``changes`` weights, depth 300: k=5 -> R@10 0.898, k=10 -> 0.893)."""


@dataclass(frozen=True, slots=True)
class HistoryWeights:
    """The weights of the file rankings, and what the step does when BM25 and dense agree on
    the best file."""

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
    recent: float = 0.0
    """RRF weight of the recency ranking: the files of the :data:`RECENT_COMMITS` newest
    commits, newest first (0 = off)."""
    pin: int = 0
    """When the step does not yield to agreement: the first ``pin`` hits of the fused list keep
    their places when BM25 and dense agree on the best file (or dense is confident, see
    :attr:`pin_confidence`), and the history reorders the rest (0 = never pinned)."""
    pin_confidence: float | None = None
    """Dense top-1 score at or above which the first hits are pinned as under agreement (a
    cosine of the default model; None = agreement only)."""
    best_chunk_only: bool = False
    """The bonus goes to each file's best chunk only, so one often-changed file cannot fill
    the top hits with its chunks (the file order is the same either way)."""


DEFAULT_WEIGHTS = HistoryWeights()
"""Weights for questions that ask where or what code is (lookups): chosen on change requests
and lookups together (docs/ranking.md). ``+lookup`` forces them for every question."""
LOOKUP_WEIGHTS = DEFAULT_WEIGHTS
CHANGE_WEIGHTS = HistoryWeights(
    similar=1.0,
    churn=0.5,
    co_change=1.0,
    yields_to_agreement=False,
    recent=0.75,
    pin=3,
    pin_confidence=0.55,
    best_chunk_only=True,
)
"""Weights for questions that ask for a change (``ragloom.retrieve.roles.change_request``:
"Fix ...", "Add support for ...", "router: ..."); ``+changes`` forces them for every
question. Chosen on the issue-11 tune splits (docs/ranking.md "Change history"): git R@10 /
MRR@10 0.892 / 0.712 against 0.856 / 0.698 with :data:`DEFAULT_WEIGHTS` for every question,
lookups file / symbol MRR@10 0.865 / 0.635 against 0.867 / 0.643. The first ``changes``
profile (similar 1.0, churn 0.5, co-change 0.5, no pin, no recency, every chunk) stays one
setting away as ``HistoryWeights(1.0, 0.5, 0.5, False)``."""
HISTORY_PROFILES: dict[str, HistoryWeights] = {
    "lookup": LOOKUP_WEIGHTS,
    "changes": CHANGE_WEIGHTS,
}
"""Profile name (``+changes`` picks ``changes``, ``+lookup`` picks ``lookup``) -> weights. Without
one, each question picks by what it asks (``change_request``)."""
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

    def recent(self, n: int) -> list[Sequence[str]]:
        """The paths of the ``n`` newest changes, newest first."""
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
    recent: dict[str, int] = field(default_factory=dict)
    """Path -> rank by the newest change that touched it (:func:`recent_ranks`)."""
    similar_share: dict[str, float] = field(default_factory=dict)
    """Path -> its similar-change vote over the best file's (1.0 for the first ranked)."""

    @property
    def empty(self) -> bool:
        return not self.similar and not self.churn and not self.recent


def file_bonus(
    path: str,
    evidence: HistoryEvidence,
    prior: float = 1.0,
    *,
    similar_weight: float = SIMILAR_WEIGHT,
    churn_weight: float = CHURN_WEIGHT,
    k: float = HISTORY_RRF_K,
    recent_weight: float = 0.0,
    recent_k: float = RECENT_RRF_K,
) -> float:
    """What the chunks of ``path`` gain: the RRF terms of its ranks, times ``prior``."""
    bonus = 0.0
    r = evidence.similar.get(path)
    if r is not None:
        bonus += similar_weight / (k + r)
    r = evidence.churn.get(path)
    if r is not None:
        bonus += churn_weight / (k + r)
    r = evidence.recent.get(path) if recent_weight else None
    if r is not None:
        bonus += recent_weight / (recent_k + r)
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


def recent_ranks(
    newest_first: Iterable[Sequence[str]],
    live: Container[str],
    max_files: int = MAX_FILES_PER_CHANGE,
) -> dict[str, int]:
    """Rank of each live path by the newest change that touched it (1 = a file of the newest
    change; the files of one change take consecutive ranks in their listed order). Sweeps of
    more than ``max_files`` files take no rank."""
    out: dict[str, int] = {}
    for paths in newest_first:
        unique = list(dict.fromkeys(paths))
        if not unique or len(unique) > max_files:
            continue
        for p in unique:
            if p in live and p not in out:
                out[p] = len(out) + 1
    return out


def history_evidence(
    similar: Iterable[tuple[float, Sequence[str]]],
    live: Container[str],
    churn: dict[str, int],
    recent: dict[str, int] | None = None,
) -> HistoryEvidence:
    """The rankings of one question from its similar changes, the churn ranks and the recency
    ranks; ``live`` holds the paths that can still be answered (the files of the code index):
    a file since deleted or renamed takes no rank."""
    votes = {p: v for p, v in similar_votes(similar).items() if p in live}
    top = max(votes.values(), default=0.0)
    return HistoryEvidence(
        ranks(votes),
        churn,
        recent if recent is not None else {},
        {p: v / top for p, v in votes.items()} if top > 0 else {},
    )
