"""Dense, sparse and hybrid retrieval over an open index: the ranking pipeline.

One query goes through (ploke-rag-plan.md sections 1 and 4, tamma phases 2 and 5):

1. query processing (``ragloom.retrieve.query``): BM25 text with identifiers split and joined
   and code synonyms added, the plain question for the embedding model, entities (files and
   symbols the index knows), a language mention, and sub-queries of a compound question;
2. BM25 and dense retrieval, run concurrently (a worker thread embeds and searches the vectors
   while the calling thread searches BM25; both libraries release the GIL);
3. weighted reciprocal rank fusion of the two lists (and of each sub-query's fused list);
4. the language boost, the exact-match boost (a named symbol or file comes first, fetched
   from the store if retrieval missed it), an optional reranker, an optional recency boost;
5. MMR over the top ``candidate_pool`` when the strategy asks for it.

Every hit keeps the rank and score each modality gave it, and with ``explain=True`` a record of
what each stage did to it (``ragloom search --explain``).

Strategy names: ``sparse``, ``dense``, ``hybrid``, ``hybrid-mmr``, each optionally followed by
``+raw`` (no query processing) or ``+no-STEP`` for one step off, where STEP is one of
``expand``, ``synonyms``, ``entities``, ``exact``, ``decompose``, ``language``
(for example ``hybrid+no-synonyms+no-decompose``). The evaluation suite runs them side by side.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np
from opentelemetry import context as otel_context

from ragloom.embed.document import embedding_key
from ragloom.errors import ConfigError
from ragloom.index.backend import ReadStore, SparseIndex, VectorIndex
from ragloom.index.store import ChunkRow
from ragloom.ingest.chunker import head_id, is_part, part_label
from ragloom.retrieve.config import (
    Dense,
    Hybrid,
    MmrConfig,
    RecencyConfig,
    RetrievalStrategy,
    RrfConfig,
    Sparse,
    parse_strategy,
    strategy_name,
)
from ragloom.retrieve.fusion import (
    apply_recency,
    file_evidence,
    mmr_select_explain,
    normalize_scores,
    rrf_fuse,
    rrf_fuse_with,
)
from ragloom.retrieve.history import (
    CHANGE_WEIGHTS,
    CO_CHANGE_TOP,
    DEFAULT_WEIGHTS,
    HISTORY_PROFILES,
    HISTORY_RRF_K,
    RECENT_COMMITS,
    SIMILAR_COMMITS,
    ChangeHistory,
    CoChange,
    HistoryEvidence,
    HistoryWeights,
    churn_ranks,
    co_change_ranks,
    file_bonus,
    history_evidence,
    recent_ranks,
)
from ragloom.retrieve.query import (
    InMemorySymbolTable,
    ProcessedQuery,
    QueryConfig,
    exact_match_boost,
    process_query,
    query_style,
)
from ragloom.retrieve.roles import (
    FileRole,
    change_request,
    file_role,
    is_declaration,
    query_intent,
)
from ragloom.telemetry import Telemetry, get_telemetry
from ragloom.types import Hit

if TYPE_CHECKING:
    from ragloom.embed.base import Embedder
    from ragloom.retrieve.rerank import Reranker

log = logging.getLogger("ragloom")

__all__ = [
    "DEFAULT_STRATEGY",
    "MAX_TOP_K",
    "QUERY_STEP_FLAGS",
    "STRATEGIES",
    "GenerationView",
    "Retriever",
    "SearchResult",
    "SearchSpec",
    "hit_to_json",
    "parse_search_spec",
]

STRATEGIES = ("hybrid", "hybrid-mmr", "dense", "sparse")
"""Base strategy names accepted by :meth:`Retriever.search` (see the module docstring)."""
DEFAULT_STRATEGY = "hybrid"
"""What ``ragloom search`` uses when the user says nothing (docs/ranking.md: evaluation)."""

QUERY_STEP_FLAGS: dict[str, str] = {
    "expand": "expand_identifiers",
    "synonyms": "synonyms",
    "entities": "extract_entities",
    "exact": "exact_boost",
    "decompose": "decompose",
    "language": "detect_language",
}
"""``+no-NAME`` suffix -> the :class:`QueryConfig` switch it turns off."""

HYBRID_CANDIDATES_MIN = 100
"""Depth of each modality's list before fusion: at least the MMR ``candidate_pool`` default (50,
ploke section 1), so MMR always sees a full pool. 100 since issue 11: the role prior and file
evidence promote hits from further down (tune split, starlette+chi+axios, file MRR@10 0.700 ->
0.712, R@10 0.837 -> 0.847 against 50)."""
HISTORY_CANDIDATES_MIN = 300
"""Depth of each modality's list when a change history takes part (the ``history`` step): its
evidence lifts files from further down. Issue-11 tune split, history as of each question,
file R@10 / MRR@10: depth 100 -> 0.853 / 0.703, 150 -> 0.862 / 0.706 (first weights); with
the change-request weights 150 -> 0.885 / 0.723, 300 -> 0.893 / 0.724, 1000 -> 0.895 / 0.724.
Indexes without history keep :data:`HYBRID_CANDIDATES_MIN` (and its latency)."""
LANGUAGE_BOOST_RRF_RANKS = 1.0
"""A hit in the language the question names gains ``w / (k + 1)`` per unit, i.e. as much as one
extra first place in one modality (ragloom's choice: strong enough to lift a same-language hit
over a near tie, never over a hit both modalities ranked much higher)."""
SYNONYM_TERM_WEIGHT = 0.3
"""BM25 weight of a code-vocabulary synonym the user did not type (docs/ranking.md, Tuning)."""
JOINED_TERM_WEIGHT = 0.5
"""BM25 weight of an identifier joined from the user's words, ``parse header`` ->
``parse_header`` (docs/ranking.md, Tuning)."""
PROSE_RRF = RrfConfig(k=10.0, weight_bm25=0.75, weight_dense=1.0)
"""RRF of the default strategy for prose questions (docs/ranking.md, Tuning: k=10 beat the
seed's k=60 on both datasets; BM25 at 0.75 was best on the docstring dataset)."""
KEYWORD_RRF = RrfConfig(k=10.0, weight_bm25=3.0, weight_dense=1.0)
"""RRF of the default strategy for keyword queries (``query_style``): BM25 leads, dense breaks
near ties (docs/ranking.md, Tuning)."""
RANKING_STEPS: dict[str, str] = {
    "roles": "demote tests, docs, examples, build and generated files (ROLE_PRIOR)",
    "decl": "demote declarations without a body (DECLARATION_PRIOR)",
    "filerank": "file evidence: chunks of files with several strong hits rise (FILE_EVIDENCE)",
    "history": "files that similar past commits changed, and files that change often, rise "
    "(ragloom.retrieve.history; needs the commits source)",
}
"""``+no-NAME`` suffix -> the ranking step of the tuned default it turns off (``+seed`` turns
all of them off, with the seed's RRF)."""
ROLE_PRIOR: dict[FileRole, float] = {
    "implementation": 1.0,
    "test": 0.3,
    "documentation": 0.3,
    "changelog": 0.3,
    "example": 0.3,
    "build": 0.3,
    "generated": 0.3,
    "declaration": 0.3,
}
"""Multiplier of a hit's fused score by its file's role (``ragloom.retrieve.roles``) unless the
question asks for that role (``query_intent``). Issue-11 tune split (starlette, chi, axios,
hybrid file MRR@10): no prior 0.634, 0.7 -> 0.608 (chi+axios), 0.5 -> 0.646, 0.3 -> 0.653
(0.700 on three repositories), 0.2 -> 0.702, 0.1 -> 0.702: 0.3, where the gain flattens."""
FILE_EVIDENCE = 0.0
"""Weight of a file's other hits in each of its chunks' scores (``file_evidence``); 0 = off.
Issue-11 tune split (chi+axios, role prior 0.5): off 0.634, 0.25 0.648, 0.5 0.646, 1.0 0.631
file MRR@10; R@10 0.766 off, 0.776 at 0.5. Off by default all the same: the gain is small and
file-level only, while chunk answers suffer: at 0.5 the chunk ranked first by BM25 *and* dense
for "brand new function" (a one-function file) fell out of the top 10 under four siblings of a
larger file (tests/integration/test_index_cli.py). Callers ranking files may raise it."""
FILE_EVIDENCE_DECAY = 0.5
"""Each further hit of the same file counts this much less than the one before."""
FILE_EVIDENCE_TOP = 4
"""At most this many other hits of a file count."""
DECLARATION_PRIOR = 0.7
"""Multiplier of a chunk that is a signature without a body (``is_declaration``) unless the
question asks for declarations. Neutral on the issue-11 git questions (file level: a
declaration and its definition usually share a file; chi+axios 0.646 either way); 0.7 is
ragloom's choice, mild enough that a question about an interface still finds it."""
MAX_TOP_K = 10_000
"""Largest ``top_k`` a search accepts: far above what fits any context budget, and a bound on
what the engines allocate (tantivy panics on a collector of 10**20 slots)."""
MAX_MISSING_ENTITY_IDS = 3
"""A named symbol that retrieval missed is fetched from the store when it names at most this
many chunks (more is an ambiguous name like ``run``: better left to retrieval)."""


@dataclass(frozen=True, slots=True)
class SearchSpec:
    """What a strategy name asks for: the strategy, the query steps, and whether ragloom's tuned
    fusion defaults apply (``+seed`` uses the seed's RrfConfig defaults for every query)."""

    strategy: RetrievalStrategy
    query_config: QueryConfig
    name: str
    tuned: bool = True
    ranking_off: frozenset[str] = frozenset()
    """Ranking steps (:data:`RANKING_STEPS`) turned off by ``+no-NAME``."""
    history: HistoryWeights | None = None
    """Weights of the history step: None picks them per question (``CHANGE_WEIGHTS`` for a
    change request, ``DEFAULT_WEIGHTS`` otherwise); ``+changes`` and ``+lookup`` force one."""

    def ranking(self, step: str) -> bool:
        """True when the tuned ranking step ``step`` runs."""
        return self.tuned and step not in self.ranking_off


def parse_search_spec(spec: str | RetrievalStrategy) -> SearchSpec:
    """``"hybrid-mmr+no-synonyms"`` -> :class:`SearchSpec`."""
    if not isinstance(spec, str):
        return SearchSpec(spec, QueryConfig(), strategy_name(spec))
    parts = [p.strip() for p in spec.strip().lower().split("+")]
    base = parts[0]
    if base not in STRATEGIES:
        raise ConfigError(
            f"unknown strategy {spec!r}; choose from {', '.join(STRATEGIES)} "
            f"(optionally +raw, +seed, +changes, +lookup or +no-STEP, STEP in "
            f"{', '.join([*QUERY_STEP_FLAGS, *RANKING_STEPS])})"
        )
    strategy = parse_strategy(base)
    qc = QueryConfig()
    tuned = True
    off: set[str] = set()
    history: HistoryWeights | None = None
    for mod in parts[1:]:
        if mod in HISTORY_PROFILES:
            history = HISTORY_PROFILES[mod]
        elif mod == "raw":
            qc = QueryConfig(**{v: False for v in QUERY_STEP_FLAGS.values()})
        elif mod == "seed":
            tuned = False
        elif mod.startswith("no-") and mod[3:] in QUERY_STEP_FLAGS:
            qc = replace(qc, **{QUERY_STEP_FLAGS[mod[3:]]: False})
        elif mod.startswith("no-") and mod[3:] in RANKING_STEPS:
            off.add(mod[3:])
        else:
            raise ConfigError(
                f"unknown strategy modifier {mod!r} in {spec!r}; use +raw, +seed, +changes, +lookup or +no-STEP "
                f"with STEP in {', '.join([*QUERY_STEP_FLAGS, *RANKING_STEPS])}"
            )
    return SearchSpec(strategy, qc, "+".join(parts), tuned, frozenset(off), history)


def hit_to_json(hit: Hit, *, explain: bool = False) -> dict[str, Any]:
    """One hit as ``ragloom search --json`` prints it; the servers and the framework adapters
    hand out the same fields (a contract: fields are only ever added)."""
    out: dict[str, Any] = {
        "id": hit.id,
        "path": hit.path,
        "start_line": hit.start_line,
        "end_line": hit.end_line,
        "kind": hit.kind,
        "symbol": hit.symbol,
        "part": part_label(hit.id, hit.text),
        "language": hit.language,
        "score": hit.score,
        "ranks": dict(hit.ranks),
    }
    if explain:
        out["scores"] = dict(hit.scores)
        out["explain"] = hit.explain
    return out


@dataclass(slots=True)
class SearchResult:
    """Hits plus what a caller should know about how they were found."""

    hits: list[Hit]
    strategy: str
    notes: list[str] = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=dict)
    vectors_complete: bool = True
    fallback_used: bool = False
    bm25_timed_out: bool = False
    """BM25 missed ``Retriever.bm25_timeout_ms``: a hybrid answer from dense alone."""
    query: dict[str, object] = field(default_factory=dict)
    embeddings: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    """Stored vectors of the hits by chunk id, when a stage already read them (MMR); context
    assembly reuses them for near-duplicate detection instead of reading them again."""
    generation: int = 0
    """The index generation every hit comes from (docs/consistency.md)."""


