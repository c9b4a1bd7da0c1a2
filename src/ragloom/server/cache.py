"""The serving layer's caches (tamma phase 8): a query-result cache and a query-embedding cache.

Both are ``cachetools`` structures (a well-kept library: ``TTLCache`` expires entries and
evicts the least recently used one when full, ``LRUCache`` only evicts) behind one lock each:
cachetools structures are not thread-safe, and the engine is called from many threads.

**Result cache keys** (:func:`result_key`): the normalised query, the route (search or
context), the strategy, top_k, budget, format, counter, ``explain``, the index *epoch* (bumped
when the engine re-opens its reader, e.g. after ``ragloom index --rebuild`` restarted the
generation count) and the index *generation*. Any index update publishes a new generation, so
entries of the old one are never looked up again (they expire with the TTL or are evicted):
invalidation needs no scan and no callback from the indexer, even when another process
re-indexes.
The digest of the model the learned stage ranks with (:func:`ranking_digest`) and the change
history's version are part of the key too: a repository model written by ``ragloom adapt``,
fitted again from new ratings, or commits synced by ``ragloom index`` when no file changed
change answers without a new generation, and the next question after them is answered afresh
(the history's version is read again at most every second).

**Normalisation** (:func:`normalize_query`): leading/trailing whitespace is stripped and runs of
whitespace collapse to one space; case is kept. Case matters to code search: ``Parser`` (a
class) and ``parser`` (a variable or module) are different questions, ragloom's query
processing reads identifier case (camelCase splitting, keyword-style detection, entity lookup
against the symbol table), so case-folding would hand one question the other's answer.
Whitespace runs do not change what ragloom retrieves (BM25 tokenises on it, the embedding
tokenizer ignores it; tests/unit/test_server_cache.py checks the engine's answers agree).

**Embedding cache** (:class:`EmbeddingCache`): keyed by (model id, exact query text), no TTL
(an embedding of a text by a model never changes); a hit skips the ONNX run.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np
from cachetools import LRUCache, TTLCache

__all__ = [
    "CacheStats",
    "EmbeddingCache",
    "ResultCache",
    "normalize_query",
    "ranking_digest",
    "result_key",
]

V = TypeVar("V")

_WS = re.compile(r"\s+")


def normalize_query(query: str) -> str:
    """Whitespace collapsed and stripped, case kept (see the module docstring for why)."""
    return _WS.sub(" ", query).strip()


def ranking_digest(retriever: Any) -> str:
    """The digest of the model ``retriever``'s learned stage ranks with now (a repository
    model while one is in use); empty when the retriever names none (the shipped model, fixed
    for the process)."""
    ranker = getattr(retriever, "ranker", None)
    return str(getattr(ranker, "digest", "")) if ranker is not None else ""


def result_key(
    route: str,
    query: str,
    *,
    strategy: str,
    top_k: int,
    budget: int | None = None,
    format: str | None = None,
    counter: str | None = None,
    explain: bool = False,
    epoch: int = 0,
    generation: int,
    structure: str = "off",
    ranking: str = "",
) -> tuple[Hashable, ...]:
    """The result-cache key of one request (everything that changes its answer). ``ranking``:
    what else changes answers within one generation (the reader's ``ranking_state``: the
    learned stage's model digest, a repository model written by ``ragloom adapt`` or fitted
    again from new ratings, and the change history's version)."""
    key: tuple[Hashable, ...] = (
        route,
        normalize_query(query),
        strategy,
        top_k,
        budget,
        format,
        counter,
        explain,
        epoch,
        generation,
    )
    if ranking:
        key = (*key, ranking)
    return key if structure == "off" else (*key, structure)


@dataclass(slots=True)
class CacheStats:
    """Counters of one cache (reported by ``status`` and ``/metrics``)."""

    hits: int = 0
    misses: int = 0
    evictions: int = 0
    """Entries pushed out by size (the least recently used) or by age (the TTL)."""
    stores: int = 0
    coalesced: int = 0
    """Misses that waited for an identical request in flight instead of computing (result
    cache only; counted as misses too, since the cache did not hold the answer)."""

    @property
    def hit_rate(self) -> float:
        total = self.hits + self.misses
        return self.hits / total if total else 0.0


class _CountingTTL(TTLCache[Hashable, V]):
    """TTLCache reporting what leaves it: ``popitem`` is how cachetools evicts by size,
    ``expire`` how it drops entries past their TTL (called inside most operations)."""

    def __init__(
        self, maxsize: int, ttl: float, timer: Callable[[], float], gone: Callable[[int], None]
    ):
        super().__init__(maxsize=maxsize, ttl=ttl, timer=timer)
        self._gone = gone

    def popitem(self) -> tuple[Hashable, V]:
        item = super().popitem()
        self._gone(1)
        return item

    def expire(self, time: float | None = None) -> list[tuple[Hashable, V]]:
        expired = list(super().expire(time))
        if expired:
            self._gone(len(expired))
        return expired


class _CountingLRU(LRUCache[Hashable, V]):
    """LRUCache reporting its size evictions."""

    def __init__(self, maxsize: int, gone: Callable[[int], None]) -> None:
        super().__init__(maxsize=maxsize)
        self._gone = gone

    def popitem(self) -> tuple[Hashable, V]:
        item = super().popitem()
        self._gone(1)
        return item


class _Counted(Generic[V]):
    """A cachetools cache behind a lock, counting hits, misses and evictions."""

    def __init__(self, enabled: bool) -> None:
        self._lock = threading.Lock()
        self.enabled = enabled
        self.stats = CacheStats()
        self._cache: LRUCache[Hashable, V] | TTLCache[Hashable, V] = LRUCache(maxsize=1)

    def _evicted(self, n: int) -> None:
        self.stats.evictions += n  # called by the cache, inside our lock

    def get(self, key: Hashable) -> V | None:
        if not self.enabled:
            return None
        with self._lock:
            value = self._cache.get(key)
            if value is None:
                self.stats.misses += 1
            else:
                self.stats.hits += 1
            return value

    def put(self, key: Hashable, value: V) -> None:
        if not self.enabled:
            return
        with self._lock:
            self._cache[key] = value
            self.stats.stores += 1

    def count_coalesced(self) -> None:
        with self._lock:
            self.stats.coalesced += 1

    def clear(self) -> None:
        with self._lock:
            self._cache.clear()

    def __len__(self) -> int:
        with self._lock:
            self._expire()
            return len(self._cache)

    def _expire(self) -> None:
        if isinstance(self._cache, TTLCache):
            self._cache.expire()

    @property
    def maxsize(self) -> float:
        return float(self._cache.maxsize)

    def to_dict(self) -> dict[str, Any]:
        """``status`` form: enabled, size, max size, hits, misses, evictions, hit rate."""
        with self._lock:
            self._expire()
            size = len(self._cache)
            st = self.stats
            return {
                "enabled": self.enabled,
                "entries": size,
                "max_entries": int(self._cache.maxsize),
                "hits": st.hits,
                "misses": st.misses,
                "evictions": st.evictions,
                "hit_rate": st.hit_rate,
                "coalesced": st.coalesced,
            }


class ResultCache(_Counted[dict[str, Any]]):
    """Query results by :func:`result_key`, for ``ttl_s`` seconds, at most ``max_entries``."""

    def __init__(
        self,
        *,
        ttl_s: float = 300.0,
        max_entries: int = 1000,
        enabled: bool = True,
        timer: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(enabled)
        self._cache = _CountingTTL(max(1, max_entries), ttl_s, timer, self._evicted)
        self.ttl_s = ttl_s

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "ttl_s": self.ttl_s}


class EmbeddingCache(_Counted[np.ndarray]):
    """Query embeddings by (model id, exact text); least recently used out first."""

    def __init__(self, *, max_entries: int = 1000, enabled: bool = True) -> None:
        super().__init__(enabled)
        self._cache = _CountingLRU(max(1, max_entries), self._evicted)

    def lookup(self, model_id: str, text: str) -> np.ndarray | None:
        """A copy of the cached vector (callers may not mutate the shared one)."""
        got = self.get((model_id, text))
        return None if got is None else got.copy()

    def store(self, model_id: str, text: str, vector: np.ndarray) -> None:
        self.put((model_id, text), np.array(vector, dtype=np.float32, copy=True))
