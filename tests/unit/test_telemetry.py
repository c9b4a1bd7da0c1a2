"""Span attributes, events and metrics, asserted with OpenTelemetry's in-memory exporters.

Providers are passed to :class:`ragloom.telemetry.Telemetry` explicitly, so no test touches
the process-wide (set-once) global providers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from ragloom.errors import DbError, SearchError
from ragloom.retrieve.config import Hybrid, MmrConfig, RrfConfig
from ragloom.service.bm25_actor import Bm25Actor
from ragloom.service.rag import RagService
from ragloom.telemetry import Telemetry, get_telemetry

T = TypeVar("T")
W = 5000.0
"""Timeout for write commands in tests: a tantivy commit takes ~0.1-0.3 s on this machine."""
BM25_ATTRS = (
    "bm25_status",
    "strict",
    "attempts",
    "timeout_ms",
    "fallback_used",
    "bm25_results",
    "dense_results",
    "duration_ms",
)
"""Attributes every BM25 search span carries (issue 5 item 5)."""
DOCS = [(1, "def parse_json(text): decode json"), (2, "def wrap(text): wrap a paragraph")]


class Tel:
    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        tp = TracerProvider()
        tp.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.telemetry = Telemetry(tp, MeterProvider(metric_readers=[self.reader]))

    def spans(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.exporter.get_finished_spans() if s.name == name]

    def metric(self, name: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        points: list[Any] = []
        for rm in data.resource_metrics if data else []:
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    if m.name == name:
                        points.extend(m.data.data_points)
        return points


@pytest.fixture
def tel() -> Iterator[Tel]:
    yield Tel()


class ListSource:
    def __init__(self, docs: Sequence[tuple[int, str]]) -> None:
        self.docs = list(docs)

    def batches(self) -> Iterable[Sequence[tuple[int, str]]]:
        yield self.docs

    def generation(self) -> int | None:
        return None


async def _nosleep(_: float) -> None:
    return None


def dense(query: str, k: int) -> list[tuple[int, float]]:
    return [(7, 0.5), (1, 0.4)][:k]


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def service(tel: Tel, docs: Sequence[tuple[int, str]] | None = DOCS) -> RagService:
    actor = Bm25Actor(ListSource(docs) if docs is not None else None, telemetry=tel.telemetry)
    return RagService(actor, dense, telemetry=tel.telemetry, sleep=_nosleep)


def test_lenient_fallback_span(tel: Tel) -> None:
    async def go() -> None:
        async with service(tel, None) as svc:
            await svc.search_bm25("json", 2)

    run(go())
    (span,) = tel.spans("ragloom.bm25")
    attrs = dict(span.attributes or {})
    assert set(BM25_ATTRS) <= set(attrs)
    assert attrs["bm25_status"] == "uninitialized"
    assert attrs["strict"] is False and attrs["attempts"] == 3
    assert attrs["timeout_ms"] == 250.0 and attrs["fallback_used"] is True
    assert (attrs["bm25_results"], attrs["dense_results"]) == (0, 2)
    retries = [e for e in span.events if e.name == "bm25_retry"]
    assert [(e.attributes or {})["sleep_ms"] for e in retries] == [50.0, 100.0]
    assert [(e.attributes or {})["attempt"] for e in retries] == [1, 2]
    (dense_span,) = tel.spans("ragloom.dense")
    assert dense_span.parent is not None and dense_span.parent.span_id == span.context.span_id
    (fb,) = tel.metric("ragloom.bm25.fallback_count")
    assert fb.value == 1
    latency = tel.metric("ragloom.bm25.search_latency_ms")
    assert sum(p.count for p in latency) == 3
    statuses = {p.attributes["status"]: p.value for p in tel.metric("ragloom.bm25.status_counts")}
    assert statuses == {"uninitialized": 3}


def test_strict_span_records_error(tel: Tel) -> None:
    async def go() -> None:
        async with service(tel, None) as svc:
            with pytest.raises(SearchError):
                await svc.search_bm25_strict("json", 2)

    run(go())
    (span,) = tel.spans("ragloom.bm25")
    attrs = dict(span.attributes or {})
    assert set(BM25_ATTRS) <= set(attrs)
    assert attrs["strict"] is True and attrs["fallback_used"] is False
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "bm25 index not ready"


def test_rebuild_and_persistence_events(tel: Tel, tmp_path: Path) -> None:
    async def go() -> None:
        async with service(tel) as svc:
            await svc.bm25_rebuild()
            await svc.bm25_save(tmp_path / "s", timeout_ms=W)
            await svc.bm25_load(tmp_path / "s", timeout_ms=W)
            (tmp_path / "bad").write_bytes(b"junk")
            with pytest.raises(DbError):
                await svc.bm25_load(tmp_path / "bad", timeout_ms=W)
        async with service(tel, None) as svc:
            with pytest.raises(DbError):
                await svc.bm25_rebuild()

    run(go())
    ok, failed = tel.spans("ragloom.bm25.rebuild")
    assert [e.name for e in ok.events] == ["rebuild_started", "rebuild_done"]
    assert isinstance((ok.events[1].attributes or {})["duration_ms"], float)
    assert (ok.attributes or {})["bm25_status"] == "ready"
    # the span helper also records the exception that left the block
    assert [e.name for e in failed.events] == ["rebuild_started", "rebuild_failure", "exception"]
    actor_ok, actor_failed = tel.spans("ragloom.bm25.actor.rebuild")
    assert [e.name for e in actor_ok.events] == ["rebuild_started", "rebuild_done"]
    assert (actor_ok.events[1].attributes or {})["docs"] == 2
    assert actor_ok.parent is not None and actor_ok.parent.span_id == ok.context.span_id
    assert [e.name for e in actor_failed.events] == ["rebuild_started", "rebuild_failure"]
    (save,) = tel.spans("ragloom.bm25.save")
    size = (tmp_path / "s").stat().st_size
    assert (save.attributes or {})["persist_bytes"] == size
    assert [e.name for e in save.events] == ["persistence_started", "persistence_done"]
    assert isinstance((save.events[1].attributes or {})["duration_ms"], float)
    load_ok, load_bad = tel.spans("ragloom.bm25.load")
    assert (load_ok.attributes or {})["persist_bytes"] == size
    assert [e.name for e in load_bad.events] == [
        "persistence_started",
        "persistence_failure",
        "exception",
    ]
    assert (load_bad.attributes or {})["bm25_status"] == "error"
    assert load_bad.status.status_code is StatusCode.ERROR
    ok_counts = {p.attributes["op"]: p.value for p in tel.metric("ragloom.bm25.persist_success")}
    bad_counts = {p.attributes["op"]: p.value for p in tel.metric("ragloom.bm25.persist_failure")}
    assert ok_counts == {"save": 1, "load": 1} and bad_counts == {"load": 1}


def test_request_span_and_stage_spans(tel: Tel) -> None:
    async def go() -> None:
        async with service(tel) as svc:
            await svc.bm25_rebuild()
            strat = Hybrid(rrf=RrfConfig(k=30.0), mmr=MmrConfig(lambda_=0.5))
            await svc.hybrid_search("parse json", 2, strategy=strat)

    run(go())
    (req,) = tel.spans("ragloom.request")
    attrs = dict(req.attributes or {})
    assert attrs["query_len"] == len("parse json") and attrs["top_k"] == 2
    assert attrs["strategy"] == "hybrid_mmr"
    assert attrs["rrf_k"] == 30.0 and attrs["mmr_lambda"] == 0.5
    assert attrs["fallback_used"] is False and attrs["bm25_status"] == "ready"
    for stage in ("ragloom.bm25", "ragloom.dense", "ragloom.fusion", "ragloom.mmr"):
        (span,) = tel.spans(stage)
        assert span.parent is not None and span.parent.span_id == req.context.span_id, stage
        assert "duration_ms" in (span.attributes or {})
    bm25 = dict(tel.spans("ragloom.bm25")[0].attributes or {})
    assert bm25["bm25_results"] == 1 and bm25["strict"] is False


def test_request_span_without_rrf_or_mmr(tel: Tel) -> None:
    async def go() -> None:
        async with service(tel) as svc:
            await svc.hybrid_search("json", 2, strategy="dense")

    run(go())
    (req,) = tel.spans("ragloom.request")
    attrs = dict(req.attributes or {})
    assert attrs["strategy"] == "dense" and attrs["rrf_k"] == -1.0 and attrs["mmr_lambda"] == -1.0


def test_default_telemetry_without_sdk_is_a_noop() -> None:
    t = get_telemetry()
    assert t is get_telemetry()
    with t.span("query", {"query_len": 3}) as span:
        span.set_attribute("x", 1)
    t.record_fallback()
    t.record_persist("save", ok=True)


def test_spans_cost_nothing_without_a_tracing_sdk() -> None:
    """No SDK (the API's proxy or the no-op provider): each block gets the non-recording span
    without going through the API; an explicit SDK provider records, errors included."""
    from opentelemetry import trace

    quiet = Telemetry(trace.NoOpTracerProvider())
    assert quiet.recording_off()
    with quiet.span("fusion") as span:
        assert span is trace.INVALID_SPAN
        span.set_attribute("hits", 3)  # accepted and dropped
    with pytest.raises(ValueError), quiet.span("fusion"):
        raise ValueError("still raised")
    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        assert Telemetry().recording_off()  # no global SDK installed in this process
    tel = Tel()
    assert not tel.telemetry.recording_off()
    with pytest.raises(ValueError), tel.telemetry.span("fusion"):
        raise ValueError("boom")
    (recorded,) = tel.spans("ragloom.fusion")
    assert recorded.status.status_code is StatusCode.ERROR
