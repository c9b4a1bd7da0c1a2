"""The serving layer's caches: keys, normalisation, TTL and size eviction, counters, threads."""

from __future__ import annotations

import threading

import numpy as np

from ragloom.server.cache import EmbeddingCache, ResultCache, normalize_query, result_key


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_normalize_collapses_whitespace_and_keeps_case() -> None:
    assert normalize_query("  parse\t the\n\nHeader  ") == "parse the Header"
    assert normalize_query("Parser") != normalize_query("parser")


def test_key_names_every_parameter() -> None:
    base = {"strategy": "hybrid", "top_k": 10, "generation": 3}
    k = result_key("search", "a  b", **base)  # type: ignore[arg-type]
    assert k == result_key("search", " a b ", **base)  # type: ignore[arg-type]
    others = [
        result_key("context", "a b", **base),  # type: ignore[arg-type]
        result_key("search", "A b", **base),  # type: ignore[arg-type]
        result_key("search", "a b", **{**base, "strategy": "sparse"}),  # type: ignore[arg-type]
        result_key("search", "a b", **{**base, "top_k": 5}),  # type: ignore[arg-type]
        result_key("search", "a b", **{**base, "generation": 4}),  # type: ignore[arg-type]
        result_key("search", "a b", **base, epoch=2),  # type: ignore[arg-type]
        result_key("search", "a b", **base, budget=100),  # type: ignore[arg-type]
        result_key("search", "a b", **base, format="markdown"),  # type: ignore[arg-type]
        result_key("search", "a b", **base, counter="o200k"),  # type: ignore[arg-type]
        result_key("search", "a b", **base, explain=True),  # type: ignore[arg-type]
    ]
    assert len({k, *others}) == len(others) + 1


def test_hits_misses_and_ttl_expiry() -> None:
    clock = Clock()
    cache = ResultCache(ttl_s=300, max_entries=10, timer=clock)
    assert cache.get("q") is None
    cache.put("q", {"hits": []})
    assert cache.get("q") == {"hits": []}
    clock.now = 299.0
    assert cache.get("q") is not None
    clock.now = 301.0
    assert cache.get("q") is None
    d = cache.to_dict()
    assert (d["hits"], d["misses"], d["evictions"], d["entries"]) == (2, 2, 1, 0)
    assert d["hit_rate"] == 0.5 and d["ttl_s"] == 300


def test_size_eviction_is_least_recently_used() -> None:
    cache = ResultCache(ttl_s=300, max_entries=2, timer=Clock())
    cache.put("a", {"v": 1})
    cache.put("b", {"v": 2})
    assert cache.get("a") is not None  # b is now the least recently used
    cache.put("c", {"v": 3})
    assert cache.get("b") is None
    assert cache.get("a") is not None and cache.get("c") is not None
    assert cache.stats.evictions == 1 and len(cache) == 2
    cache.put("c", {"v": 4})  # replacing a key evicts nothing
    assert cache.stats.evictions == 1


def test_disabled_cache_never_answers() -> None:
    cache = ResultCache(enabled=False)
    cache.put("q", {"x": 1})
    assert cache.get("q") is None and len(cache) == 0


def test_embedding_cache_returns_copies() -> None:
    cache = EmbeddingCache(max_entries=4)
    v = np.ones(3, dtype=np.float32)
    cache.store("m", "q", v)
    v[0] = 5.0  # the caller's array is not the cached one
    got = cache.lookup("m", "q")
    assert got is not None and got.tolist() == [1.0, 1.0, 1.0]
    got[1] = 7.0
    again = cache.lookup("m", "q")
    assert again is not None and again.tolist() == [1.0, 1.0, 1.0]
    assert cache.lookup("other-model", "q") is None
    assert cache.lookup("m", "q ") is None  # exact text


def test_counters_stay_exact_under_threads() -> None:
    cache = ResultCache(ttl_s=300, max_entries=50)
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        barrier.wait()
        try:
            for j in range(500):
                key = (i * 7 + j) % 80
                if cache.get(key) is None:
                    cache.put(key, {"k": key})
        except BaseException as exc:  # pragma: no cover - the assertion below reports it
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    st = cache.stats
    assert st.hits + st.misses == 8 * 500
    assert st.stores == st.misses
    assert len(cache) <= 50
    # concurrent misses of one key store it twice (the second replaces the first)
    assert 0 < st.evictions <= st.stores - len(cache)
