"""The BM25 actor: status machine, commands, timeouts and snapshots (real tantivy engines)."""

from __future__ import annotations

import asyncio
import json
import re
import struct
import threading
import time
from collections.abc import Coroutine, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragloom.errors import ChannelError, DbError, TimeoutError_
from ragloom.index.tokenize import TOKENIZER_VERSION
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
from ragloom.service.persist import (
    SNAPSHOT_FORMAT_VERSION,
    SNAPSHOT_MAGIC,
    load_snapshot,
    read_header,
    save_snapshot,
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


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


class ListSource:
    """A document source over a list; can fail a number of times or wait on a gate."""

    def __init__(
        self,
        docs: Sequence[tuple[int, str]],
        *,
        fail_times: int = 0,
        gate: threading.Event | None = None,
    ) -> None:
        self.docs = list(docs)
        self.fail_times = fail_times
        self.gate = gate
        self.calls = 0

    def batches(self) -> Iterable[Sequence[tuple[int, str]]]:
        self.calls += 1
        if self.gate is not None:
            assert self.gate.wait(10), "test gate never opened"
        if self.fail_times > 0:
            self.fail_times -= 1
            raise OSError("store unreadable")
        for i in range(0, len(self.docs), 2):
            yield self.docs[i : i + 2]

    def generation(self) -> int | None:
        return 3


class SlowEngine:
    """A real engine whose search waits ``delay`` seconds (or on ``gate``)."""

    def __init__(self, inner: Bm25Engine, delay: float, gate: threading.Event | None) -> None:
        self.inner = inner
        self.directory = inner.directory
        self.delay = delay
        self.gate = gate

    def search(self, query: str, k: int) -> list[tuple[int, float]]:
        if self.gate is not None:
            self.gate.wait(10)
        time.sleep(self.delay)
        return self.inner.search(query, k)

    def rowids(self) -> np.ndarray:
        return self.inner.rowids()

    def apply(self, add: Iterable[tuple[int, str]], remove: Sequence[int]) -> int:
        return self.inner.apply(add, remove)


# -- status machine ---------------------------------------------------------------------------


def test_uninitialized_then_rebuild_ready_with_exact_docs() -> None:
    async def go() -> None:
        async with Bm25Actor(ListSource(DOCS)) as actor:
            assert await actor.status() == Uninitialized()
            assert await actor.search("json", 5) == []
            done = await actor.rebuild()
            assert await done == Ready(len(DOCS))
            assert await actor.status() == Ready(5)
            hits = await actor.search("json decode", 5)
            assert {r for r, _ in hits} == {1, 5}
            assert hits == sorted(hits, key=lambda h: -h[1])

    run(go())


def test_rebuild_with_no_documents_is_empty() -> None:
    async def go() -> None:
        async with Bm25Actor(ListSource([])) as actor:
            assert await (await actor.rebuild()) == Empty()
            assert await actor.status() == Empty()

    run(go())


def test_rebuild_without_source_is_error() -> None:
    async def go() -> None:
        async with Bm25Actor(None) as actor:
            done = await actor.rebuild()
            with pytest.raises(DbError, match="no document source"):
                await done
            status = await actor.status()
            assert isinstance(status, Error)
            assert "no document source" in status.message

    run(go())


def test_building_is_visible_and_status_answers_while_building() -> None:
    async def go() -> None:
        gate = threading.Event()
        async with Bm25Actor(ListSource(DOCS, gate=gate)) as actor:
            done = await actor.rebuild()
            # status answers within its 250 ms timeout while the build is blocked
            assert await actor.status() == Building()
            assert await actor.search("json", 5) == []
            gate.set()
            assert await done == Ready(5)

    run(go())


def test_ready_to_building_serves_old_engine_then_ready() -> None:
    async def go() -> None:
        gate = threading.Event()
        gate.set()
        source = ListSource(DOCS, gate=gate)
        async with Bm25Actor(source) as actor:
            assert await (await actor.rebuild()) == Ready(5)
            gate.clear()
            source.docs = DOCS[:2]
            done = await actor.rebuild()
            assert await actor.status() == Building()
            assert {r for r, _ in await actor.search("json", 5)} == {1, 5}  # old engine
            gate.set()
            assert await done == Ready(2)
            assert {r for r, _ in await actor.search("json", 5)} == {1}

    run(go())


def test_error_then_rebuild_recovers_through_building() -> None:
    async def go() -> None:
        gate = threading.Event()
        gate.set()
        source = ListSource(DOCS, fail_times=1, gate=gate)
        async with Bm25Actor(source) as actor:
            with pytest.raises(DbError, match="bm25 rebuild failed: store unreadable"):
                await (await actor.rebuild())
            status = await actor.status()
            assert isinstance(status, Error) and "store unreadable" in status.message
            assert await actor.search("json", 5) == []
            gate.clear()
            done = await actor.rebuild()
            seen = [await actor.status()]
            gate.set()
            seen.append(await done)
            assert seen == [Building(), Ready(5)]

    run(go())


def test_index_batch_remove_finalize_seed() -> None:
    async def go() -> None:
        async with Bm25Actor(None) as actor:
            assert await actor.finalize_seed(timeout_ms=W) == Empty()
            assert await actor.index_batch(DOCS[:3], timeout_ms=W) == Ready(3)
            assert await actor.index_batch(
                [(3, "replaced text"), (9, "json thing")], timeout_ms=W
            ) == Ready(4)
            assert {r for r, _ in await actor.search("json", 5)} == {1, 9}
            assert await actor.remove([1, 2, 3, 9], timeout_ms=W) == Empty()
            assert await actor.search("json", 5) == []

    run(go())


def test_writes_are_refused_in_error() -> None:
    async def go() -> None:
        async with Bm25Actor(None) as actor:
            with pytest.raises(DbError):
                await (await actor.rebuild())
            for call in (
                actor.index_batch(DOCS, timeout_ms=W),
                actor.remove([1], timeout_ms=W),
                actor.finalize_seed(timeout_ms=W),
            ):
                with pytest.raises(DbError, match=r"in error .*rebuild"):
                    await call

    run(go())


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.booleans(), st.lists(st.integers(1, 12), max_size=5)),
        min_size=1,
        max_size=6,
    )
)
def test_ready_docs_is_exact(ops: list[tuple[bool, list[int]]]) -> None:
    """Property: after any IndexBatch/Remove sequence, Ready.docs is the size of the id set."""

    async def go() -> None:
        model: set[int] = set()
        async with Bm25Actor(None) as actor:
            for add, ids in ops:
                if add:
                    status = await actor.index_batch(
                        [(i, f"doc number {i} text") for i in ids], timeout_ms=W
                    )
                    model |= set(ids)
                else:
                    status = await actor.remove(ids, timeout_ms=W)
                    model -= set(ids)
                if actor.current_status == Uninitialized():
                    assert not model
                    continue
                assert status == (Ready(len(model)) if model else Empty())

    run(go())


