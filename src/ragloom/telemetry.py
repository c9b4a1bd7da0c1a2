"""Tracing spans and metrics-ready instruments for ragloom (OpenTelemetry API only).

ragloom depends on ``opentelemetry-api`` alone: with no SDK configured every span and
instrument is a no-op and costs next to nothing. An application (or a test) that installs an
SDK ``TracerProvider`` / ``MeterProvider`` sees everything below, either globally or by
passing the providers to :class:`Telemetry` explicitly.

Spans (one per pipeline stage, names ``ragloom.<stage>``; ploke-rag-plan.md section 5):

- ``ragloom.request``: ``query_len``, ``top_k``, ``strategy``, ``rrf_k``, ``mmr_lambda``
- ``ragloom.query``, ``ragloom.dense``, ``ragloom.fusion``, ``ragloom.mmr``,
  ``ragloom.rerank``, ``ragloom.assembly``: ``duration_ms``
- ``ragloom.bm25`` (and ``ragloom.bm25.status`` / ``.save`` / ``.load`` / ``.rebuild``):
  ``bm25_status``, ``strict``, ``attempts``, ``timeout_ms``, ``fallback_used``,
  ``bm25_results``, ``dense_results``, ``duration_ms``, and ``persist_bytes`` on save/load
  (ploke-rag-plan.md section 3 E; ploke-rag-crucial-notes.md section 10).

Events: ``persistence_started`` / ``persistence_done`` / ``persistence_failure`` and
``rebuild_started`` / ``rebuild_done`` / ``rebuild_failure``, each terminal one with
``duration_ms``; ``bm25_retry`` with ``attempt`` and ``sleep_ms`` (section 3 D).

Metrics (section 3 E "optional events for metrics later"; exported as Prometheus metrics by the
serving layer): counters ``ragloom.bm25.status_counts`` (attribute ``status``),
``ragloom.bm25.fallback_count``, ``ragloom.bm25.persist_success`` and
``ragloom.bm25.persist_failure`` (attribute ``op``), histogram
``ragloom.bm25.search_latency_ms``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Final

from opentelemetry import metrics, trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from ragloom._version import __version__

__all__ = [
    "EVENT_PERSISTENCE_DONE",
    "EVENT_PERSISTENCE_FAILURE",
    "EVENT_PERSISTENCE_STARTED",
    "EVENT_REBUILD_DONE",
    "EVENT_REBUILD_FAILURE",
    "EVENT_REBUILD_STARTED",
    "EVENT_RETRY",
    "INSTRUMENTATION_NAME",
    "STAGES",
    "Telemetry",
    "get_telemetry",
]

INSTRUMENTATION_NAME: Final = "ragloom"
"""Tracer and meter name (the brief: tracer "ragloom")."""

STAGES: Final = (
    "request",
    "query",
    "bm25",
    "bm25.status",
    "bm25.save",
    "bm25.load",
    "bm25.rebuild",
    "bm25.actor.rebuild",
    "dense",
    "fusion",
    "mmr",
    "rerank",
    "assembly",
)
"""Pipeline stages that get a span (issue 5 item 5: query processing, each retrieval, fusion,
MMR, rerank, assembly; plus the BM25 lifecycle operations)."""

EVENT_PERSISTENCE_STARTED: Final = "persistence_started"
"""Event names from ploke-rag-crucial-notes.md section 10."""
EVENT_PERSISTENCE_DONE: Final = "persistence_done"
EVENT_PERSISTENCE_FAILURE: Final = "persistence_failure"
EVENT_REBUILD_STARTED: Final = "rebuild_started"
EVENT_REBUILD_DONE: Final = "rebuild_done"
EVENT_REBUILD_FAILURE: Final = "rebuild_failure"
EVENT_RETRY: Final = "bm25_retry"
"""ploke-rag-plan.md section 3 D: "emit trace events with attempt number and sleep_ms"."""


_NOOP_PROVIDERS = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)
"""Providers that record nothing: the API's default proxy (no SDK installed) and the no-op."""


