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

This module defines :class:`ServingEngine` with its core (construction, ``search``, ``context``,
closing); its other concerns are mixins in their own modules: ``ragloom.server.readers``
(opening, sharing and replacing readers), ``ragloom.server.answers`` (parameter checks, the
result cache, the time limit, JSON shaping), ``ragloom.server.multisource`` (several sources),
``ragloom.server.inspection`` (the code graph, the map, status), ``ragloom.server.jobs``
(re-index jobs), ``ragloom.server.watching`` (the watcher) and ``ragloom.server.operations``
(feedback, metrics, settings reload).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, cast

from ragloom.api import DEFAULT_INDEX_DIRNAME, Index
from ragloom.assemble.budget import FORMATS, Format
from ragloom.assemble.structure import STRUCTURE_MODES
from ragloom.assemble.tokens import counter_key
from ragloom.embed.base import Embedder
from ragloom.errors import DbError, IncompatibleIndexError, InputError, RagError
from ragloom.paths import existing_dir
from ragloom.retrieve.reader import DB_NAME
from ragloom.retrieve.search import MAX_TOP_K, SearchResult
from ragloom.server.answers import _FLIGHT_WAIT_S as _FLIGHT_WAIT_S
from ragloom.server.answers import _Flight, hit_json
from ragloom.server.answers import _parts_json as _parts_json
from ragloom.server.cache import EmbeddingCache, ResultCache, result_key
from ragloom.server.embedding import BatchingEmbedder, CachingEmbedder
from ragloom.server.feedback import FeedbackBase, QueryLogger, log_bytes
from ragloom.server.inspection import _STATUS_TTL_S as _STATUS_TTL_S
from ragloom.server.inspection import _InspectionMixin
from ragloom.server.jobs import _Job
from ragloom.server.metrics import EngineMetrics
from ragloom.server.multisource import _SourcesMixin
from ragloom.server.operations import _FIXED_SECTIONS as _FIXED_SECTIONS
from ragloom.server.operations import _OperationsMixin
from ragloom.server.readers import _REOPEN_RETRY_S as _REOPEN_RETRY_S
from ragloom.server.readers import BM25_WORKERS as BM25_WORKERS
from ragloom.server.readers import _Reader
from ragloom.server.target import FolderTarget, PostgresTarget, ServingTarget
from ragloom.settings import Settings, load_settings
from ragloom.watch import Watcher

__all__ = ["ServingEngine", "hit_json"]

log = logging.getLogger("ragloom")

_FORMAT_ALIASES = {"text": "plain"}
"""Settings name the plain format ``text``; the assembler calls it ``plain``."""
P = ParamSpec("P")
_COMPUTE_THREADS = 64
"""Threads answering queries under ``timeouts.query_ms`` (above the HTTP server's 40 request
threads, so a request never queues for one)."""


def _time_limited(
    method: Callable[Concatenate[ServingEngine, P], dict[str, Any]],
) -> Callable[Concatenate[ServingEngine, P], dict[str, Any]]:
    """Run a query method on the engine's query pool within ``timeouts.query_ms``
    (:meth:`ServingEngine._bounded`)."""

    @functools.wraps(method)
    def bounded(self: ServingEngine, /, *args: P.args, **kwargs: P.kwargs) -> dict[str, Any]:
        return self._bounded(functools.partial(method, self, *args, **kwargs))

    return bounded


