"""Build and incrementally update an index: walk, parse, store, BM25, embed, vectors.

Order of work, chosen so that a crash (even SIGKILL) at any point leaves a usable index and the
next run finishes the job with exactly the chunks of a clean build:

1. Walk the root, hash every file, compare with the store: changed, new and removed files.
2. Parse the changed files into chunks (tree-sitter).
3. One SQLite transaction writes every file's new chunk set and bumps the generation. Before
   it commits nothing has changed; after it the store is the new truth.
4. BM25 is brought in line with the store by a set difference of rowids and committed:
   the index is now searchable by keywords (progressive indexing).
5. Chunks whose text has no embedding yet for this model are embedded (longest-first batches
   sorted by length), each batch committed, so an interrupted run resumes where it stopped.
6. The HNSW index is brought in line with the embedded rowids and saved atomically.

Steps 4 and 6 are idempotent set differences, so they also repair a run killed half way.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ragloom.embed.document import embedding_key
from ragloom.index.bm25 import TantivyBm25, bm25_document
from ragloom.index.store import Store
from ragloom.index.vectors import HnswVectors
from ragloom.ingest.ids import file_hash
from ragloom.ingest.walker import DEFAULT_MAX_FILE_BYTES, SourceFile, is_binary, walk
from ragloom.types import Chunk

if TYPE_CHECKING:
    from ragloom.embed.base import Embedder

__all__ = ["IndexStats", "ProgressFn", "sync_bm25", "sync_vectors", "update_index"]

log = logging.getLogger("ragloom.index")

ProgressFn = Callable[[str, int, int], None]
"""progress(stage, done, total): stages are scan, parse, bm25, embed, vectors."""

EMBED_COMMIT_BATCH = 256
"""Texts embedded between two store commits: bounds the work lost to an interruption."""
_BM25_FEED_BATCH = 2000


def _no_progress(stage: str, done: int, total: int) -> None:
    return None


@dataclass(slots=True)
class IndexStats:
    """What one ``index`` run did; the CLI's ``--json`` output (a stable contract)."""

    files_scanned: int = 0
    files_changed: int = 0
    files_removed: int = 0
    files_skipped: dict[str, int] = field(default_factory=dict)
    chunks_total: int = 0
    chunks_added: int = 0
    chunks_updated: int = 0
    chunks_removed: int = 0
    chunks_embedded: int = 0
    embeddings_pending: int = 0
    seconds: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)
    bm25_ready_seconds: float = 0.0
    model: str = ""
    model_changed: bool = False

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def sync_bm25(store: Store, bm25: TantivyBm25, progress: ProgressFn = _no_progress) -> int:
    """Make the BM25 engine hold exactly the store's chunk rowids; returns documents added."""
    want = store.all_rowids()
    have = bm25.rowids()
    add = np.setdiff1d(want, have, assume_unique=True)
    remove = np.setdiff1d(have, want, assume_unique=True)
    if not len(add) and not len(remove):
        return 0
    total = len(add)
    docs: list[tuple[int, str]] = []
    done = 0
    progress("bm25", 0, total)
    add_list = add.tolist()
    for start in range(0, total, _BM25_FEED_BATCH):
        part = add_list[start : start + _BM25_FEED_BATCH]
        rows = store.chunks_by_rowids(part)
        texts = store.texts_by_rowids(part)
        for rowid in part:
            row = rows[rowid]
            docs.append((rowid, bm25_document(texts[rowid], row.symbol, row.path)))
        done += len(part)
        progress("bm25", done, total)
    bm25.apply(docs, remove.tolist())
    return len(docs)


def sync_vectors(
    store: Store, vectors: HnswVectors, model_id: str, progress: ProgressFn = _no_progress
) -> int:
    """Make the HNSW index hold exactly the embedded chunk rowids; returns vectors added."""
    want = np.unique(store.embedded_rowids(model_id))
    have = vectors.rowids()
    add = np.setdiff1d(want, have, assume_unique=True)
    remove = np.setdiff1d(have, want, assume_unique=True)
    if not len(add) and not len(remove):
        return 0
    progress("vectors", 0, len(add))
    vecs = store.vectors_for_rowids(model_id, add.tolist(), vectors.dim)
    vectors.apply(add, vecs, remove.tolist())
    progress("vectors", len(add), len(add))
    return len(add)


def _read(sf: SourceFile, max_bytes: int) -> tuple[SourceFile, bytes] | str:
    """A walked file's bytes (and its size and mtime as read), or why it is skipped now:
    ``vanished`` (deleted since the walk), ``unreadable``, ``too_large``, ``special``."""
    from ragloom.ingest.walker import read_source

    return read_source(sf, max_bytes)


