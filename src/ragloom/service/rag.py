"""RagService: BM25 lifecycle, lenient and strict search, persistence and hybrid retrieval.

The service talks to a :class:`~ragloom.service.bm25_actor.Bm25Actor` (every request with a
client-side timeout, default 250 ms) and to a dense search backend (any callable
``dense(query, k) -> [(rowid, score)]``, async or sync; a sync one runs in a worker thread).

Behaviour (ploke-rag-plan.md section 3 C/D, ploke-bm25-notes.md; issue 5 item 2):

- :meth:`RagService.search_bm25` (lenient, the default): search; when BM25 answers nothing and
  the status is not Ready, retry while the status is Building or Uninitialized, up to
  ``retries`` (2) times, sleeping ``backoff_ms`` (50 ms, then 100 ms) before each retry; then
  answer from dense search with ``fallback_used=True``. An Empty or Error status falls back at
  once. A Ready index that matches nothing is a real empty answer (no fallback).
- :meth:`RagService.search_bm25_strict`: never falls back. Nothing found and status Empty
  raises ``SearchError("bm25 index empty")``; nothing found and any other status but Ready
  raises ``SearchError("bm25 index not ready")``.
- :meth:`RagService.hybrid_search`: dense errors propagate; BM25 errors (timeouts, actor
  failures) bubble as they are; when BM25 answers nothing while Building or Uninitialized (or
  Error) the dense list is fused alone and ``fallback_used`` is set.
- A request that outlives its timeout raises :class:`~ragloom.errors.TimeoutError_`.

Strict behaviour is opt-in per call (``strict=True``) or in :class:`Bm25Config`
(``strict_default``); lenient stays the default.

:class:`SyncRagService`, the blocking twin, is here too. Settings and constants live in
:mod:`ragloom.service.config`, the dense backend over an index folder in
:mod:`ragloom.service.dense`, the on-disk BM25 state for ``ragloom status`` in
:mod:`ragloom.service.index_state`; each is re-exported here.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar, cast

import numpy as np

from ragloom.errors import ConfigError, RagError, SearchError
from ragloom.retrieve.config import (
    STRATEGY_REGISTRY,
    Dense,
    Hybrid,
    RetrievalStrategy,
    Sparse,
)
from ragloom.retrieve.fusion import mmr_select, normalize_scores, rrf_fuse
from ragloom.retrieve.reader import DB_NAME
from ragloom.service.bm25_actor import (
    Bm25Actor,
    Bm25Status,
    Building,
    Empty,
    Error,
    Ready,
    StoreDocumentSource,
    Uninitialized,
)
from ragloom.service.config import (
    BM25_EMPTY_MESSAGE,
    BM25_NOT_READY_MESSAGE,
    DEFAULT_BACKOFF_MS,
    DEFAULT_RETRIES,
    HYBRID_CANDIDATES_MIN,
    Bm25Config,
    DenseSearch,
    EmbeddingLookup,
    Hits,
)
from ragloom.service.dense import IndexDense
from ragloom.service.index_state import bm25_state_for_index
from ragloom.service.persist import DEFAULT_SNAPSHOT_NAME
from ragloom.telemetry import (
    EVENT_PERSISTENCE_DONE,
    EVENT_PERSISTENCE_FAILURE,
    EVENT_PERSISTENCE_STARTED,
    EVENT_REBUILD_DONE,
    EVENT_REBUILD_FAILURE,
    EVENT_REBUILD_STARTED,
    EVENT_RETRY,
    Telemetry,
    get_telemetry,
)
from ragloom.types import Hit

__all__ = [
    "BM25_EMPTY_MESSAGE",
    "BM25_NOT_READY_MESSAGE",
    "DEFAULT_BACKOFF_MS",
    "DEFAULT_RETRIES",
    "HYBRID_CANDIDATES_MIN",
    "Bm25Config",
    "Bm25SearchResult",
    "DenseSearch",
    "EmbeddingLookup",
    "HybridResult",
    "IndexDense",
    "RagService",
    "SyncRagService",
    "bm25_state_for_index",
]

T = TypeVar("T")


@dataclass(slots=True)
class Bm25SearchResult:
    """A BM25 search answer and how it was obtained."""

    hits: Hits
    fallback_used: bool
    bm25_status: Bm25Status
    attempts: int
    bm25_results: int
    dense_results: int


@dataclass(slots=True)
class HybridResult:
    """Fused hits, the per-modality lists and what happened on the way."""

    hits: Hits
    strategy: str
    fallback_used: bool
    bm25_status: Bm25Status | None
    bm25: Hits = field(default_factory=list)
    dense: Hits = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=dict)


def _strategy(strategy: RetrievalStrategy | str) -> tuple[RetrievalStrategy, str]:
    if isinstance(strategy, str):
        make = STRATEGY_REGISTRY.get(strategy)
        if make is None:
            raise ConfigError(
                f"unknown strategy {strategy!r}; choose from {', '.join(STRATEGY_REGISTRY)}"
            )
        strategy = make(None, None)
    if isinstance(strategy, Dense):
        return strategy, "dense"
    if isinstance(strategy, Sparse):
        return strategy, "sparse"
    if isinstance(strategy, Hybrid):
        return strategy, "hybrid_mmr" if strategy.mmr is not None else "hybrid"
    raise ConfigError(f"unknown strategy {strategy!r}")


class RagService:
    """Async retrieval service over a BM25 actor and a dense backend (module docstring)."""

    def __init__(
        self,
        actor: Bm25Actor,
        dense: DenseSearch | None = None,
        *,
        config: Bm25Config | None = None,
        telemetry: Telemetry | None = None,
        embeddings: EmbeddingLookup | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.actor = actor
        self.dense = dense
        self.config = config if config is not None else Bm25Config()
        self.telemetry = telemetry if telemetry is not None else actor.telemetry
        self.embeddings = embeddings
        self._sleep = sleep

    @classmethod
    def for_index(
        cls,
        index_dir: Path,
        *,
        config: Bm25Config | None = None,
        telemetry: Telemetry | None = None,
        workdir: Path | None = None,
    ) -> RagService:
        """A service over an index folder: Rebuild reads its store, dense search and MMR
        embeddings come from its vectors, the default snapshot is ``<index>/bm25.snapshot``."""
        cfg = config if config is not None else Bm25Config()
        if cfg.persist_path is None:
            cfg = replace(cfg, persist_path=index_dir / DEFAULT_SNAPSHOT_NAME)
        tel = telemetry if telemetry is not None else get_telemetry()
        actor = Bm25Actor(StoreDocumentSource(index_dir / DB_NAME), workdir=workdir, telemetry=tel)
        dense = IndexDense(index_dir)
        return cls(actor, dense, config=cfg, telemetry=tel, embeddings=dense.embeddings)

    # -- lifecycle ----------------------------------------------------------------------
    async def start(self) -> RagService:
        """Start the actor (idempotent)."""
        await self.actor.start()
        return self

    async def close(self) -> None:
        """Stop the actor."""
        await self.actor.close()

    async def __aenter__(self) -> RagService:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _timeout(self, timeout_ms: float | None) -> float:
        return self.config.timeout_ms if timeout_ms is None else timeout_ms

    # -- status -------------------------------------------------------------------------
    async def _status(self, timeout_ms: float) -> Bm25Status:
        status = await self.actor.status(timeout_ms=timeout_ms)
        self.telemetry.record_status(status.label)
        return status

    async def bm25_status(self, *, timeout_ms: float | None = None) -> Bm25Status:
        """The actor's status: ``Uninitialized | Building | Ready(docs) | Empty | Error``."""
        tm = self._timeout(timeout_ms)
        with self.telemetry.span("bm25.status", {"timeout_ms": tm}) as span:
            status = await self._status(tm)
            span.set_attribute("bm25_status", status.label)
            if isinstance(status, Ready):
                span.set_attribute("bm25_docs", status.docs)
            return status

    # -- BM25 search --------------------------------------------------------------------
    async def _bm25(self, query: str, k: int, timeout_ms: float, *, strict: bool) -> Hits:
        t0 = time.perf_counter()
        try:
            return await self.actor.search(query, k, timeout_ms=timeout_ms)
        finally:
            self.telemetry.record_search_latency((time.perf_counter() - t0) * 1000, strict=strict)

    async def _dense(self, query: str, k: int) -> Hits:
        fn = self.dense
        if fn is None:
            return []
        with self.telemetry.span("dense", {"top_k": k}) as span:
            try:
                if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
                    getattr(fn, "__call__", None)  # noqa: B004 - async callable objects
                ):
                    hits = await cast(Callable[[str, int], Awaitable[Hits]], fn)(query, k)
                else:
                    hits = await asyncio.to_thread(cast(Callable[[str, int], Hits], fn), query, k)
            except RagError:
                raise
            except Exception as exc:
                raise SearchError(f"dense search failed: {exc}") from exc
            span.set_attribute("dense_results", len(hits))
            return list(hits)

    async def search_bm25(
        self,
        query: str,
        k: int,
        *,
        strict: bool | None = None,
        timeout_ms: float | None = None,
    ) -> Bm25SearchResult:
        """Lenient BM25 search with retries and dense fallback (strict if asked, per call or
        by ``config.strict_default``)."""
        if strict if strict is not None else self.config.strict_default:
            hits = await self.search_bm25_strict(query, k, timeout_ms=timeout_ms)
            status = self.actor.current_status
            return Bm25SearchResult(hits, False, status, 1, len(hits), 0)
        tm = self._timeout(timeout_ms)
        cfg = self.config
        attrs = {"strict": False, "timeout_ms": tm, "top_k": k}
        with self.telemetry.span("bm25", attrs) as span:
            attempts = 0
            while True:
                attempts += 1
                hits = await self._bm25(query, k, tm, strict=False)
                status = await self._status(tm)
                if hits or isinstance(status, Ready):
                    result = Bm25SearchResult(hits, False, status, attempts, len(hits), 0)
                    break
                if isinstance(status, Building | Uninitialized) and attempts <= cfg.retries:
                    sleep_ms = cfg.backoff_ms[attempts - 1]
                    span.add_event(
                        EVENT_RETRY,
                        {"attempt": attempts, "sleep_ms": sleep_ms, "bm25_status": status.label},
                    )
                    await self._sleep(sleep_ms / 1000.0)
                    continue
                dense = await self._dense(query, k)
                self.telemetry.record_fallback()
                result = Bm25SearchResult(dense, True, status, attempts, 0, len(dense))
                break
            span.set_attributes(
                {
                    "bm25_status": result.bm25_status.label,
                    "attempts": result.attempts,
                    "fallback_used": result.fallback_used,
                    "bm25_results": result.bm25_results,
                    "dense_results": result.dense_results,
                }
            )
            return result

    async def search_bm25_strict(
        self, query: str, k: int, *, timeout_ms: float | None = None
    ) -> Hits:
        """BM25 only, never a fallback: raises ``SearchError("bm25 index empty")`` or
        ``SearchError("bm25 index not ready")`` when nothing is found and the index is not
        Ready."""
        tm = self._timeout(timeout_ms)
        attrs = {
            "strict": True,
            "timeout_ms": tm,
            "top_k": k,
            "attempts": 1,
            "fallback_used": False,
            "dense_results": 0,
        }
        with self.telemetry.span("bm25", attrs) as span:
            hits = await self._bm25(query, k, tm, strict=True)
            span.set_attribute("bm25_results", len(hits))
            status = await self._status(tm)
            span.set_attribute("bm25_status", status.label)
            if not hits:
                _raise_if_unusable(status)
            return hits

    # -- lifecycle commands ---------------------------------------------------------------
    async def bm25_rebuild(
        self,
        *,
        wait: bool = True,
        wait_timeout_s: float | None = None,
        timeout_ms: float | None = None,
    ) -> Bm25Status:
        """Rebuild BM25 from the document source.

        The request is accepted within ``timeout_ms`` (status becomes Building). With
        ``wait`` the call returns the final status (Ready or Empty), raising DbError when the
        rebuild failed (status Error) and TimeoutError_ after ``wait_timeout_s`` if given.
        """
        from ragloom.errors import TimeoutError_

        tm = self._timeout(timeout_ms)
        with self.telemetry.span("bm25.rebuild", {"timeout_ms": tm, "wait": wait}) as span:
            t0 = time.perf_counter()
            done = await self.actor.rebuild(timeout_ms=tm)
            span.add_event(EVENT_REBUILD_STARTED)
            if not wait:
                span.set_attribute("bm25_status", Building().label)
                return Building()
            try:
                status = await asyncio.wait_for(asyncio.shield(done), wait_timeout_s)
            except TimeoutError:
                raise TimeoutError_(
                    f"bm25 rebuild did not finish within {wait_timeout_s:g} s"
                ) from None
            except RagError as exc:
                span.add_event(
                    EVENT_REBUILD_FAILURE,
                    {"duration_ms": (time.perf_counter() - t0) * 1000, "error": str(exc)},
                )
                span.set_attribute("bm25_status", "error")
                raise
            span.add_event(EVENT_REBUILD_DONE, {"duration_ms": (time.perf_counter() - t0) * 1000})
            span.set_attribute("bm25_status", status.label)
            return status

    def _persist_path(self, path: str | Path | None) -> Path:
        if path is not None:
            return Path(path)
        if self.config.persist_path is None:
            raise ConfigError("no bm25 snapshot path given and none configured (persist_path)")
        return self.config.persist_path

    async def _persist(self, op: str, path: str | Path | None, timeout_ms: float | None) -> int:
        tm = self._timeout(timeout_ms)
        target = self._persist_path(path)
        with self.telemetry.span(f"bm25.{op}", {"timeout_ms": tm, "path": str(target)}) as span:
            t0 = time.perf_counter()
            span.add_event(EVENT_PERSISTENCE_STARTED, {"op": op})
            try:
                if op == "save":
                    nbytes = await self.actor.save(target, timeout_ms=tm)
                else:
                    nbytes = await self.actor.load(target, timeout_ms=tm)
            except RagError as exc:
                self.telemetry.record_persist(op, ok=False)
                span.add_event(
                    EVENT_PERSISTENCE_FAILURE,
                    {
                        "op": op,
                        "duration_ms": (time.perf_counter() - t0) * 1000,
                        "error": str(exc),
                    },
                )
                span.set_attribute("bm25_status", self.actor.current_status.label)
                raise
            ms = (time.perf_counter() - t0) * 1000
            self.telemetry.record_persist(op, ok=True)
            span.add_event(
                EVENT_PERSISTENCE_DONE, {"op": op, "duration_ms": ms, "persist_bytes": nbytes}
            )
            span.set_attribute("persist_bytes", nbytes)
            span.set_attribute("bm25_status", self.actor.current_status.label)
            return nbytes

    def hydrate(self, hits: Hits) -> list[Hit]:
        """Turn ``(rowid, score)`` hits into :class:`ragloom.types.Hit` records (path, lines,
        symbol, text); needs a service over an index folder (:meth:`for_index`)."""
        dense = self.dense
        if not isinstance(dense, IndexDense):
            raise ConfigError("hydrate needs a service built with RagService.for_index")
        return dense.hydrate(hits)

    async def bm25_save(
        self, path: str | Path | None = None, *, timeout_ms: float | None = None
    ) -> int:
        """Snapshot the BM25 index (only in Ready or Empty); returns bytes written.

        ``path`` defaults to ``config.persist_path``. Failures raise DbError."""
        return await self._persist("save", path, timeout_ms)

    async def bm25_load(
        self, path: str | Path | None = None, *, timeout_ms: float | None = None
    ) -> int:
        """Restore a snapshot without rebuilding; returns bytes read.

        A missing, corrupt or incompatible file raises DbError and leaves the status at
        ``Error(message)``; :meth:`bm25_rebuild` recovers."""
        return await self._persist("load", path, timeout_ms)

    # -- hybrid -------------------------------------------------------------------------
    async def hybrid_search(
        self,
        query: str,
        top_k: int = 10,
        *,
        strategy: RetrievalStrategy | str = "hybrid",
        strict: bool | None = None,
        timeout_ms: float | None = None,
    ) -> HybridResult:
        """Dense, sparse or hybrid (RRF, optional MMR) retrieval as ``(rowid, score)``."""
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
            raise ConfigError(f"top_k must be an int >= 1, got {top_k!r}")
        strat, name = _strategy(strategy)
        is_strict = strict if strict is not None else self.config.strict_default
        hybrid = strat if isinstance(strat, Hybrid) else None
        with self.telemetry.request_span(
            query_len=len(query),
            top_k=top_k,
            strategy=name,
            rrf_k=hybrid.rrf.k if hybrid else None,
            mmr_lambda=hybrid.mmr.lambda_ if hybrid and hybrid.mmr else None,
        ) as span:
            t0 = time.perf_counter()
            if isinstance(strat, Dense):
                dense = await self._dense(query, top_k)
                result = HybridResult(dense[:top_k], name, False, None, [], dense)
            elif isinstance(strat, Sparse):
                sr = await self.search_bm25(query, top_k, strict=is_strict, timeout_ms=timeout_ms)
                result = HybridResult(
                    sr.hits,
                    name,
                    sr.fallback_used,
                    sr.bm25_status,
                    [] if sr.fallback_used else sr.hits,
                    sr.hits if sr.fallback_used else [],
                )
            else:
                assert hybrid is not None
                result = await self._hybrid(query, top_k, hybrid, name, is_strict, timeout_ms)
            result.timings_ms["total"] = (time.perf_counter() - t0) * 1000
            span.set_attributes(
                {
                    "fallback_used": result.fallback_used,
                    "bm25_results": len(result.bm25),
                    "dense_results": len(result.dense),
                    "results": len(result.hits),
                }
            )
            if result.bm25_status is not None:
                span.set_attribute("bm25_status", result.bm25_status.label)
            return result

    async def _hybrid_bm25(
        self, query: str, depth: int, tm: float, strict: bool
    ) -> tuple[Hits, Bm25Status]:
        attrs = {"strict": strict, "timeout_ms": tm, "top_k": depth, "attempts": 1}
        with self.telemetry.span("bm25", attrs) as span:
            hits = await self._bm25(query, depth, tm, strict=strict)
            status = await self._status(tm)
            span.set_attributes({"bm25_results": len(hits), "bm25_status": status.label})
            return hits, status

    async def _hybrid(
        self,
        query: str,
        top_k: int,
        strat: Hybrid,
        name: str,
        strict: bool,
        timeout_ms: float | None,
    ) -> HybridResult:
        tm = self._timeout(timeout_ms)
        depth = max(top_k, strat.mmr.candidate_pool if strat.mmr else HYBRID_CANDIDATES_MIN)
        timings: dict[str, float] = {}
        t = time.perf_counter()
        bm25_task = asyncio.ensure_future(self._hybrid_bm25(query, depth, tm, strict))
        dense_task = asyncio.ensure_future(self._dense(query, depth))
        await asyncio.wait([bm25_task, dense_task])
        timings["retrieval"] = (time.perf_counter() - t) * 1000
        dense_exc = dense_task.exception()
        bm25_exc = bm25_task.exception()  # retrieved either way: no "never retrieved" warning
        if dense_exc is not None:  # dense errors propagate first (plan section 3 C)
            raise dense_exc
        if bm25_exc is not None:  # BM25 errors bubble as-is
            raise bm25_exc
        bm25, status = bm25_task.result()
        dense = dense_task.result()
        fallback = not bm25 and isinstance(status, Building | Uninitialized | Error)
        if not bm25 and strict:
            _raise_if_unusable(status)
        if fallback:
            self.telemetry.record_fallback()
        lists = {"bm25": bm25, "dense": dense} if not fallback else {"dense": dense}
        t = time.perf_counter()
        with self.telemetry.span(
            "fusion", {"rrf_k": strat.rrf.k, "lists": len(lists), "fallback_used": fallback}
        ) as fspan:
            fused = rrf_fuse(lists, strat.rrf.weights_for(lists), strat.rrf.k)
            fspan.set_attribute("results", len(fused))
        timings["fusion"] = (time.perf_counter() - t) * 1000
        if strat.mmr is not None and fused:
            t = time.perf_counter()
            with self.telemetry.span(
                "mmr", {"mmr_lambda": strat.mmr.lambda_, "candidates": len(fused)}
            ):
                pool = fused[: strat.mmr.candidate_pool]
                lookup = self.embeddings
                vecs: Mapping[int, np.ndarray] = (
                    await asyncio.to_thread(lookup, [r for r, _ in pool]) if lookup else {}
                )
                hits = mmr_select(normalize_scores(pool), top_k, vecs, strat.mmr)
            timings["mmr"] = (time.perf_counter() - t) * 1000
        else:
            hits = fused[:top_k]
        return HybridResult(hits, name, fallback, status, bm25, dense, timings)