@dataclass(frozen=True, slots=True)
class GenerationView:
    """The index generation a query answers from (docs/consistency.md): the rows it shows are
    those at or below ``watermark`` that are not ``hidden`` (replaced rows not yet deleted)."""

    generation: int
    watermark: int
    hidden: frozenset[int] = frozenset()

    def visible(self, rowid: int) -> bool:
        return rowid <= self.watermark and rowid not in self.hidden


MAX_GENERATION_ATTEMPTS = 5
"""A query that saw the published generation change while it ran is answered again (at most
this many times; publishing takes one index run, a query a few ms)."""
_MAX_REFETCH = 6
"""Times a modality's list is re-fetched, twice as deep, while rows of another generation
crowd it (only during an update)."""


def _visible_top(
    search: Callable[[int], list[tuple[int, float]]], k: int, view: GenerationView
) -> list[tuple[int, float]]:
    """The best ``k`` hits ``view`` shows: ``search(n)`` is asked again, deeper, while rows of
    another generation (held by BM25 and HNSW during an update) take places."""
    if k <= 0:
        return []
    fetch = k
    out: list[tuple[int, float]] = []
    for _ in range(_MAX_REFETCH):
        raw = search(fetch)
        out = [(r, s) for r, s in raw if view.visible(r)]
        if len(out) >= k or len(raw) < fetch:
            break
        fetch = 2 * fetch + len(raw) - len(out)
    return out[:k]


