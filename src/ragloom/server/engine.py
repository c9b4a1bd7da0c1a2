"""The serving engine: one warm index answering many threads at once (docs/serving.md).

:class:`ServingEngine` is what the HTTP server (``ragloom.server.http``) and the MCP server
(``ragloom.server.mcp``) call: ``search``, ``context``, ``status``, re-index jobs, feedback and
metrics. It adds to :class:`ragloom.api.Index`:

- **one shared reader**, opened once: the store connection, the BM25 searcher, the HNSW graph
  and the ONNX session are shared by every thread (each is safe for concurrent reads; the
  reasoning and measurements are in docs/serving.md); a new *generation* is picked up by the
  reader itself (``Retriever.pin``: BM25 reload, vectors re-read when their file changed), and
  a *replaced* database (``ragloom index --rebuild``, a new file) opens a new reader (a new
  *epoch*) while queries in flight finish on the old one, which is closed after the last;
- **caches** (``ragloom.server.cache``): results keyed by the normalised query, the request's
  parameters, the epoch and the generation, and query embeddings by model and text;
- **micro-batching** of query embeddings (``ragloom.server.embedding``);
- **jobs**: an incremental re-index in a background thread, one at a time, while queries keep
  answering from the published generation;
- **feedback** (``ragloom.server.feedback``) and **metrics** (``ragloom.server.metrics``).

Every answer carries ``query_id`` (logged, so feedback can name it), ``latency_ms``,
``cache_hit`` and the ``generation`` it was answered from.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, cast

from ragloom.api import DEFAULT_INDEX_DIRNAME, Index
from ragloom.assemble import AssemblyPolicy, TokenBudget, assemble_context, get_counter
from ragloom.assemble.budget import FORMATS, Format
from ragloom.assemble.context import ContextPart
from ragloom.assemble.structure import STRUCTURE_MODES, StructureMode, structure_budget
from ragloom.embed.base import Embedder
from ragloom.errors import (
    ConfigError,
    DbError,
    IncompatibleIndexError,
    IndexLockedError,
    InputError,
    RagError,
    SearchError,
    TimeoutError_,
)
from ragloom.index.lock import WriteLock
from ragloom.index.vectors import HnswVectors, persist_live, share_live, unshare_live
from ragloom.paths import existing_dir
from ragloom.retrieve.reader import DB_NAME
from ragloom.retrieve.search import (
    MAX_TOP_K,
    Retriever,
    SearchResult,
    hit_to_json,
    parse_search_spec,
)
from ragloom.server.cache import EmbeddingCache, ResultCache, result_key
from ragloom.server.embedding import BatchingEmbedder, CachingEmbedder
from ragloom.server.feedback import FeedbackBase, QueryLogEntry, QueryLogger
from ragloom.server.metrics import EngineMetrics
from ragloom.server.target import FolderTarget, PostgresTarget, ServingTarget
from ragloom.settings import Settings, load_settings
from ragloom.types import Hit
from ragloom.watch import DEFAULT_DEBOUNCE_MS, DEFAULT_RESCAN_S, BatchReport, Watcher

__all__ = ["ServingEngine", "hit_json"]

log = logging.getLogger("ragloom")

_FORMAT_ALIASES = {"text": "plain"}
"""Settings name the plain format ``text``; the assembler calls it ``plain``."""
BM25_WORKERS = 4
"""Threads running BM25 searches beside the dense side of concurrent hybrid queries (tantivy
releases the GIL while it searches; docs/serving.md)."""
_STATUS_TTL_S = 2.0
"""BM25 state read for ``/metrics`` is reused this long (it opens the engine folder)."""
_REOPEN_RETRY_S = 0.25
"""While a rebuilt database has published nothing, the engine looks again this often."""
P = ParamSpec("P")
_FIXED_SECTIONS = ("server.", "storage.")
"""Settings a live reload does not change (fixed when the server starts)."""
_FLIGHT_WAIT_S = 30.0
"""An identical request waits this long for the first one's answer before computing its own."""
_COMPUTE_THREADS = 64
"""Threads answering queries under ``timeouts.query_ms`` (above the HTTP server's 40 request
threads, so a request never queues for one)."""


def hit_json(hit: Hit, explain: bool, generation: int) -> dict[str, Any]:
    """One hit as ``ragloom search --json`` prints it, generation included."""
    return {**hit_to_json(hit, explain=explain), "generation": generation}


def _parts_json(parts: Sequence[ContextPart]) -> list[dict[str, Any]]:
    """Context parts as JSON, each with the chunk id to rate (its first hit) and its span."""
    out = []
    for p in parts:
        d = p.to_dict()
        d["chunk_id"] = p.hit_ids[0] if p.hit_ids else p.id
        d["path"] = p.file_path
        d["start_line"] = p.ranges[0][0] if p.ranges else 0
        d["end_line"] = p.ranges[-1][1] if p.ranges else 0
        out.append(d)
    return out


@dataclass(eq=False)
class _Reader:
    """One opened index (an epoch): used by queries, closed after the last one left."""

    epoch: int
    index: Index
    retriever: Retriever
    ident: object | None
    refs: int = 0
    retired: bool = False

    def close(self) -> None:
        self.retriever.close()
        self.index.close()


@dataclass(eq=False)
class _Flight:
    """One computation of a result-cache key that identical concurrent requests wait for."""

    done: threading.Event = field(default_factory=threading.Event)
    body: dict[str, Any] | None = None


