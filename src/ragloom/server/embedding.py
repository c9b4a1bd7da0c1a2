"""Query-embedding wrappers for a warm server: micro-batching and the embedding cache.

Both are :class:`ragloom.embed.base.Embedder` implementations wrapping another embedder, so the
engine hands them to :class:`ragloom.api.Index` like any embedder and the library's own query
path (``Retriever.embed_query``) uses them unchanged; a CLI or API caller that does not go
through the engine never sees them.

**Micro-batching** (:class:`BatchingEmbedder`): an ONNX run has a fixed cost (operator
dispatch, thread hand-offs) that a batch of queries shares. Concurrent ``embed_query`` calls
join one open batch; its first caller (the leader) waits up to ``window_ms`` for company (woken
early when the batch is full), then runs the whole batch as ONE ``embed_documents`` call of the
wrapped embedder, and every caller takes its row. Calls that arrive while a batch runs queue in
the next batch, whose leader runs it as soon as the running one ends, so under load batches
form even with no window. A lone query runs at once, without the window, which would only
add latency there (2-3 ms per question, docs/benchmarks.md "Cost of one question"): lone when
``company`` (the engine's count of answers being computed, this one included) says no other
question is in flight, or, without ``company``, when the batcher was idle (no call within the
last ``idle_s``; 0 turns this off).

Every shipped embedder defines ``embed_query(t)`` as ``embed_documents([t])[0]``, which is what
makes batching queries through ``embed_documents`` the same computation. For a row-independent
model (fp32 ONNX, the hashing embedder) batched vectors equal unbatched ones. The shipped
MiniLM is int8 with *dynamic* quantisation: each activation tensor is quantised with one scale
taken over the whole batch, so a query's vector depends slightly on its batch-mates (cosine
0.996-0.997 to its unbatched vector, measured; identical when the batch holds only copies of
it). docs/serving.md measures what that does to rankings; ``window_ms=0`` turns batching off
(every query embedded alone, exactly as the CLI does).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ragloom.embed.base import DEFAULT_BATCH_SIZE, Embedder, ProgressCallback
from ragloom.server.cache import EmbeddingCache

__all__ = ["BatchStats", "BatchingEmbedder", "CachingEmbedder"]


@dataclass(slots=True)
class _Batch:
    texts: list[str] = field(default_factory=list)
    full: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    result: np.ndarray | None = None
    error: BaseException | None = None


@dataclass(slots=True)
class BatchStats:
    """What the batcher did: queries in, underlying calls out."""

    queries: int = 0
    batches: int = 0
    largest: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "queries": self.queries,
            "batches": self.batches,
            "largest_batch": self.largest,
            "mean_batch": self.queries / self.batches if self.batches else 0.0,
        }


class _Wrapper:
    """An embedder around ``inner`` that changes only :meth:`embed_query`: the model's
    identity and document embedding are the wrapped one's (documents come in batches
    already)."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dim(self) -> int:
        return self.inner.dim

    @property
    def spec(self) -> str:
        return str(getattr(self.inner, "spec", self.inner.model_id))

    def embed_documents(
        self,
        texts: Sequence[str],
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        progress: ProgressCallback | None = None,
    ) -> np.ndarray:
        """Documents go straight to the wrapped embedder."""
        return self.inner.embed_documents(texts, batch_size=batch_size, progress=progress)


class BatchingEmbedder(_Wrapper):
    """Coalesces concurrent :meth:`embed_query` calls into one ``embed_documents`` call."""

    def __init__(
        self,
        inner: Embedder,
        *,
        window_ms: float = 2.0,
        max_batch: int = DEFAULT_BATCH_SIZE,
        idle_s: float = 0.05,
        company: Callable[[], int] | None = None,
    ) -> None:
        super().__init__(inner)
        self.window_s = max(0.0, window_ms) / 1000.0
        self.max_batch = max(1, max_batch)
        self.idle_s = idle_s
        self.company = company
        """Questions in flight now, the caller's included (None: judge by ``idle_s``)."""
        self.stats = BatchStats()
        self._lock = threading.Lock()
        self._run_lock = threading.Lock()
        self._open: _Batch | None = None
        self._last_arrival = 0.0

    def embed_query(self, text: str) -> np.ndarray:
        """The vector of ``text``, computed in a batch with concurrent callers' queries
        (a window of 0 turns batching off: every query is embedded alone)."""
        if self.window_s <= 0:
            vec: np.ndarray = self.inner.embed_query(text)
            return vec
        now = time.monotonic()
        with self._lock:
            if self.company is not None:
                idle = self.company() <= 1
            else:
                idle = self.idle_s > 0 and now - self._last_arrival > self.idle_s
            self._last_arrival = now
            batch = self._open
            leader = batch is None
            if batch is None:
                batch = self._open = _Batch()
            row = len(batch.texts)
            batch.texts.append(text)
            if len(batch.texts) >= self.max_batch:
                self._open = None  # full: the next caller opens a new batch
                batch.full.set()
        if leader:
            if self.window_s > 0 and not idle:
                batch.full.wait(self.window_s)
            self._run(batch)
        else:
            batch.done.wait()
        if batch.error is not None:
            raise batch.error
        assert batch.result is not None
        out: np.ndarray = batch.result[row].copy()
        return out

    def _run(self, batch: _Batch) -> None:
        with self._run_lock:  # one batch at a time: the next one fills meanwhile
            with self._lock:
                if self._open is batch:
                    self._open = None
                texts = list(batch.texts)
            try:
                batch.result = self.inner.embed_documents(texts, batch_size=len(texts))
            except BaseException as exc:  # every waiter re-raises it
                batch.error = exc
            finally:
                with self._lock:
                    self.stats.queries += len(texts)
                    self.stats.batches += 1
                    self.stats.largest = max(self.stats.largest, len(texts))
                batch.done.set()


class CachingEmbedder(_Wrapper):
    """An embedder whose :meth:`embed_query` answers repeated texts from an
    :class:`~ragloom.server.cache.EmbeddingCache` (keyed by model id and exact text)."""

    def __init__(self, inner: Embedder, cache: EmbeddingCache) -> None:
        super().__init__(inner)
        self.cache = cache

    def embed_query(self, text: str) -> np.ndarray:
        model = self.inner.model_id
        got = self.cache.lookup(model, text)
        if got is not None:
            return got
        vec = self.inner.embed_query(text)
        self.cache.store(model, text, vec)
        return vec
