"""Graph records made in a worker process while the main one chunks, stores and feeds BM25.

Finding a file's references and what its names hold (:mod:`ragloom.ingest.refs`,
:mod:`ragloom.ingest.binds`) costs about as much CPU as chunking it, and all of it is Python
holding the GIL. A large update (a first index, a branch switch) therefore hands it to one
worker process: the main process chunks with ``parse_file(refs=False)`` and goes on to the
store write and BM25, the worker parses each code file again and makes its record, and the
update collects the records before it publishes (they become visible with the file rows, in
the same generation; docs/graph.md, "What it costs"). A small update (a watcher's batch, a
few edited files) makes them inline: starting a worker costs more than it saves.

A worker that fails (it was killed, it could not start) costs nothing but time: the files it
did not answer for get their records inline.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
from collections.abc import Callable, Collection
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path

from ragloom.ingest.languages import CODE_SPECS, detect_language

__all__ = ["GRAPH_WORKER_MIN_FILES", "GraphWorker", "backfill_records", "graph_record"]

log = logging.getLogger("ragloom.index")

GRAPH_WORKER_MIN_FILES = 150
"""Changed code files from which an update makes its graph records in a worker process
(measured on this repository: below ~100 files the worker's start-up, ~0.3 s, outweighs what
it saves)."""


def graph_record(rel: str, data: bytes, digest: str) -> bytes | None:
    """The stored graph record of one file version (None: not code)."""
    from ragloom.ingest.chunker import parse_file

    graph = parse_file(rel, data, digest)[1]
    return graph.to_blob() if graph is not None else None


class GraphWorker:
    """One update's graph records, made beside it in a worker process (see the module)."""

    def __init__(self) -> None:
        self._pool: ProcessPoolExecutor | None = None
        self._jobs: dict[str, tuple[str, bytes, Future[bytes | None] | None]] = {}
        self.active = False

    @staticmethod
    def wanted(code_files: int) -> bool:
        """True when an update of ``code_files`` changed code files should use a worker."""
        if os.environ.get("RAGLOOM_GRAPH_WORKER", "1").strip().lower() in {"0", "off", "no"}:
            return False
        return code_files >= GRAPH_WORKER_MIN_FILES and (os.cpu_count() or 1) >= 2

    def start(self) -> bool:
        """Start the worker process; False (and records made inline) when it cannot."""
        try:
            # forkserver: a fork of a process with threads (a server, a watcher) may inherit
            # a held lock; the fork server is a fresh single-threaded process
            ctx = multiprocessing.get_context("forkserver")
            self._pool = ProcessPoolExecutor(
                max_workers=1, mp_context=ctx, initializer=_ignore_interrupts
            )
            self.active = True
        except (OSError, ValueError) as exc:  # no forkserver here, no processes allowed
            log.info("graph worker not started: %s", exc)
            self.active = False
        return self.active

    @staticmethod
    def is_code(rel: str) -> bool:
        return detect_language(rel) in CODE_SPECS

    def submit(self, rel: str, data: bytes, digest: str) -> None:
        fut: Future[bytes | None] | None = None
        if self._pool is not None:
            try:
                fut = self._pool.submit(graph_record, rel, data, digest)
            except RuntimeError:  # the pool broke: this file and the rest inline
                self._pool = None
        self._jobs[rel] = (digest, data, fut)

    def results(self) -> dict[str, tuple[str, bytes | None]]:
        """rel -> (digest, record) for every file submitted; waits for the worker."""
        out: dict[str, tuple[str, bytes | None]] = {}
        for rel, (digest, data, fut) in self._jobs.items():
            blob: bytes | None
            try:
                if fut is None:
                    raise RuntimeError("no worker")
                blob = fut.result()
            except Exception:  # the worker failed or died: make this one here
                blob = graph_record(rel, data, digest)
            out[rel] = (digest, blob)
        self._jobs.clear()
        return out

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        self.active = False


def backfill_records(
    root: Path,
    missing: Callable[[Collection[str]], list[tuple[str, str]]],
    skip: Collection[str],
    progress: Callable[[str, int, int], None],
) -> list[tuple[str, str, bytes]]:
    """(path, hash, record) for the published code files that have no current graph record
    (``missing(code languages)`` lists them), leaving out ``skip`` (the files the update
    writes or removes anyway). An index made before the graph, or by another version of the
    extractor, has files whose chunks are current but whose records are not: they are read
    and parsed once more; a file whose bytes no longer match its row is left to the next
    update (its record comes with its new chunks)."""
    from ragloom.ingest.chunker import parse_file
    from ragloom.ingest.ids import file_hash

    todo = [(p, h) for p, h in missing(list(CODE_SPECS)) if p not in skip]
    out: list[tuple[str, str, bytes]] = []
    if not todo:
        return out
    progress("graph", 0, len(todo))
    for i, (path, digest) in enumerate(todo, 1):
        try:
            data = (root / path).read_bytes()
        except OSError:
            continue
        if file_hash(data) != digest:
            continue
        graph = parse_file(path, data, digest)[1]
        if graph is not None:
            out.append((path, digest, graph.to_blob()))
        if i % 200 == 0:
            progress("graph", i, len(todo))
    progress("graph", len(todo), len(todo))
    return out


def _ignore_interrupts() -> None:
    """In the worker: a Ctrl-C reaches the whole process group; the indexer stops its worker
    itself, and the worker's own KeyboardInterrupt only printed a traceback after the
    command had exited."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