def _raise_if_unusable(status: Bm25Status) -> None:
    """The strict rule for an empty BM25 answer (issue 5 item 2)."""
    if isinstance(status, Empty):
        raise SearchError(BM25_EMPTY_MESSAGE)
    if not isinstance(status, Ready):
        raise SearchError(BM25_NOT_READY_MESSAGE)


# --------------------------------------------------------------------------------------------
# Sync wrapper
# --------------------------------------------------------------------------------------------


class SyncRagService:
    """Blocking facade for scripts: a private event loop in a daemon thread runs the service.

    >>> with SyncRagService.for_index(Path(".ragloom")) as svc:   # doctest: +SKIP
    ...     svc.bm25_rebuild()
    ...     svc.search_bm25("decode json", 5).hits
    """

    def __init__(self, factory: Callable[[], RagService]) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="ragloom-rag-service", daemon=True
        )
        self._thread.start()
        self.service = factory()
        self._call(self.service.start())

    @classmethod
    def for_index(cls, index_dir: Path, **kwargs: Any) -> SyncRagService:
        """See :meth:`RagService.for_index`."""
        return cls(lambda: RagService.for_index(index_dir, **kwargs))

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def bm25_status(self, **kw: Any) -> Bm25Status:
        """See :meth:`RagService.bm25_status`."""
        return self._call(self.service.bm25_status(**kw))

    def search_bm25(self, query: str, k: int, **kw: Any) -> Bm25SearchResult:
        """See :meth:`RagService.search_bm25`."""
        return self._call(self.service.search_bm25(query, k, **kw))

    def search_bm25_strict(self, query: str, k: int, **kw: Any) -> Hits:
        """See :meth:`RagService.search_bm25_strict`."""
        return self._call(self.service.search_bm25_strict(query, k, **kw))

    def bm25_rebuild(self, **kw: Any) -> Bm25Status:
        """See :meth:`RagService.bm25_rebuild`."""
        return self._call(self.service.bm25_rebuild(**kw))

    def hydrate(self, hits: Hits) -> list[Hit]:
        """See :meth:`RagService.hydrate`."""
        return self.service.hydrate(hits)

    def bm25_save(self, path: str | Path | None = None, **kw: Any) -> int:
        """See :meth:`RagService.bm25_save`."""
        return self._call(self.service.bm25_save(path, **kw))

    def bm25_load(self, path: str | Path | None = None, **kw: Any) -> int:
        """See :meth:`RagService.bm25_load`."""
        return self._call(self.service.bm25_load(path, **kw))

    def hybrid_search(self, query: str, top_k: int = 10, **kw: Any) -> HybridResult:
        """See :meth:`RagService.hybrid_search`."""
        return self._call(self.service.hybrid_search(query, top_k, **kw))

    def close(self) -> None:
        """Stop the service and its loop thread."""
        if not self._loop.is_running():
            return
        try:
            self._call(self.service.close())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()

    def __enter__(self) -> SyncRagService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