# -- timeouts and channel errors --------------------------------------------------------------


def test_stuck_search_times_out_with_typed_error() -> None:
    async def go() -> None:
        gate = threading.Event()

        def factory(d: Path, create: bool) -> Bm25Engine:
            return SlowEngine(tantivy_engine(d, create), 0.0, gate)

        async with Bm25Actor(None, engine_factory=factory) as actor:
            await actor.index_batch(DOCS, timeout_ms=W)
            t0 = time.perf_counter()
            with pytest.raises(TimeoutError_, match="bm25 search timed out after 60 ms") as ei:
                await actor.search("json", 5, timeout_ms=60)
            assert 0.05 <= time.perf_counter() - t0 < 5.0  # not the stuck search's 10 s
            assert isinstance(ei.value, ChannelError)
            # the actor is busy with the stuck search: status times out too (default 250 ms)
            with pytest.raises(TimeoutError_, match="bm25 status timed out after 250 ms"):
                await actor.status()
            gate.set()
            assert await actor.status() == Ready(5)

    run(go())


def test_slow_search_within_timeout_answers() -> None:
    async def go() -> None:
        def factory(d: Path, create: bool) -> Bm25Engine:
            return SlowEngine(tantivy_engine(d, create), 0.05, None)

        async with Bm25Actor(None, engine_factory=factory) as actor:
            await actor.index_batch(DOCS, timeout_ms=W)
            assert await actor.search("json", 5, timeout_ms=10_000)

    run(go())