@dataclass(slots=True)
class _Lists:
    bm25: list[tuple[int, float]]
    dense: list[tuple[int, float]]
    bm25_ms: float = 0.0
    dense_ms: float = 0.0
    bm25_timed_out: bool = False


class Retriever:
    """Answers queries from a store, a BM25 engine and a vector index."""

    def __init__(
        self,
        store: ReadStore,
        bm25: SparseIndex | None,
        vectors: VectorIndex | None,
        embedder: Callable[[], Embedder] | None,
        *,
        rrf: RrfConfig | None = None,
        mmr: MmrConfig | None = None,
        reranker: Reranker | None = None,
        recency: RecencyConfig | None = None,
        telemetry: Telemetry | None = None,
        history: ChangeHistory | None = None,
    ) -> None:
        self.store = store
        self.history = history
        """Past changes (the ``commits`` source) for the ``history`` ranking step; None ranks
        without them."""
        self.telemetry = telemetry if telemetry is not None else get_telemetry()
        self.bm25 = bm25
        self.vectors = vectors
        self.rrf = rrf if rrf is not None else PROSE_RRF
        self.keyword_rrf = rrf if rrf is not None else KEYWORD_RRF
        self.adaptive = rrf is None
        self.mmr = mmr if mmr is not None else MmrConfig()
        self.reranker = reranker
        self.recency = recency
        self.synonym_weight = SYNONYM_TERM_WEIGHT
        self.joined_weight = JOINED_TERM_WEIGHT
        self._embedder_factory = embedder
        self._embedder: Embedder | None = None
        self._symbols: tuple[int, InMemorySymbolTable] | None = None
        self._info: tuple[int, dict[int, tuple[str, FileRole, bool]]] | None = None
        self._count: tuple[int, int] | None = None
        self._churn: (
            tuple[tuple[int, str], frozenset[str], dict[str, int], CoChange, dict[str, int]] | None
        ) = None
        """((generation, history version), indexed paths, churn ranks, co-change tables, recency
        ranks)."""
        self._view: tuple[int, GenerationView] | None = None
        """(store data_version, view) of the last pin."""
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._symbols_lock = threading.Lock()
        """One rebuild of the symbol table per generation: without it, every request thread of a
        server rebuilt it at once after a re-index (40 threads: 40 rebuilds, 45.8 s, the
        process stalled; docs/serving.md)."""
        self.bm25_timeout_ms: float | None = None
        """A hybrid query waits at most this long for its BM25 side once the dense side is
        done, then answers from dense alone with a note (the seed's lenient BM25: a slow BM25
        never fails a query). None waits; the serving engine sets ``timeouts.bm25_ms``."""
        self.bm25_workers = 1
        """Threads running hybrid queries' BM25 side (created on the first hybrid query): one
        suits a single caller; a server sharing this Retriever across request threads raises
        it so their BM25 searches do not queue behind one thread (docs/serving.md)."""

    # -- components ---------------------------------------------------------------------
    @property
    def embedder(self) -> Embedder | None:
        with self._lock:
            if self._embedder is None and self._embedder_factory is not None:
                self._embedder = self._embedder_factory()
        return self._embedder

    def symbol_table(self) -> InMemorySymbolTable:
        """The index's symbols and paths, rebuilt when the store's generation changes."""
        gen = self.store.generation()
        cached = self._symbols
        if cached is not None and cached[0] == gen:
            return cached[1]
        with self._symbols_lock:
            cached = self._symbols  # another thread may have rebuilt it while this one waited
            if cached is None or cached[0] != gen:
                # A split symbol is one definition: it is listed once, as its first part (the
                # one with the definition line), so 64 parts neither make its name look
                # ambiguous (which halves an entity's confidence) nor all get fetched and
                # boosted.
                rows = (r for r in self.store.symbol_table() if not is_part(r[2]))
                cached = (gen, InMemorySymbolTable(rows))
                self._symbols = cached
            return cached[1]

    def chunk_count(self) -> int:
        """The store's chunk count, cached per index generation (a count(*) costs ~1 ms at 100k
        chunks, twice per query otherwise)."""
        gen = self.store.generation()
        if self._count is None or self._count[0] != gen:
            self._count = (gen, self.store.chunk_count())
        return self._count[1]

    def pin(self) -> GenerationView:
        """The published generation to answer from. When it changed, the BM25 searcher is
        reloaded (its commit precedes the publication, so it holds the generation's rows); the
        vectors are reloaded when their file was replaced. Nothing is re-read while the store
        is unchanged (``data_version``: the indexer commits after every vector save)."""
        version = self.store.data_version()
        cached = self._view
        if cached is not None and cached[0] == version:
            return cached[1]
        gen, watermark = self.store.published()
        view = cached[1] if cached is not None else None
        if view is None or view.generation != gen or view.watermark != watermark:
            view = GenerationView(gen, watermark, frozenset(self.store.hidden_rowids(gen)))
            if self.bm25 is not None:
                self.bm25.reload()
        if self.vectors is not None:
            self.vectors = self.vectors.refreshed()
        self._view = (version, view)
        return view

    def _still_published(self, view: GenerationView) -> bool:
        """True when ``view``'s generation is still the published one (the seqlock check): one
        ``data_version`` read when nothing was written since the pin; otherwise the next
        :meth:`pin` re-reads everything and the generation number decides."""
        cached = self._view
        if cached is not None and cached[1] is view and self.store.data_version() == cached[0]:
            return True
        self._view = None
        return self.store.generation() == view.generation

    def vectors_complete(self) -> bool:
        n = self.vectors.count() if self.vectors is not None else 0
        return n >= self.chunk_count()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None

    # -- single modalities --------------------------------------------------------------
    def bm25_terms(self, pq: ProcessedQuery) -> list[tuple[str, float]]:
        """Weighted BM25 terms: typed words 1.0, joined identifiers and synonyms less."""
        syn = set(pq.synonyms_added)
        joined = set(pq.identifier_candidates)
        return [
            (t, self.synonym_weight if t in syn else self.joined_weight if t in joined else 1.0)
            for t in pq.terms
        ] or [(pq.sparse_text, 1.0)]

    def sparse(
        self,
        query: str | Sequence[tuple[str, float]],
        k: int,
        *,
        view: GenerationView | None = None,
    ) -> list[tuple[int, float]]:
        """Top ``k`` BM25 hits of the generation ``view`` (default: the published one)."""
        bm25 = self.bm25
        if bm25 is None:
            return []
        view = view if view is not None else self.pin()
        return _visible_top(lambda n: bm25.search(query, n), k, view)

    def embed_query(self, query: str) -> np.ndarray | None:
        if self.vectors is None or self.vectors.count() == 0:
            return None
        emb = self.embedder
        if emb is None:
            return None
        vec: np.ndarray = emb.embed_query(query)
        return vec

    def dense(
        self,
        query: str,
        k: int,
        vector: np.ndarray | None = None,
        *,
        view: GenerationView | None = None,
    ) -> list[tuple[int, float]]:
        """Top ``k`` vector hits of the generation ``view`` (default: the published one)."""
        view = view if view is not None else self.pin()
        vectors = self.vectors
        if vectors is None:
            return []
        if vector is None:
            vector = self.embed_query(query)
        if vector is None:
            return []
        vec = vector
        return _visible_top(lambda n: vectors.search(vec, n), k, view)

    def _timed_dense(
        self,
        query: str,
        k: int,
        ctx: otel_context.Context | None = None,
        view: GenerationView | None = None,
    ) -> tuple[list[tuple[int, float]], float]:
        t = time.perf_counter()
        with self.telemetry.span("dense", context=ctx) as span:
            out = self.dense(query, k, view=view)
            span.set_attribute("dense_results", len(out))
        return out, (time.perf_counter() - t) * 1000

    def _timed_sparse(
        self,
        pq: ProcessedQuery,
        k: int,
        ctx: otel_context.Context | None = None,
        view: GenerationView | None = None,
    ) -> tuple[list[tuple[int, float]], float]:
        t = time.perf_counter()
        with self.telemetry.span("bm25", context=ctx) as span:
            out = self.sparse(self.bm25_terms(pq), k, view=view)
            span.set_attribute("bm25_status", "ready" if self.bm25 is not None else "missing")
            span.set_attribute("strict", False)
            span.set_attribute("attempts", 1)
            span.set_attribute("bm25_results", len(out))
        return out, (time.perf_counter() - t) * 1000

    def _retrieve(
        self,
        pq: ProcessedQuery,
        depth: int,
        sparse: bool,
        dense: bool,
        view: GenerationView | None = None,
    ) -> _Lists:
        """The dense side in this thread while a worker thread runs BM25.

        BM25 (~0.2 ms) finishes well before the query embedding (~1.2 ms), so its result is
        ready when the dense side ends: no thread wake-up lies on the critical path.
        """
        fut: Future[tuple[list[tuple[int, float]], float]] | None = None
        out = _Lists([], [])
        if dense and sparse:
            pool = self._pool
            if pool is None:
                with self._lock:  # two threads must not each make a pool
                    if self._pool is None:
                        self._pool = ThreadPoolExecutor(
                            max_workers=max(1, self.bm25_workers), thread_name_prefix="ragloom-bm25"
                        )
                    pool = self._pool
            ctx = otel_context.get_current()
            fut = pool.submit(self._timed_sparse, pq, depth, ctx, view)
        elif sparse:
            out.bm25, out.bm25_ms = self._timed_sparse(pq, depth, None, view)
        if dense:
            out.dense, out.dense_ms = self._timed_dense(pq.dense_text, depth, None, view)
        if fut is not None:
            limit = self.bm25_timeout_ms
            try:
                out.bm25, out.bm25_ms = fut.result(None if limit is None else limit / 1000.0)
            except FutureTimeout:
                fut.cancel()
                out.bm25_timed_out = True
        return out

    # -- the pipeline -------------------------------------------------------------------
    async def asearch(
        self,
        query: str,
        *,
        top_k: int = 10,
        strategy: str | RetrievalStrategy = DEFAULT_STRATEGY,
        explain: bool = False,
    ) -> SearchResult:
        """:meth:`search` without blocking the event loop (runs in a worker thread)."""
        return await asyncio.to_thread(
            self.search, query, top_k=top_k, strategy=strategy, explain=explain
        )

    def search(
        self,
        query: str,
        *,
        top_k: int = 10,
        strategy: str | RetrievalStrategy = DEFAULT_STRATEGY,
        explain: bool = False,
        query_config: QueryConfig | None = None,
    ) -> SearchResult:
        """Rank chunks for ``query``; see the module docstring for the stages."""
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
            raise ConfigError(f"top_k must be an integer >= 1, got {top_k!r}")
        if top_k > MAX_TOP_K:
            raise ConfigError(f"top_k must be at most {MAX_TOP_K}, got {top_k!r}")
        spec = parse_search_spec(strategy)
        strat, qc, name = spec.strategy, spec.query_config, spec.name
        if query_config is not None:
            qc = query_config
        if isinstance(strat, Hybrid):
            # An explicit RrfConfig wins; the seed default stands for "ragloom's tuned default",
            # which depends on the query's style when adaptive (``+seed`` keeps the seed's).
            if strat.rrf == RrfConfig() and spec.tuned:
                keyword = self.adaptive and query_style(query) == "keyword"
                strat = Hybrid(rrf=self.keyword_rrf if keyword else self.rrf, mmr=strat.mmr)
            if strat.mmr is not None and strat.mmr == MmrConfig():
                strat = Hybrid(rrf=strat.rrf, mmr=self.mmr)
        hybrid = isinstance(strat, Hybrid)
        steps = frozenset(st for st in RANKING_STEPS if hybrid and spec.ranking(st))
        with self.telemetry.request_span(
            query_len=len(query),
            top_k=top_k,
            strategy=name,
            rrf_k=strat.rrf.k if isinstance(strat, Hybrid) else None,
            mmr_lambda=strat.mmr.lambda_ if isinstance(strat, Hybrid) and strat.mmr else None,
        ) as span:
            # Answer from one generation: pin the published one, then check it is still the one
            # published (a seqlock): rows a generation shows change only after a newer one is
            # published, so an unchanged generation means every read saw that generation.
            cached = self._view
            for attempt in range(MAX_GENERATION_ATTEMPTS):
                # the view of the last query is used as is: the check below catches any write
                # since (and the retry pins afresh), so a quiet index costs one data_version read
                view = cached[1] if attempt == 0 and cached is not None else self.pin()
                result = self._search(
                    query, top_k, strat, qc, name, explain, view, steps, spec.history
                )
                if self._still_published(view):
                    break
            span.set_attribute("generation", result.generation)
            span.set_attribute("hits", len(result.hits))
            span.set_attribute("fallback_used", result.fallback_used and hybrid)
        return result

    def _search(
        self,
        query: str,
        top_k: int,
        strat: RetrievalStrategy,
        qc: QueryConfig,
        name: str,
        explain: bool,
        view: GenerationView,
        steps: frozenset[str] = frozenset(),
        weights: HistoryWeights | None = None,
    ) -> SearchResult:
        result = SearchResult(hits=[], strategy=name, generation=view.generation)
        t0 = time.perf_counter()
        with self.telemetry.span("query") as qspan:
            symbols = self.symbol_table() if qc.extract_entities else None
            pq = process_query(query, qc, symbols)
            qspan.set_attribute("steps", list(pq.steps))
            qspan.set_attribute("sub_queries", len(pq.sub_queries))
        result.timings_ms["query"] = (time.perf_counter() - t0) * 1000
        result.query = _query_info(pq)
        if pq.is_empty or not any(ch.isalnum() for ch in query):
            result.notes.append("the query has no searchable words")
            return result
        result.vectors_complete = self.vectors_complete()
        if not result.vectors_complete and not isinstance(strat, Sparse):
            n = self.vectors.count() if self.vectors is not None else 0
            result.notes.append(
                f"embeddings incomplete: {n} of {self.chunk_count()} chunks have vectors; "
                "dense results cover only those (run `ragloom index` to finish)"
            )
        use_sparse = not isinstance(strat, Dense)
        use_dense = not isinstance(strat, Sparse)
        pool = strat.mmr.candidate_pool if isinstance(strat, Hybrid) and strat.mmr else 0
        depth = max(top_k, pool, HYBRID_CANDIDATES_MIN) if isinstance(strat, Hybrid) else top_k
        if "history" in steps and self.history is not None:
            depth = max(depth, HISTORY_CANDIDATES_MIN)

        main = self._retrieve(pq, depth, use_sparse, use_dense, view)
        result.timings_ms["bm25"] = main.bm25_ms
        result.timings_ms["dense"] = main.dense_ms
        if isinstance(strat, Hybrid) and not main.dense:
            result.fallback_used = True
            if main.bm25:
                result.notes.append("no vectors available: hybrid answered from BM25 alone")
        if main.bm25_timed_out:
            result.fallback_used = result.bm25_timed_out = True
            result.notes.append(
                f"bm25 did not answer within {self.bm25_timeout_ms:g} ms: "
                "hybrid answered from dense alone"
            )

        t = time.perf_counter()
        subs: dict[str, list[tuple[int, float]]] = {}
        for i, sq in enumerate(pq.sub_queries, 1):
            sub = self._retrieve(sq, depth, use_sparse, use_dense, view)
            subs[f"sub{i}"], _ = self._fuse(strat, sub)
        with self.telemetry.span("fusion") as fspan:
            fused, per_modality = self._fuse(strat, main)
            if subs:
                k = strat.rrf.k if isinstance(strat, Hybrid) else self.rrf.k
                fused = rrf_fuse({"query": fused, **subs}, None, k)
            fspan.set_attribute("bm25_results", len(main.bm25))
            fspan.set_attribute("dense_results", len(main.dense))
            fspan.set_attribute("fallback_used", result.fallback_used)
        result.timings_ms["fusion"] = (time.perf_counter() - t) * 1000

        t = time.perf_counter()
        priors: dict[int, dict[str, float]] = {}
        if steps:
            fused = self._priors(
                fused[: max(depth, top_k)], query, steps, priors, per_modality, weights
            )
            result.timings_ms["priors"] = (time.perf_counter() - t) * 1000
            t = time.perf_counter()
        ranked = fused[: max(depth, top_k)]
        mmr = isinstance(strat, Hybrid) and strat.mmr is not None
        strong = qc.exact_boost and any(
            e.confidence >= qc.exact_min_confidence for e in pq.entities
        )
        boosted = bool(pq.language and isinstance(strat, Hybrid)) or strong
        heads = {i for e in pq.entities if e.kind == "symbol" for i in e.ids}
        if mmr or boosted or explain or self.recency is not None or self.reranker is not None:
            rows = self.store.chunks_by_rowids([r for r, _ in ranked])
        else:
            # Nothing reorders the fused list: only the hits returned need their rows (50 rows
            # cost ~0.2 ms, 15 ~0.07 ms). A row gone since indexing means loading the rest.
            rows = self.store.chunks_by_rowids([r for r, _ in ranked[:top_k]])
            if len(rows) < min(top_k, len(ranked)) or _has_part_of(rows, heads):
                rows = self.store.chunks_by_rowids([r for r, _ in ranked])
        explains: dict[int, dict[str, Any]] = (
            {r: dict(priors.get(r, {})) for r, _ in ranked} if explain else {}
        )
        ranked = [(r, s) for r, s in ranked if r in rows]
        if pq.language and isinstance(strat, Hybrid):
            bonus = strat.rrf.weight_bm25 * LANGUAGE_BOOST_RRF_RANKS / (strat.rrf.k + 1)
            ranked = _boost(ranked, {r for r in rows if rows[r].language == pq.language}, bonus)
            if explain:
                for r in rows:
                    if rows[r].language == pq.language:
                        explains.setdefault(r, {})["language_boost"] = bonus
        if strong:
            ranked, rows = self._exact(ranked, rows, pq, qc, explains if explain else None)
        if self.recency is not None:
            ranked = self._recency(ranked, rows)
        if self.reranker is not None:
            with self.telemetry.span("rerank"):
                ranked = self._rerank(self.reranker, pq.dense_text, ranked[:depth], rows)
        if _has_part_of(rows, heads):
            ranked, rows = self._heads_first(ranked, rows, heads, explains if explain else None)
        result.timings_ms["boosts"] = (time.perf_counter() - t) * 1000

        pool_vecs: dict[int, np.ndarray] = {}
        if isinstance(strat, Hybrid) and strat.mmr is not None and ranked:
            t = time.perf_counter()
            with self.telemetry.span("mmr", {"mmr_lambda": strat.mmr.lambda_}):
                ranked, pool_vecs = self._mmr(
                    ranked, top_k, strat.mmr, explains if explain else None
                )
            result.timings_ms["mmr"] = (time.perf_counter() - t) * 1000
        ranked = ranked[:top_k]
        t = time.perf_counter()
        rrf = strat.rrf if isinstance(strat, Hybrid) else self.rrf
        result.hits = self._hydrate(ranked, rows, per_modality, explains if explain else None, rrf)
        if pool_vecs:
            result.embeddings = {
                rows[r].id: pool_vecs[r] for r, _ in ranked if r in pool_vecs and r in rows
            }
        result.timings_ms["hydrate"] = (time.perf_counter() - t) * 1000
        result.timings_ms["total"] = (time.perf_counter() - t0) * 1000
        return result

    def chunk_info(self, rowids: Sequence[int]) -> dict[int, tuple[str, FileRole, bool]]:
        """(path, file role, is a declaration) of each rowid, cached per index generation:
        only rows not seen since the generation changed are read (their rows, and the texts of
        the few whose kind needs one), so the cost is O(candidates) and ~0 once warm."""
        gen = self.store.generation()
        if self._info is None or self._info[0] != gen:
            self._info = (gen, {})
        cache = self._info[1]
        missing = [r for r in rowids if r not in cache]
        if missing:
            rows = self.store.chunks_by_rowids(missing)
            need_text = [r for r, row in rows.items() if _needs_text(row)]
            texts = self.store.texts_by_rowids(need_text) if need_text else {}
            for r, row in rows.items():
                decl = is_declaration(row.path, row.kind, texts.get(r))
                cache[r] = (row.path, file_role(row.path), decl)
        return {r: cache[r] for r in rowids if r in cache}

    def _history_evidence(
        self, query: str, recent: bool = False
    ) -> tuple[HistoryEvidence, CoChange] | None:
        """The history's file rankings for ``query`` (with the recency ranking when ``recent``)
        and its co-change tables (None without a history or when it fails: ranking goes on
        without it). The churn ranks, the co-change tables, the recency ranks and the indexed
        paths are computed once per index generation and history version."""
        hist = self.history
        if hist is None:
            return None
        try:
            key = (self.store.generation(), hist.version())
            cached = self._churn
            if cached is None or cached[0] != key:
                live = frozenset(self.store.files())
                table = CoChange.of(hist.changes(), live)
                # a ChangeHistory written before ``recent`` joined the protocol ranks without it
                newest = getattr(hist, "recent", None)
                rec = recent_ranks(newest(RECENT_COMMITS), live) if callable(newest) else {}
                cached = (key, live, churn_ranks(table), table, rec)
                self._churn = cached
            similar = hist.similar(query, SIMILAR_COMMITS)
            evidence = history_evidence(
                similar, cached[1], cached[2], cached[4] if recent else None
            )
            return evidence, cached[3]
        except Exception as exc:  # evidence, never a reason to fail a search
            log.warning("change history unavailable for this query: %s", exc)
            return None

    def _agree(
        self, lists: dict[str, list[tuple[int, float]]] | None, confident: float | None = None
    ) -> bool:
        """True when BM25's and dense's best hits are in the same file, or when dense's best
        score is at least ``confident``."""
        bm25 = (lists or {}).get("bm25") or []
        dense = (lists or {}).get("dense") or []
        if confident is not None and dense and dense[0][1] >= confident:
            return True
        if not bm25 or not dense:
            return False
        info = self.chunk_info([bm25[0][0], dense[0][0]])
        a, b = info.get(bm25[0][0]), info.get(dense[0][0])
        return a is not None and b is not None and a[0] == b[0]

    def _history_bonus(
        self,
        out: list[tuple[int, float]],
        info: dict[int, tuple[str, FileRole, bool]],
        intent: frozenset[FileRole],
        evidence: HistoryEvidence,
        table: CoChange,
        notes: dict[int, dict[str, float]],
        weights: HistoryWeights = DEFAULT_WEIGHTS,
    ) -> list[tuple[int, float]]:
        """Add each file's bonus (``ragloom.retrieve.history``) to its chunks (to its best one
        only with ``weights.best_chunk_only``): similar changes, churn and recency first, then
        the co-change of the :data:`CO_CHANGE_TOP` best files after that."""

        def prior(role: FileRole) -> float:
            return ROLE_PRIOR[role] if role not in intent else 1.0

        bonus: dict[str, float] = {}
        gains: set[int] = set()
        for r, _ in sorted(out, key=lambda it: (-it[1], it[0])):
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
        for r, _ in sorted(scored, key=lambda it: (-it[1], it[0])):
            path = info[r][0] if r in info else None
            if path is not None and path not in top:
                top.append(path)
                if len(top) == CO_CHANGE_TOP:
                    break
        co = co_change_ranks(top, table) if weights.co_change else {}
        result: list[tuple[int, float]] = []
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

    def _priors(
        self,
        ranked: list[tuple[int, float]],
        query: str,
        steps: frozenset[str],
        notes: dict[int, dict[str, float]],
        lists: dict[str, list[tuple[int, float]]] | None = None,
        weights: HistoryWeights | None = None,
    ) -> list[tuple[int, float]]:
        """The tuned ranking priors on the fused list: role and declaration demotions
        (unless the question asks for that role), the change history, then file evidence;
        re-sorted. The history's weights are ``weights``, or picked by the question
        (:func:`~ragloom.retrieve.roles.change_request`); when BM25 and dense agree on the best
        file (``lists`` are their ranked lists) the step yields or pins the first hits, as the
        weights say."""
        info = self.chunk_info([r for r, _ in ranked])
        intent = query_intent(query)
        out: list[tuple[int, float]] = []
        for r, s in ranked:
            meta = info.get(r)
            if meta is None:
                out.append((r, s))
                continue
            _, role, decl = meta
            f = 1.0
            if "roles" in steps and role not in intent:
                f *= ROLE_PRIOR[role]
            if "decl" in steps and decl and "declaration" not in intent and role != "declaration":
                f *= DECLARATION_PRIOR
            if f != 1.0:
                notes.setdefault(r, {})["prior"] = f
            out.append((r, s * f))
        pinned: list[int] = []
        if "history" in steps and self.history is not None:
            if weights is None:
                weights = CHANGE_WEIGHTS if change_request(query) else DEFAULT_WEIGHTS
            agree = self._agree(lists, weights.pin_confidence)
            if not (agree and weights.yields_to_agreement):
                head: list[tuple[int, float]] = []
                if agree and weights.pin:
                    # the pinned hits neither gain nor pick the files co-change ranks by
                    out.sort(key=lambda it: (-it[1], it[0]))
                    head, out = out[: weights.pin], out[weights.pin :]
                    pinned = [r for r, _ in head]
                found = self._history_evidence(query, recent=weights.recent > 0)
                if found is not None and not found[0].empty:
                    out = self._history_bonus(out, info, intent, found[0], found[1], notes, weights)
                out = head + out
        if "filerank" in steps:
            paths = {r: m[0] for r, m in info.items()}
            out = file_evidence(out, paths, FILE_EVIDENCE, FILE_EVIDENCE_DECAY, FILE_EVIDENCE_TOP)
        else:
            out.sort(key=lambda it: (-it[1], it[0]))
        if pinned:
            out = _pin_first(out, pinned)
        return out

    def _fuse(
        self, strat: RetrievalStrategy, lists: _Lists
    ) -> tuple[list[tuple[int, float]], dict[str, list[tuple[int, float]]]]:
        if isinstance(strat, Sparse):
            return list(lists.bm25), {"bm25": lists.bm25}
        if isinstance(strat, Dense):
            return list(lists.dense), {"dense": lists.dense}
        named = {"bm25": lists.bm25, "dense": lists.dense}
        fused = rrf_fuse_with(named, strat.rrf)
        return [(it.id, it.score) for it in fused], named

    def _exact(
        self,
        ranked: list[tuple[int, float]],
        rows: dict[int, ChunkRow],
        pq: ProcessedQuery,
        qc: QueryConfig,
        explains: dict[int, dict[str, Any]] | None,
    ) -> tuple[list[tuple[int, float]], dict[int, ChunkRow]]:
        present = {rows[r].id for r, _ in ranked}
        wanted: list[str] = []
        for e in pq.entities:
            strong = e.kind == "symbol" and e.confidence >= qc.exact_min_confidence
            if strong and 0 < len(e.ids) <= MAX_MISSING_ENTITY_IDS:
                wanted.extend(i for i in e.ids if i not in present)
        if wanted:
            extra = self.store.chunks_by_ids(wanted)
            rows = dict(rows)
            for row in extra.values():
                rows[row.rowid] = row
                ranked.append((row.rowid, 0.0))
        by_id = {rows[r].id: r for r, _ in ranked}
        boosted = exact_match_boost(
            [(rows[r].id, s) for r, s in ranked],
            pq.entities,
            qc,
            id_paths={rows[r].id: rows[r].path for r, _ in ranked},
            # a split symbol is boosted once, as its first part (the others keep their rank)
            id_symbols={rows[r].id: rows[r].symbol for r, _ in ranked if not is_part(rows[r].id)},
        )
        out = [(by_id[cid], s) for cid, s in boosted]
        if explains is not None:
            before = dict(ranked)
            for r, s in out:
                if s != before.get(r):
                    explains.setdefault(r, {})["exact_match"] = s
        return out, rows

    def _heads_first(
        self,
        ranked: list[tuple[int, float]],
        rows: dict[int, ChunkRow],
        heads: set[str],
        explains: dict[int, dict[str, Any]] | None,
    ) -> tuple[list[tuple[int, float]], dict[int, ChunkRow]]:
        """A split symbol the query names is represented by its first part, the one holding its
        definition line: when a later part ranks above it (its parts all carry the name and the
        signature, so BM25 and the embedder cannot tell them apart), the first part takes the
        best rank and score its parts earned, fetched from the store if retrieval missed it;
        everything else keeps its order."""
        own: dict[str, int] = {}  # head id -> rowid, where ranked
        best: dict[str, int] = {}  # head id -> index of its best-ranked later part
        for i, (r, _) in enumerate(ranked):
            cid = rows[r].id
            if cid in heads:
                own.setdefault(cid, r)
            elif is_part(cid) and head_id(cid) in heads and head_id(cid) not in own:
                best.setdefault(head_id(cid), i)
        if not best:
            return ranked, rows
        missing = [h for h in best if h not in own]
        if missing:
            rows = dict(rows)
            for row in self.store.chunks_by_ids(missing).values():
                rows[row.rowid] = row
                own[row.id] = row.rowid
        at = {best[h]: own[h] for h in best if h in own}  # index -> head rowid placed there
        moved = set(at.values())
        out: list[tuple[int, float]] = []
        for i, (r, s) in enumerate(ranked):
            if i in at:
                out.append((at[i], s))
                if explains is not None:
                    explains.setdefault(at[i], {})["first_part"] = i + 1
            if r not in moved:
                out.append((r, s))
        return out, rows

    def _rerank(
        self,
        reranker: Reranker,
        query: str,
        ranked: list[tuple[int, float]],
        rows: dict[int, ChunkRow],
    ) -> list[tuple[int, float]]:
        texts = self.store.texts_by_rowids([r for r, _ in ranked])
        by_id = {rows[r].id: r for r, _ in ranked}
        reranked = reranker.rerank(query, [(rows[r].id, texts.get(r, "")) for r, _ in ranked])
        return [(by_id[cid], s) for cid, s in reranked]

    def _recency(
        self, ranked: list[tuple[int, float]], rows: dict[int, ChunkRow]
    ) -> list[tuple[int, float]]:
        assert self.recency is not None
        files = self.store.files()
        dates: dict[int, datetime | float] = {}
        for r, _ in ranked:
            f = files.get(rows[r].path)
            if f is not None:
                dates[r] = float(f.mtime)
        return apply_recency(normalize_scores(ranked), dates, time.time(), self.recency)

    def _mmr(
        self,
        ranked: list[tuple[int, float]],
        top_k: int,
        cfg: MmrConfig,
        explains: dict[int, dict[str, Any]] | None,
    ) -> tuple[list[tuple[int, float]], dict[int, np.ndarray]]:
        """MMR over the pool; also returns the pool's vectors by rowid."""
        pool = ranked[: cfg.candidate_pool]
        ids = [r for r, _ in pool]
        # The HNSW index holds the pool's vectors in memory (unit length, as cosine needs);
        # the store is the fallback for an index without vectors loaded.
        vecs = self.vectors.get(ids) if self.vectors is not None else {}
        emb = self.embedder if not vecs else None
        if emb is not None:
            mat = self.store.vectors_for_rowids(embedding_key(emb.model_id), ids, emb.dim)
            vecs = {r: mat[i] for i, r in enumerate(ids) if float(np.abs(mat[i]).sum()) > 0.0}
        rel = normalize_scores(pool)
        picks = mmr_select_explain(rel, top_k, vecs, cfg)
        original = dict(pool)
        if explains is not None:
            for p in picks:
                explains.setdefault(p.id, {})["mmr"] = {
                    "relevance": p.relevance,
                    "objective": p.mmr_score,
                    "max_sim": p.max_sim,
                }
        return [(p.id, original[p.id]) for p in picks], vecs

    # -- hits ---------------------------------------------------------------------------
    def embeddings_for_hits(self, hits: Sequence[Hit]) -> dict[str, np.ndarray]:
        """Stored embeddings of the hits' chunks, by chunk id (for MMR and near-dup dedup)."""
        emb = self.embedder
        if emb is None or not hits:
            return {}
        rows = self.store.chunks_by_ids([h.id for h in hits])
        rowids = [rows[h.id].rowid for h in hits if h.id in rows]
        vecs = self.store.vectors_for_rowids(embedding_key(emb.model_id), rowids, emb.dim)
        by_rowid = {r.rowid: r.id for r in rows.values()}
        return {
            by_rowid[rowid]: vecs[i]
            for i, rowid in enumerate(rowids)
            if float(np.abs(vecs[i]).sum()) > 0.0
        }

    def hydrate(
        self,
        ranked: Sequence[tuple[int, float]],
        lists: dict[str, list[tuple[int, float]]],
    ) -> list[Hit]:
        """Turn (rowid, score) into hits with per-modality ranks; rows gone since are dropped."""
        rows = self.store.chunks_by_rowids([r for r, _ in ranked])
        return self._hydrate(ranked, rows, lists, None, self.rrf)

    def _hydrate(
        self,
        ranked: Sequence[tuple[int, float]],
        rows: dict[int, ChunkRow],
        lists: dict[str, list[tuple[int, float]]],
        explains: dict[int, dict[str, Any]] | None,
        rrf: RrfConfig,
    ) -> list[Hit]:
        texts = self.store.texts_by_rowids([r for r, _ in ranked])
        positions: dict[str, dict[int, tuple[int, float]]] = {}
        for name, items in lists.items():
            pos: dict[int, tuple[int, float]] = {}
            for rank, (rowid, score) in enumerate(items, 1):
                pos.setdefault(rowid, (rank, score))
            positions[name] = pos
        hits: list[Hit] = []
        for rowid, score in ranked:
            row = rows.get(rowid)
            if row is None:
                continue
            hit = _hit(row, score, texts.get(rowid, ""))
            for name, pos in positions.items():
                if rowid in pos:
                    hit.ranks[name] = pos[rowid][0]
                    hit.scores[name] = pos[rowid][1]
            if explains is not None:
                info = dict(explains.get(rowid, {}))
                if len(lists) > 1:
                    info["rrf"] = {
                        name: rrf.weights.get(name, 1.0) / (rrf.k + rank)
                        for name, rank in hit.ranks.items()
                    }
                hit.explain = info
            hits.append(hit)
        return hits


