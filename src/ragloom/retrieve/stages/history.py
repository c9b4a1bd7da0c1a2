"""History: files that similar past commits changed, files that change often, the files of
the newest commits, and files that change together with the best ones rise (issue 11;
docs/ranking.md "Change history"; the arithmetic in :mod:`ragloom.retrieve.history`).

Per question the weights are :data:`~ragloom.retrieve.history.CHANGE_WEIGHTS` for a change
request (:func:`~ragloom.retrieve.roles.change_request`) and
:data:`~ragloom.retrieve.history.DEFAULT_WEIGHTS` otherwise, unless ``+changes`` or ``+lookup``
forces one. When BM25 and dense agree on the best file (or dense is confident), the step yields
(adds nothing) or pins the first hits, as the weights say. Each file's bonus goes to its chunks
(to its best chunk only with ``best_chunk_only``), scaled by the role prior; then co-change
ranks the files that change with the :data:`~ragloom.retrieve.history.CO_CHANGE_TOP` best.
Explain records: ``history`` (the file bonus) and ``co_change``. Without a history (not a
repository, ``--no-history``) the stage only sorts. Its constants live in
``ragloom.retrieve.history`` (weights, k, commit counts) beside the evidence they weigh.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from ragloom.retrieve.history import (
    CHANGE_WEIGHTS,
    CO_CHANGE_TOP,
    DEFAULT_WEIGHTS,
    HISTORY_PROFILES,
    HISTORY_RRF_K,
    CoChange,
    HistoryEvidence,
    HistoryWeights,
    co_change_ranks,
    file_bonus,
)
from ragloom.retrieve.roles import FileRole, change_request, query_intent
from ragloom.retrieve.stages.base import Ranked, RankState, StageBase, by_score, issue_reading
from ragloom.retrieve.stages.priors import role_prior

__all__ = ["HistoryStage", "history_bonus", "history_query", "modalities_agree", "pin_first"]

ChunkInfo = Mapping[int, tuple[str, FileRole, bool]]
ISSUE_HISTORY_TERMS = 32
"""An issue's strongest BM25 terms that, after its title, search the past commits."""


class HistoryStage(StageBase):
    """Add the change history's file bonus to the candidates, then sort (and pin)."""

    name: str = "history"
    reads: frozenset[str] = frozenset(
        {"query", "modalities", "role", "history", "co_change", "recent"}
    )
    group: str = "priors"

    def apply(self, state: RankState) -> None:
        out = list(state.ranked)
        src = state.source
        issue, text = issue_reading(state)
        weights = state.history_weights
        asked = history_query(state)
        if issue is not None and state.issue_weights is not None:
            profile = state.issue_weights.history
            if weights is None and profile != "auto":
                weights = HISTORY_PROFILES.get(profile)
                if weights is None:  # "off"
                    state.ranked = by_score(out)
                    return
        if src.history is not None:
            info = src.chunk_info([r for r, _ in out])
            intent = query_intent(text)
            if weights is None:
                weights = CHANGE_WEIGHTS if change_request(text) else DEFAULT_WEIGHTS
            agree = src.agree(state.modalities, weights.pin_confidence)
            if not (agree and weights.yields_to_agreement):
                head: Ranked = []
                if agree and weights.pin:
                    # the pinned hits neither gain nor pick the files co-change ranks by
                    out = by_score(out)
                    head, out = out[: weights.pin], out[weights.pin :]
                    state.pinned = [r for r, _ in head]
                    state.pre_pin = dict(head)
                # the recency ranking is cached per index generation: always read, so the
                # learned stage's features see it (the bonus weighs it by ``weights.recent``)
                found = src.history_evidence(asked, recent=True)
                state.history_found = found
                if found is not None and not found[0].empty:
                    out = history_bonus(out, info, intent, found[0], found[1], state.notes, weights)
                out = head + out
        state.ranked = by_score(out)
        if state.pinned:
            state.ranked = pin_first(state.ranked, state.pinned)


def history_query(state: RankState) -> str:
    """What searches the past commits: the question, or for an issue its title and its
    :data:`ISSUE_HISTORY_TERMS` strongest BM25 terms."""
    issue, _ = issue_reading(state)
    if issue is None or state.issue_weights is None:
        return state.query
    return " ".join([issue.text.title, *(t for t, _ in issue.terms[:ISSUE_HISTORY_TERMS])])


def history_bonus(
    out: Ranked,
    info: ChunkInfo,
    intent: frozenset[FileRole],
    evidence: HistoryEvidence,
    table: CoChange,
    notes: dict[int, dict[str, object]],
    weights: HistoryWeights = DEFAULT_WEIGHTS,
) -> Ranked:
    """Add each file's bonus (``ragloom.retrieve.history``) to its chunks (to its best one
    only with ``weights.best_chunk_only``): similar changes, churn and recency first, then
    the co-change of the :data:`CO_CHANGE_TOP` best files after that. Order is kept."""

    def prior(role: FileRole) -> float:
        return role_prior(role, intent)

    bonus: dict[str, float] = {}
    gains: set[int] = set()
    for r, _ in by_score(out):
        meta = info.get(r)
        if meta is None:
            continue
        if meta[0] not in bonus:
            gains.add(r)
            bonus[meta[0]] = file_bonus(
                meta[0],
                evidence,
                prior(meta[1]),
                similar_weight=weights.similar,
                churn_weight=weights.churn,
                recent_weight=weights.recent,
            )
        elif not weights.best_chunk_only:
            gains.add(r)
    scored = [(r, s + bonus.get(info[r][0], 0.0) if r in gains else s) for r, s in out]
    top: list[str] = []
    for r, _ in by_score(scored):
        path = info[r][0] if r in info else None
        if path is not None and path not in top:
            top.append(path)
            if len(top) == CO_CHANGE_TOP:
                break
    co = co_change_ranks(top, table) if weights.co_change else {}
    result: Ranked = []
    for r, s in scored:
        meta = info.get(r)
        if meta is not None and r in gains:
            rank = co.get(meta[0])
            if rank is not None:
                extra = weights.co_change / (HISTORY_RRF_K + rank) * prior(meta[1])
                s += extra
                notes.setdefault(r, {})["co_change"] = extra
            if bonus.get(meta[0]):
                notes.setdefault(r, {})["history"] = bonus[meta[0]]
        result.append((r, s))
    return result


def modalities_agree(
    lists: Mapping[str, Sequence[tuple[int, float]]] | None,
    chunk_info: Callable[[Sequence[int]], ChunkInfo],
    confident: float | None = None,
) -> bool:
    """True when BM25's and dense's best hits are in the same file, or when dense's best
    score is at least ``confident``."""
    bm25 = (lists or {}).get("bm25") or []
    dense = (lists or {}).get("dense") or []
    if confident is not None and dense and dense[0][1] >= confident:
        return True
    if not bm25 or not dense:
        return False
    info = chunk_info([bm25[0][0], dense[0][0]])
    a, b = info.get(bm25[0][0]), info.get(dense[0][0])
    return a is not None and b is not None and a[0] == b[0]


def pin_first(ranked: Ranked, first: list[int]) -> Ranked:
    """``ranked`` with the rows of ``first`` moved to the front in that order, every score at
    least the one after it (so later re-sorts keep the order)."""
    keep = set(first)
    rest = [(r, s) for r, s in ranked if r not in keep]
    score = dict(ranked)
    floor = rest[0][1] if rest else 0.0
    head: Ranked = []
    for r in reversed(first):
        if r in score:
            floor = max(score[r], floor)
            head.append((r, floor))
    return head[::-1] + rest