def test_closed_or_unstarted_actor_is_a_channel_error() -> None:
    async def go() -> None:
        actor = Bm25Actor(None)
        with pytest.raises(ChannelError, match="not running"):
            await actor.status()
        await actor.start()
        await actor.close()
        with pytest.raises(ChannelError, match="not running"):
            await actor.search("x", 1)

    run(go())


def test_full_mailbox_is_a_channel_error() -> None:
    async def go() -> None:
        gate = threading.Event()

        def factory(d: Path, create: bool) -> Bm25Engine:
            return SlowEngine(tantivy_engine(d, create), 0.0, gate)

        async with Bm25Actor(None, engine_factory=factory, queue_size=1) as actor:
            await actor.index_batch(DOCS, timeout_ms=W)
            stuck = asyncio.ensure_future(actor.search("json", 1, timeout_ms=5000))
            await asyncio.sleep(0.05)  # the actor is now inside the stuck search
            queued = asyncio.ensure_future(actor.status(timeout_ms=5000))
            await asyncio.sleep(0)
            with pytest.raises(ChannelError, match="mailbox is full"):
                await actor.status()
            gate.set()
            assert await stuck
            assert await queued == Ready(5)

    run(go())


# -- persistence ------------------------------------------------------------------------------


def test_save_requires_ready_or_empty(tmp_path: Path) -> None:
    async def go() -> None:
        gate = threading.Event()
        async with Bm25Actor(ListSource(DOCS, gate=gate)) as actor:
            with pytest.raises(DbError, match="while it is uninitialized"):
                await actor.save(tmp_path / "s", timeout_ms=W)
            done = await actor.rebuild()
            with pytest.raises(DbError, match="while it is building"):
                await actor.save(tmp_path / "s", timeout_ms=W)
            with pytest.raises(DbError, match="while the index is building"):
                await actor.load(tmp_path / "s", timeout_ms=W)
            gate.set()
            await done
            assert not (tmp_path / "s").exists()

    run(go())


def test_save_load_roundtrip_restores_without_rebuild(tmp_path: Path) -> None:
    async def go() -> None:
        snap = tmp_path / "bm25.snapshot"
        async with Bm25Actor(ListSource(DOCS)) as actor:
            await (await actor.rebuild())
            written = await actor.save(snap, timeout_ms=W)
            expected = await actor.search("json text wrap", 5)
        assert written == snap.stat().st_size
        source = ListSource([])
        async with Bm25Actor(source) as fresh:
            assert await fresh.load(snap, timeout_ms=W) == written
            assert await fresh.status() == Ready(5)
            assert await fresh.search("json text wrap", 5) == expected
            assert source.calls == 0  # restored, not rebuilt
            # Ready -> Ready on Load (swap)
            assert await fresh.load(snap, timeout_ms=W) == written
            assert await fresh.status() == Ready(5)

    run(go())


def test_empty_index_saves_and_loads_as_empty(tmp_path: Path) -> None:
    async def go() -> None:
        async with Bm25Actor(ListSource([])) as actor:
            await (await actor.rebuild())
            await actor.save(tmp_path / "e", timeout_ms=W)
        async with Bm25Actor(None) as fresh:
            await fresh.load(tmp_path / "e", timeout_ms=W)
            assert await fresh.status() == Empty()

    run(go())


def _snapshot(tmp_path: Path) -> Path:
    snap = tmp_path / "good.snapshot"

    async def go() -> None:
        async with Bm25Actor(ListSource(DOCS)) as actor:
            await (await actor.rebuild())
            await actor.save(snap, timeout_ms=W)

    run(go())
    return snap


def _rewrite_header(snap: Path, dest: Path, **changes: object) -> Path:
    data = snap.read_bytes()
    (n,) = struct.unpack("<I", data[8:12])
    header = json.loads(data[12 : 12 + n])
    header.update(changes)
    raw = json.dumps(header).encode()
    dest.write_bytes(data[:8] + struct.pack("<I", len(raw)) + raw + data[12 + n :])
    return dest


