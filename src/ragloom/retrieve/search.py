"""Dense, sparse and hybrid retrieval over an open index; ranking runs as a list of stages.

One query goes through (ploke-rag-plan.md sections 1 and 4, tamma phases 2 and 5):

1. query processing (``ragloom.retrieve.query``): BM25 terms, the embedding text, entities,
   a language mention, sub-queries, and an issue's parts and names;
2. BM25 and dense retrieval (one after the other; on a worker thread beside the dense side
   when a BM25 time limit is set), for the question and each sub-query, all from one pinned
   index generation;
3. the ranking stages of the strategy (``ragloom.retrieve.stages``; docs/ranking.md "Stages");
4. hydration: the top ``top_k`` become :class:`~ragloom.types.Hit` objects.

This module keeps retrieval (2, 4) and the per-generation caches the stages read through
:class:`~ragloom.retrieve.stages.base.RankingSource`. Every hit keeps the rank and score each
modality gave it, and with ``explain=True`` a record of what each stage did to it
(``ragloom search --explain``). Strategy names: :mod:`ragloom.retrieve.stages.pipeline`.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TYPE_CHECKING

import numpy as np
from opentelemetry import context as otel_context

from ragloom.embed.document import embedding_key
from ragloom.errors import ConfigError, EmbeddingError
from ragloom.index.backend import ReadStore, SparseIndex, VectorIndex
from ragloom.index.file_bm25 import FileScorer
from ragloom.index.readscope import read_scope
from ragloom.retrieve.config import (
    Dense,
    Hybrid,
    MmrConfig,
    RecencyConfig,
    RetrievalStrategy,
    RrfConfig,
    Sparse,
)
from ragloom.retrieve.fusion import tied_by_row as tied_by_row
from ragloom.retrieve.generation import MAX_GENERATION_ATTEMPTS, GenerationView
from ragloom.retrieve.generation import visible_top as _visible_top
from ragloom.retrieve.history import ChangeHistory, CoChange, HistoryEvidence
from ragloom.retrieve.query import (
    InMemorySymbolTable,
    ProcessedQuery,
    QueryConfig,
    process_query,
    query_style,
)
from ragloom.retrieve.results import (
    RetrievedLists,
    SearchResult,
    build_hits,
    hit_to_json,
    query_info,
)
from ragloom.retrieve.roles import FileRole
from ragloom.retrieve.stages.base import ISSUE_WEIGHTS, IssueWeights, RankState
from ragloom.retrieve.stages.history import modalities_agree
from ragloom.retrieve.stages.pipeline import (
    DEFAULT_STRATEGY,
    QUERY_STEP_FLAGS,
    RANKING_STEPS,
    STRATEGIES,
    SearchSpec,
    build_stages,
    parse_search_spec,
    tuned_steps,
)
from ragloom.retrieve.stages.runner import run_stages
from ragloom.retrieve.stages.source import EvidenceCache
from ragloom.retrieve.symbol_cache import SymbolCache
from ragloom.telemetry import Telemetry, get_telemetry
from ragloom.types import Hit

if TYPE_CHECKING:
    from ragloom.embed.base import Embedder
    from ragloom.graph import CodeGraph
    from ragloom.retrieve.ranker import Scorer
    from ragloom.retrieve.rerank import Reranker

__all__ = [
    "DEFAULT_STRATEGY",
    "MAX_TOP_K",
    "QUERY_STEP_FLAGS",
    "RANKING_STEPS",
    "STRATEGIES",
    "GenerationView",
    "Retriever",
    "SearchResult",
    "SearchSpec",
    "hit_to_json",
    "parse_search_spec",
]

log = logging.getLogger("ragloom.retrieve")

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
HISTORY_ATTACH_RECHECK_S = 5.0
"""How soon a reader without a change history looks again for one that appeared since it opened
(:meth:`Retriever.attach_history_later`: the first history sync ran after the reader opened);
each look that finds none doubles the wait, up to :data:`HISTORY_ATTACH_MAX_WAIT_S` (a
sub-folder's index whose commits never touch it reads the whole history to find that out)."""
HISTORY_ATTACH_MAX_WAIT_S = 600.0
MAX_TOP_K = 10_000
"""Largest ``top_k`` a search accepts: far above what fits any context budget, and a bound on
what the engines allocate (tantivy panics on a collector of 10**20 slots)."""

NOTHING_MATCHED_NOTE = (
    "no indexed text contains the query's words (BM25 found nothing): the hits are only the "
    "nearest by meaning (dense) and may be unrelated"
)
"""The note of an answer whose words matched nothing (trial finding 9, 2026-11-28): dense
retrieval always has a nearest neighbour, so without it an agent could not tell "nothing
relevant" from "here is the answer"."""


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
        self._history = history
        self._history_opener: Callable[[], ChangeHistory | None] | None = None
        self._history_tried = 0.0
        self._history_wait = HISTORY_ATTACH_RECHECK_S
        self._history_lock = threading.Lock()
        self.telemetry = telemetry if telemetry is not None else get_telemetry()
        self.bm25 = bm25
        self.file_bm25: FileScorer | None = None
        """BM25 over whole files (:mod:`ragloom.index.file_bm25`), which the learned stage's
        features read; None when the index has none (the stage then ranks with the model that
        does not read it, :data:`~ragloom.retrieve.stages.learned.BASE_MODEL`)."""
        self.vectors = vectors
        self.rrf = rrf if rrf is not None else PROSE_RRF
        self.keyword_rrf = rrf if rrf is not None else KEYWORD_RRF
        self.adaptive = rrf is None
        self.mmr = mmr if mmr is not None else MmrConfig()
        self.reranker = reranker
        self.recency = recency
        self.synonym_weight = SYNONYM_TERM_WEIGHT
        self.issue_weights: IssueWeights = ISSUE_WEIGHTS  # how issue-like questions rank
        self.ranker: Scorer | None = None  # the learned stage's model; None: the shipped one
        self.joined_weight = JOINED_TERM_WEIGHT
        self._embedder_factory = embedder
        self._embedder: Embedder | None = None
        self._symbols = SymbolCache()
        self._count: tuple[int, int] | None = None
        self._complete: tuple[int, np.ndarray, int] | None = None
        """(generation, the label list it was checked against, the chunks it covers)."""
        self._evidence = EvidenceCache()
        """Per-generation facts the ranking stages read (roles, declarations, history tables)."""
        self._view: tuple[int, GenerationView] | None = None
        """(store data_version, view) of the last pin."""
        self._answering = threading.local()
        """``generation``: the generation of the query this thread is answering (its pinned
        view's), which the per-generation caches are checked against instead of asking the
        store again: with PostgreSQL each ask is a round trip, nine a hybrid query before."""
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
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

    def drop_embedder(self) -> None:
        """Search without a query embedder (its model cannot be loaded here): dense finds
        nothing and hybrid answers from BM25 alone, with a note, rather than fail."""
        with self._lock:
            self._embedder_factory = None
            self._embedder = None

    @property
    def history(self) -> ChangeHistory | None:
        """Past changes (the ``commits`` source) for the ``history`` ranking step; None ranks
        without them."""
        return self._history

    @history.setter
    def history(self, value: ChangeHistory | None) -> None:
        # a history set by hand (an evaluation's arm, one cut as of a date) is the one used:
        # no later attachment replaces it
        self._history = value
        self._history_opener = None

    def attach_history_later(self, opener: Callable[[], ChangeHistory | None]) -> None:
        """Rank with the history ``opener`` returns once it returns one: a reader opened before
        the repository's first history sync (a server started before ``ragloom index`` synced
        the commits) would otherwise rank without it until restarted. Tried before a query,
        first :data:`HISTORY_ATTACH_RECHECK_S` after this call, then after twice the last wait
        each time it finds none, up to :data:`HISTORY_ATTACH_MAX_WAIT_S`."""
        self._history_opener = opener
        self._history_tried = time.monotonic()
        self._history_wait = HISTORY_ATTACH_RECHECK_S

    def _attach_history(self) -> None:
        opener = self._history_opener
        if opener is None or time.monotonic() - self._history_tried < self._history_wait:
            return
        with self._history_lock:
            if self._history_opener is not opener or self._history is not None:
                return
            if time.monotonic() - self._history_tried < self._history_wait:
                return  # another thread tried while this one waited
            try:
                found = opener()
            except Exception as exc:  # evidence, never a reason to fail a search
                log.warning("change history not attached: %s", exc)
                found = None
            self._history_tried = time.monotonic()
            self._history_wait = min(2 * self._history_wait, HISTORY_ATTACH_MAX_WAIT_S)
            if found is not None:
                self._history = found
                self._history_opener = None
                log.info("change history attached: the repository's commits were synced")

    def _generation(self) -> int | None:
        """The generation the query this thread is answering was pinned to (None outside a
        query: the caches then ask the store)."""
        gen: int | None = getattr(self._answering, "generation", None)
        return gen

    def symbol_table(self) -> InMemorySymbolTable:
        """The index's symbols and paths, rebuilt when the store's generation changes."""
        return self._symbols.table(self.store, self._generation())

    def chunk_count(self) -> int:
        """The store's chunk count, cached per index generation (a count(*) costs ~1 ms at 100k
        chunks, twice per query otherwise)."""
        pinned = self._generation()
        gen = self.store.generation() if pinned is None else pinned
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
            if self.file_bm25 is not None:
                self.file_bm25.reload()
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
        """True when every chunk of the generation answered from has a vector (see
        :meth:`vectors_covered`)."""
        return self.vectors_covered() >= self.chunk_count()

    def vectors_covered(self) -> int:
        """How many chunks of the generation answered from have a vector. Counting the labels
        is not enough: a batch that replaces chunks publishes their new rows before it embeds
        them, while the vectors still hold the old rows (as many), so the rowids are compared
        (once per generation and label list: 16 ms at 18k chunks)."""
        n = self.vectors.count() if self.vectors is not None else 0
        total = self.chunk_count()
        held = getattr(self.vectors, "rowids", None)
        labels: np.ndarray | None = held() if held is not None else None
        published = getattr(self.store, "published_rowids", None)
        if n < total or labels is None or published is None:
            return n  # short already, or a store without rowids (PostgreSQL): the count
        pinned = self._generation()
        gen = self.store.generation() if pinned is None else pinned
        cached = self._complete
        if cached is not None and cached[0] == gen and cached[1] is labels:
            return cached[2]
        covered = int(np.isin(published(), labels, assume_unique=True).sum())
        self._complete = (gen, labels, covered)
        return covered

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None

    # -- single modalities --------------------------------------------------------------
    def bm25_terms(self, pq: ProcessedQuery) -> list[tuple[str, float]]:
        """Weighted BM25 terms: typed words 1.0, joined identifiers and synonyms less."""
        if pq.issue is not None and pq.issue.terms:  # an issue: its own terms, strongest first
            return list(pq.issue.terms)
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
        return tied_by_row(_visible_top(lambda n: vectors.search(vec, n), k, view))

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
    ) -> RetrievedLists:
        """BM25 then the dense side, in this thread; with a BM25 time limit (``bm25_timeout_ms``,
        which the servers set) BM25 runs on a worker thread beside the dense side, so that a slow
        BM25 can be left behind. Serial is faster without one: the query session embeds on every
        core of an idle machine, and a BM25 thread beside it takes a core and the GIL (0.2 ms
        per question on 2 cores; docs/benchmarks.md, "One question alone, after the second
        round of cuts")."""
        fut: Future[tuple[list[tuple[int, float]], float]] | None = None
        out = RetrievedLists([], [])
        if dense and sparse and self.bm25_timeout_ms is not None:
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
            try:
                out.dense, out.dense_ms = self._timed_dense(pq.dense_text, depth, None, view)
            except EmbeddingError as exc:
                if not sparse:  # dense alone: nothing else can answer
                    if fut is not None:
                        fut.cancel()
                    raise
                # the query model failed (a remote embedding server down): hybrid answers
                # from BM25 alone, with a note, rather than fail
                out.dense_error = str(exc)
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
        if self._history_opener is not None:
            self._attach_history()
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
                self._answering.generation = view.generation
                try:
                    # a fresh read scope per attempt: a retry never reuses the rows it read
                    with read_scope():
                        result = self._search(query, top_k, strat, qc, spec, explain, view)
                finally:
                    self._answering.generation = None
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
        spec: SearchSpec,
        explain: bool,
        view: GenerationView,
    ) -> SearchResult:
        result = SearchResult(hits=[], strategy=spec.name, generation=view.generation)
        t0 = time.perf_counter()
        with self.telemetry.span("query") as qspan:
            symbols = self.symbol_table() if qc.extract_entities else None
            pq = process_query(query, qc, symbols)
            qspan.set_attribute("steps", list(pq.steps))
            qspan.set_attribute("sub_queries", len(pq.sub_queries))
        result.timings_ms["query"] = (time.perf_counter() - t0) * 1000
        result.query = query_info(pq)
        if pq.is_empty or not any(ch.isalnum() for ch in query):
            result.notes.append("the query has no searchable words")
            return result
        result.vectors_complete = self.vectors_complete()
        foreign = getattr(self.vectors, "foreign_dim", None)
        foreign_key = getattr(self.vectors, "foreign_key", None)
        if foreign is not None and not isinstance(strat, Sparse):
            result.notes.append(
                f"the index was re-embedded with another model ({foreign}-d vectors) since it "
                "was opened: dense found nothing; open it again to search with its new model"
            )
        elif foreign_key is not None and not isinstance(strat, Sparse):
            result.notes.append(
                f"the vector index was made with another model ({foreign_key}) than the one "
                "the index was opened with: dense found nothing (re-embedded since it was "
                "opened: open it again; else `ragloom index` rebuilds the vectors from the "
                "stored embeddings)"
            )
        elif not result.vectors_complete and not isinstance(strat, Sparse):
            n = self.vectors_covered()
            result.notes.append(
                f"embeddings incomplete: {n} of {self.chunk_count()} chunks have vectors; "
                "dense results cover only those (`ragloom index`, or a watching server's next "
                "batch, adds the rest)"
            )
        use_sparse = not isinstance(strat, Dense)
        use_dense = not isinstance(strat, Sparse)
        steps = tuned_steps(spec, strat)
        pool = strat.mmr.candidate_pool if isinstance(strat, Hybrid) and strat.mmr else 0
        depth = max(top_k, pool, HYBRID_CANDIDATES_MIN) if isinstance(strat, Hybrid) else top_k
        if "history" in steps and self.history is not None:
            depth = max(depth, HISTORY_CANDIDATES_MIN)

        main = self._retrieve(pq, depth, use_sparse, use_dense, view)
        result.timings_ms["bm25"] = main.bm25_ms
        result.timings_ms["dense"] = main.dense_ms
        if isinstance(strat, Hybrid) and not main.dense:
            result.fallback_used = True
            if main.dense_error:
                result.notes.append(
                    f"the question could not be embedded ({main.dense_error}): hybrid "
                    "answered from BM25 alone"
                )
            elif main.bm25:
                result.notes.append("no vectors available: hybrid answered from BM25 alone")
        if main.bm25_timed_out:
            result.fallback_used = result.bm25_timed_out = True
            result.notes.append(
                f"bm25 did not answer within {self.bm25_timeout_ms:g} ms: "
                "hybrid answered from dense alone"
            )
        t = time.perf_counter()
        subs = [self._retrieve(sq, depth, use_sparse, use_dense, view) for sq in pq.sub_queries]
        if (
            use_sparse
            and main.dense
            and not main.bm25
            and not main.bm25_timed_out
            and not any(s.bm25 for s in subs)
        ):
            result.notes.append(NOTHING_MATCHED_NOTE)
        state = RankState(
            query=query,
            pq=pq,
            qc=qc,
            strategy=strat,
            source=self,
            top_k=top_k,
            depth=depth,
            lists={"bm25": main.bm25, "dense": main.dense},
            sub_lists=[{"bm25": s.bm25, "dense": s.dense} for s in subs],
            sub_rrf_k=self.rrf.k,
            steps=steps,
            history_weights=spec.history,
            issue_weights=self.issue_weights if qc.issue_text else None,
            explain=explain,
            fallback_used=result.fallback_used,
            telemetry=self.telemetry,
            timings_ms={"fusion": (time.perf_counter() - t) * 1000},
        )
        stages = build_stages(spec, strat, reranker=self.reranker, recency=self.recency,
                              issue=self.issue_weights, ranker=self.ranker)  # fmt: skip
        run_stages(stages, state)
        result.timings_ms.update(state.timings_ms)

        ranked = state.ranked[:top_k]
        rows = state.rows or {}
        t = time.perf_counter()
        rrf = strat.rrf if isinstance(strat, Hybrid) else self.rrf
        texts = self.store.texts_by_rowids([r for r, _ in ranked])
        notes = state.notes if explain else None
        result.hits = build_hits(
            ranked, rows, texts, state.modalities, rrf, notes, state.stage_records
        )
        result.rowids = {rows[r].id: r for r, _ in ranked if r in rows}
        if state.vectors:
            result.embeddings = {
                rows[r].id: state.vectors[r] for r, _ in ranked if r in state.vectors and r in rows
            }
        result.timings_ms["hydrate"] = (time.perf_counter() - t) * 1000
        result.timings_ms["total"] = (time.perf_counter() - t0) * 1000
        return result

    # -- what the ranking stages read (RankingSource) --------------------------------------
    def chunk_info(self, rowids: Sequence[int]) -> dict[int, tuple[str, FileRole, bool]]:
        """(path, file role, is a declaration) of each rowid, cached per index generation."""
        return self._evidence.chunk_info(self.store, rowids, self._generation())

    def history_evidence(
        self, query: str, recent: bool = False
    ) -> tuple[HistoryEvidence, CoChange] | None:
        """The history's file rankings for ``query`` and its co-change tables (None without
        a history or when it fails); cached per generation and history version."""
        return self._evidence.history_evidence(
            self.store, self.history, query, recent, self._generation()
        )

    def file_bm25_scores(
        self, query: str | Sequence[tuple[str, float]], paths: Sequence[str]
    ) -> dict[str, float] | None:
        """Whole-file BM25 score of ``query`` for each of ``paths`` in the pinned generation
        (0.0 where no term matches; paths it does not show are left out); None when the index
        has no file BM25."""
        reader = self.file_bm25
        if reader is None:
            return None
        view = self._view[1] if self._view is not None else self.pin()
        return reader.scores(query, paths, (view.generation, view.watermark))

    def agree(
        self, lists: Mapping[str, Sequence[tuple[int, float]]] | None, confident: float | None
    ) -> bool:
        """True when BM25's and dense's best hits are in the same file, or when dense's best
        score is at least ``confident``."""
        return modalities_agree(lists, self.chunk_info, confident)

    def code_graph(self) -> CodeGraph | None:
        """The code graph of the published generation (built once per generation; None for a
        store that keeps no graph records, one without ``graph_snapshot``)."""
        return self._evidence.code_graph(self.store, self._generation())

    @property
    def cached_graph(self) -> CodeGraph | None:
        """The code graph last built (of this generation or an older one), without building."""
        return self._evidence.cached_graph

    def pool_vectors(self, rowids: Sequence[int]) -> dict[int, np.ndarray]:
        """Unit vectors of ``rowids``: the HNSW index holds them in memory (as cosine needs);
        the store is the fallback for an index without vectors loaded."""
        vecs = self.vectors.get(rowids) if self.vectors is not None else {}
        emb = self.embedder if not vecs else None
        if emb is not None:
            mat = self.store.vectors_for_rowids(embedding_key(emb.model_id), rowids, emb.dim)
            vecs = {r: mat[i] for i, r in enumerate(rowids) if float(np.abs(mat[i]).sum()) > 0.0}
        return vecs

    # -- hits ---------------------------------------------------------------------------
    def embeddings_for_hits(
        self, hits: Sequence[Hit], rowids: Mapping[str, int] | None = None
    ) -> dict[str, np.ndarray]:
        """Stored embeddings of the hits' chunks, by chunk id (for MMR and near-dup dedup).

        With ``rowids`` (the search's :attr:`SearchResult.rowids`) and every hit in it, they
        come from the HNSW index in memory (:meth:`pool_vectors`, as MMR takes them) instead of
        two SQLite reads (3.8 ms at 100k chunks, docs/benchmarks.md "Cost of one question")."""
        emb = self.embedder
        if emb is None or not hits:
            return {}
        if rowids is not None and self.vectors is not None and all(h.id in rowids for h in hits):
            wanted = [rowids[h.id] for h in hits]
            held = self.vectors.get(wanted)
            if len(held) == len(set(wanted)):
                return {h.id: held[rowids[h.id]] for h in hits}
        rows = self.store.chunks_by_ids([h.id for h in hits])
        found = [rows[h.id].rowid for h in hits if h.id in rows]
        vecs = self.store.vectors_for_rowids(embedding_key(emb.model_id), found, emb.dim)
        by_rowid = {r.rowid: r.id for r in rows.values()}
        return {
            by_rowid[rowid]: vecs[i]
            for i, rowid in enumerate(found)
            if float(np.abs(vecs[i]).sum()) > 0.0
        }

    def hydrate(
        self,
        ranked: Sequence[tuple[int, float]],
        lists: dict[str, list[tuple[int, float]]],
    ) -> list[Hit]:
        """Turn (rowid, score) into hits with per-modality ranks; rows gone since are dropped."""
        rows = self.store.chunks_by_rowids([r for r, _ in ranked])
        texts = self.store.texts_by_rowids([r for r, _ in ranked])
        return build_hits(ranked, rows, texts, lists, self.rrf)