@dataclass
class _Job:
    id: str
    state: str = "queued"
    phase: str = ""
    done: int = 0
    total: int = 0
    stats: dict[str, Any] | None = None
    error: str | None = None
    created_at: float = field(default_factory=time.time)
    started_at: float | None = None
    finished_at: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "state": self.state,
            "progress": {"phase": self.phase, "done": self.done, "total": self.total},
            "stats": self.stats,
            "error": self.error,
            "created_at": self.created_at,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
        }


def _time_limited(
    method: Callable[Concatenate[ServingEngine, P], dict[str, Any]],
) -> Callable[Concatenate[ServingEngine, P], dict[str, Any]]:
    """Run a query method on the engine's query pool within ``timeouts.query_ms``
    (:meth:`ServingEngine._bounded`)."""

    @functools.wraps(method)
    def bounded(self: ServingEngine, /, *args: P.args, **kwargs: P.kwargs) -> dict[str, Any]:
        return self._bounded(functools.partial(method, self, *args, **kwargs))

    return bounded


class ServingEngine:
    """One warm index, thread-safe; see the module docstring."""

    def __init__(
        self,
        index_dir: Path,
        root: Path,
        settings: Settings,
        *,
        embedder: Embedder | None = None,
        warm: bool = True,
        target: ServingTarget | None = None,
    ) -> None:
        self.target: ServingTarget = target or FolderTarget(index_dir, root)
        self.index_dir = self.target.index_dir
        self.root = self.target.root
        self._settings = settings
        self._lock = threading.RLock()
        self._closed = False
        manifest = self.target.manifest()
        self._embedding_cache = EmbeddingCache(
            max_entries=settings.cache.embedding_max_entries, enabled=settings.cache.enabled
        )
        self._results = ResultCache(
            ttl_s=settings.cache.ttl_s,
            max_entries=settings.cache.max_entries,
            enabled=settings.cache.enabled,
        )
        self._batcher: BatchingEmbedder | None = None
        self._embedder: Embedder | None = None
        base = embedder
        if base is None:
            spec = settings.embedding.model or manifest.embedding_spec
            try:
                from ragloom.embed.registry import load_embedder

                base = load_embedder(spec)
            except RagError as exc:  # searching still works (BM25; dense notes the problem)
                log.warning("query embedder %s unavailable: %s", spec, exc)
        if base is not None and (
            base.model_id != manifest.embedding_model or base.dim != manifest.embedding_dim
        ):
            raise IncompatibleIndexError(
                f"index was embedded with {manifest.embedding_model} "
                f"({manifest.embedding_dim}-d) but the configured query embedder is "
                f"{base.model_id} ({base.dim}-d); set embedding.model to the index's model "
                f"or re-index with `ragloom index {root} --model ...`"
            )
        self._doc_embedder = base
        """The loaded model itself: the watcher embeds documents with it (no second load,
        and the query-embedding cache is not filled with chunk texts)."""
        self._watcher: Watcher | None = None
        self._watch_thread: threading.Thread | None = None
        self._watch_error = ""
        if base is not None:
            self._batcher = BatchingEmbedder(base, window_ms=settings.server.batch_window_ms)
            self._embedder = CachingEmbedder(self._batcher, self._embedding_cache)
        self._epoch = 0
        self._reopen_after = 0.0
        self._inflight: dict[tuple[object, ...], _Flight] = {}
        self._reader: _Reader = self._open_reader()
        self._fallbacks = {
            "dense_unavailable": 0,
            "bm25_unavailable": 0,
            "bm25_timeout": 0,
            "query_timeout": 0,
        }
        self._compute = ThreadPoolExecutor(_COMPUTE_THREADS, thread_name_prefix="ragloom-query")
        self._jobs: dict[str, _Job] = {}
        self._running_job: str | None = None
        self._job_thread: threading.Thread | None = None
        self._bm25_state: tuple[float, str] = (0.0, "uninitialized")
        self._feedback_store: FeedbackBase | None = None
        self._query_log: QueryLogger | None = None
        self._feedback_error = ""
        try:
            self._feedback_store = self.target.open_feedback()
            self._query_log = QueryLogger(self._feedback_store)
        except DbError as exc:  # a read-only index folder still serves queries
            self._feedback_error = str(exc)
            log.warning("feedback and the query log are off: %s", exc)
        self.metrics = EngineMetrics(self._metrics_snapshot)
        if warm:
            self._warm()

    # -- construction -------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        path: str | Path,
        settings: Settings | None = None,
        *,
        embedder: Embedder | None = None,
        warm: bool = True,
    ) -> ServingEngine:
        """Open a repository root (its ``.ragloom`` folder) or an index folder.

        ``settings`` defaults to :func:`ragloom.settings.load_settings` for the repository;
        ``warm`` loads the query embedder and runs one query through it, so the first request
        does not pay the model load (~0.7 s for the shipped model).
        """
        p = existing_dir(path)
        if (p / DB_NAME).exists():
            index = Index.at(p)
            root, index_dir = index.root, index.index_dir
        else:
            root, index_dir = p.resolve(), (p / DEFAULT_INDEX_DIRNAME).resolve()
        if settings is None:
            settings = load_settings(root).settings
        return cls(index_dir, root, settings, embedder=embedder, warm=warm)

    @classmethod
    def open_postgres(
        cls,
        dsn: str,
        repository: str,
        root: Path,
        settings: Settings | None = None,
        *,
        cache_dir: Path | None = None,
        ef_search: int | None = None,
        embedder: Embedder | None = None,
        warm: bool = True,
        source_tree: bool = True,
        pool_size: int | None = None,
    ) -> ServingEngine:
        """Serve ``repository`` of a PostgreSQL + pgvector database (docs/postgres.md);
        ``root`` is its source tree (context snippets, settings). Several engines, on one
        machine or many, may serve the same repository while one of them re-indexes it.
        ``source_tree`` False (``root`` is only a stand-in for a tree this machine lacks)
        refuses re-index jobs, which would index ``root`` in its place. ``pool_size`` (default
        ``storage.pool_size``) read connections let concurrent queries read side by side."""
        if settings is None:
            settings = load_settings(root).settings
        target = PostgresTarget(
            dsn,
            repository,
            root,
            cache_dir=cache_dir,
            ef_search=ef_search,
            source_tree=source_tree,
            pool_size=pool_size or settings.storage.pool_size,
        )
        return cls(target.index_dir, root, settings, embedder=embedder, warm=warm, target=target)

    def _open_reader(self) -> _Reader:
        index = self.target.open_index(self._embedder)
        ident = self.target.ident()
        retriever = index.retriever  # opens store, BM25 and vectors now: errors surface here
        # The Retriever runs each hybrid query's BM25 side on a worker pool of one thread by
        # default (right for one caller): shared by many request threads, that one worker
        # would queue every query's BM25 search behind the others'. docs/serving.md measures.
        retriever.bm25_workers = BM25_WORKERS
        retriever.bm25_timeout_ms = self._settings.timeouts.bm25_ms
        self._epoch += 1
        return _Reader(self._epoch, index, retriever, ident)

    def _warm(self) -> None:
        """Load what the first query would (the ONNX session, the symbol table, the token
        counter), so no request pays for it."""
        r = self._reader
        try:
            r.retriever.search("warm up", top_k=1)
            get_counter(self._settings.assembly.counter).count("warm up")
        except RagError as exc:
            log.warning("could not warm the engine: %s", exc)

    @property
    def settings(self) -> Settings:
        return self._settings

    # -- readers ------------------------------------------------------------------------
    @contextlib.contextmanager
    def _use_reader(self) -> Iterator[_Reader]:
        """The current reader, re-opened first when the database file was replaced."""
        if self._closed:
            raise InputError("the serving engine is closed")
        ident = self.target.ident()
        with self._lock:
            reader = self._reader
            if ident is not None and ident != reader.ident:
                fresh = self._replacement()
                if fresh is not None:
                    reader.retired = True
                    self._reader = fresh
                    if reader.refs == 0:
                        reader.close()
                    reader = fresh
                    if self._watcher is not None and isinstance(
                        fresh.retriever.vectors, HnswVectors
                    ):  # the watcher's updates go to the new reader's vectors from now on
                        share_live(fresh.retriever.vectors)
            reader.refs += 1
        try:
            yield reader
        finally:
            with self._lock:
                reader.refs -= 1
                if reader.retired and reader.refs == 0:
                    reader.close()

    def _replacement(self) -> _Reader | None:
        """A reader of a new database file (a rebuild), once that file has published a
        generation; until then (the rebuild is still writing it: no BM25 engine yet, nothing
        published) None, and the old reader keeps answering. Checked at most every
        :data:`_REOPEN_RETRY_S` (called with the engine lock held)."""
        now = time.monotonic()
        if now < self._reopen_after:
            return None
        self._reopen_after = now + _REOPEN_RETRY_S
        if self.target.published_generation() < 1:
            return None
        try:
            return self._open_reader()
        except RagError as exc:  # manifest or engines not in place yet
            log.info("rebuilt index not ready for reading yet: %s", exc)
            return None

    # -- parameters ---------------------------------------------------------------------
    @staticmethod
    def _check_query(query: object) -> str:
        if not isinstance(query, str):
            raise InputError(f"query must be a string, got {type(query).__name__}")
        return query

    @staticmethod
    def _check_int(name: str, value: object, lo: int, hi: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise InputError(f"{name} must be an integer from {lo} to {hi}, got {value!r}")
        return value

    @staticmethod
    def _check_strategy(strategy: object) -> str:
        if not isinstance(strategy, str):
            raise InputError(f"strategy must be a string, got {type(strategy).__name__}")
        try:
            return parse_search_spec(strategy).name
        except ConfigError as exc:
            raise InputError(str(exc)) from exc

    def _strict_bm25(self, reader: _Reader, strategy: str) -> None:
        if (
            self._settings.bm25.strict
            and reader.retriever.bm25 is None
            and not strategy.startswith("dense")
        ):
            raise SearchError("bm25 index unavailable and bm25.strict is set")

    def _count_fallbacks(self, reader: _Reader, result: SearchResult, strategy: str) -> None:
        with self._lock:
            if result.bm25_timed_out:
                self._fallbacks["bm25_timeout"] += 1
            elif result.fallback_used:
                self._fallbacks["dense_unavailable"] += 1
            if reader.retriever.bm25 is None and not strategy.startswith("dense"):
                self._fallbacks["bm25_unavailable"] += 1

    @staticmethod
    def _cacheable(result: SearchResult) -> bool:
        """Answers given while the index was still embedding a generation change within it
        (``ragloom index`` publishes before embedding): those are not cached."""
        return result.vectors_complete and not result.fallback_used

    def _finish(
        self,
        out: dict[str, Any],
        route: str,
        strat: str,
        gen: int,
        ids: list[str],
        hit: bool,
        t0: float,
    ) -> dict[str, Any]:
        """Log the answer (for feedback), stamp its latency and freshness and count it in the
        metrics."""
        out["pending_changes"] = self._may_miss_a_change(gen)
        elapsed = time.perf_counter() - t0
        out["latency_ms"] = elapsed * 1000
        if self._query_log is not None:
            self._query_log.submit(
                QueryLogEntry(
                    out["query_id"],
                    route,
                    out["query"],
                    strat,
                    gen,
                    tuple(ids),
                    time.time(),
                    latency_ms=out["latency_ms"],
                )
            )
        self.metrics.observe_query(route, hit, elapsed)
        return out

    def _answer(
        self,
        r: _Reader,
        key: Callable[[int], tuple[object, ...]],
        compute: Callable[[], tuple[dict[str, Any], SearchResult]],
    ) -> tuple[dict[str, Any], bool]:
        """The cached body for ``key`` at the published generation, else computed once for
        all identical concurrent requests (single flight: they wait for the first and share
        its answer, reported as a cache hit). True when this call did not compute it."""
        k0 = key(r.retriever.store.generation())
        body = self._results.get(k0)
        if body is not None:
            return body, True
        with self._lock:
            flight = self._inflight.get(k0)
            leader = flight is None
            if flight is None:
                flight = self._inflight[k0] = _Flight()
        if not leader:
            flight.done.wait(_FLIGHT_WAIT_S)
            if flight.body is not None:
                self._results.count_coalesced()
                return flight.body, True
            body, _ = compute()  # the first one failed or took too long: answer alone
            return body, False
        try:
            body, res = compute()
            if self._cacheable(res):
                self._results.put(key(res.generation), body)
            flight.body = body
        finally:
            with self._lock:
                self._inflight.pop(k0, None)
            flight.done.set()
        return body, False

    # -- queries ------------------------------------------------------------------------
    def _bounded(self, fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """``fn()`` within ``timeouts.query_ms``: past it the caller gets
        TimeoutError_ (HTTP 504, an MCP tool error) while the computation runs on and its
        answer is cached for the next ask. Typed errors of ``fn`` pass through."""
        if self._closed:
            raise InputError("the serving engine is closed")
        limit_ms = self._settings.timeouts.query_ms
        fut = self._compute.submit(fn)
        try:
            return fut.result(timeout=limit_ms / 1000.0)
        except FutureTimeout:
            with self._lock:
                self._fallbacks["query_timeout"] += 1
            raise TimeoutError_(
                f"the query did not finish within timeouts.query_ms = {limit_ms:g} ms "
                "(it runs on; its answer is cached for the next ask)"
            ) from None

    @_time_limited
    def search(
        self,
        query: str,
        *,
        top_k: int | None = None,
        strategy: str | None = None,
        explain: bool = False,
        sources: Sequence[str] | None = None,
    ) -> dict[str, Any]:
        """Ranked hits for ``query`` (the dict of docs/serving.md "search").

        ``sources`` (e.g. ``["code", "docs", "commits"]``) asks the synced sources of the
        index in parallel and fuses them (docs/sources.md); the answer then adds ``sources``
        (each source's status, count and latency) and each hit its ``source``. Without it, or
        with ``["code"]`` alone, only the code index answers (cached). Bounded by
        ``timeouts.query_ms`` (TimeoutError_ past it).
        """
        t0 = time.perf_counter()
        s = self._settings
        query = self._check_query(query)
        k = self._check_int("top_k", s.ranking.top_k if top_k is None else top_k, 1, MAX_TOP_K)
        strat = self._check_strategy(s.ranking.strategy if strategy is None else strategy)
        explain = bool(explain)
        names = self._check_sources(sources)
        if names is not None:
            return self._search_sources(query, names, k, strat, explain, t0)
        with self._use_reader() as r:
            self._strict_bm25(r, strat)

            def key(gen: int) -> tuple[object, ...]:
                return result_key(
                    "search", query, strategy=strat, top_k=k, explain=explain,
                    epoch=r.epoch, generation=gen,
                )  # fmt: skip

            def compute() -> tuple[dict[str, Any], SearchResult]:
                res = r.retriever.search(query, top_k=k, strategy=strat, explain=explain)
                self._count_fallbacks(r, res, strat)
                return {
                    "generation": res.generation,
                    "strategy": res.strategy,
                    "hits": [hit_json(h, explain, res.generation) for h in res.hits],
                    "notes": list(res.notes),
                }, res

            body, hit = self._answer(r, key, compute)
        qid = uuid.uuid4().hex
        hits = [{**h, "ranks": dict(h["ranks"])} for h in body["hits"]]
        out = {
            "query_id": qid,
            "latency_ms": 0.0,
            "cache_hit": hit,
            "generation": body["generation"],
            "query": query,
            "strategy": body["strategy"],
            "top_k": k,
            "hits": hits,
            "notes": list(body["notes"]),
        }
        return self._finish(
            out, "search", strat, body["generation"], [h["id"] for h in hits], hit, t0
        )

    @_time_limited
    def context(
        self,
        query: str,
        *,
        top_k: int | None = None,
        budget: int | None = None,
        strategy: str | None = None,
        format: str | None = None,
        sources: Sequence[str] | None = None,
        structure: str | None = None,
    ) -> dict[str, Any]:
        """A token-budgeted context for ``query`` (the dict of docs/serving.md "context");
        ``sources`` as in :meth:`search` (non-code items rendered with their attribution);
        ``structure`` as ``assembly.structure`` (docs/graph.md). Bounded by
        ``timeouts.query_ms``."""
        t0 = time.perf_counter()
        s = self._settings
        query = self._check_query(query)
        k = self._check_int(
            "top_k", s.assembly.context_top_k if top_k is None else top_k, 1, MAX_TOP_K
        )
        tokens = self._check_int(
            "budget", s.assembly.budget if budget is None else budget, 1, 10**9
        )
        strat = self._check_strategy(s.ranking.strategy if strategy is None else strategy)
        fmt_in = s.assembly.format if format is None else format
        fmt = _FORMAT_ALIASES.get(fmt_in, fmt_in) if isinstance(fmt_in, str) else fmt_in
        if fmt not in FORMATS:
            raise InputError(
                f"format must be one of {', '.join(FORMATS)} (or text), got {fmt_in!r}"
            )
        counter_name = s.assembly.counter
        mode = s.assembly.structure if structure is None else structure
        if mode not in STRUCTURE_MODES:
            raise InputError(f"structure must be one of {', '.join(STRUCTURE_MODES)}, got {mode!r}")
        names = self._check_sources(sources)
        if names is not None:
            return self._context_sources(
                query, names, k, strat, tokens, cast(Format, fmt), counter_name, t0
            )
        with self._use_reader() as r:
            self._strict_bm25(r, strat)

            def key(gen: int) -> tuple[object, ...]:
                return result_key(
                    "context", query, strategy=strat, top_k=k, budget=tokens, format=fmt,
                    counter=counter_name, epoch=r.epoch, generation=gen,
                    structure=mode,
                )  # fmt: skip

            def compute() -> tuple[dict[str, Any], SearchResult]:
                res = r.retriever.search(query, top_k=k, strategy=strat)
                self._count_fallbacks(r, res, strat)
                body = self._assemble(
                    r, query, res, tokens, cast(Format, fmt), counter_name,
                    mode,
                )  # fmt: skip
                return body, res

            body, hit = self._answer(r, key, compute)
        qid = uuid.uuid4().hex
        out = {
            "query_id": qid,
            "latency_ms": 0.0,
            "cache_hit": hit,
            "generation": body["generation"],
            "query": query,
            "format": fmt,
            "strategy": body["strategy"],
            "top_k": k,
            "budget": tokens,
            "context": body["context"],
            "parts": [dict(p) for p in body["parts"]],
            "stats": dict(body["stats"]),
            "notes": list(body["notes"]),
            "hit_ids": list(body["hit_ids"]),
        }
        if "structure" in body:
            out["structure"] = dict(body["structure"])
        return self._finish(
            out, "context", strat, body["generation"], list(body["hit_ids"]), hit, t0
        )

    # -- several sources (docs/sources.md) ----------------------------------------------
    @staticmethod
    def _check_sources(sources: Sequence[str] | None) -> list[str] | None:
        """Source names asked for, or None for the code index alone (the cached path)."""
        if sources is None:
            return None
        if isinstance(sources, str) or not all(isinstance(n, str) for n in sources):
            raise InputError("sources must be a list of source names, e.g. ['code', 'docs']")
        from ragloom.sources.registry import parse_source_list, source_factories

        try:
            names = parse_source_list(list(sources))
        except RagError as exc:
            raise InputError(str(exc)) from exc
        known = source_factories()
        unknown = [n for n in names if n not in known]
        if unknown:
            raise InputError(
                f"unknown source {unknown[0]!r}; known sources: {', '.join(sorted(known))}"
            )
        return None if names == ["code"] else names

    def _multi_search(
        self, r: _Reader, query: str, names: list[str], k: int, strat: str, explain: bool
    ) -> Any:
        from ragloom.sources.multi import SourceSet

        options = {"code": {"strategy": strat, "explain": explain}}
        ss = SourceSet(self.root, self.index_dir, names, options=options, index=r.index)
        try:
            return ss.search(query, top_k=k, total_ms=self._settings.timeouts.query_ms)
        finally:
            ss.close()

    def _search_sources(
        self, query: str, names: list[str], k: int, strat: str, explain: bool, t0: float
    ) -> dict[str, Any]:
        with self._use_reader() as r:
            res = self._multi_search(r, query, names, k, strat, explain)
            gen = r.retriever.store.generation()
        hits: list[dict[str, Any]] = []
        for h in res.hits:
            if h.source == "code" and h.payload is not None:
                hits.append(
                    {**hit_json(h.payload, explain, gen), "source": "code", "score": h.score}
                )
            else:
                d = h.to_dict()
                if explain:
                    d["explain"] = h.explain
                else:
                    d.pop("text", None)
                hits.append(d)
        qid = uuid.uuid4().hex
        out = {
            "query_id": qid,
            "latency_ms": 0.0,
            "cache_hit": False,
            "generation": gen,
            "query": query,
            "strategy": strat,
            "top_k": k,
            "hits": hits,
            "notes": list(res.notes),
            "sources": res.sources_json(),
            "timings_ms": dict(res.timings_ms),
        }
        return self._finish(out, "search", strat, gen, [str(h["id"]) for h in hits], False, t0)

    def _context_sources(
        self,
        query: str,
        names: list[str],
        k: int,
        strat: str,
        budget: int,
        fmt: Format,
        counter: str,
        t0: float,
    ) -> dict[str, Any]:
        from ragloom.sources.context import assemble_sources

        with self._use_reader() as r:
            res = self._multi_search(r, query, names, k, strat, False)
            gen = r.retriever.store.generation()
            ctx = assemble_sources(
                r.index, query, res.hits, budget=budget, format=fmt, counter=counter
            )
        parts = _parts_json(ctx.parts)
        hit_ids = [h.id for h in res.hits]
        qid = uuid.uuid4().hex
        out = {
            "query_id": qid,
            "latency_ms": 0.0,
            "cache_hit": False,
            "generation": gen,
            "query": query,
            "format": fmt,
            "strategy": strat,
            "top_k": k,
            "budget": budget,
            "context": ctx.text,
            "parts": parts,
            "stats": ctx.stats.to_dict(),
            "notes": list(res.notes),
            "hit_ids": hit_ids,
            "sources": res.sources_json(),
        }
        return self._finish(out, "context", strat, gen, hit_ids, False, t0)

    def _assemble(
        self,
        r: _Reader,
        query: str,
        result: SearchResult,
        budget: int,
        fmt: Format,
        counter: str,
        structure: StructureMode = "off",
    ) -> dict[str, Any]:
        """What ``Index.get_context`` does after its search, keeping the search's generation."""
        retriever = r.retriever
        embeddings = result.embeddings
        if len(embeddings) < len(result.hits):
            embeddings = retriever.embeddings_for_hits(result.hits)
        full = TokenBudget.for_total(budget)
        policy = AssemblyPolicy(format=fmt)
        tc = get_counter(counter)
        with retriever.telemetry.span("assembly", {"hits": len(result.hits)}) as span:
            ctx = assemble_context(
                query,
                result.hits,
                root=self.root,
                budget=structure_budget(full, structure),
                policy=policy,
                counter=tc,
                embeddings=embeddings,
            )
            if structure != "off":
                ctx = r.index.add_structure(ctx, structure, full, policy, tc)
            span.set_attribute("parts", len(ctx.parts))
            span.set_attribute("tokens", ctx.stats.tokens_total)
        parts = _parts_json(ctx.parts)
        extra = {"structure": ctx.structure} if ctx.structure is not None else {}
        return {
            **extra,
            "generation": result.generation,
            "strategy": result.strategy,
            "context": ctx.text,
            "parts": parts,
            "stats": ctx.stats.to_dict(),
            "notes": list(result.notes),
            "hit_ids": [h.id for h in result.hits],
        }

    # -- status -------------------------------------------------------------------------
    def graph(
        self,
        query: str,
        symbol: str,
        *,
        path: str | None = None,
        min_confidence: float | None = None,
        limit: int = 200,
    ) -> dict[str, Any]:
        """One code-graph answer (``defs``, ``refs``, ``callers``, ``callees``; the shape of
        :func:`ragloom.graph.views.graph_answer`), from the served generation's graph."""
        from ragloom.graph import DEFAULT_MIN_CONFIDENCE
        from ragloom.graph.views import graph_answer

        if query not in ("defs", "refs", "callers", "callees"):
            raise InputError(
                f"unknown graph query {query!r}; choose from defs, refs, callers, callees"
            )
        if not isinstance(symbol, str):
            raise InputError(f"symbol must be a string, got {type(symbol).__name__}")
        limit = self._check_int("limit", limit, 1, 10_000)
        conf = DEFAULT_MIN_CONFIDENCE if min_confidence is None else float(min_confidence)
        with self._use_reader() as r:
            return self._bounded(
                lambda: graph_answer(
                    r.index.graph(),
                    query,  # type: ignore[arg-type]
                    symbol,
                    path=path,
                    min_confidence=conf,
                    limit=limit,
                )
            )

    def repo_map(
        self, query: str | None = None, *, budget: int | None = None, format: str = "text"
    ) -> dict[str, Any]:
        """A repository map within ``budget`` tokens (``Index.repo_map``; default: a quarter
        of ``assembly.budget``), from the served generation's graph."""
        s = self._settings
        if query is not None:
            query = self._check_query(query)
        tokens = self._check_int(
            "budget", max(1, s.assembly.budget // 4) if budget is None else budget, 1, 10**6
        )
        counter = s.assembly.counter
        with self._use_reader() as r:
            return self._bounded(
                lambda: r.index.repo_map(query, budget=tokens, format=format, counter=counter)
            )

    def status(self) -> dict[str, Any]:
        """``IndexStatus.to_dict()`` plus the engine's generation, caches, batcher and jobs."""
        with self._use_reader() as r:
            st = r.index.status(freshness=False).to_dict()
            gen = r.retriever.store.generation()
            epoch = r.epoch
        with self._lock:
            self._bm25_state = (time.monotonic(), str(st.get("bm25_status", "uninitialized")))
            running = sum(1 for j in self._jobs.values() if j.state in ("queued", "running"))
        st.update(
            {
                "generation": gen,
                "epoch": epoch,
                "cache": self._results.to_dict(),
                "embedding_cache": self._embedding_cache.to_dict(),
                "batching": self._batcher.stats.to_dict() if self._batcher else None,
                "jobs": running,
                "fallbacks": dict(self._fallbacks),
                "watch": self.watch_state(),
            }
        )
        return st

    # -- jobs ---------------------------------------------------------------------------
    def start_reindex(self) -> str:
        """Start an incremental re-index in a background thread; the running job's id when one
        runs already. Queries keep answering from the published generation meanwhile."""
        self.target.check_reindex()
        with self._lock:
            if self._closed:
                raise InputError("the serving engine is closed")
            if self._running_job is not None:
                return self._running_job
            job = _Job(uuid.uuid4().hex)
            self._jobs[job.id] = job
            self._running_job = job.id
            thread = threading.Thread(
                target=self._run_job, args=(job,), name="ragloom-reindex", daemon=True
            )
            self._job_thread = thread
        thread.start()
        return job.id

    def _run_job(self, job: _Job) -> None:
        def progress(phase: str, done: int, total: int) -> None:
            job.phase, job.done, job.total = phase, done, total

        job.state = "running"
        job.started_at = time.time()
        try:
            writer = self.target.open_index(self._embedder)
            stats = writer.index(progress=progress)
            job.stats = stats.to_dict()
            job.state = "succeeded"
        except Exception as exc:  # reported through job(); the engine keeps serving
            job.error = f"{type(exc).__name__}: {exc}"
            job.state = "failed"
            log.warning("re-index job %s failed: %s", job.id, exc)
        finally:
            job.finished_at = time.time()
            self.metrics.jobs_finished.labels(job.state).inc()
            with self._lock:
                self._running_job = None

    def job(self, job_id: str) -> dict[str, Any] | None:
        """The job's state and progress, or None for an unknown id."""
        with self._lock:
            j = self._jobs.get(job_id)
            return None if j is None else j.to_dict()

    def wait_job(self, job_id: str, timeout: float | None = None) -> dict[str, Any] | None:
        """Block until the job finished (tests, the CLI); its final state."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            j = self.job(job_id)
            if j is None or j["state"] in ("succeeded", "failed"):
                return j
            if deadline is not None and time.monotonic() > deadline:
                return j
            time.sleep(0.02)

    # -- watching -----------------------------------------------------------------------
    def start_watching(
        self,
        *,
        debounce_ms: int = DEFAULT_DEBOUNCE_MS,
        rescan_s: float = DEFAULT_RESCAN_S,
        on_batch: Callable[[BatchReport], None] | None = None,
    ) -> bool:
        """Follow the work tree (:class:`ragloom.watch.Watcher`) in a background thread: each
        batch of edits is applied as one incremental update with the loaded model, and queries
        pick the new generation up. Only for a local folder index; False (with the reason in
        :meth:`watch_state`) for a PostgreSQL repository or a closed engine. Idempotent."""
        from ragloom.server.target import FolderTarget
        from ragloom.watch import Watcher

        with self._lock:
            if self._closed:
                return False
            if self._watcher is not None:
                return True
            if not isinstance(self.target, FolderTarget):
                self._watch_error = "only a local folder index is watched"
                return False
            writer = self.target.open_index(self._doc_embedder)
            vectors = self._reader.retriever.vectors
            if isinstance(vectors, HnswVectors):
                # the watcher's updates change the readers' vector index in memory (no file
                # round trip per edit); it is saved when the tree has been quiet a while
                share_live(vectors)
            watcher = Watcher(
                writer,
                debounce_ms=debounce_ms,
                rescan_s=rescan_s,
                on_batch=on_batch,
                on_message=lambda m: log.info("watch: %s", m),
                on_idle=self._persist_vectors,
            )
            self._watcher = watcher

        def run() -> None:
            try:
                watcher.run()
            except Exception as exc:  # a deleted root, a failing update: serving goes on
                self._watch_error = f"{type(exc).__name__}: {exc}"
                log.warning("stopped watching %s: %s", self.root, exc)
            finally:
                writer.close()

        thread = threading.Thread(target=run, name="ragloom-watch", daemon=True)
        self._watch_thread = thread
        thread.start()
        return True

    def stop_watching(self, timeout: float | None = 30.0) -> None:
        """Stop the watcher after the batch it is applying (nothing is left half-written) and
        save the vectors it changed in memory."""
        watcher, thread = self._watcher, self._watch_thread
        if watcher is not None:
            watcher.stop()
        if thread is not None:
            thread.join(timeout)
        if watcher is not None:
            self._persist_vectors()
            unshare_live(self.index_dir / "vectors", persist=False)

    def _persist_vectors(self) -> None:
        """Save the live vector index when it is ahead of its file, under the write lock (when
        another process holds it, its update writes a complete file itself)."""
        try:
            with WriteLock(self.index_dir):
                persist_live(self.index_dir / "vectors")
        except IndexLockedError:
            log.info("vector index not saved now: another update holds the lock")
        except (OSError, DbError) as exc:
            log.warning("could not save the vector index: %s", exc)

    def watch_state(self) -> dict[str, Any]:
        """``watching``, ``ready`` (the update at start is done: edits from now on are followed),
        ``pending`` (a change seen and not yet published), ``batches`` applied, the
        ``generation`` the last one published, the last batch (as ``ragloom watch --json`` prints it) and ``error``."""
        w = self._watcher
        thread = self._watch_thread
        alive = thread is not None and thread.is_alive()
        return {
            "watching": alive,
            "pending": bool(w is not None and alive and w.pending),
            "batches": w.batches if w is not None else 0,
            "ready": bool(w is not None and w.last_report is not None),
            "generation": w.last_generation if w is not None and w.last_report else None,
            "last_batch": w.last_report.to_dict() if w and w.last_report else None,
            "error": self._watch_error or None,
        }

    def _may_miss_a_change(self, generation: int) -> bool:
        """Whether an answer read from ``generation`` may miss a change the watcher knew of:
        one is seen and not yet published, or was published after that generation."""
        w = self._watcher
        if w is None:
            return False
        return w.pending or w.last_generation > generation

    # -- feedback -----------------------------------------------------------------------
    def _feedback(self) -> FeedbackBase:
        """The feedback store, with every answer given so far in its query log."""
        if self._feedback_store is None or self._query_log is None:
            raise DbError(f"feedback is unavailable: {self._feedback_error}")
        self._query_log.flush()
        return self._feedback_store

    def record_feedback(
        self, query_id: str, chunk_id: str, rating: str, comment: str | None = None
    ) -> dict[str, Any]:
        """Store a rating of one chunk of an answer; InputError for an unknown query_id or a
        rating outside helpful | not_helpful | partially_helpful."""
        return self._feedback().record_feedback(query_id, chunk_id, rating, comment)

    def track_context_usage(self, query_id: str, used_chunk_ids: Sequence[str]) -> dict[str, Any]:
        """Record which chunks of an answer the caller used."""
        return self._feedback().track_context_usage(query_id, used_chunk_ids)

    def feedback_stats(self, query_id: str) -> dict[str, Any]:
        """total, helpful/not_helpful/partially_helpful counts, avg_rating, used_chunk_ids."""
        return self._feedback().stats(query_id)

    def query_feedback(self, query_id: str) -> list[dict[str, Any]]:
        """Every rating of ``query_id`` (tamma ``getQueryFeedback``)."""
        store = self._feedback()
        store.stats(query_id)  # InputError for an unknown id
        return store.query_feedback(query_id)

    # -- metrics ------------------------------------------------------------------------
    def _metrics_snapshot(self) -> dict[str, Any]:
        r = self._reader
        now = time.monotonic()
        with self._lock:
            stamp, bm25_status = self._bm25_state
        if now - stamp > _STATUS_TTL_S:
            bm25_status = self.target.bm25_status()
            with self._lock:
                self._bm25_state = (now, bm25_status)
        with self._lock:
            jobs: dict[str, int] = {"queued": 0, "running": 0, "succeeded": 0, "failed": 0}
            for j in self._jobs.values():
                jobs[j.state] = jobs.get(j.state, 0) + 1
            fallbacks = dict(self._fallbacks)
        try:
            generation = r.retriever.store.generation()
        except Exception:  # a reader closed under us: report the last epoch's view as 0
            generation = 0
        return {
            "caches": {
                "result": self._results.to_dict(),
                "embedding": self._embedding_cache.to_dict(),
            },
            "batching": self._batcher.stats.to_dict() if self._batcher else {},
            "bm25_up": 1 if r.retriever.bm25 is not None else 0,
            "bm25_status": bm25_status,
            "fallbacks": fallbacks,
            "generation": generation,
            "epoch": r.epoch,
            "jobs": jobs,
        }

    def metrics_text(self) -> str:
        """Prometheus exposition text of this engine's registry."""
        return self.metrics.text()

    def observe_request(self, route: str, status: int, seconds: float) -> None:
        """Count one served request (the HTTP and MCP servers call this)."""
        self.metrics.observe_request(route, status, seconds)

    # -- settings and lifecycle ---------------------------------------------------------
    def apply_settings(self, settings: Settings) -> None:
        """Live reload: ranking and assembly defaults apply to the next request; a changed
        cache section replaces the caches (emptied). Queries in flight keep the settings they
        started with (each reads ``self._settings`` once)."""
        with self._lock:
            old = self._settings
            if settings.cache != old.cache:
                self._results = ResultCache(
                    ttl_s=settings.cache.ttl_s,
                    max_entries=settings.cache.max_entries,
                    enabled=settings.cache.enabled,
                )
                self._embedding_cache.enabled = settings.cache.enabled
                self._embedding_cache.clear()
            if self._batcher is not None:
                self._batcher.window_s = max(0.0, settings.server.batch_window_ms) / 1000.0
            self._reader.retriever.bm25_timeout_ms = settings.timeouts.bm25_ms
            self._settings = settings

    def reload_settings(self) -> dict[str, Any]:
        """Live reload on request (HTTP ``POST /config/reload``, the MCP ``reload_config``
        tool): re-read the repository's ``ragloom.toml`` / ``[tool.ragloom]`` and the
        environment, and apply them as :meth:`apply_settings` does.

        The ``server`` and ``storage`` sections keep their running values (host, port, token,
        the request limits and the index served are fixed when the server starts); their keys
        report the source ``running``.
        A bad configuration raises ConfigError (one line, with the key path) and nothing
        changes. Returns ``{"changed": [dotted keys], "settings", "sources", "files"}``.
        """
        loaded = load_settings(self.root)
        current = self.settings
        new = loaded.settings.model_copy(
            update={"server": current.server, "storage": current.storage}
        )
        before, after = current.flat(), new.flat()
        changed = sorted(k for k, v in after.items() if before.get(k) != v)
        self.apply_settings(new)
        sources = {
            k: ("running" if k.startswith(_FIXED_SECTIONS) else v)
            for k, v in loaded.sources.items()
        }
        return {
            "changed": changed,
            "settings": new.public_dict(),
            "sources": sources,
            "files": [str(p) for p in loaded.files],
        }

    def close(self) -> None:
        """Stop the query log writer, wait for a running job, close the reader."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            thread = self._job_thread
        self.stop_watching()
        if thread is not None:
            thread.join()
        self._compute.shutdown(wait=True)  # queries in flight finish before the reader closes
        if self._query_log is not None:
            self._query_log.close()
        if self._feedback_store is not None:
            self._feedback_store.close()
        with self._lock:
            self._reader.retired = True
            if self._reader.refs == 0:
                self._reader.close()

    def __enter__(self) -> ServingEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
