"""How :class:`~ragloom.server.engine.ServingEngine` answers: parameter checks, the result
cache with single flight, the ``timeouts.query_ms`` bound, the query log entry and the JSON
shape of hits, context parts and assembled contexts (docs/serving.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any

from ragloom.assemble import AssemblyPolicy, TokenBudget, get_counter
from ragloom.assemble.budget import Format
from ragloom.assemble.context import ContextPart
from ragloom.assemble.structure import StructureMode
from ragloom.errors import ConfigError, InputError, OverloadedError, SearchError, TimeoutError_
from ragloom.retrieve.search import SearchResult, hit_to_json, parse_search_spec
from ragloom.server.cache import ResultCache
from ragloom.server.feedback import QueryLogEntry, QueryLogger
from ragloom.server.metrics import EngineMetrics
from ragloom.server.readers import _Reader
from ragloom.server.switching import _SwitchingMixin
from ragloom.types import Hit

__all__ = ["hit_json"]

_FLIGHT_WAIT_S = 30.0
DOOR_FACTOR = 2
"""The HTTP routes refuse a question at once (503) while this many times the admission limit
are already handed to the query pool and unanswered (:meth:`_AnswersMixin.answer_async`)."""
"""An identical request waits this long for the first one's answer before computing its own."""


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
class _Flight:
    """One computation of a result-cache key that identical concurrent requests wait for."""

    done: threading.Event = field(default_factory=threading.Event)
    body: dict[str, Any] | None = None


class _AnswersMixin(_SwitchingMixin):
    """Checks, caching and shaping of answers (part of ``ServingEngine``)."""

    _fallbacks: dict[str, int]
    _query_log: QueryLogger | None
    metrics: EngineMetrics
    _results: ResultCache
    _inflight: dict[tuple[object, ...], _Flight]
    _compute: ThreadPoolExecutor
    _computing: int
    worker_count: int
    _queued: int
    """Questions the HTTP routes handed to the query pool and not yet answered (cached ones
    too): the door check of :meth:`answer_async`."""

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
            with self._admitted():
                body, _ = compute()  # the first one failed or took too long: answer alone
            return body, False
        try:
            with self._admitted():
                body, res = compute()
            if self._cacheable(res):
                self._results.put(key(res.generation), body)
            flight.body = body
        finally:
            with self._lock:
                self._inflight.pop(k0, None)
            flight.done.set()
        return body, False

    @contextlib.contextmanager
    def _admitted(self) -> Iterator[None]:
        """Admission control: at most ``server.max_inflight`` new answers are computed at once.
        Beyond that the question is refused at once (:class:`OverloadedError`, HTTP 503 with
        ``Retry-After``): past the server's capacity a queue only grows toward the time limit
        (measured at 100k chunks: p95 8.3 s at 60 questions/s without a limit, 0.35 s with 8;
        docs/serving.md, "Under sustained load"). Cached answers never wait for it. Under
        ``serve http --workers N`` the limit holds in each worker (:meth:`admission_limit`)."""
        limit = self.admission_limit()
        with self._lock:
            if limit and self._computing >= limit:
                raise self._overloaded(limit)
            self._computing += 1
        try:
            yield
        finally:
            with self._lock:
                self._computing -= 1

    def admission_limit(self) -> int:
        """New answers this process computes at once: ``server.max_inflight`` (0: no limit),
        in each worker of ``serve http --workers N``: with 2 workers on 2 cores, 8 each
        answered 92 questions/s at 100k chunks, 4 each refused questions from 40/s on and
        answered 75/s (docs/serving.md "Workers")."""
        return self._settings.server.max_inflight

    def _overloaded(self, limit: int) -> OverloadedError:
        """Count and build the 503 of a question refused by admission control (the lock is
        held by the caller, or the count is a plain increment from the event loop)."""
        self._fallbacks["overloaded"] += 1
        return OverloadedError(
            f"the server is computing {self._computing} answers, its limit "
            f"(server.max_inflight = {limit}"
            f"{f' in each of {self.worker_count} workers' if self.worker_count > 1 else ''}"
            "); retry in a second",
            retry_after_s=1,
        )

    # -- queries ------------------------------------------------------------------------
    async def answer_async(self, route: str, /, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """``search`` or ``context`` called from an event loop (the HTTP routes): the
        question goes straight to the query pool and the loop awaits it, one thread hand-off
        where ``run_in_threadpool(engine.context, ...)`` made two (the loop's worker, then the
        pool). The same time limit, errors and caching as the method itself."""
        if route not in ("search", "context"):
            raise InputError(f"no query route {route!r}")
        method = getattr(type(self), route).__wrapped__
        limit = self.admission_limit()
        with self._lock:
            if limit and self._queued >= DOOR_FACTOR * limit:
                # refused at the door, from the event loop: when the questions already handed
                # to the pool wait for the CPU, a refusal made in a pool thread waits with them
                raise self._overloaded(limit)
            self._queued += 1
        try:
            fut = self._submit(functools.partial(method, self, *args, **kwargs))
        except BaseException:
            self._dequeue(None)
            raise
        fut.add_done_callback(self._dequeue)
        try:
            # shielded: past the limit the computation runs on and its answer is cached
            result: dict[str, Any] = await asyncio.wait_for(
                asyncio.shield(asyncio.wrap_future(fut)),
                self._settings.timeouts.query_ms / 1000.0,
            )
        except TimeoutError:
            raise self._timed_out() from None
        return result

    def _dequeue(self, _fut: object) -> None:
        with self._lock:
            self._queued -= 1

    def _submit(self, fn: Callable[[], dict[str, Any]]) -> Future[dict[str, Any]]:
        if self._closed:
            raise InputError("the serving engine is closed")
        return self._compute.submit(fn)

    def _timed_out(self) -> TimeoutError_:
        with self._lock:
            self._fallbacks["query_timeout"] += 1
        return TimeoutError_(
            f"the query did not finish within timeouts.query_ms = "
            f"{self._settings.timeouts.query_ms:g} ms "
            "(it runs on; its answer is cached for the next ask)"
        )

    def _bounded(self, fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """``fn()`` within ``timeouts.query_ms``: past it the caller gets
        TimeoutError_ (HTTP 504, an MCP tool error) while the computation runs on and its
        answer is cached for the next ask. Typed errors of ``fn`` pass through."""
        fut = self._submit(fn)
        try:
            return fut.result(timeout=self._settings.timeouts.query_ms / 1000.0)
        except FutureTimeout:
            raise self._timed_out() from None

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
        ctx = r.index.assemble(
            query,
            result,
            budget=TokenBudget.for_total(budget),
            policy=AssemblyPolicy(format=fmt),
            counter=get_counter(counter),
            structure=structure,
        )
        parts = _parts_json(ctx.parts)
        extra = {"structure": ctx.structure} if ctx.structure is not None else {}
        return {
            **extra,
            "generation": result.generation,
            "strategy": result.strategy,
            "context": ctx.text,
            "parts": parts,
            "stats": ctx.stats.to_dict(),
            "notes": [*result.notes, *ctx.stats.shortfall_notes()],
            "hit_ids": [h.id for h in result.hits],
        }