def update_index(
    root: Path,
    index_dir: Path,
    store: Store,
    embedder: Embedder | None,
    *,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    progress: ProgressFn = _no_progress,
    model_changed: bool = False,
    on_bm25_ready: Callable[[], None] | None = None,
) -> IndexStats:
    """Bring the index in ``index_dir`` up to date with ``root``. Caller holds the write lock."""
    from ragloom.ingest.chunker import chunk_file, detect_language

    t0 = time.perf_counter()
    stats = IndexStats(model_changed=model_changed)
    # 1. walk and hash
    walked = walk(root, max_file_bytes=max_file_bytes, index_dir=index_dir)
    skipped: Counter[str] = Counter(walked.skipped)
    known = store.files()
    changed: list[tuple[SourceFile, bytes, str]] = []
    seen: set[str] = set()
    progress("scan", 0, len(walked.files))
    for i, sf in enumerate(walked.files):
        got = _read(sf, max_file_bytes)
        if isinstance(got, str):
            skipped[got] += 1
            continue
        sf, data = got
        if is_binary(data):
            skipped["binary"] += 1
            continue
        seen.add(sf.rel)
        digest = file_hash(data)
        old = known.get(sf.rel)
        if old is None or old.hash != digest:
            changed.append((sf, data, digest))
        if i % 200 == 0:
            progress("scan", i, len(walked.files))
    progress("scan", len(walked.files), len(walked.files))
    removed = sorted(set(known) - seen)
    stats.files_scanned = len(seen)
    stats.files_changed = len(changed)
    stats.files_removed = len(removed)
    stats.files_skipped = dict(sorted(skipped.items()))
    t1 = time.perf_counter()
    stats.timings["scan"] = t1 - t0

    # 2. parse
    parsed: list[tuple[SourceFile, str, list[Chunk]]] = []
    progress("parse", 0, len(changed))
    for i, (sf, data, digest) in enumerate(changed, 1):
        parsed.append((sf, digest, chunk_file(sf.rel, data, digest)))
        progress("parse", i, len(changed))
    t2 = time.perf_counter()
    stats.timings["parse"] = t2 - t1

    # 3. one atomic store write
    if parsed or removed:
        with store.transaction() as conn:
            for sf, digest, chunks in parsed:
                language = detect_language(sf.rel)
                source = chunks[0].source if chunks else "text"
                a, u, r, _ = store.replace_file(
                    conn,
                    sf.rel,
                    chunks,
                    file_hash=digest,
                    size=sf.size,
                    mtime=sf.mtime,
                    language=language,
                    source=source,
                )
                stats.chunks_added += a
                stats.chunks_updated += u
                stats.chunks_removed += r
            for path in removed:
                stats.chunks_removed += store.remove_file(conn, path)
            store.set_meta("generation", str(store.generation() + 1), conn)
    stats.chunks_total = store.chunk_count()
    t3 = time.perf_counter()
    stats.timings["store"] = t3 - t2

    # 4. BM25
    bm25_dir = index_dir / "bm25"
    try:
        bm25 = TantivyBm25(bm25_dir, create=True)
    except Exception:  # an unreadable engine folder is rebuilt from the store
        log.warning("bm25 index unreadable, rebuilding", extra={"path": str(bm25_dir)})
        bm25 = TantivyBm25.reset(bm25_dir)
    sync_bm25(store, bm25, progress)
    t4 = time.perf_counter()
    stats.timings["bm25"] = t4 - t3
    stats.bm25_ready_seconds = t4 - t0
    if on_bm25_ready is not None:
        on_bm25_ready()

    # 5. embeddings, 6. vectors
    if embedder is not None:
        stats.model = embedder.model_id
        vec_dir = index_dir / "vectors"
        key = embedding_key(embedder.model_id)
        if vec_dir.exists() and HnswVectors.stored_key(vec_dir) != key:
            # Vectors made under another model or embedding-text format: rowids alone cannot
            # tell them apart, so the HNSW index is rebuilt from the store's cache.
            log.info("vector index made under another embedding key, rebuilding")
            shutil.rmtree(vec_dir)
        vectors = HnswVectors(vec_dir, embedder.dim, key)
        try:
            stats.chunks_embedded = embed_missing(store, embedder, progress)
        finally:
            t5 = time.perf_counter()
            stats.timings["embed"] = t5 - t4
            sync_vectors(store, vectors, key, progress)
            stats.timings["vectors"] = time.perf_counter() - t5
        stats.embeddings_pending = stats.chunks_total - vectors.count()
    stats.seconds = time.perf_counter() - t0
    return stats


def embed_missing(store: Store, embedder: Embedder, progress: ProgressFn = _no_progress) -> int:
    """Embed every chunk text that has no embedding for this model; resumable."""
    key = embedding_key(embedder.model_id)
    missing = store.missing_embeddings(key)
    if not missing:
        return 0
    # Length-sorted batches: padding waste is what makes transformer batches slow.
    missing.sort(key=lambda item: len(item[1]))
    total = len(missing)
    done = 0
    progress("embed", 0, total)
    for start in range(0, total, EMBED_COMMIT_BATCH):
        part = missing[start : start + EMBED_COMMIT_BATCH]
        vecs = embedder.embed_documents([t for _, t in part])
        store.put_embeddings(key, ((h, vecs[i]) for i, (h, _) in enumerate(part)))
        done += len(part)
        progress("embed", done, total)
    return total
