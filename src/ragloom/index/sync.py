"""Keep the derived indexes in step with the store: BM25 and HNSW by set differences of
rowids (steps 4, 5 and 7 of :mod:`ragloom.index.indexer`), and the embedding of chunk texts
that have none yet (step 6). :mod:`ragloom.index.indexer` re-exports every name.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ragloom.embed.cache import VectorCache
from ragloom.embed.document import embedding_key
from ragloom.errors import DbError
from ragloom.index.bm25 import TantivyBm25, bm25_document
from ragloom.index.store import Store
from ragloom.index.vectors import HnswVectors, is_live, live_vectors

if TYPE_CHECKING:
    from ragloom.embed.base import Embedder

log = logging.getLogger("ragloom.index")

ProgressFn = Callable[[str, int, int], None]
"""progress(stage, done, total): stages are scan, parse, bm25, bm25-files, embed, vectors."""

EMBED_COMMIT_BATCH = 256
"""Texts embedded between two store commits: bounds the work lost to an interruption."""
_BM25_FEED_BATCH = 2000


def _no_progress(stage: str, done: int, total: int) -> None:
    return None


def sync_bm25(
    store: Store, bm25: TantivyBm25, progress: ProgressFn = _no_progress, *, recent: bool = False
) -> int:
    """Make the BM25 engine hold exactly the rows of the published and the pending generation
    (:meth:`Store.wanted_rowids`); returns documents added. ``recent`` (a watcher's batch, the
    engine in step before it): add the pending generation's new rows and drop the rows the
    published one hid, without listing the whole store (2 x 45 ms at 100k chunks)."""
    have = bm25.held_rowids()
    if recent:  # np.isin, not setdiff1d: no sort of the whole engine's rowids
        pending = store.pending_rowids()
        add = pending[~np.isin(pending, have)]
        gone = np.array(store.hidden_rowids(store.generation()), dtype=np.int64)
        remove = gone[np.isin(gone, have)]
    else:
        want = store.wanted_rowids()
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
        sources = store.bm25_sources(part)
        for rowid in part:
            text, symbol, path = sources[rowid]
            docs.append((rowid, bm25_document(text, symbol, path)))
        done += len(part)
        progress("bm25", done, total)
    bm25.apply(docs, remove.tolist())
    return len(docs)


def _sync_bm25_or_rebuild(
    store: Store, bm25: TantivyBm25, progress: ProgressFn = _no_progress, *, recent: bool = False
) -> TantivyBm25:
    """:func:`sync_bm25`; when the engine cannot be written (damaged in a way its own recovery
    does not handle), it is rebuilt from the store, the source of truth, instead of failing the
    update. Returns the engine in use."""
    try:
        sync_bm25(store, bm25, progress, recent=recent)
        return bm25
    except DbError as exc:
        log.warning(
            "bm25 index unwritable, rebuilding",
            extra={"path": str(bm25.directory), "error": str(exc)},
        )
    bm25 = TantivyBm25.reset(bm25.directory)
    sync_bm25(store, bm25, progress)
    return bm25


def _remove_stale_temporaries(index_dir: Path) -> None:
    """Delete the temporary files of atomic writes (``.NAME.*.tmp``, :mod:`ragloom.index.atomic`
    and :meth:`HnswVectors.apply`) that a killed run left in the BM25, vector and graph
    folders, and the staged vectors of a model switch killed midway: only a writer holding the
    write lock (the caller) writes the first two, and a left-over copy of the vector index is
    as large as the index. Readers store the graph (:mod:`ragloom.graph.cache`): one whose
    temporary file goes under it keeps no graph."""
    shutil.rmtree(index_dir / NEXT_VECTORS_DIR, ignore_errors=True)
    for sub in ("bm25", "bm25-files", "vectors", "graph"):
        try:
            entries = list((index_dir / sub).iterdir())
        except OSError:
            continue
        for path in entries:
            if path.name.startswith(".") and path.name.endswith(".tmp") and path.is_file():
                path.unlink(missing_ok=True)


NEXT_VECTORS_DIR = "vectors.next"
"""Where a model switch builds the new model's vectors while readers search the old ones."""
_VECTOR_FILES = ("vectors.hnsw", "labels.npz", "state.json")
"""A vector folder's files, in the order a save writes them (readers pair the first two)."""


