"""Prometheus metrics of one serving engine (``GET /metrics``, MCP ``index_status``).

Each engine owns a ``CollectorRegistry`` (two engines in one process, as in the tests, never
share counters). Request counts and latencies are recorded as they happen
(:meth:`EngineMetrics.observe_request`, called by the HTTP and MCP servers per request); the
state the engine already counts (cache hits, misses and evictions, the micro-batcher, BM25
status, fallbacks, the index generation, jobs) is read at scrape time by a custom collector,
so nothing is counted twice and a scrape always agrees with ``status``.

Names (all prefixed ``ragloom_``):

- ``requests_total{route,status}`` counter, ``request_duration_seconds{route,status}`` histogram;
- ``engine_queries_total{route,cache}`` counter (``cache`` = hit | miss);
- ``cache_hits_total{cache}``, ``cache_misses_total{cache}``, ``cache_evictions_total{cache}``,
  ``cache_entries{cache}``, ``cache_hit_rate{cache}`` (``cache`` = result | embedding);
- ``embedding_batches_total``, ``embedding_batched_queries_total``, ``embedding_batch_largest``;
- ``bm25_up`` (1 when the reader has a BM25 engine), ``bm25_status{status}`` (1 for the
  current state of ``<index>/bm25``: ready, empty, uninitialized, error),
  ``fallbacks_total{kind}`` (``dense_unavailable``: a hybrid answer from BM25 alone, the
  Retriever's ``fallback_used``; ``bm25_unavailable``: a hybrid or sparse answer without a BM25
  engine, dense alone or nothing);
- ``index_generation``, ``index_epoch`` (reader re-opens);
- ``jobs{state}`` gauge, ``jobs_finished_total{state}`` counter.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = ["LATENCY_BUCKETS", "EngineMetrics"]

LATENCY_BUCKETS = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.02,
    0.05,
    0.1,
    0.2,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)
"""Seconds: fine below 100 ms, where ragloom's p95 goal (100 ms) and tamma's (200 ms) lie."""


class _StateCollector(Collector):
    def __init__(self, snapshot: Callable[[], dict[str, Any]]) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterable[Metric]:
        return list(self._families(self._snapshot()))

    def describe(self) -> Iterable[Metric]:
        return []  # read at scrape time; no metadata needed up front

    @staticmethod
    def _families(s: dict[str, Any]) -> Iterator[Metric]:
        caches: dict[str, dict[str, Any]] = s.get("caches", {})
        hits = CounterMetricFamily("ragloom_cache_hits", "Cache lookups answered", labels=["cache"])
        misses = CounterMetricFamily(
            "ragloom_cache_misses", "Cache lookups missed", labels=["cache"]
        )
        evictions = CounterMetricFamily(
            "ragloom_cache_evictions", "Entries evicted by size or expired by TTL", labels=["cache"]
        )
        entries = GaugeMetricFamily("ragloom_cache_entries", "Entries held", labels=["cache"])
        rate = GaugeMetricFamily(
            "ragloom_cache_hit_rate", "hits / (hits + misses) since start", labels=["cache"]
        )
        for name, c in caches.items():
            hits.add_metric([name], c["hits"])
            misses.add_metric([name], c["misses"])
            evictions.add_metric([name], c["evictions"])
            entries.add_metric([name], c["entries"])
            rate.add_metric([name], c["hit_rate"])
        yield from (hits, misses, evictions, entries, rate)

        batch: dict[str, Any] = s.get("batching", {})
        yield CounterMetricFamily(
            "ragloom_embedding_batches",
            "Underlying embedding calls made by the micro-batcher",
            value=batch.get("batches", 0),
        )
        yield CounterMetricFamily(
            "ragloom_embedding_batched_queries",
            "Query embeddings computed through the micro-batcher",
            value=batch.get("queries", 0),
        )
        yield GaugeMetricFamily(
            "ragloom_embedding_batch_largest",
            "Largest micro-batch so far",
            value=batch.get("largest_batch", 0),
        )

        yield GaugeMetricFamily(
            "ragloom_bm25_up", "1 when the reader has a BM25 engine", value=s.get("bm25_up", 0)
        )
        status = GaugeMetricFamily(
            "ragloom_bm25_status", "1 for the current BM25 state of the index", labels=["status"]
        )
        current = s.get("bm25_status", "uninitialized")
        for name in ("ready", "empty", "uninitialized", "error"):
            status.add_metric([name], 1.0 if name == current else 0.0)
        yield status
        fallbacks = CounterMetricFamily(
            "ragloom_fallbacks", "Answers that lacked one retrieval modality", labels=["kind"]
        )
        for kind, n in sorted(s.get("fallbacks", {}).items()):
            fallbacks.add_metric([kind], n)
        yield fallbacks

        yield GaugeMetricFamily(
            "ragloom_index_generation", "Published index generation", value=s.get("generation", 0)
        )
        yield GaugeMetricFamily(
            "ragloom_index_epoch", "Reader re-opens (a rebuilt index)", value=s.get("epoch", 0)
        )
        jobs = GaugeMetricFamily("ragloom_jobs", "Re-index jobs by state", labels=["state"])
        for state, n in sorted(s.get("jobs", {}).items()):
            jobs.add_metric([state], n)
        yield jobs
        worker = s.get("worker") or {}
        info = GaugeMetricFamily(
            "ragloom_worker_info",
            "The worker process that answered this scrape (serve http --workers)",
            labels=["index", "pid"],
        )
        info.add_metric([str(worker.get("index", 0)), str(worker.get("pid", 0))], 1)
        yield info
        yield GaugeMetricFamily(
            "ragloom_workers", "Worker processes serving this index", value=s.get("workers", 1)
        )


class EngineMetrics:
    """The engine's registry: request instruments plus the scrape-time state collector."""

    def __init__(self, snapshot: Callable[[], dict[str, Any]]) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.requests = Counter(
            "ragloom_requests",
            "Requests served, by route and status code",
            ["route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "ragloom_request_duration_seconds",
            "Request latency, by route and status code",
            ["route", "status"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.queries = Counter(
            "ragloom_engine_queries",
            "Engine searches and contexts, by route and cache outcome",
            ["route", "cache"],
            registry=self.registry,
        )
        self.engine_latency = Histogram(
            "ragloom_engine_query_duration_seconds",
            "Engine search/context latency (excluding transport), by route and cache outcome",
            ["route", "cache"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.jobs_finished = Counter(
            "ragloom_jobs_finished",
            "Re-index jobs finished, by final state",
            ["state"],
            registry=self.registry,
        )
        self.registry.register(_StateCollector(snapshot))

    def observe_request(self, route: str, status: int, seconds: float) -> None:
        labels = (route, str(status))
        self.requests.labels(*labels).inc()
        self.latency.labels(*labels).observe(max(0.0, seconds))

    def observe_query(self, route: str, cache_hit: bool, seconds: float) -> None:
        labels = (route, "hit" if cache_hit else "miss")
        self.queries.labels(*labels).inc()
        self.engine_latency.labels(*labels).observe(max(0.0, seconds))

    def text(self) -> str:
        return generate_latest(self.registry).decode("utf-8")