def _corruptions(snap: Path, tmp_path: Path) -> dict[str, tuple[Path, str]]:
    data = snap.read_bytes()
    flipped = bytearray(data)
    flipped[-10] ^= 0xFF
    (tmp_path / "flip").write_bytes(bytes(flipped))
    (tmp_path / "trunc").write_bytes(data[:-100])
    (tmp_path / "magic").write_bytes(b"NOTASNAP" + data[8:])
    return {
        "checksum": (tmp_path / "flip", "checksum mismatch"),
        "truncated": (tmp_path / "trunc", "truncated"),
        "magic": (tmp_path / "magic", "not a ragloom BM25 snapshot"),
        "version": (
            _rewrite_header(snap, tmp_path / "v", format_version=SNAPSHOT_FORMAT_VERSION + 1),
            f"format version {SNAPSHOT_FORMAT_VERSION + 1}",
        ),
        "tokenizer": (
            _rewrite_header(snap, tmp_path / "tok", tokenizer_version="old-tok"),
            f"tokenizer 'old-tok', this ragloom uses {TOKENIZER_VERSION!r}",
        ),
        "doc_count": (_rewrite_header(snap, tmp_path / "dc", doc_count=99), "checksum mismatch"),
        "missing": (tmp_path / "nope", "No such file"),
    }


@pytest.mark.parametrize(
    "case", ["checksum", "truncated", "magic", "version", "tokenizer", "doc_count", "missing"]
)
def test_bad_snapshot_enters_error_and_rebuild_recovers(tmp_path: Path, case: str) -> None:
    snap = _snapshot(tmp_path)
    bad, message = _corruptions(snap, tmp_path)[case]

    async def go() -> None:
        async with Bm25Actor(ListSource(DOCS)) as actor:
            with pytest.raises(DbError, match=re.escape(message)):
                await actor.load(bad, timeout_ms=W)
            status = await actor.status()
            assert isinstance(status, Error)
            assert message in status.message
            with pytest.raises(DbError, match="rebuild to recover"):
                await actor.load(snap, timeout_ms=W)
            done = await actor.rebuild()
            assert await done == Ready(5)
            assert await actor.search("json", 5)

    run(go())
    assert not list((tmp_path).glob("**/gen-*"))


def test_load_failure_from_ready_is_error(tmp_path: Path) -> None:
    snap = _snapshot(tmp_path)
    bad, _ = _corruptions(snap, tmp_path)["checksum"]

    async def go() -> None:
        async with Bm25Actor(ListSource(DOCS)) as actor:
            await (await actor.rebuild())
            with pytest.raises(DbError):
                await actor.load(bad, timeout_ms=W)
            assert isinstance(await actor.status(), Error)

    run(go())


def test_save_is_atomic_and_keeps_previous_file_on_failure(tmp_path: Path) -> None:
    engine_dir = tmp_path / "engine"
    eng = tantivy_engine(engine_dir, True)
    eng.apply([(1, "alpha beta")], [])
    snap = tmp_path / "s"
    n = save_snapshot(engine_dir, snap, doc_count=1, source_generation=4)
    header = read_header(snap)
    assert header.doc_count == 1 and header.source_generation == 4
    assert header.format_version == SNAPSHOT_FORMAT_VERSION
    assert header.tokenizer_version == TOKENIZER_VERSION
    assert header.checksum.startswith("sha256:")
    assert snap.read_bytes()[:8] == SNAPSHOT_MAGIC and n == snap.stat().st_size
    before = snap.read_bytes()
    with pytest.raises(DbError):
        save_snapshot(tmp_path / "missing" / "file-not-dir", snap / "sub", doc_count=0)
    assert snap.read_bytes() == before
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    out = tmp_path / "restored"
    got, nbytes = load_snapshot(snap, out)
    assert got == header and nbytes == n
    assert (out / "rowids.npy").exists()
    with pytest.raises(DbError, match="already exists"):
        load_snapshot(snap, out)
    assert (out / "rowids.npy").exists()


def test_close_fails_a_running_rebuild_and_queued_writes(tmp_path: Path) -> None:
    async def go() -> None:
        gate = threading.Event()
        actor = await Bm25Actor(ListSource(DOCS, gate=gate)).start()
        done = await actor.rebuild()
        await asyncio.sleep(0.02)  # the writer lane is now inside the blocked build
        queued = asyncio.ensure_future(actor.finalize_seed(timeout_ms=W))
        await asyncio.sleep(0.02)
        await actor.close()
        gate.set()
        with pytest.raises(ChannelError, match="closed"):
            await done
        with pytest.raises(ChannelError, match="closed"):
            await queued

    run(go())
