"""Index a tree into any storage backend through the contract (``index/backend.py``).

The embedded backend keeps its own, finer-grained ``update_index`` (progressive BM25 commits,
label-list repairs, disk reclaim); this is the update every other backend gets, in the same
order of work so a crash at any point leaves the published generation intact:

1. under the backend's write lock, walk and parse what changed (``scan_tree``, shared with
   ``update_index``);
2. write the changed files (chunks and code graph records) into one
   :class:`~ragloom.index.backend.IndexUpdate`, with the graph records of unchanged code files
   that lack one (a repository indexed before the graph was kept, or by another extractor
   version: :func:`graph_backfill`), and publish it (atomic: readers see the old generation
   or the new one, never a mix); chunks whose text already has a cached vector are
   searchable by vector at once;
3. embed the texts that have no vector yet, in committed batches (an interrupted run resumes
   where it stopped; until then those chunks are found by BM25 only).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from ragloom.embed.document import embedding_key
from ragloom.index.backend import StorageBackend
from ragloom.index.graphwork import backfill_records
from ragloom.index.indexer import EMBED_COMMIT_BATCH, IndexStats, ProgressFn, scan_tree
from ragloom.ingest.walker import DEFAULT_MAX_FILE_BYTES

if TYPE_CHECKING:
    from ragloom.embed.base import Embedder

__all__ = ["graph_backfill", "index_into"]


log = logging.getLogger("ragloom.index")


def _no_progress(stage: str, done: int, total: int) -> None:
    return None


def graph_backfill(
    root: Path,
    backend: StorageBackend,
    skip: Collection[str],
    progress: ProgressFn = _no_progress,
) -> list[tuple[str, str, bytes]]:
    """(path, hash, record) for the published code files without a current graph record,
    leaving out ``skip`` (the files this update writes or removes anyway): the embedded
    indexer's backfill (:func:`~ragloom.index.graphwork.backfill_records`) on ``backend``."""
    return backfill_records(root, backend.files_without_graph, skip, progress)


def _indexed_bytes(root: Path, rel: str, digest: str) -> bytes | None:
    """``rel``'s bytes when they are still the version parsed (``digest``), for a backend that
    keeps them; None when the file changed or went since (the next run writes it)."""
    from ragloom.ingest.ids import file_hash

    try:
        data = (root / rel).read_bytes()
    except OSError:
        return None
    return data if file_hash(data) == digest else None


def _backfill_content(root: Path, backend: StorageBackend, progress: ProgressFn) -> float | None:
    """Give the published files that have no bytes kept (indexed before the backend kept
    them) their bytes from ``root``, each only while it is still its indexed version; the
    seconds it took (None: none to give)."""
    t0 = time.perf_counter()
    todo = backend.files_without_content()
    if not todo:
        return None
    progress("content", 0, len(todo))

    def read() -> Iterator[tuple[str, str, bytes]]:
        for i, (path, digest) in enumerate(todo, 1):
            data = _indexed_bytes(root, path, digest)
            if data is not None:
                yield path, digest, data
            progress("content", i, len(todo))

    done = backend.put_file_contents(read())
    log.info("kept the bytes of %d of %d files indexed before", done, len(todo))
    return time.perf_counter() - t0


def embed_texts(
    backend: StorageBackend,
    embedder: Embedder,
    missing: list[tuple[str, str]],
    stats: IndexStats,
    progress: ProgressFn = _no_progress,
) -> None:
    """Embed ``missing`` (node hash, text) in committed batches (an interrupted run resumes)
    and store the vectors under the embedder's key; counted in ``stats``."""
    key = embedding_key(embedder.model_id)
    missing.sort(key=lambda item: len(item[1]))  # length-sorted batches pad less
    progress("embed", 0, len(missing))
    done = 0
    for start in range(0, len(missing), EMBED_COMMIT_BATCH):
        part = missing[start : start + EMBED_COMMIT_BATCH]
        vecs = embedder.embed_documents([text for _, text in part])
        backend.put_embeddings(key, ((h, vecs[i]) for i, (h, _) in enumerate(part)))
        done += len(part)
        stats.chunks_embedded += len(part)
        stats.embeddings_computed += len(part)  # all by the model: see README
        progress("embed", done, len(missing))


