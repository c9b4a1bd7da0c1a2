"""The BM25 actor: one asyncio task owns the BM25 engine; callers talk to it by messages.

Commands (ploke-rag-crucial-notes.md section 2): :class:`Search`, :class:`IndexBatch`,
:class:`Remove`, :class:`Rebuild`, :class:`FinalizeSeed`, :class:`Status`, :class:`Save` and
:class:`Load`. Each carries an :class:`asyncio.Future` the actor answers through; the client
side (:meth:`Bm25Actor.request` and the typed helpers) waits with a timeout (default 250 ms,
crucial-notes section 4) and turns an expired wait into :class:`~ragloom.errors.TimeoutError_`.

Status machine (ploke-rag-plan.md section 3 A)::

    Uninitialized --Rebuild--> Building --> Ready(docs) | Empty | Error(message)
    Ready         --Rebuild--> Building          (or stays Ready)
    Error         --Rebuild--> Building
    Uninitialized | Empty --Load--> Building --> Ready | Empty | Error
    Ready         --Load--> Ready (the new engine is swapped in) | Error

``Ready.docs`` is exact: it is the size of the set of rowids the engine holds. IndexBatch and
Remove apply to the engine and settle the status to Ready/Empty; FinalizeSeed closes an
IndexBatch seeding phase (an engine exists, possibly empty, and the status is Ready/Empty).

Two lanes keep the actor answering while it works:

- the *command loop* answers Status at once and runs Search (in a worker thread, awaited in
  order), so a status query never waits for a rebuild;
- the *writer lane* runs IndexBatch, Remove, Rebuild, FinalizeSeed, Save and Load one at a
  time, in arrival order, in worker threads. Rebuild and Load build a fresh engine in a new
  folder and swap it in at the end; until then searches are answered by the previous engine
  (if any; otherwise they return nothing while the status says Building).

A command the client gave up on (timeout) before the actor took it from the mailbox is
skipped; once accepted it runs to completion and only its answer is dropped.
Preconditions are checked when a command is accepted: Save only in Ready or Empty; Load not in
Building or Error (ploke section 3 B lists Load from Uninitialized, Empty and Ready only; a
Rebuild recovers from Error); IndexBatch, Remove and FinalizeSeed not in Error.

The status values live in :mod:`ragloom.service.bm25_status`, the commands in
:mod:`ragloom.service.bm25_commands`, the engine and document-source contracts in
:mod:`ragloom.service.bm25_engine`; all are re-exported here.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final, TypeVar

from ragloom.errors import ChannelError, DbError, RagError, TimeoutError_
from ragloom.service.bm25_commands import (
    Command,
    FinalizeSeed,
    IndexBatch,
    Load,
    Rebuild,
    Remove,
    Save,
    Search,
    Status,
)
from ragloom.service.bm25_engine import (
    Bm25Engine,
    DocumentSource,
    EngineFactory,
    StoreDocumentSource,
    tantivy_engine,
    tokenised,
)
from ragloom.service.bm25_status import (
    Bm25Status,
    Building,
    Empty,
    Error,
    Ready,
    Uninitialized,
    status_label,
)
from ragloom.service.persist import load_snapshot, save_snapshot
from ragloom.telemetry import (
    EVENT_REBUILD_DONE,
    EVENT_REBUILD_FAILURE,
    EVENT_REBUILD_STARTED,
    Telemetry,
    get_telemetry,
)

__all__ = [
    "DEFAULT_QUEUE_SIZE",
    "DEFAULT_TIMEOUT_MS",
    "Bm25Actor",
    "Bm25Engine",
    "Bm25Status",
    "Building",
    "DocumentSource",
    "Empty",
    "EngineFactory",
    "Error",
    "FinalizeSeed",
    "IndexBatch",
    "Load",
    "Ready",
    "Rebuild",
    "Remove",
    "Save",
    "Search",
    "Status",
    "StoreDocumentSource",
    "Uninitialized",
    "status_label",
    "tantivy_engine",
]

log = logging.getLogger("ragloom.service")

DEFAULT_TIMEOUT_MS: Final = 250.0
"""Client-side timeout of every actor request (ploke-rag-crucial-notes.md section 4)."""
DEFAULT_QUEUE_SIZE: Final = 1024
"""Commands waiting in the actor's mailbox before send fails with ChannelError (bounded so a
stuck actor shows up as an error rather than unbounded memory)."""
_GEN_PREFIX: Final = "gen-"
"""Engine folders inside the work directory are ``gen-<n>``."""

T = TypeVar("T")

_STOP: Final = object()


def _reply(fut: asyncio.Future[T], value: T) -> None:
    if not fut.done():
        fut.set_result(value)


def _fail(fut: asyncio.Future[Any], exc: BaseException) -> None:
    if not fut.done():
        fut.set_exception(exc)


def _as_db_error(what: str, exc: BaseException) -> RagError:
    if isinstance(exc, RagError):
        return exc
    return DbError(f"{what}: {exc}")


# --------------------------------------------------------------------------------------------
# The actor
# --------------------------------------------------------------------------------------------


class Bm25Actor:
    """Owns one BM25 engine; see the module docstring for commands, lanes and states.

    Use as ``async with Bm25Actor(source) as actor: ...`` or call :meth:`start` and
    :meth:`close`. ``workdir`` holds the engine folders; by default a private temporary folder
    that :meth:`close` removes.
    """

    def __init__(
        self,
        source: DocumentSource | None = None,
        *,
        workdir: Path | None = None,
        engine_factory: EngineFactory = tantivy_engine,
        telemetry: Telemetry | None = None,
        queue_size: int = DEFAULT_QUEUE_SIZE,
    ) -> None:
        self.source = source
        self._own_workdir = workdir is None
        self._workdir_arg = workdir
        self.workdir: Path | None = None
        self._factory = engine_factory
        self.telemetry = telemetry if telemetry is not None else get_telemetry()
        self._queue_size = queue_size
        self._queue: asyncio.Queue[Any] | None = None
        self._jobs: asyncio.Queue[Any] | None = None
        self._loop_task: asyncio.Task[None] | None = None
        self._writer_task: asyncio.Task[None] | None = None
        self._engine: Bm25Engine | None = None
        self._error: str | None = None
        self._pending_builds = 0
        self._generation: int | None = None
        self._trash: list[Path] = []
        self._current_job: Any = None
        self._gen = itertools.count(1)
        self._closed = False

    # -- lifecycle ----------------------------------------------------------------------
    async def start(self) -> Bm25Actor:
        """Start the command loop and the writer lane on the running event loop."""
        if self._loop_task is not None:
            return self
        if self._workdir_arg is None:
            self.workdir = Path(tempfile.mkdtemp(prefix="ragloom-bm25-"))
        else:
            self.workdir = self._workdir_arg
            self.workdir.mkdir(parents=True, exist_ok=True)
            for old in self.workdir.glob(f"{_GEN_PREFIX}*"):
                shutil.rmtree(old, ignore_errors=True)
        self._queue = asyncio.Queue(self._queue_size)
        self._jobs = asyncio.Queue()
        self._loop_task = asyncio.create_task(self._run(), name="ragloom-bm25-actor")
        self._writer_task = asyncio.create_task(self._write_lane(), name="ragloom-bm25-writer")
        return self

    async def close(self) -> None:
        """Stop both lanes, fail unanswered requests with ChannelError, remove engine folders."""
        if self._closed:
            return
        self._closed = True
        for task in (self._loop_task, self._writer_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        closed = ChannelError("bm25 actor closed")
        left: list[Any] = [self._current_job] if self._current_job is not None else []
        for q in (self._queue, self._jobs):
            while q is not None and not q.empty():
                left.append(q.get_nowait())
        for item in left:
            cmd = item[0] if isinstance(item, tuple) else item
            if isinstance(cmd, Command):
                _fail(cmd.fut, closed)
                if isinstance(cmd, Rebuild) and cmd.done is not None:
                    _fail(cmd.done, closed)
        self._engine = None
        if self.workdir is not None:
            if self._own_workdir:
                shutil.rmtree(self.workdir, ignore_errors=True)
            else:
                for old in self.workdir.glob(f"{_GEN_PREFIX}*"):
                    shutil.rmtree(old, ignore_errors=True)

    async def __aenter__(self) -> Bm25Actor:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- state --------------------------------------------------------------------------
    @property
    def current_status(self) -> Bm25Status:
        """The status as the actor sees it now (no message round trip)."""
        if self._pending_builds > 0:
            return Building()
        if self._error is not None:
            return Error(self._error)
        if self._engine is None:
            return Uninitialized()
        docs = len(self._engine.rowids())
        return Ready(docs) if docs > 0 else Empty()

    def _new_engine_dir(self) -> Path:
        assert self.workdir is not None
        return self.workdir / f"{_GEN_PREFIX}{next(self._gen)}"

    def _swap(self, engine: Bm25Engine | None) -> None:
        for path in self._trash:  # folders retired at the previous swap: no search uses them now
            shutil.rmtree(path, ignore_errors=True)
        self._trash = []
        if self._engine is not None:
            self._trash.append(self._engine.directory)
        self._engine = engine

    # -- client side --------------------------------------------------------------------
    async def request(self, cmd: Command[T], timeout_ms: float = DEFAULT_TIMEOUT_MS) -> T:
        """Send ``cmd`` and wait for its answer at most ``timeout_ms``.

        Raises :class:`TimeoutError_` when the wait expires (the command is then skipped if
        the actor has not started it), :class:`ChannelError` when the actor is not running or
        its mailbox is full, and whatever error the actor answered (DbError, ...).
        """
        if timeout_ms <= 0:
            raise ChannelError(f"bm25 {cmd.name}: timeout must be > 0 ms, got {timeout_ms}")
        task = self._loop_task
        if self._closed or self._queue is None or task is None or task.done():
            raise ChannelError(f"bm25 {cmd.name}: actor is not running")
        try:
            self._queue.put_nowait(cmd)
        except asyncio.QueueFull:
            raise ChannelError(f"bm25 {cmd.name}: actor mailbox is full") from None
        try:
            return await asyncio.wait_for(cmd.fut, timeout_ms / 1000.0)
        except TimeoutError:
            raise TimeoutError_(f"bm25 {cmd.name} timed out after {timeout_ms:g} ms") from None

    def _future(self) -> asyncio.Future[Any]:
        return asyncio.get_running_loop().create_future()

    async def status(self, *, timeout_ms: float = DEFAULT_TIMEOUT_MS) -> Bm25Status:
        """Status command."""
        return await self.request(Status(self._future()), timeout_ms)

    async def search(
        self, query: str, top_k: int, *, timeout_ms: float = DEFAULT_TIMEOUT_MS
    ) -> list[tuple[int, float]]:
        """Search command: ``(rowid, score)`` best first."""
        return await self.request(Search(self._future(), query=query, top_k=top_k), timeout_ms)

    async def index_batch(
        self, docs: Sequence[tuple[int, str]], *, timeout_ms: float = DEFAULT_TIMEOUT_MS
    ) -> Bm25Status:
        """IndexBatch command: add or replace ``(rowid, text)`` documents."""
        return await self.request(IndexBatch(self._future(), docs=list(docs)), timeout_ms)

    async def remove(
        self, ids: Sequence[int], *, timeout_ms: float = DEFAULT_TIMEOUT_MS
    ) -> Bm25Status:
        """Remove command: delete documents by rowid."""
        return await self.request(Remove(self._future(), ids=list(ids)), timeout_ms)

    async def finalize_seed(self, *, timeout_ms: float = DEFAULT_TIMEOUT_MS) -> Bm25Status:
        """FinalizeSeed command."""
        return await self.request(FinalizeSeed(self._future()), timeout_ms)

    async def rebuild(
        self, *, timeout_ms: float = DEFAULT_TIMEOUT_MS
    ) -> asyncio.Future[Bm25Status]:
        """Rebuild command; returns once accepted, with a future of the final status."""
        done: asyncio.Future[Bm25Status] = self._future()
        await self.request(Rebuild(self._future(), done=done), timeout_ms)
        return done

    async def save(self, path: Path, *, timeout_ms: float = DEFAULT_TIMEOUT_MS) -> int:
        """Save command: snapshot to ``path``; returns bytes written."""
        return await self.request(Save(self._future(), path=Path(path)), timeout_ms)

    async def load(self, path: Path, *, timeout_ms: float = DEFAULT_TIMEOUT_MS) -> int:
        """Load command: restore the snapshot at ``path``; returns bytes read."""
        return await self.request(Load(self._future(), path=Path(path)), timeout_ms)

    # -- command loop -------------------------------------------------------------------
    async def _run(self) -> None:
        assert self._queue is not None and self._jobs is not None
        while True:
            cmd = await self._queue.get()
            if cmd.fut.done():  # the client gave up (timeout) before we started
                continue
            try:
                await self._dispatch(cmd)
            except Exception as exc:  # keep the actor alive whatever one command does
                log.exception("bm25 actor: %s failed", cmd.name)
                _fail(cmd.fut, _as_db_error(f"bm25 {cmd.name} failed", exc))

    async def _dispatch(self, cmd: Command[Any]) -> None:
        assert self._jobs is not None
        status = self.current_status
        if isinstance(cmd, Status):
            _reply(cmd.fut, status)
        elif isinstance(cmd, Search):
            engine = self._engine
            if engine is None or cmd.top_k <= 0:
                _reply(cmd.fut, [])
                return
            try:
                hits = await asyncio.to_thread(engine.search, cmd.query, cmd.top_k)
            except Exception as exc:
                raise _as_db_error("bm25 search failed", exc) from exc
            _reply(cmd.fut, hits)
        elif isinstance(cmd, Rebuild):
            self._pending_builds += 1
            _reply(cmd.fut, Building())
            self._jobs.put_nowait(cmd)
        elif isinstance(cmd, Save):
            if not isinstance(status, Ready | Empty):
                raise DbError(f"cannot save the bm25 index while it is {status.label}")
            self._jobs.put_nowait(cmd)
        elif isinstance(cmd, Load):
            if isinstance(status, Building):
                raise DbError("cannot load a bm25 snapshot while the index is building")
            if isinstance(status, Error):
                raise DbError(
                    f"cannot load a bm25 snapshot while the index is in error "
                    f"({status.message}); rebuild to recover"
                )
            if not isinstance(status, Ready):
                self._pending_builds += 1  # Uninitialized/Empty -> Building -> ...
            self._jobs.put_nowait((cmd, not isinstance(status, Ready)))
        elif isinstance(cmd, IndexBatch | Remove | FinalizeSeed):
            if isinstance(status, Error):
                raise DbError(
                    f"bm25 index is in error ({status.message}); rebuild before {cmd.name}"
                )
            self._jobs.put_nowait(cmd)
        else:  # pragma: no cover - every command class is handled above
            raise ChannelError(f"unknown bm25 command {cmd!r}")

    # -- writer lane --------------------------------------------------------------------
    async def _write_lane(self) -> None:
        assert self._jobs is not None
        while True:
            job = await self._jobs.get()
            self._current_job = job
            if isinstance(job, tuple):
                await self._do_load(job[0], counted=job[1])
            elif isinstance(job, Rebuild):
                await self._do_rebuild(job)
            else:
                try:
                    await self._do_write(job)
                except Exception as exc:
                    log.warning("bm25 actor: %s failed: %s", job.name, exc)
                    _fail(job.fut, _as_db_error(f"bm25 {job.name} failed", exc))
            self._current_job = None

    def _require_engine(self, what: str) -> Bm25Engine | None:
        if self._error is not None:
            raise DbError(f"bm25 index is in error ({self._error}); rebuild before {what}")
        return self._engine

    async def _do_write(self, cmd: Command[Any]) -> None:
        if isinstance(cmd, Save):
            engine = self._require_engine("save")
            if engine is None:
                raise DbError("cannot save the bm25 index: it is not built")
            doc_count = len(engine.rowids())
            written = await asyncio.to_thread(
                save_snapshot,
                engine.directory,
                cmd.path,
                doc_count=doc_count,
                source_generation=self._generation,
            )
            _reply(cmd.fut, written)
            return
        engine = self._require_engine(cmd.name)
        if isinstance(cmd, Remove):
            if engine is not None and cmd.ids:
                await asyncio.to_thread(engine.apply, [], [int(i) for i in cmd.ids])
        elif isinstance(cmd, IndexBatch | FinalizeSeed):
            if engine is None:
                engine = await asyncio.to_thread(self._factory, self._new_engine_dir(), True)
                self._swap(engine)
            docs = list(tokenised(cmd.docs)) if isinstance(cmd, IndexBatch) else []
            if docs or isinstance(cmd, FinalizeSeed):
                await asyncio.to_thread(engine.apply, docs, [])
        _reply(cmd.fut, self.current_status)

    def _build(self) -> tuple[Bm25Engine, int | None]:
        if self.source is None:
            raise DbError("no document source configured for rebuild")
        source = self.source
        generation = source.generation()
        engine = self._factory(self._new_engine_dir(), True)
        try:
            docs = (doc for batch in source.batches() for doc in batch)
            engine.apply(tokenised(docs), [])
        except BaseException:
            shutil.rmtree(engine.directory, ignore_errors=True)
            raise
        return engine, generation

    async def _do_rebuild(self, cmd: Rebuild) -> None:
        done = cmd.done
        with self.telemetry.span("bm25.actor.rebuild", context=cmd.ctx) as span:
            t0 = time.perf_counter()
            span.add_event(EVENT_REBUILD_STARTED)
            try:
                engine, generation = await asyncio.to_thread(self._build)
            except Exception as exc:
                ms = (time.perf_counter() - t0) * 1000.0
                msg = f"bm25 rebuild failed: {exc}"
                span.add_event(EVENT_REBUILD_FAILURE, {"duration_ms": ms, "error": msg})
                log.warning("%s", msg)
                self._swap(None)
                self._error = msg
                self._pending_builds -= 1
                if done is not None:
                    _fail(done, DbError(msg))
                return
            ms = (time.perf_counter() - t0) * 1000.0
            self._swap(engine)
            self._generation = generation
            self._error = None
            self._pending_builds -= 1
            status = self.current_status
            span.add_event(
                EVENT_REBUILD_DONE,
                {"duration_ms": ms, "docs": len(engine.rowids()), "bm25_status": status.label},
            )
            span.set_attribute("bm25_status", status.label)
            if done is not None:
                _reply(done, status)

    def _restore(self, path: Path) -> tuple[Bm25Engine, int | None, int]:
        target = self._new_engine_dir()
        header, nbytes = load_snapshot(path, target)
        try:
            engine = self._factory(target, False)
            docs = len(engine.rowids())
            if docs != header.doc_count:
                raise DbError(
                    f"bm25 snapshot {path} holds {docs} documents, its header says "
                    f"{header.doc_count}; rebuild the BM25 index"
                )
        except BaseException:
            shutil.rmtree(target, ignore_errors=True)
            raise
        return engine, header.source_generation, nbytes

    async def _do_load(self, cmd: Load, *, counted: bool) -> None:
        try:
            engine, generation, nbytes = await asyncio.to_thread(self._restore, cmd.path)
        except Exception as exc:
            err = _as_db_error(f"cannot load bm25 snapshot {cmd.path}", exc)
            self._swap(None)
            self._error = str(err)
            if counted:
                self._pending_builds -= 1
            _fail(cmd.fut, err)
            return
        self._swap(engine)
        self._generation = generation
        self._error = None
        if counted:
            self._pending_builds -= 1
        _reply(cmd.fut, nbytes)
