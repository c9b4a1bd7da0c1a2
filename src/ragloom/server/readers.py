"""The readers of :class:`~ragloom.server.engine.ServingEngine`: one opened index per epoch.

All threads share one reader (store connection, BM25 searcher, HNSW graph, ONNX session); a
new generation is picked up by the reader itself, and a *replaced* database (``ragloom index
--rebuild``, a new file) opens a new reader (a new epoch) while queries in flight finish on
the old one, which is closed after the last (docs/serving.md).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

from ragloom.api import Index
from ragloom.assemble import get_counter
from ragloom.embed.base import Embedder
from ragloom.errors import InputError, RagError
from ragloom.index.vectors import HnswVectors, share_live
from ragloom.retrieve.search import Retriever
from ragloom.server.target import ServingTarget
from ragloom.settings import Settings
from ragloom.watch import Watcher

__all__ = ["BM25_WORKERS"]

log = logging.getLogger("ragloom")

BM25_WORKERS = 4
"""Threads running BM25 searches beside the dense side of concurrent hybrid queries (tantivy
releases the GIL while it searches; docs/serving.md)."""
_REOPEN_RETRY_S = 0.25
"""While a rebuilt database has published nothing, the engine looks again this often."""


HISTORY_RECHECK_S = 1.0
"""Seconds a reader keys cached answers by the change-history version it last read."""


@dataclass(eq=False)
class _Reader:
    """One opened index (an epoch): used by queries, closed after the last one left."""

    epoch: int
    index: Index
    retriever: Retriever
    ident: object | None
    refs: int = 0
    retired: bool = False
    _history: tuple[float, str] = (-HISTORY_RECHECK_S, "")
    """(when read, ``time.monotonic``; the change history's version) (:meth:`ranking_state`)."""

    def close(self) -> None:
        self.retriever.close()
        self.index.close()

    def ranking_state(self) -> str:
        """What, besides the generation, changes this reader's answers: the ranking model's
        digest (``ragloom adapt``, a refit) and the change history's version (``ragloom index``
        syncs new commits even when no file changed, so no generation is published). Part of
        the result cache's key; the history is read again at most every
        :data:`HISTORY_RECHECK_S` (a database round trip for PostgreSQL)."""
        from ragloom.server.cache import ranking_digest

        now = time.monotonic()
        read_at, version = self._history
        if now - read_at >= HISTORY_RECHECK_S:
            hist = self.retriever.history
            try:
                version = str(hist.version()) if hist is not None else ""
            except Exception:  # the history is evidence: a failed read keeps the last one
                log.warning("cannot read the change history's version", exc_info=True)
            self._history = (now, version)
        return f"{ranking_digest(self.retriever)}/{version}"


class _ReadersMixin:
    """Opening, warming, sharing and replacing the reader (part of ``ServingEngine``)."""

    target: ServingTarget
    _settings: Settings
    _lock: threading.RLock
    _closed: bool
    _embedder: Embedder | None
    _dense_off: bool = False
    """The query embedder could not be loaded: answer without one (BM25 alone)."""
    _epoch: int
    _reopen_after: float
    _reader: _Reader
    _watcher: Watcher | None

    def _open_reader(self) -> _Reader:
        index = self.target.open_index(self._embedder)
        ident = self.target.ident()
        retriever = index.retriever  # opens store, BM25 and vectors now: errors surface here
        # The Retriever runs each hybrid query's BM25 side on a worker pool of one thread by
        # default (right for one caller): shared by many request threads, that one worker
        # would queue every query's BM25 search behind the others'. docs/serving.md measures.
        retriever.bm25_workers = BM25_WORKERS
        retriever.bm25_timeout_ms = self._settings.timeouts.bm25_ms
        if self._embedder is None and self._dense_off:
            retriever.drop_embedder()  # the reader would try to load the failed model again
        self._epoch += 1
        return _Reader(self._epoch, index, retriever, ident)

    def _warm(self) -> None:
        """Load what the first query would (the ONNX session, the symbol table, the token
        counter), so no request pays for it."""
        r = self._reader
        try:
            r.retriever.search("warm up", top_k=1)
            get_counter(self._settings.assembly.counter).count("warm up")
        except RagError as exc:
            log.warning("could not warm the engine: %s", exc)

    # -- readers ------------------------------------------------------------------------
    @contextlib.contextmanager
    def _use_reader(self) -> Iterator[_Reader]:
        """The current reader, re-opened first when the database file was replaced."""
        if self._closed:
            raise InputError("the serving engine is closed")
        self._check_model_switch()
        ident = self.target.ident()
        with self._lock:
            reader = self._reader
            if ident is not None and ident != reader.ident:
                fresh = self._replacement()
                if fresh is not None:
                    self._replace_reader(fresh)
                    reader = fresh
            reader.refs += 1
        try:
            yield reader
        finally:
            with self._lock:
                reader.refs -= 1
                if reader.retired and reader.refs == 0:
                    reader.close()

    def _check_model_switch(self) -> None:
        """Follow a model switch made by another process (``ragloom.server.switching``)."""

    def _replace_reader(self, fresh: _Reader) -> None:
        """Make ``fresh`` the reader new queries use; the old one is closed after its last
        query (called with the engine lock held)."""
        old = self._reader
        old.retired = True
        self._reader = fresh
        if old.refs == 0:
            old.close()
        if self._watcher is not None and isinstance(fresh.retriever.vectors, HnswVectors):
            # the watcher's updates go to the new reader's vectors from now on
            share_live(fresh.retriever.vectors)

    def _replacement(self) -> _Reader | None:
        """A reader of a new database file (a rebuild), once that file has published a
        generation; until then (the rebuild is still writing it: no BM25 engine yet, nothing
        published) None, and the old reader keeps answering. Checked at most every
        :data:`_REOPEN_RETRY_S` (called with the engine lock held)."""
        now = time.monotonic()
        if now < self._reopen_after:
            return None
        self._reopen_after = now + _REOPEN_RETRY_S
        if self.target.published_generation() < 1:
            return None
        try:
            return self._open_reader()
        except RagError as exc:  # manifest or engines not in place yet
            log.info("rebuilt index not ready for reading yet: %s", exc)
            return None