class ServingEngine(_OperationsMixin, _InspectionMixin, _SourcesMixin):
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
                self._dense_off = True
        if base is not None and base.model_id != manifest.embedding_model:
            asked = settings.embedding.model or getattr(base, "spec", None) or base.model_id
            raise IncompatibleIndexError(
                f"index was embedded with {manifest.embedding_model} "
                f"({manifest.embedding_dim}-d) but the configured query embedder is "
                f"{base.model_id}; run `ragloom index {root} --model {asked}` to re-embed "
                f"every chunk with it, or set embedding.model to the index's model"
            )
        if base is not None:
            # the dimension is asked only of a model that can answer now: a remote model
            # whose server is down must not keep the server from starting (its queries
            # answer from BM25 with a note until it is back)
            try:
                dim = base.dim
            except RagError as exc:
                log.warning("query embedder %s cannot answer now: %s", base.model_id, exc)
                dim = manifest.embedding_dim
            if dim != manifest.embedding_dim:
                raise IncompatibleIndexError(
                    f"index was embedded with {manifest.embedding_model} "
                    f"({manifest.embedding_dim}-d) but the query embedder gives {dim}-d "
                    f"vectors; run `ragloom index {root}` to re-embed every chunk"
                )
        self._doc_embedder = base
        """The loaded model itself: the watcher embeds documents with it (no second load,
        and the query-embedding cache is not filled with chunk texts)."""
        self._watcher: Watcher | None = None
        self._watch_thread: threading.Thread | None = None
        self._watch_error = ""
        if base is not None:
            self._batcher = BatchingEmbedder(
                base, window_ms=settings.server.batch_window_ms, company=lambda: self._computing
            )
            self._embedder = CachingEmbedder(self._batcher, self._embedding_cache)
        self._init_switching(manifest.embedding_model, manifest.embedding_dim)
        self._epoch = 0
        self._reopen_after = 0.0
        self._inflight: dict[tuple[object, ...], _Flight] = {}
        self._reader: _Reader = self._open_reader()
        self._fallbacks = {
            "dense_unavailable": 0,
            "bm25_unavailable": 0,
            "bm25_timeout": 0,
            "query_timeout": 0,
            "overloaded": 0,
        }
        self._computing = 0
        """New answers being computed now (admission control, ``server.max_inflight``)."""
        self._queued = 0
        self._compute = ThreadPoolExecutor(_COMPUTE_THREADS, thread_name_prefix="ragloom-query")
        self._jobs: dict[str, _Job] = {}
        self._running_job: str | None = None
        self._job_thread: threading.Thread | None = None
        self._bm25_state: tuple[float, str] = (0.0, "uninitialized")
        self._feedback_store: FeedbackBase | None = None
        self._feedback_readonly: FeedbackBase | None = None
        """The folder's feedback database opened read-only, for the figures, where it could not
        be opened to write (a read-only index folder); opened at the first read."""
        self._query_log: QueryLogger | None = None
        self._feedback_error = ""
        try:
            self._feedback_store = self.target.open_feedback()
            self._feedback_store.max_log_bytes = log_bytes(settings)
            self._query_log = QueryLogger(self._feedback_store)
        except DbError as exc:  # a read-only index folder still serves queries
            self._feedback_error = str(exc)
            log.warning("feedback and the query log are off: %s", exc)
        self.worker_index = 0
        """This process's worker number under ``serve http --workers N`` (0: the primary)."""
        self.worker_count = 1
        """How many worker processes serve this index (:meth:`set_worker`)."""
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

    def set_worker(self, index: int, count: int) -> None:
        """Declare this engine worker ``index`` of ``count`` processes serving the same index
        (``serve http --workers``, docs/serving.md "Workers"). With more than one: re-index
        jobs' records are shared through files (a job started on one worker can be polled on
        another), and feedback naming an answer this worker does not know waits briefly for
        the other workers' query logs (up to 3x their gathering interval)."""
        from ragloom.server.feedback import QUERY_LOG_GATHER_S

        self.worker_index, self.worker_count = index, count
        if count > 1:
            self._jobs_dir = self.target.jobs_dir()
            if self._feedback_store is not None:
                self._feedback_store.lookup_wait_s = 3 * QUERY_LOG_GATHER_S

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
                    epoch=r.epoch, generation=gen, ranking=r.ranking_state(),
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
            # checked on every answer, cached or not: a file may change at any time
            changed = self._changed_files(r, [h["path"] for h in body["hits"]], body["generation"])
        qid = uuid.uuid4().hex
        hits = [
            {**h, "ranks": dict(h["ranks"]), "stale": h["path"] in changed} for h in body["hits"]
        ]
        notes = list(body["notes"])
        if changed:
            notes.append(
                f"{len(changed)} of the hits' files changed since indexing, so their lines "
                "may have moved: " + ", ".join(sorted(changed)[:5])
            )
        out = {
            "query_id": qid,
            "latency_ms": 0.0,
            "cache_hit": hit,
            "generation": body["generation"],
            "query": query,
            "strategy": body["strategy"],
            "top_k": k,
            "hits": hits,
            "notes": notes,
        }
        return self._finish(
            out, "search", strat, body["generation"], [h["id"] for h in hits], hit, t0
        )

    @staticmethod
    def _changed_files(r: _Reader, paths: Sequence[str], generation: int) -> set[str]:
        """Those of ``paths`` changed since indexing (:meth:`Index.changed_since_indexed`, its
        rows read once per generation); none when that cannot be read (a hit is never lost
        to this check)."""
        try:
            return r.index.changed_since_indexed(paths, generation)
        except (OSError, RagError) as exc:
            log.warning("could not check the hits' files: %s", exc)
            return set()

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
        counter: str | None = None,
    ) -> dict[str, Any]:
        """A token-budgeted context for ``query`` (the dict of docs/serving.md "context");
        ``sources`` as in :meth:`search` (non-code items rendered with their attribution);
        ``structure`` as ``assembly.structure`` (docs/graph.md); ``counter`` the token counter
        the budget is counted with (``assembly.counter`` when None). Bounded by
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
        counter_name = s.assembly.counter if counter is None else counter_key(counter)
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
                    structure=mode, ranking=r.ranking_state(),
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
        for store in (self._feedback_store, self._feedback_readonly):
            if store is not None:
                store.close()
        with self._lock:
            self._reader.retired = True
            if self._reader.refs == 0:
                self._reader.close()

    def __enter__(self) -> ServingEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