def stage_model_switch(
    store: Store,
    index_dir: Path,
    embedder: Embedder,
    progress: ProgressFn = _no_progress,
    cache: VectorCache | None = None,
) -> tuple[int, int, HnswVectors]:
    """Embed every chunk with ``embedder`` (a model the index is not embedded with yet) and
    build its vectors in :data:`NEXT_VECTORS_DIR`, leaving the index's own vectors, and so
    its readers, as they are. Resumable: embeddings of a killed switch are in the store (and
    the vector cache) and are not computed again. Returns (vectors written, of which from
    the cache, the staged index); :func:`switch_vectors` puts it in place."""
    key = embedding_key(embedder.model_id)
    embedded, cached = embed_missing(store, embedder, progress, cache)
    staged = index_dir / NEXT_VECTORS_DIR
    shutil.rmtree(staged, ignore_errors=True)
    vectors = HnswVectors(staged, embedder.dim, key)
    sync_vectors(store, vectors, key, progress)  # saved by it (none: no chunk, no file)
    return embedded, cached, vectors


def switch_vectors(store: Store, index_dir: Path) -> None:
    """Put the staged vectors of a model switch in place of the index's, file by file as a
    save writes them (a reader pairs the index file with its label list and loads again when
    they do not match), then remove the staging folder. The caller wrote the manifest naming
    the new model first: a reader of the old model never loads the new vectors as its own."""
    staged, target = index_dir / NEXT_VECTORS_DIR, index_dir / "vectors"
    target.mkdir(parents=True, exist_ok=True)
    for name in _VECTOR_FILES:
        if (staged / name).exists():
            os.replace(staged / name, target / name)
        else:
            (target / name).unlink(missing_ok=True)
    (target / "rowids.npy").unlink(missing_ok=True)  # an older format's label list
    shutil.rmtree(staged, ignore_errors=True)
    # a store commit: readers re-check the vector file when the store changed
    store.set_meta("vectors_saved", str(int(store.get_meta("vectors_saved") or 0) + 1))


def sync_vectors(
    store: Store, vectors: HnswVectors, model_id: str, progress: ProgressFn = _no_progress
) -> int:
    """Make the HNSW index hold exactly the embedded rows of the published and the pending
    generation; returns vectors added."""
    want = np.unique(store.embedded_rowids(model_id))
    have = vectors.held_rowids()
    add = np.setdiff1d(want, have, assume_unique=True)
    remove = np.setdiff1d(have, want, assume_unique=True)
    if not len(add) and not len(remove):
        return 0
    progress("vectors", 0, len(add))
    vecs = store.vectors_for_rowids(model_id, add.tolist(), vectors.dim)
    _apply_vectors(store, vectors, add, vecs, remove.tolist())
    progress("vectors", len(add), len(add))
    return len(add)


def sync_recent_vectors(store: Store, vectors: HnswVectors, model_id: str, since: int) -> int:
    """:func:`sync_vectors` for one update when the index held every wanted vector before it:
    add the embedded new rows (rowid above ``since``), drop the rows this update hid. Reads
    the update's rows only. Returns vectors added."""
    gone = np.array(store.hidden_rowids(store.generation()), dtype=np.int64)
    new = store.embedded_rowids(model_id, above=since)
    have = vectors.held_rowids()
    new = np.unique(new[~np.isin(new, gone)])
    add = new[~np.isin(new, have)]
    remove = gone[np.isin(gone, have)]
    if not len(add) and not len(remove):
        return 0
    vecs = store.vectors_for_rowids(model_id, add.tolist(), vectors.dim)
    _apply_vectors(store, vectors, add, vecs, remove.tolist())
    return len(add)


def _open_vectors(spec: VectorsSpec) -> HnswVectors:
    """The live index of the folder when this process shares one (a watching server: changed
    in memory, saved later), else the file's."""
    live = live_vectors(spec[0], spec[1])
    if live is None:
        return HnswVectors(*spec)
    live.key = spec[2]
    return live


def _apply_vectors(
    store: Store, vectors: HnswVectors, add: np.ndarray, vecs: np.ndarray, remove: list[int]
) -> None:
    if is_live(vectors):  # readers of this process search it as changed; the file comes later
        vectors.apply(add, vecs, remove, persist=False)
        return
    vectors.apply(add, vecs, remove)
    # a store commit after every save: readers re-check the vector file when the store changed
    store.set_meta("vectors_saved", str(int(store.get_meta("vectors_saved") or 0) + 1))


