"""The BM25 service on a real index (stdlib ``json`` + ``textwrap``, real chunker, real
embedding model): rebuild, strict cold start, snapshots across processes, corruption."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest

from ragloom.api import Index
from ragloom.errors import DbError, SearchError
from ragloom.index.bm25 import TantivyBm25
from ragloom.index.store import Store
from ragloom.service import (
    DEFAULT_SNAPSHOT_NAME,
    Empty,
    Error,
    RagService,
    Ready,
    bm25_state_for_index,
)
from tests.conftest import copy_stdlib_packages

pytestmark = pytest.mark.integration

T = TypeVar("T")
W = 10_000.0
"""Timeout for writes (save/load) in tests; reads keep the 250 ms default."""
QUERIES = ["decode a JSON document", "JSONDecodeError", "dedent text", "wrap paragraph width"]
SRC = Path(__file__).resolve().parents[2] / "src"


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = copy_stdlib_packages(tmp_path_factory.mktemp("corpus"), ["json", "textwrap"])
    idx = Index.at(root)
    idx.index(embed=True)
    idx.close()
    return idx.index_dir


def _chunks(index_dir: Path) -> int:
    store = Store(index_dir / "index.sqlite", readonly=True)
    try:
        return store.chunk_count()
    finally:
        store.close()


def test_strict_before_build_then_rebuild_searches_without_fallback(index_dir: Path) -> None:
    async def go() -> dict[str, list[tuple[int, float]]]:
        async with RagService.for_index(index_dir) as svc:
            with pytest.raises(SearchError, match=r"^bm25 index not ready$"):
                await svc.search_bm25_strict(QUERIES[0], 5)
            status = await svc.bm25_rebuild()
            assert status == Ready(_chunks(index_dir))
            out = {}
            for q in QUERIES:
                res = await svc.search_bm25(q, 5)
                assert res.hits and not res.fallback_used and res.attempts == 1
                assert await svc.search_bm25_strict(q, 5) == res.hits
                out[q] = res.hits
            hybrid = await svc.hybrid_search(QUERIES[0], 5)
            assert hybrid.hits and hybrid.bm25 and hybrid.dense and not hybrid.fallback_used
            return out

    got = run(go())
    # the actor's index equals the indexer's BM25 index (same documents, same tokens)
    engine = TantivyBm25(index_dir / "bm25")
    for q, hits in got.items():
        ref = engine.search(q, 5)
        assert [r for r, _ in hits] == [r for r, _ in ref]
        assert [s for _, s in hits] == pytest.approx([s for _, s in ref], rel=1e-5)


def test_hybrid_cold_start_falls_back_to_real_dense(index_dir: Path) -> None:
    async def go() -> None:
        async with RagService.for_index(index_dir) as svc:
            res = await svc.hybrid_search(QUERIES[0], 5)
            assert res.fallback_used and res.bm25 == [] and len(res.hits) == 5
            assert [r for r, _ in res.hits] == [r for r, _ in res.dense[:5]]

    run(go())


_CHILD = textwrap.dedent(
    """
    import asyncio, json, sys, time
    from pathlib import Path
    from ragloom.service import Bm25Actor, RagService

    async def main():
        snap, queries = Path(sys.argv[1]), json.loads(sys.argv[2])
        # no document source: a rebuild is impossible, so answers can only come from Load
        async with RagService(Bm25Actor(None)) as svc:
            t0 = time.perf_counter()
            await svc.bm25_load(snap, timeout_ms=10000)
            load_ms = (time.perf_counter() - t0) * 1000
            out = {}
            for q in queries:
                res = await svc.search_bm25(q, 5)
                assert not res.fallback_used and res.attempts == 1
                out[q] = res.hits
            status = await svc.bm25_status()
            print(json.dumps({"hits": out, "docs": status.docs, "load_ms": load_ms}))

    asyncio.run(main())
    """
)


def test_save_then_load_in_fresh_process_answers_identically(
    index_dir: Path, tmp_path: Path
) -> None:
    snap = tmp_path / DEFAULT_SNAPSHOT_NAME

    async def go() -> dict[str, list[tuple[int, float]]]:
        async with RagService.for_index(index_dir) as svc:
            await svc.bm25_rebuild()
            assert await svc.bm25_save(snap, timeout_ms=W) == snap.stat().st_size
            return {q: (await svc.search_bm25(q, 5)).hits for q in QUERIES}

    expected = run(go())
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, str(snap), json.dumps(QUERIES)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    child = json.loads(proc.stdout)
    assert child["docs"] == _chunks(index_dir)
    got = {q: [(int(r), float(s)) for r, s in hits] for q, hits in child["hits"].items()}
    assert got == expected


def _corrupt(snap: Path, how: str) -> None:
    data = bytearray(snap.read_bytes())
    if how == "flip":
        data[len(data) // 2] ^= 0x01
    else:  # wrong format version
        old = b'"format_version": 1'
        assert old in data
        data = bytearray(bytes(data).replace(old, b'"format_version": 9'))
    snap.write_bytes(bytes(data))


@pytest.mark.parametrize(
    ("how", "message"), [("flip", "checksum mismatch"), ("version", "format version 9")]
)
def test_bad_snapshot_is_error_and_rebuild_recovers(
    index_dir: Path, tmp_path: Path, how: str, message: str
) -> None:
    snap = tmp_path / "s"

    async def go() -> None:
        async with RagService.for_index(index_dir) as svc:
            await svc.bm25_rebuild()
            await svc.bm25_save(snap, timeout_ms=W)
        _corrupt(snap, how)
        async with RagService.for_index(index_dir) as svc:
            with pytest.raises(DbError, match=message):
                await svc.bm25_load(snap, timeout_ms=W)
            status = await svc.bm25_status()
            assert isinstance(status, Error) and message in status.message
            assert "rebuild" in status.message
            assert await svc.bm25_rebuild() == Ready(_chunks(index_dir))
            assert (await svc.search_bm25_strict(QUERIES[0], 5))[0]

    run(go())


def test_bm25_state_for_index(index_dir: Path) -> None:
    state = bm25_state_for_index(index_dir)
    assert state["live_status"] == "ready" and state["live_docs"] == _chunks(index_dir)

    async def go() -> None:
        async with RagService.for_index(index_dir) as svc:  # default path <index>/bm25.snapshot
            await svc.bm25_rebuild()
            await svc.bm25_save(timeout_ms=W)

    snap = index_dir / DEFAULT_SNAPSHOT_NAME
    try:
        run(go())
        state = bm25_state_for_index(index_dir)
        header = state["snapshot"]
        assert isinstance(header, dict) and header["doc_count"] == _chunks(index_dir)
        assert state["snapshot_error"] is None and state["snapshot_stale"] is False
        snap.write_bytes(b"garbage!")
        state = bm25_state_for_index(index_dir)
        assert state["snapshot"] is None and "bad magic" in str(state["snapshot_error"])
    finally:
        snap.unlink(missing_ok=True)


def test_empty_repository_rebuilds_to_empty(tmp_path: Path) -> None:
    root = tmp_path / "empty"
    root.mkdir()
    idx = Index.at(root)
    idx.index(embed=False)
    idx.close()

    async def go() -> None:
        async with RagService.for_index(idx.index_dir) as svc:
            assert await svc.bm25_rebuild() == Empty()
            with pytest.raises(SearchError, match=r"^bm25 index empty$"):
                await svc.search_bm25_strict("anything", 3)

    run(go())


def test_sync_service_hydrates_hits(index_dir: Path) -> None:
    from ragloom.service.rag import SyncRagService

    svc = SyncRagService.for_index(index_dir)
    try:
        svc.bm25_rebuild()
        result = svc.hybrid_search("decode a JSON document", 5)
        hits = svc.hydrate(result.hits)
        assert hits and hits[0].path.startswith("json/") and hits[0].text
        assert [h.score for h in hits] == [s for _, s in result.hits][: len(hits)]
    finally:
        svc.close()