def _needs_text(row: ChunkRow) -> bool:
    """Whether :func:`is_declaration` needs the chunk's text (Python classes, abstract methods
    and TypeScript ``declare``); the others are decided by path and kind."""
    if row.language == "python":
        return row.kind == "class" or row.kind == "method"
    return row.language in ("typescript", "tsx") and row.kind in ("class", "method", "module")


def _pin_first(ranked: list[tuple[int, float]], first: list[int]) -> list[tuple[int, float]]:
    """``ranked`` with the rows of ``first`` moved to the front in that order, every score at
    least the one after it (so later re-sorts keep the order)."""
    keep = set(first)
    rest = [(r, s) for r, s in ranked if r not in keep]
    score = dict(ranked)
    floor = rest[0][1] if rest else 0.0
    head: list[tuple[int, float]] = []
    for r in reversed(first):
        if r in score:
            floor = max(score[r], floor)
            head.append((r, floor))
    return head[::-1] + rest


def _has_part_of(rows: dict[int, ChunkRow], heads: set[str]) -> bool:
    """True when a later part of a split symbol named by the query is among ``rows``."""
    return bool(heads) and any(is_part(r.id) and head_id(r.id) in heads for r in rows.values())


def _boost(
    ranked: list[tuple[int, float]], which: set[int], bonus: float
) -> list[tuple[int, float]]:
    if not which or not math.isfinite(bonus):
        return ranked
    out = [(r, s + bonus if r in which else s) for r, s in ranked]
    out.sort(key=lambda it: (-it[1], it[0]))
    return out


def _query_info(pq: ProcessedQuery) -> dict[str, object]:
    return {
        "dense_text": pq.dense_text,
        "sparse_text": pq.sparse_text,
        "language": pq.language,
        "steps": list(pq.steps),
        "entities": [
            {"kind": e.kind, "value": e.value, "confidence": e.confidence} for e in pq.entities
        ],
        "sub_queries": [s.dense_text for s in pq.sub_queries],
    }


def _hit(row: ChunkRow, score: float, text: str) -> Hit:
    return Hit(
        id=row.id,
        path=row.path,
        start_line=row.start_line,
        end_line=row.end_line,
        kind=row.kind,
        symbol=row.symbol,
        language=row.language,
        score=score,
        text=text,
        node_hash=row.node_hash,
        file_hash=row.file_hash,
        start_byte=row.start_byte,
        end_byte=row.end_byte,
        source=row.source,
    )
