"""What a ranking stage is, what it works on, and how a list of stages runs (issue 21).

Ranking is a pipeline of small stages (../shared/STYLE.md habit 13, Haystack's components):
each takes the ranked candidates of a :class:`RankState` with their evidence, re-ranks them,
declares what it reads, and reports to ``--explain`` what it did. A strategy is a list of
stages (:func:`ragloom.retrieve.stages.pipeline.build_stages`); :func:`run_stages` runs one.

A stage implements :class:`Stage`. :class:`StageBase` supplies the defaults, so a new stage
writes ``name``, ``reads`` and ``apply`` (and ``applies`` when it has nothing to do for some
queries). Stages mutate the state (``state.ranked``, ``state.rows``, ``state.notes``); they
reach the index only through :class:`RankingSource`, so a unit test runs one on a hand-built
state with a fake source and no index.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ragloom.index.backend import ReadStore
from ragloom.retrieve.config import Hybrid, RetrievalStrategy
from ragloom.retrieve.fusion import sort_by_score
from ragloom.retrieve.history import ChangeHistory, CoChange, HistoryEvidence, HistoryWeights
from ragloom.retrieve.query import IssueQuery, ProcessedQuery, QueryConfig
from ragloom.retrieve.roles import FileRole
from ragloom.telemetry import Telemetry, get_telemetry

if TYPE_CHECKING:
    from ragloom.graph import CodeGraph
    from ragloom.index.store import ChunkRow

__all__ = [
    "ISSUE_WEIGHTS",
    "CandidateEvidence",
    "IssueWeights",
    "RankState",
    "Ranked",
    "RankingSource",
    "Stage",
    "StageBase",
    "by_score",
    "issue_reading",
]

Ranked = list[tuple[int, float]]
"""(rowid, score) pairs, best first once a stage has sorted them."""


def by_score(ranked: Sequence[tuple[int, float]]) -> Ranked:
    """``ranked`` sorted by score descending, then rowid ascending (the pipeline's total order)."""
    return sort_by_score(list(ranked))


class RankingSource(Protocol):
    """What stages read from the index (the :class:`~ragloom.retrieve.search.Retriever`
    implements it, with per-generation caches; tests pass a small fake)."""

    history: ChangeHistory | None
    store: ReadStore
    """Rows, texts and files of the index (the generation pinned for this query)."""

    def chunk_info(self, rowids: Sequence[int]) -> dict[int, tuple[str, FileRole, bool]]:
        """(path, file role, is a declaration) of each rowid."""
        ...

    def agree(
        self, lists: Mapping[str, Sequence[tuple[int, float]]] | None, confident: float | None
    ) -> bool:
        """True when BM25's and dense's best hits share a file (or dense is ``confident``)."""
        ...

    def history_evidence(
        self, query: str, recent: bool = False
    ) -> tuple[HistoryEvidence, CoChange] | None:
        """The history's file rankings for ``query`` and its co-change tables."""
        ...

    def pool_vectors(self, rowids: Sequence[int]) -> dict[int, np.ndarray]:
        """Stored unit vectors of ``rowids`` (those that have one)."""
        ...

    def file_bm25_scores(
        self, query: str | Sequence[tuple[str, float]], paths: Sequence[str]
    ) -> dict[str, float] | None:
        """Whole-file BM25 score of ``query`` for each of ``paths`` (None: the index keeps no
        BM25 over whole files)."""
        ...

    def code_graph(self) -> CodeGraph | None:
        """The code graph of the published generation (None: the index keeps none)."""
        ...


@dataclass(frozen=True, slots=True)
class CandidateEvidence:
    """Everything known about one candidate, for stages that score candidates from features
    (a learned ranker): each modality's rank and score, its file's role, whether it is a
    declaration, and what earlier stages noted (``prior``, ``history``, ``co_change``, ...)."""

    rowid: int
    score: float
    rank: int
    ranks: dict[str, int]
    scores: dict[str, float]
    path: str | None
    role: FileRole | None
    declaration: bool | None
    notes: dict[str, Any]


@dataclass(frozen=True, slots=True)
class IssueWeights:
    """How an issue's names and parts weigh in ranking."""

    path: float = 1.0
    """Bonus weight of a file the issue names (paths, modules, traceback frames)."""
    symbol: float = 1.0
    """Bonus weight of a chunk whose symbol the issue names (symbols, traceback functions)."""
    k: float = 10.0
    """RRF k of the names' ranks (the fusion's k: a first-named file weighs like a top hit)."""
    max_names: int = 8
    """Names of each kind that count, strongest first."""
    history: str = "lookup"
    """History weights for an issue: a profile (``changes``, ``lookup``), ``auto`` (the title
    decides, as for any question) or ``off``. ``lookup``: the best of five candidates on the
    SWE-bench tune half (53 questions, mean of file Acc@1/Acc@5/MRR@10 under both protocols:
    lookup 63.5, auto 63.1, off 61.6, changes 58.0; docs/ranking.md "Issue texts: tuning")."""
    title_intent: bool = True
    """Roles asked for and change requests are read from the title alone."""
    file_evidence: float | None = None
    """The file-evidence weight (``filerank`` stage) for an issue; None keeps the stage's own
    (:data:`ragloom.retrieve.stages.filerank.FILE_EVIDENCE`)."""


ISSUE_WEIGHTS = IssueWeights()
"""The default (docs/ranking.md, "Issue texts": chosen on the SWE-bench tune half)."""


def issue_reading(state: RankState) -> tuple[IssueQuery | None, str]:
    """The question's issue reading (None for a plain question) and the text that says which
    roles it asks for and whether it is a change request (the title of an issue)."""
    issue = state.pq.issue
    weights = state.issue_weights
    if issue is None or weights is None:
        return None, state.query
    return issue, issue.text.title if weights.title_intent else state.query


@dataclass(slots=True)
class RankState:
    """One query's candidates on their way through the stages."""

    query: str
    pq: ProcessedQuery
    qc: QueryConfig
    strategy: RetrievalStrategy
    """Resolved: a Hybrid carries the RRF and MMR settings this query uses."""
    source: RankingSource
    top_k: int
    depth: int
    """Depth of each modality's list; the fused list is cut to ``max(depth, top_k)``."""
    lists: dict[str, Ranked] = field(default_factory=dict)
    """The main question's modality lists as retrieved (``bm25``, ``dense``), best first."""
    sub_lists: list[dict[str, Ranked]] = field(default_factory=list)
    """Each sub-query's modality lists (compound questions)."""
    sub_rrf_k: float = 60.0
    """RRF k that fuses the question's list with its sub-queries' lists outside hybrid."""
    steps: frozenset[str] = frozenset()
    """Tuned ranking steps on for this query (``roles``, ``decl``, ``filerank``, ``history``)."""
    history_weights: HistoryWeights | None = None
    """Forced history weights (``+changes``, ``+lookup``); None picks them per question."""
    issue_weights: IssueWeights | None = ISSUE_WEIGHTS
    """How an issue-like question is read (None: as plain text, ``+no-issue``)."""
    explain: bool = False
    modalities: dict[str, Ranked] = field(default_factory=dict)
    """The lists fusion used, by name: what each hit's ``ranks`` and ``scores`` come from."""
    ranked: Ranked = field(default_factory=list)
    rows: dict[int, ChunkRow] | None = None
    """Chunk rows of the candidates, loaded before the first stage that reads rows."""
    rows_partial: bool = False
    """True while ``rows`` holds only the top rows of a list kept whole for a stage that
    re-orders every candidate without reading rows (``keeps_candidates``); the rest are
    loaded before a stage that reads them, and the final hits' at the end."""
    notes: dict[int, dict[str, Any]] = field(default_factory=dict)
    """Rowid -> the explain record the stages wrote (``prior``, ``history``, ``mmr``, ...)."""
    pinned: list[int] = field(default_factory=list)
    """Rows the history stage keeps first, in order (the pin on agreement)."""
    pre_pin: dict[int, float] = field(default_factory=dict)
    """The pinned rows' scores before the pin raised them (for stages after the pin)."""
    vectors: dict[int, np.ndarray] = field(default_factory=dict)
    """Vectors a stage read (MMR's pool), handed on to context assembly."""
    history_found: tuple[HistoryEvidence, CoChange] | None = None
    """The history's file rankings the history stage read for this question (with the
    recency ranking), for the stages after it (the learned stage's features)."""
    fallback_used: bool = False
    timings_ms: dict[str, float] = field(default_factory=dict)
    telemetry: Telemetry = field(default_factory=get_telemetry)
    trace: list[tuple[str, Ranked, Ranked]] = field(default_factory=list)
    """(stage, ranked before, ranked after) of every stage that ran, with ``explain``."""

    @property
    def hybrid(self) -> bool:
        return isinstance(self.strategy, Hybrid)

    def note(self, rowid: int, key: str, value: Any) -> None:
        self.notes.setdefault(rowid, {})[key] = value

    def evidence(self, rowids: Sequence[int] | None = None) -> dict[int, CandidateEvidence]:
        """:class:`CandidateEvidence` of ``rowids`` (default: every ranked candidate)."""
        if rowids is None:
            ranked = self.ranked
        else:
            wanted = set(rowids)
            ranked = [(r, s) for r, s in self.ranked if r in wanted]
        position = {r: (i, s) for i, (r, s) in enumerate(self.ranked, 1)}
        at: dict[str, dict[int, tuple[int, float]]] = {}
        for name, items in self.modalities.items():
            pos: dict[int, tuple[int, float]] = {}
            for rank, (r, s) in enumerate(items, 1):
                pos.setdefault(r, (rank, s))
            at[name] = pos
        info = self.source.chunk_info([r for r, _ in ranked])
        out: dict[int, CandidateEvidence] = {}
        for r, _ in ranked:
            meta = info.get(r)
            out[r] = CandidateEvidence(
                rowid=r,
                score=position[r][1],
                rank=position[r][0],
                ranks={n: p[r][0] for n, p in at.items() if r in p},
                scores={n: p[r][1] for n, p in at.items() if r in p},
                path=meta[0] if meta else None,
                role=meta[1] if meta else None,
                declaration=meta[2] if meta else None,
                notes=dict(self.notes.get(r, {})),
            )
        return out

    def stage_records(self, rowid: int) -> list[dict[str, Any]]:
        """What each stage did to ``rowid``: one record per stage that moved it or changed its
        score (or added or dropped it), ``rank_*`` 1-based, None where it was not ranked."""
        out: list[dict[str, Any]] = []
        for name, before, after in self.trace:
            b = _position(before, rowid)
            a = _position(after, rowid)
            if b != a:
                out.append(
                    {
                        "stage": name,
                        "rank_before": b[0] if b else None,
                        "rank_after": a[0] if a else None,
                        "score_before": b[1] if b else None,
                        "score_after": a[1] if a else None,
                    }
                )
        return out


def _position(ranked: Ranked, rowid: int) -> tuple[int, float] | None:
    for i, (r, s) in enumerate(ranked, 1):
        if r == rowid:
            return i, s
    return None


class Stage(Protocol):
    """One ranking step. ``name`` is its ``+no-NAME`` switch and its name in ``--explain``;
    ``reads`` names the evidence it uses (documentation, and what a feature stage may ask
    for); ``group`` is the ``SearchResult.timings_ms`` key its time adds to."""

    name: str
    reads: frozenset[str]
    group: str
    needs_rows: bool
    """True when ``apply`` reads ``state.rows`` (they are loaded before it runs)."""

    def applies(self, state: RankState) -> bool:
        """False when the stage has nothing to do for this query (it is then skipped)."""
        ...

    def wants_all_rows(self, state: RankState, rows: Mapping[int, ChunkRow] | None) -> bool:
        """True when every candidate's row must be loaded, not only the top ``top_k``'s:
        asked first with ``rows`` None, then with the top rows loaded."""
        ...

    def keeps_list(self, state: RankState) -> bool:
        """True when the stage re-orders every candidate from facts other than their rows
        (``chunk_info``, the modality lists): the list is then kept whole when the rows are
        loaded, without loading every row."""
        ...

    def uses_rows(self, state: RankState) -> bool:
        """True when ``apply`` (or ``applies``) reads the rows of this query's candidates; a
        list kept whole gets its remaining rows first."""
        ...

    def apply(self, state: RankState) -> None:
        """Re-rank ``state.ranked`` (and note what was done in ``state.notes``)."""
        ...


class StageBase:
    """Defaults of :class:`Stage`: always applies, reads no rows, times as ``boosts``."""

    name: str = ""
    reads: frozenset[str] = frozenset()
    group: str = "boosts"
    needs_rows: bool = False
    keeps_candidates: bool = False
    """True for a stage that re-orders every candidate without reading rows (the learned
    stage): see :meth:`keeps_list`."""

    def applies(self, state: RankState) -> bool:
        return True

    def wants_all_rows(self, state: RankState, rows: Mapping[int, ChunkRow] | None) -> bool:
        # a stage that reorders needs every candidate's row; the top rows do for the rest
        return self.needs_rows and rows is None and self.applies(state)

    def keeps_list(self, state: RankState) -> bool:
        return self.keeps_candidates and self.applies(state)

    def uses_rows(self, state: RankState) -> bool:
        # a stage that does not apply reads no rows (one whose ``applies`` reads rows says
        # otherwise: the heads stage)
        return self.needs_rows and self.applies(state)

    def apply(self, state: RankState) -> None:  # pragma: no cover - every stage overrides
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