def index_into(
    root: Path,
    backend: StorageBackend,
    embedder: Embedder | None,
    *,
    skip_dir: Path | None = None,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    progress: ProgressFn = _no_progress,
    model_changed: bool = False,
    rebuild: bool = False,
    verify: Collection[str] | None = None,
    wait_s: float = 0.0,
) -> IndexStats:
    """Bring ``backend``'s repository up to date with ``root`` (takes the write lock, waiting
    up to ``wait_s`` seconds; IndexLockedError when another indexer holds it). ``skip_dir`` is left out of the walk.
    ``rebuild`` drops every stored chunk and re-parses every file, in the same single update
    (readers see the old generation until the rebuilt one is published). ``verify``: as for
    :func:`~ragloom.index.indexer.scan_tree`."""
    from ragloom.ingest.chunker import detect_language

    t0 = time.perf_counter()
    stats = IndexStats(model_changed=model_changed)
    with backend.write_lock(wait_s):
        known = backend.files()
        parsed, removed = scan_tree(
            root,
            skip_dir,
            {} if rebuild else known,
            stats,
            max_file_bytes=max_file_bytes,
            progress=progress,
            verify=None if rebuild else verify,
        )
        if rebuild:
            removed = sorted(known)
        t1 = time.perf_counter()
        # unchanged code files without a record: written in this update, so its publish shows
        # them (and bumps the generation readers rebuild the graph for) even when nothing else
        # changed
        backfill = (
            []
            if rebuild
            else graph_backfill(root, backend, {p.sf.rel for p in parsed} | set(removed), progress)
        )
        t2 = time.perf_counter()
        if backfill:
            stats.timings["graph"] = t2 - t1
        if parsed or removed or backfill:
            update = backend.begin_update()
            try:
                if rebuild:  # old rows first, so every file's chunks are written anew
                    for path in removed:
                        stats.chunks_removed += update.remove_file(path)
                    removed = []
                for sf, digest, chunks, graph in parsed:
                    a, u, r, _ = update.replace_file(
                        sf.rel,
                        chunks,
                        file_hash=digest,
                        size=sf.size,
                        mtime=sf.mtime,
                        language=detect_language(sf.rel),
                        source=chunks[0].source if chunks else "text",
                        graph=None if graph is None else graph.to_blob(),
                        content=(
                            _indexed_bytes(root, sf.rel, digest) if backend.keeps_content else None
                        ),
                    )
                    stats.chunks_added += a
                    stats.chunks_updated += u
                    stats.chunks_removed += r
                for path in removed:
                    stats.chunks_removed += update.remove_file(path)
                for path, digest, blob in backfill:
                    update.put_file_graph(path, digest, blob)
                t3 = time.perf_counter()
                stats.timings["store"] = t3 - t2
                stats.generation = update.publish()
            except BaseException:
                update.abort()
                raise
            stats.timings["publish"] = time.perf_counter() - t3
        else:
            stats.generation = backend.generation()
        if backend.keeps_content and not rebuild:
            # files indexed before the backend kept their bytes: given them now, from the tree
            # (only those still at their indexed version), without a new generation
            took = _backfill_content(root, backend, progress)
            if took is not None:
                stats.timings["content"] = took
        stats.chunks_total = backend.chunk_count()
        stats.bm25_ready_seconds = time.perf_counter() - t0
        if embedder is not None:
            t5 = time.perf_counter()
            key = embedding_key(embedder.model_id)
            stats.model = embedder.model_id
            embed_texts(backend, embedder, backend.missing_embeddings(key), stats, progress)
            stats.timings["embed"] = time.perf_counter() - t5
            stats.embeddings_pending = len(backend.missing_embeddings(key))
        backend.finish_index(
            stats.chunks_added + stats.chunks_updated + stats.chunks_removed
            + stats.chunks_embedded
        )  # fmt: skip
    stats.seconds = time.perf_counter() - t0
    return stats
