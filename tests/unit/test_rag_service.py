"""RagService: lenient retries and fallback, strict errors, timeouts, hybrid, sync wrapper."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Coroutine, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pytest

from ragloom.errors import ConfigError, DbError, EmbeddingError, SearchError, TimeoutError_
from ragloom.retrieve.config import Hybrid, MmrConfig, RrfConfig
from ragloom.service.bm25_actor import (
    Bm25Actor,
    Bm25Engine,
    Building,
    Empty,
    Error,
    Ready,
    Uninitialized,
    tantivy_engine,
)
from ragloom.service.rag import (
    BM25_EMPTY_MESSAGE,
    BM25_NOT_READY_MESSAGE,
    Bm25Config,
    RagService,
    SyncRagService,
)

T = TypeVar("T")

W = 5000.0
"""Timeout for write commands in tests: a tantivy commit takes ~0.1-0.3 s on this machine."""

DOCS = [
    (1, "def parse_json(text): return decoder.decode(text)"),
    (2, "class HttpClient: def send_request(self, url): pass"),
    (3, "def dedent(text): remove common leading whitespace"),
    (4, "def wrap(text, width): wrap a paragraph of text"),
    (5, "class JSONDecoder: decode a json document"),
]
DENSE_HITS = [(40, 0.9), (5, 0.8), (41, 0.7)]


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


class ListSource:
    def __init__(self, docs: Sequence[tuple[int, str]], gate: threading.Event | None = None):
        self.docs = list(docs)
        self.gate = gate

    def batches(self) -> Iterable[Sequence[tuple[int, str]]]:
        if self.gate is not None:
            assert self.gate.wait(10)
        yield self.docs

    def generation(self) -> int | None:
        return None


class FakeDense:
    """Deterministic dense backend that records its calls."""

    def __init__(self, hits: list[tuple[int, float]] | None = None, exc: Exception | None = None):
        self.hits = DENSE_HITS if hits is None else hits
        self.exc = exc
        self.calls: list[tuple[str, int]] = []

    def __call__(self, query: str, k: int) -> list[tuple[int, float]]:
        self.calls.append((query, k))
        if self.exc is not None:
            raise self.exc
        return self.hits[:k]


class SleepRecorder:
    def __init__(self, on_sleep: Any = None) -> None:
        self.sleeps: list[float] = []
        self.on_sleep = on_sleep

    async def __call__(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        if self.on_sleep is not None:
            await self.on_sleep(len(self.sleeps))
        await asyncio.sleep(0)


class StuckEngine:
    def __init__(self, inner: Bm25Engine, gate: threading.Event) -> None:
        self.inner, self.gate, self.directory = inner, gate, inner.directory

    def search(self, query: str, k: int) -> list[tuple[int, float]]:
        self.gate.wait(10)
        return self.inner.search(query, k)

    def rowids(self) -> np.ndarray:
        return self.inner.rowids()

    def apply(self, add: Iterable[tuple[int, str]], remove: Sequence[int]) -> int:
        return self.inner.apply(add, remove)


async def ready_service(dense: Any = None, **kw: Any) -> RagService:
    actor = await Bm25Actor(ListSource(DOCS)).start()
    svc = RagService(actor, dense if dense is not None else FakeDense(), **kw)
    assert await svc.bm25_rebuild() == Ready(5)
    return svc


# -- lenient --------------------------------------------------------------------------------


def test_cold_start_retries_twice_with_50_100_ms_then_falls_back() -> None:
    async def go() -> None:
        sleep = SleepRecorder()
        dense = FakeDense()
        async with RagService(Bm25Actor(None), dense, sleep=sleep) as svc:
            res = await svc.search_bm25("json", 3)
        assert sleep.sleeps == [0.05, 0.1]
        assert res.attempts == 3
        assert res.fallback_used is True
        assert res.hits == DENSE_HITS
        assert res.bm25_status == Uninitialized()
        assert (res.bm25_results, res.dense_results) == (0, 3)
        assert dense.calls == [("json", 3)]

    run(go())


def test_cold_start_real_sleeps_take_150_ms() -> None:
    async def go() -> None:
        async with RagService(Bm25Actor(None), FakeDense()) as svc:
            t0 = time.perf_counter()
            res = await svc.search_bm25("json", 3)
            elapsed = time.perf_counter() - t0
        assert res.fallback_used and res.attempts == 3
        assert 0.15 <= elapsed < 5.0  # generous: a busy machine is slow

    run(go())


def test_building_index_that_becomes_ready_during_retries_answers_from_bm25() -> None:
    async def go() -> None:
        gate = threading.Event()
        actor = Bm25Actor(ListSource(DOCS, gate=gate))

        async def on_sleep(n: int) -> None:
            if n == 1:  # finish the build during the first backoff
                gate.set()
                done = svc.actor.current_status
                assert done == Building()
                while not isinstance(svc.actor.current_status, Ready):
                    await asyncio.sleep(0.005)

        sleep = SleepRecorder(on_sleep)
        dense = FakeDense()
        async with RagService(actor, dense, sleep=sleep) as svc:
            assert await svc.bm25_rebuild(wait=False) == Building()
            res = await svc.search_bm25("json", 3)
        assert res.fallback_used is False
        assert res.attempts == 2 and sleep.sleeps == [0.05]
        assert {r for r, _ in res.hits} == {1, 5}
        assert res.bm25_status == Ready(5)
        assert dense.calls == []

    run(go())


def test_empty_and_error_fall_back_at_once() -> None:
    async def go() -> None:
        sleep = SleepRecorder()
        async with RagService(Bm25Actor(ListSource([])), FakeDense(), sleep=sleep) as svc:
            assert await svc.bm25_rebuild() == Empty()
            res = await svc.search_bm25("json", 3)
            assert (res.fallback_used, res.attempts, res.bm25_status) == (True, 1, Empty())
        async with RagService(Bm25Actor(None), FakeDense(), sleep=sleep) as svc:
            with pytest.raises(DbError):
                await svc.bm25_rebuild()
            res = await svc.search_bm25("json", 3)
            assert res.fallback_used and res.attempts == 1
            assert isinstance(res.bm25_status, Error)
        assert sleep.sleeps == []

    run(go())


def test_ready_index_without_match_is_an_empty_answer_not_a_fallback() -> None:
    async def go() -> None:
        dense = FakeDense()
        svc = await ready_service(dense)
        try:
            res = await svc.search_bm25("zzzqqq", 3)
            assert (res.hits, res.fallback_used, res.attempts) == ([], False, 1)
            assert dense.calls == []
        finally:
            await svc.close()

    run(go())


def test_no_dense_backend_falls_back_to_nothing() -> None:
    async def go() -> None:
        async with RagService(Bm25Actor(None), None, sleep=SleepRecorder()) as svc:
            res = await svc.search_bm25("json", 3)
        assert res.hits == [] and res.fallback_used

    run(go())


# -- strict ---------------------------------------------------------------------------------


def test_strict_errors_are_exact() -> None:
    async def go() -> None:
        async with RagService(Bm25Actor(None), FakeDense()) as svc:
            with pytest.raises(SearchError) as ei:
                await svc.search_bm25_strict("json", 3)
            assert str(ei.value) == BM25_NOT_READY_MESSAGE == "bm25 index not ready"
            with pytest.raises(DbError):
                await svc.bm25_rebuild()  # -> Error
            with pytest.raises(SearchError, match=r"^bm25 index not ready$"):
                await svc.search_bm25_strict("json", 3)
        async with RagService(Bm25Actor(ListSource([])), FakeDense()) as svc:
            await svc.bm25_rebuild()
            with pytest.raises(SearchError) as ei:
                await svc.search_bm25_strict("json", 3)
            assert str(ei.value) == BM25_EMPTY_MESSAGE == "bm25 index empty"
        gate = threading.Event()
        async with RagService(Bm25Actor(ListSource(DOCS, gate=gate)), FakeDense()) as svc:
            await svc.bm25_rebuild(wait=False)
            with pytest.raises(SearchError, match=r"^bm25 index not ready$"):
                await svc.search_bm25_strict("json", 3)
            gate.set()

    run(go())


def test_strict_on_ready_index_returns_hits_or_nothing() -> None:
    async def go() -> None:
        dense = FakeDense()
        svc = await ready_service(dense)
        try:
            assert {r for r, _ in await svc.search_bm25_strict("json", 3)} == {1, 5}
            assert await svc.search_bm25_strict("zzzqqq", 3) == []
            assert dense.calls == []
        finally:
            await svc.close()

    run(go())


def test_strict_per_call_and_in_config() -> None:
    async def go() -> None:
        dense = FakeDense()
        async with RagService(Bm25Actor(None), dense) as svc:
            with pytest.raises(SearchError, match="not ready"):
                await svc.search_bm25("json", 3, strict=True)
        cfg = Bm25Config(strict_default=True)
        async with RagService(Bm25Actor(None), dense, config=cfg) as svc:
            with pytest.raises(SearchError, match="not ready"):
                await svc.search_bm25("json", 3)
            res = await svc.search_bm25("json", 3, strict=False)
            assert res.fallback_used
        assert len(dense.calls) == 1

    run(go())


# -- timeouts -------------------------------------------------------------------------------


def test_timeouts_map_to_typed_error_and_are_configurable() -> None:
    async def go() -> None:
        gate = threading.Event()

        def factory(d: Path, create: bool) -> Bm25Engine:
            return StuckEngine(tantivy_engine(d, create), gate)

        actor = Bm25Actor(ListSource(DOCS), engine_factory=factory)
        cfg = Bm25Config(timeout_ms=80)
        async with RagService(actor, FakeDense(), config=cfg) as svc:
            await svc.bm25_rebuild()
            t0 = time.perf_counter()
            with pytest.raises(TimeoutError_, match="bm25 search timed out after 80 ms"):
                await svc.search_bm25("json", 3)
            assert time.perf_counter() - t0 < 5.0  # not the stuck search's 10 s
            with pytest.raises(TimeoutError_, match="after 30 ms"):
                await svc.search_bm25_strict("json", 3, timeout_ms=30)
            with pytest.raises(TimeoutError_):
                await svc.hybrid_search("json", 3)
            with pytest.raises(TimeoutError_, match="bm25 status timed out"):
                await svc.bm25_status()
            gate.set()
            assert await svc.bm25_status(timeout_ms=W) == Ready(5)

    run(go())


def test_default_timeout_is_250_ms() -> None:
    assert Bm25Config().timeout_ms == 250.0
    assert Bm25Config().retries == 2 and Bm25Config().backoff_ms == (50.0, 100.0)
    assert Bm25Config().strict_default is False


@pytest.mark.parametrize(
    "kwargs",
    [{"timeout_ms": 0}, {"retries": -1}, {"retries": 3}, {"backoff_ms": (-1.0, 1.0)}],
)
def test_bad_config_is_config_error(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        Bm25Config(**kwargs)


# -- hybrid ---------------------------------------------------------------------------------


def test_hybrid_fuses_both_lists() -> None:
    async def go() -> None:
        dense = FakeDense()
        svc = await ready_service(dense)
        try:
            res = await svc.hybrid_search("json decode", 3)
        finally:
            await svc.close()
        assert not res.fallback_used and res.bm25_status == Ready(5)
        assert res.hits[0][0] == 5  # in both lists
        assert {r for r, _ in res.bm25} == {1, 5} and res.dense == DENSE_HITS
        assert len(res.hits) == 3 and dense.calls == [("json decode", 50)]

    run(go())


def test_hybrid_cold_start_uses_dense_alone_with_fallback_flag() -> None:
    async def go() -> None:
        async with RagService(Bm25Actor(None), FakeDense()) as svc:
            res = await svc.hybrid_search("json", 3)
            assert res.fallback_used and res.bm25_status == Uninitialized()
            assert [r for r, _ in res.hits] == [40, 5, 41]
            with pytest.raises(SearchError, match=r"^bm25 index not ready$"):
                await svc.hybrid_search("json", 3, strict=True)

    run(go())


def test_hybrid_dense_errors_propagate() -> None:
    async def go() -> None:
        svc = await ready_service(FakeDense(exc=EmbeddingError("model missing")))
        try:
            with pytest.raises(EmbeddingError, match="model missing"):
                await svc.hybrid_search("json", 3)
            svc.dense = FakeDense(exc=RuntimeError("hnsw broke"))
            with pytest.raises(SearchError, match="dense search failed: hnsw broke"):
                await svc.hybrid_search("json", 3)
        finally:
            await svc.close()

    run(go())


def test_hybrid_async_dense_and_strategies() -> None:
    async def adense(query: str, k: int) -> list[tuple[int, float]]:
        await asyncio.sleep(0)
        return DENSE_HITS[:k]

    def lookup(rowids: Sequence[int]) -> Mapping[int, np.ndarray]:
        return {r: np.array([1.0, 0.0]) if r in (1, 5) else np.array([0.0, 1.0]) for r in rowids}

    async def go() -> None:
        svc = await ready_service(adense, embeddings=lookup)
        try:
            dense = await svc.hybrid_search("json", 2, strategy="dense")
            assert dense.hits == DENSE_HITS[:2] and dense.bm25_status is None
            sparse = await svc.hybrid_search("json", 2, strategy="sparse")
            assert {r for r, _ in sparse.hits} == {1, 5} and not sparse.fallback_used
            strat = Hybrid(rrf=RrfConfig(k=10.0), mmr=MmrConfig(lambda_=0.3))
            mmr = await svc.hybrid_search("json decode", 2, strategy=strat)
            assert mmr.strategy == "hybrid_mmr" and "mmr" in mmr.timings_ms
            ids = [r for r, _ in mmr.hits]
            # diversity: one of the two near-identical {1, 5} and one of the others
            assert len(ids) == 2 and len({r in (1, 5) for r in ids}) == 2
            with pytest.raises(ConfigError):
                await svc.hybrid_search("json", 0)
            with pytest.raises(ConfigError):
                await svc.hybrid_search("json", 2, strategy="bogus")
        finally:
            await svc.close()

    run(go())


def test_sparse_strategy_cold_start_reports_fallback() -> None:
    async def go() -> None:
        async with RagService(Bm25Actor(None), FakeDense(), sleep=SleepRecorder()) as svc:
            res = await svc.hybrid_search("json", 3, strategy="sparse")
        assert res.fallback_used and res.dense == DENSE_HITS and res.bm25 == []

    run(go())


# -- persistence through the service ----------------------------------------------------------


def test_save_load_through_service(tmp_path: Path) -> None:
    async def go() -> None:
        svc = await ready_service(config=Bm25Config(persist_path=tmp_path / "s"))
        try:
            n = await svc.bm25_save(timeout_ms=W)
            assert n == (tmp_path / "s").stat().st_size
        finally:
            await svc.close()
        async with RagService(Bm25Actor(None), FakeDense()) as fresh:
            with pytest.raises(ConfigError, match="no bm25 snapshot path"):
                await fresh.bm25_save()
            assert await fresh.bm25_load(tmp_path / "s", timeout_ms=W) == n
            assert await fresh.bm25_status() == Ready(5)
            (tmp_path / "bad").write_bytes(b"junk")
            with pytest.raises(DbError, match="not a ragloom BM25 snapshot"):
                await fresh.bm25_load(tmp_path / "bad", timeout_ms=W)
            status = await fresh.bm25_status()
            assert isinstance(status, Error) and "bad magic" in status.message

    run(go())


# -- sync wrapper ---------------------------------------------------------------------------


def test_sync_wrapper(tmp_path: Path) -> None:
    with SyncRagService(lambda: RagService(Bm25Actor(ListSource(DOCS)), FakeDense())) as svc:
        assert svc.bm25_status() == Uninitialized()
        assert svc.search_bm25("json", 2).fallback_used
        assert svc.bm25_rebuild() == Ready(5)
        assert {r for r, _ in svc.search_bm25_strict("json", 5)} == {1, 5}
        assert svc.hybrid_search("json", 2).hits
        n = svc.bm25_save(tmp_path / "snap", timeout_ms=W)
        assert svc.bm25_load(tmp_path / "snap", timeout_ms=W) == n
        assert svc.search_bm25_strict("zzzqqq", 2) == []
    cold = SyncRagService(lambda: RagService(Bm25Actor(None), FakeDense()))
    with cold, pytest.raises(SearchError, match=r"^bm25 index not ready$"):
        cold.search_bm25_strict("json", 2)
    svc.close()  # idempotent
