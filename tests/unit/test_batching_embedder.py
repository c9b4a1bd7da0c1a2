"""Micro-batching of concurrent query embeddings, and the query-embedding cache wrapper."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
import pytest

from ragloom.embed.base import DEFAULT_BATCH_SIZE, HashingEmbedder, ProgressCallback
from ragloom.errors import EmbeddingError
from ragloom.server.cache import EmbeddingCache
from ragloom.server.embedding import BatchingEmbedder, CachingEmbedder


class CountingEmbedder(HashingEmbedder):
    """The deterministic hashing embedder, recording each ``embed_documents`` call."""

    def __init__(self, fail: bool = False) -> None:
        super().__init__(64)
        self.calls: list[int] = []
        self.fail = fail
        self._calls_lock = threading.Lock()

    def embed_documents(
        self,
        texts: Sequence[str],
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        progress: ProgressCallback | None = None,
    ) -> np.ndarray:
        with self._calls_lock:
            self.calls.append(len(texts))
        if self.fail:
            raise EmbeddingError("model exploded")
        return super().embed_documents(texts, batch_size=batch_size, progress=progress)


def _concurrent(emb: BatchingEmbedder, texts: list[str]) -> list[np.ndarray | BaseException]:
    out: list[np.ndarray | BaseException] = [np.zeros(0)] * len(texts)
    barrier = threading.Barrier(len(texts))

    def run(i: int) -> None:
        barrier.wait()
        try:
            out[i] = emb.embed_query(texts[i])
        except BaseException as exc:
            out[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(texts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def test_concurrent_queries_share_few_batches_and_match_unbatched() -> None:
    inner = CountingEmbedder()
    # a window generous enough for 16 threads to arrive in on a busy machine (they all do,
    # long before it ends: the leader waits it out, as 16 < max_batch)
    batcher = BatchingEmbedder(inner, window_ms=1000.0, idle_s=0.0)
    texts = [f"query number {i} about parsing" for i in range(16)]
    got = _concurrent(batcher, texts)
    assert sum(inner.calls) == 16
    assert len(inner.calls) <= 3, inner.calls  # 16 threads, one window: one or two batches
    reference = HashingEmbedder(64)
    for text, vec in zip(texts, got, strict=True):
        assert isinstance(vec, np.ndarray)
        assert np.array_equal(vec, reference.embed_query(text))
    st = batcher.stats.to_dict()
    assert st["queries"] == 16 and st["batches"] == len(inner.calls)
    assert st["largest_batch"] >= 8


def test_a_full_batch_runs_without_waiting_for_the_window() -> None:
    inner = CountingEmbedder()
    batcher = BatchingEmbedder(inner, window_ms=60_000.0, max_batch=4, idle_s=0.0)
    got = _concurrent(batcher, [f"q{i}" for i in range(8)])  # would hang a minute otherwise
    assert all(isinstance(v, np.ndarray) for v in got)
    assert sorted(inner.calls) == [4, 4]


def test_a_lone_query_on_an_idle_batcher_does_not_wait() -> None:
    inner = CountingEmbedder()
    batcher = BatchingEmbedder(inner, window_ms=60_000.0, idle_s=3600.0)
    batcher._last_arrival = -1e9  # long idle
    vec = batcher.embed_query("alone")  # returns at once: would wait a minute otherwise
    assert np.array_equal(vec, HashingEmbedder(64).embed_query("alone"))
    assert inner.calls == [1]


def test_the_only_question_in_flight_does_not_wait_even_right_after_another() -> None:
    inner = CountingEmbedder()
    in_flight = [1]
    batcher = BatchingEmbedder(
        inner, window_ms=60_000.0, idle_s=3600.0, company=lambda: in_flight[0]
    )
    for i in range(3):  # back to back: the idle rule alone would wait a minute each
        batcher.embed_query(f"q{i}")
    assert inner.calls == [1, 1, 1]


def test_with_company_in_flight_the_leader_waits_for_it() -> None:
    inner = CountingEmbedder()
    batcher = BatchingEmbedder(inner, window_ms=60_000.0, max_batch=4, company=lambda: 4)
    got = _concurrent(batcher, [f"q{i}" for i in range(4)])  # one full batch, no waiting
    assert all(isinstance(v, np.ndarray) for v in got)
    assert inner.calls == [4]


def test_an_error_reaches_every_caller_of_the_batch() -> None:
    batcher = BatchingEmbedder(CountingEmbedder(fail=True), window_ms=50.0, idle_s=0.0)
    got = _concurrent(batcher, [f"q{i}" for i in range(6)])
    assert all(isinstance(g, EmbeddingError) for g in got)
    # and the batcher still works afterwards
    batcher.inner = CountingEmbedder()
    assert batcher.embed_query("after").shape == (64,)


def test_caching_embedder_skips_the_model_on_a_repeat() -> None:
    inner = CountingEmbedder()
    cache = EmbeddingCache(max_entries=10)
    emb = CachingEmbedder(inner, cache)
    a = emb.embed_query("parse the header")
    b = emb.embed_query("parse the header")
    assert np.array_equal(a, b) and inner.calls == [1]
    emb.embed_query("parse the  header")  # exact text: another entry
    assert inner.calls == [1, 1]
    assert (cache.stats.hits, cache.stats.misses) == (1, 2)
    assert emb.model_id == inner.model_id and emb.dim == 64


@pytest.fixture(scope="module")
def onnx() -> object:
    from ragloom.embed.registry import load_embedder

    return load_embedder("default")


def test_shipped_model_batched_vectors_agree_with_unbatched(onnx: object) -> None:
    from ragloom.embed.base import Embedder

    assert isinstance(onnx, Embedder)
    texts = [
        "decode a JSON document",
        "where are HTTP headers parsed?",
        "TokenBudget.for_total",
        "how does the writer lock work when two processes index at once",
        "csv",
        "retry with exponential backoff and jitter",
        "parse_header",
        "which function renders the context as markdown",
    ]
    batcher = BatchingEmbedder(onnx, window_ms=200.0, idle_s=0.0)
    got = _concurrent(batcher, texts)
    assert batcher.stats.batches <= 3
    for text, vec in zip(texts, got, strict=True):
        assert isinstance(vec, np.ndarray)
        ref = onnx.embed_query(text)
        # the int8 model quantises activations with one scale per batch tensor, so a row
        # moves a little with its batch-mates (measured cosine 0.996-0.997), never far
        assert float(np.dot(vec, ref)) > 0.99


def test_shipped_model_window_zero_is_exactly_unbatched(onnx: object) -> None:
    from ragloom.embed.base import Embedder

    assert isinstance(onnx, Embedder)
    texts = ["decode a JSON document", "parse_header", "retry with backoff", "csv"]
    batcher = BatchingEmbedder(onnx, window_ms=0.0)
    got = _concurrent(batcher, texts)
    assert batcher.stats.batches == 0  # nothing went through a batch
    for text, vec in zip(texts, got, strict=True):
        assert isinstance(vec, np.ndarray)
        assert np.array_equal(vec, onnx.embed_query(text))