def add_known_vectors(
    store: Store, spec: VectorsSpec, progress: ProgressFn = _no_progress
) -> HnswVectors | None:
    """Before a publish: give the pending generation's new rows whose text already has an
    embedding (a moved or restored chunk) their vectors, and drop labels above the watermark
    that are no row of it (left by a run killed before it published). Looks at the pending rows
    and the saved label list only, and loads the index (returned) only when there is work (the
    full :func:`sync_vectors` runs after the publish), so the publish is not delayed by it."""
    directory, _, model_id = spec
    _, watermark = store.published()
    vectors = live_vectors(directory, spec[1])
    if vectors is not None:
        vectors.key = model_id
    held = vectors.held_rowids() if vectors is not None else HnswVectors.stored_labels(directory)
    if held is None:  # the label list does not describe the file: ask the index itself
        vectors = _open_vectors(spec)
        held = vectors.held_rowids()
    add = np.setdiff1d(store.pending_rowids(model_id), held)
    ghosts = np.setdiff1d(held[held > watermark], store.pending_rowids())
    if not len(add) and not len(ghosts):
        return vectors
    vectors = vectors if vectors is not None else _open_vectors(spec)
    progress("vectors", 0, len(add))
    vecs = store.vectors_for_rowids(model_id, add.tolist(), vectors.dim)
    _apply_vectors(store, vectors, add, vecs, ghosts.tolist())
    progress("vectors", len(add), len(add))
    return vectors


VectorsSpec = tuple[Path, int, str]
"""(folder, dimension, embedding key) of the HNSW index an update keeps in step."""


def _vectors_spec(index_dir: Path, embedder: Embedder | None) -> VectorsSpec | None:
    """The HNSW index to keep in step with the store: the embedder's (an index made under
    another key is discarded and rebuilt from the store's cache), or, when not embedding, the
    one already there (None when there is none)."""
    vec_dir = index_dir / "vectors"
    if embedder is None:
        key, dim = HnswVectors.stored_key(vec_dir), HnswVectors.stored_dim(vec_dir)
        return None if key is None or dim is None else (vec_dir, dim, key)
    key = embedding_key(embedder.model_id)
    if vec_dir.exists() and HnswVectors.stored_key(vec_dir) != key:
        # Vectors made under another model or embedding-text format: rowids alone cannot
        # tell them apart, so the HNSW index is rebuilt from the store's cache.
        log.info("vector index made under another embedding key, rebuilding")
        shutil.rmtree(vec_dir)
    return vec_dir, embedder.dim, key


def embed_missing(
    store: Store,
    embedder: Embedder,
    progress: ProgressFn = _no_progress,
    cache: VectorCache | None = None,
    *,
    above: int | None = None,
) -> tuple[int, int]:
    """Embed every chunk text that has no embedding for this model; resumable. Texts the
    ``cache`` holds (:mod:`ragloom.embed.cache`: embedded before, by any index) are taken from
    it, and every vector computed goes into it. Returns (vectors written, of which from the
    cache). ``above``: only rows with a larger rowid (one update's new rows)."""
    key = embedding_key(embedder.model_id)
    missing = store.missing_embeddings(key, above=above)
    if not missing:
        return 0, 0
    total = len(missing)
    done = 0
    progress("embed", 0, total)
    if cache is not None:
        ckeys = [VectorCache.key(key, t) for _, t in missing]
        found = cache.get(ckeys, embedder.dim)
        if found:
            hits = [
                (h, found[ck]) for (h, _), ck in zip(missing, ckeys, strict=True) if ck in found
            ]
            for start in range(0, len(hits), EMBED_COMMIT_BATCH):
                store.put_embeddings(key, hits[start : start + EMBED_COMMIT_BATCH])
                done += len(hits[start : start + EMBED_COMMIT_BATCH])
                progress("embed", done, total)
            missing = [m for m, ck in zip(missing, ckeys, strict=True) if ck not in found]
    cached = done
    # Length-sorted batches: padding waste is what makes transformer batches slow.
    missing.sort(key=lambda item: len(item[1]))
    for start in range(0, len(missing), EMBED_COMMIT_BATCH):
        part = missing[start : start + EMBED_COMMIT_BATCH]
        vecs = embedder.embed_documents([t for _, t in part])
        store.put_embeddings(key, ((h, vecs[i]) for i, (h, _) in enumerate(part)))
        if cache is not None:
            cache.put((VectorCache.key(key, t), vecs[i]) for i, (_, t) in enumerate(part))
        done += len(part)
        progress("embed", done, total)
    return total, cached