class Telemetry:
    """A tracer plus the BM25 metric instruments, from explicit or global providers."""

    def __init__(
        self,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
    ) -> None:
        self.tracer = trace.get_tracer(
            INSTRUMENTATION_NAME, __version__, tracer_provider=tracer_provider
        )
        self._explicit_noop: bool | None = (
            None if tracer_provider is None else isinstance(tracer_provider, _NOOP_PROVIDERS)
        )
        """True/False for an explicit provider; None: ask the global one at each span (an
        SDK installed later is honoured)."""
        meter = metrics.get_meter(INSTRUMENTATION_NAME, __version__, meter_provider=meter_provider)
        self.status_counts = meter.create_counter(
            "ragloom.bm25.status_counts", description="BM25 status observations by status"
        )
        self.search_latency_ms = meter.create_histogram(
            "ragloom.bm25.search_latency_ms", unit="ms", description="BM25 search latency"
        )
        self.fallback_count = meter.create_counter(
            "ragloom.bm25.fallback_count", description="searches answered by dense fallback"
        )
        self.persist_success = meter.create_counter(
            "ragloom.bm25.persist_success", description="successful BM25 save/load"
        )
        self.persist_failure = meter.create_counter(
            "ragloom.bm25.persist_failure", description="failed BM25 save/load"
        )

    @contextmanager
    def span(
        self,
        stage: str,
        attributes: Mapping[str, AttributeValue] | None = None,
        *,
        context: Context | None = None,
    ) -> Iterator[Span]:
        """A span ``ragloom.<stage>`` that records ``duration_ms`` and marks errors.

        An exception leaving the block is recorded on the span (status ERROR) and re-raised.
        Without a tracing SDK (the default) the block gets the non-recording span at once:
        a span through the API's proxy costs ~8 us, and a question opens eight.
        """
        if self.recording_off():
            yield trace.INVALID_SPAN
            return
        t0 = time.perf_counter()
        with self.tracer.start_as_current_span(
            f"{INSTRUMENTATION_NAME}.{stage}",
            context=context,
            attributes=dict(attributes or {}),
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                yield span
            except BaseException as exc:
                span.record_exception(exc)
                span.set_status(Status(StatusCode.ERROR, str(exc)))
                raise
            finally:
                span.set_attribute("duration_ms", (time.perf_counter() - t0) * 1000.0)

    def recording_off(self) -> bool:
        """True when no span can be recorded: no tracing SDK is installed (the API's proxy or
        no-op provider answers)."""
        explicit = self._explicit_noop
        if explicit is not None:
            return explicit
        return isinstance(trace.get_tracer_provider(), _NOOP_PROVIDERS)

    @contextmanager
    def request_span(
        self,
        *,
        query_len: int,
        top_k: int,
        strategy: str,
        rrf_k: float | None,
        mmr_lambda: float | None,
    ) -> Iterator[Span]:
        """The ``ragloom.request`` span with the section 5 request attributes.

        ``rrf_k`` / ``mmr_lambda`` are recorded as -1.0 when the strategy has no RRF / MMR
        (OpenTelemetry attributes cannot be null).
        """
        attrs: dict[str, AttributeValue] = {
            "query_len": query_len,
            "top_k": top_k,
            "strategy": strategy,
            "rrf_k": float(rrf_k) if rrf_k is not None else -1.0,
            "mmr_lambda": float(mmr_lambda) if mmr_lambda is not None else -1.0,
        }
        with self.span("request", attrs) as span:
            yield span

    def record_status(self, status_label: str) -> None:
        """Count one observation of the BM25 status (``ready``, ``building``, ...)."""
        self.status_counts.add(1, {"status": status_label})

    def record_search_latency(self, ms: float, *, strict: bool) -> None:
        """Record one BM25 search round trip in milliseconds."""
        self.search_latency_ms.record(ms, {"strict": strict})

    def record_fallback(self) -> None:
        """Count one search answered by the dense fallback."""
        self.fallback_count.add(1)

    def record_persist(self, op: str, *, ok: bool) -> None:
        """Count one save or load (``op``) success or failure."""
        (self.persist_success if ok else self.persist_failure).add(1, {"op": op})


_DEFAULT: Telemetry | None = None


def get_telemetry() -> Telemetry:
    """The process-wide :class:`Telemetry` bound to the global providers (created lazily).

    The OpenTelemetry API proxies resolve the global providers at first use, so an SDK set
    after this call is still honoured.
    """
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = Telemetry()
    return _DEFAULT
