"""Build and incrementally update an index: walk, parse, store, BM25, embed, vectors.

Order of work, chosen so that a crash (even SIGKILL) at any point leaves a usable index and the
next run finishes the job with exactly the chunks of a clean build:

0. A generation an earlier run wrote but never published (it was killed) is rolled back,
   and the temporary files it left beside BM25 and the vectors are removed.
1. Walk the root, hash every file, compare with the store: changed, new and removed files.
2. Parse the changed files into chunks (tree-sitter).
3. One SQLite transaction writes every file's new chunk set as the pending generation ``G + 1``
   beside the published ``G`` (docs/consistency.md): readers still see exactly ``G``.
4. BM25 is brought in line with the store by a set difference of rowids and committed: it
   holds the rows of both generations. The BM25 over whole files (:mod:`ragloom.index.file_bm25`)
   is brought in line the same way, with the file versions of both generations. The HNSW index
   gains the new rows whose text already has an embedding (a moved or restored chunk).
5. Publish: one small transaction makes ``G + 1`` what readers see; the index is now searchable
   by keywords (progressive indexing). BM25 then drops the rows ``G + 1`` replaced, and the
   file BM25 the file versions it replaced.
6. Chunks whose text has no embedding yet for this model are embedded (longest-first batches
   sorted by length), each batch committed, so an interrupted run resumes where it stopped.
7. The HNSW index is brought in line with the embedded rowids (new rows in, replaced rows out)
   and saved atomically; then the store deletes the replaced rows.
8. Cached embeddings no chunk can use (another model or text format, texts gone) are pruned
   and the freed pages are given back to the file system (``incremental_vacuum``, bounded).

Steps 4, 5 and 7 are idempotent set differences, so they also repair a run killed half way; a
reader that pinned ``G`` sees ``G`` whatever point the update has reached.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from ragloom.embed.cache import VectorCache
from ragloom.index.bm25 import TantivyBm25
from ragloom.index.file_bm25 import sync_around_publish
from ragloom.index.graphwork import GraphWorker, backfill_records
from ragloom.index.store import FileRow, Store
from ragloom.index.store_schema import CHUNKER_VERSION_META as CHUNKER_VERSION_META
from ragloom.index.store_schema import GRAPH_VERSION_META as GRAPH_VERSION_META
from ragloom.index.sync import EMBED_COMMIT_BATCH as EMBED_COMMIT_BATCH
from ragloom.index.sync import (
    ProgressFn,
    _no_progress,
    _open_vectors,
    _remove_stale_temporaries,
    _sync_bm25_or_rebuild,
    _vectors_spec,
    add_known_vectors,
    embed_missing,
    sync_bm25,
    sync_recent_vectors,
    sync_vectors,
)
from ragloom.index.sync import VectorsSpec as VectorsSpec
from ragloom.index.vectors import HnswVectors
from ragloom.ingest.chunker import CHUNKER_VERSION
from ragloom.ingest.filegraph import FILE_GRAPH_VERSION, FileGraph
from ragloom.ingest.ids import file_hash
from ragloom.ingest.walker import DEFAULT_MAX_FILE_BYTES, SourceFile, is_binary, walk
from ragloom.types import Chunk

if TYPE_CHECKING:
    from ragloom.embed.base import Embedder

__all__ = [
    "IndexStats",
    "ProgressFn",
    "add_known_vectors",
    "scan_tree",
    "sync_bm25",
    "sync_vectors",
    "update_index",
]

log = logging.getLogger("ragloom.index")

RECLAIM_SECONDS = 5.0
"""Most time one run spends giving free database pages back to the file system (the rest is
reclaimed by the next runs): docs/consistency.md, "Stale embeddings"."""
STAT_MARGIN_S = 2.0
"""How far before the previous scan a file's modification time must lie for its size and time
to vouch for its bytes: covers file systems whose timestamps tick coarsely (2 s on FAT)."""
SCAN_STARTED_META = "scan_started_at"
"""Meta key: when the last published update's scan began (seconds since the epoch)."""


def _settled_before(store: Store) -> float | None:
    raw = store.get_meta(SCAN_STARTED_META)
    try:
        return float(raw) - STAT_MARGIN_S if raw else None
    except ValueError:
        return None


PATHS_SAMPLE = 20
"""How many changed paths :attr:`IndexStats.paths_changed` names at most."""


@dataclass(slots=True)
class IndexStats:
    """What one ``index`` run did; the CLI's ``--json`` output (a stable contract)."""

    files_scanned: int = 0
    files_changed: int = 0
    files_removed: int = 0
    files_skipped: dict[str, int] = field(default_factory=dict)
    files_skipped_examples: dict[str, list[str]] = field(default_factory=dict)
    """The first 20 paths skipped for each reason of :attr:`files_skipped` (walk order)."""
    chunks_total: int = 0
    chunks_added: int = 0
    chunks_updated: int = 0
    chunks_removed: int = 0
    chunks_embedded: int = 0
    """Chunk texts that got a vector in this run: computed, or taken from the vector cache."""
    embeddings_computed: int = 0
    """Of those, the vectors the model computed (the slow part)."""
    embeddings_cached: int = 0
    """Of those, the vectors taken from the vector cache (:mod:`ragloom.embed.cache`): texts
    embedded before, by this or another index, branch or work tree."""
    embeddings_pending: int = 0
    seconds: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)
    bm25_ready_seconds: float = 0.0
    model: str = ""
    model_changed: bool = False
    generation: int = 0
    """The published index generation after this run (search answers report theirs)."""
    chunks_collected: int = 0
    """Replaced chunk rows deleted once no generation showed them any more."""
    embeddings_pruned: int = 0
    """Cached embeddings dropped: made under another model or text format, or of texts no chunk
    has any more."""
    bytes_reclaimed: int = 0
    """Bytes the database file shrank by (free pages given back, incremental vacuum)."""
    history_commits: int | None = None
    """Commits the change history holds after this run (the ``commits`` source, ranking
    evidence: docs/ranking.md "Change history"); None when it was not synced (not a git work
    tree, ``history=False``, or the sync failed: the warning says why)."""
    files_trusted: int = 0
    """Of ``files_scanned``, files not read again: unchanged in size and modification time
    since an update that read them after their last write (see :func:`scan_tree`)."""
    paths_changed: list[str] = field(default_factory=list)
    """Up to :data:`PATHS_SAMPLE` of the changed, new and removed files (sorted): what a
    watcher's line names."""
    removed_skipped: dict[str, str] = field(default_factory=dict)
    """Removed files that are still on disk, and why they are skipped now (``too_large``,
    ``unreadable``, ``gitignored``, ...; ``skipped`` when the walk kept no example), up to
    :data:`PATHS_SAMPLE`: a file that grew past the size cap was counted "removed" without a
    word."""

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def _why(reasons: Mapping[str, str], rel: str) -> str:
    """The walk's reason for skipping ``rel``: its own, or its nearest folder's (a skipped
    folder is counted once, under its own path), else ``skipped``."""
    path = rel
    while path:
        if path in reasons:
            return reasons[path]
        path = path.rpartition("/")[0]
    return "skipped"


def _read(sf: SourceFile, max_bytes: int) -> tuple[SourceFile, bytes] | str:
    """A walked file's bytes (and its size and mtime as read), or why it is skipped now:
    ``vanished`` (deleted since the walk), ``unreadable``, ``too_large``, ``special``."""
    from ragloom.ingest.walker import read_source

    return read_source(sf, max_bytes)


class ParsedFile(NamedTuple):
    """One changed file as parsed: its chunks and its graph record (None unless code)."""

    sf: SourceFile
    digest: str
    chunks: list[Chunk]
    graph: FileGraph | None


def scan_tree(
    root: Path,
    index_dir: Path | None,
    known: Mapping[str, FileRow],
    stats: IndexStats,
    *,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    progress: ProgressFn = _no_progress,
    verify: Collection[str] | None = None,
    settled_before: float | None = None,
    graph_worker: GraphWorker | None = None,
) -> tuple[list[ParsedFile], list[str]]:
    """Steps 1 and 2 of an update, shared by every storage backend: walk ``root``, hash each
    file, compare with ``known`` (the published files) and parse the changed ones into chunks.
    Returns (changed files with their digest, chunks and graph record, removed paths); fills
    the scan counts
    and the ``scan`` and ``parse`` timings of ``stats``.

    ``verify`` None (``ragloom index``): see ``settled_before``. A collection (the
    relative paths a file watcher saw events for) trusts a file outside it whose size and
    modification time are those of its row, and reads only the rest: the scan of a one-file
    edit costs a walk of the tree instead of reading all of it. A change the watcher was told
    of is always hashed, so a rewrite within one tick of the clock with the same size is not
    missed; a change no event reported is found by its size or time (the rescan).

    ``settled_before`` (a time; :func:`update_index` passes the start of the previous scan
    less :data:`STAT_MARGIN_S`) trusts a file whose size and modification time are those of
    its row when that time is before it: the row was read after the file's last write, so a
    file with the same time has the same bytes (git's racy-clean rule). A file written close
    to the previous scan is read again. None reads every file."""
    from ragloom.ingest.chunker import parse_file

    t0 = time.perf_counter()
    walked = walk(root, max_file_bytes=max_file_bytes, index_dir=index_dir)
    changed: list[tuple[SourceFile, bytes, str]] = []
    seen: set[str] = set()
    progress("scan", 0, len(walked.files))
    for i, sf in enumerate(walked.files):
        row = known.get(sf.rel)
        if (
            row is not None
            and row.size == sf.size
            and row.mtime == sf.mtime
            and (verify is None or sf.rel not in verify)
            and (verify is not None or (settled_before is not None and sf.mtime < settled_before))
        ):
            seen.add(sf.rel)
            stats.files_trusted += 1
            continue
        got = _read(sf, max_file_bytes)
        if isinstance(got, str):
            walked.skip(got, sf.rel)
            continue
        sf, data = got
        if is_binary(data):
            walked.skip("binary", sf.rel)
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
    stats.files_skipped = dict(sorted(walked.skipped.items()))
    stats.files_skipped_examples = {k: list(v) for k, v in sorted(walked.examples.items())}
    stats.paths_changed = sorted([sf.rel for sf, _, _ in changed] + removed)[:PATHS_SAMPLE]
    if removed:
        why = {rel: reason for reason, rels in walked.examples.items() for rel in rels}
        present = [rel for rel in removed if os.path.lexists(os.path.join(root, rel))]
        stats.removed_skipped = {rel: _why(why, rel) for rel in present[:PATHS_SAMPLE]}
    t1 = time.perf_counter()
    stats.timings["scan"] = t1 - t0

    # 2. parse
    parsed: list[ParsedFile] = []
    progress("parse", 0, len(changed))
    worker = None
    if graph_worker is not None:
        n_code = sum(1 for sf, _, _ in changed if graph_worker.is_code(sf.rel))
        if graph_worker.wanted(n_code) and graph_worker.start():
            worker = graph_worker
    for i, (sf, data, digest) in enumerate(changed, 1):
        if worker is not None and worker.is_code(sf.rel):
            chunks, graph = parse_file(sf.rel, data, digest, refs=False)[0], None
            worker.submit(sf.rel, data, digest)
        else:
            chunks, graph = parse_file(sf.rel, data, digest)
        parsed.append(ParsedFile(sf, digest, chunks, graph))
        progress("parse", i, len(changed))
    stats.timings["parse"] = time.perf_counter() - t1
    return parsed, removed


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
    cache: VectorCache | None = None,
    verify: Collection[str] | None = None,
    trust_stat: bool = True,
    recent_only: bool = False,
    rebuild: bool = False,
) -> IndexStats:
    """Bring the index in ``index_dir`` up to date with ``root``. Caller holds the write lock.
    ``rebuild``: every file is read and parsed again and every chunk written anew (the old
    rows removed first), in the one pending generation, so readers see the old index until it
    is published.
    ``cache``: the vector cache embeddings are taken from and kept in (None: none).
    ``verify``: as for :func:`scan_tree` (None: hash every file). ``trust_stat``: a file
    written before the previous update's scan began and unchanged in size and time since is
    not read again (:func:`scan_tree`'s ``settled_before``); False reads every file.
    ``recent_only`` (a watcher's batch): embeddings are looked for, and vectors added, for this
    update's new rows only, instead of two anti-joins over the whole store (430 and 300 ms at
    100k chunks); rows an earlier run left without a vector wait for the next full update (the
    watcher's start and its rescans)."""
    t0 = time.perf_counter()
    stats = IndexStats(model_changed=model_changed)
    # 0. an update killed before it published is undone (readers never saw it), and the
    # temporary files a killed run left are removed
    _remove_stale_temporaries(index_dir)
    if rolled_back := store.rollback_pending():
        log.info("rolled back an unpublished update", extra={"rows": rolled_back})
    # rows above it are this update's (for ``recent_only``)
    _, since = store.published()
    # 1. walk and hash, 2. parse
    worker = GraphWorker()
    try:
        known = store.files()
        if known and not rebuild and store.get_meta(CHUNKER_VERSION_META) != str(CHUNKER_VERSION):
            log.info(
                "the chunking rules changed since this index was made: every file is parsed again",
                extra={"chunker_version": CHUNKER_VERSION},
            )
            rebuild = True
        parsed, removed = scan_tree(
            root,
            index_dir,
            {} if rebuild else known,
            stats,
            max_file_bytes=max_file_bytes,
            progress=progress,
            verify=None if rebuild else verify,
            settled_before=_settled_before(store) if trust_stat and not rebuild else None,
            graph_worker=worker,
        )
        if rebuild:
            removed = sorted(known)
        done = _apply_update(
            root, index_dir, store, embedder, stats, parsed, removed, worker, t0, since,
            progress=progress, on_bm25_ready=on_bm25_ready, cache=cache,
            recent_only=recent_only, remove_first=rebuild,
        )  # fmt: skip
        if store.get_meta(CHUNKER_VERSION_META) != str(CHUNKER_VERSION):
            store.set_meta(CHUNKER_VERSION_META, str(CHUNKER_VERSION))
        return done
    finally:
        worker.close()


def _apply_update(
    root: Path,
    index_dir: Path,
    store: Store,
    embedder: Embedder | None,
    stats: IndexStats,
    parsed: list[ParsedFile],
    removed: list[str],
    worker: GraphWorker,
    t0: float,
    since: int,
    *,
    progress: ProgressFn,
    on_bm25_ready: Callable[[], None] | None,
    cache: VectorCache | None,
    recent_only: bool,
    remove_first: bool = False,
) -> IndexStats:
    """Steps 3 to 8 of :func:`update_index` (its docstring and the module's);
    ``remove_first``: the removed files' rows go before the parsed files' are written (a
    rebuild, which removes every file and writes each one anew)."""
    from ragloom.ingest.chunker import detect_language

    scan_started = time.time() - (time.perf_counter() - t0)
    t2 = time.perf_counter()

    # 3. one atomic store write: the pending generation, beside the published one
    _check_graph_version(store)
    if parsed or removed:
        with store.transaction() as conn:
            pending = store.begin_generation(conn)
            if remove_first:
                for path in removed:
                    stats.chunks_removed += store.remove_file(conn, path, generation=pending)
                removed = []
            for sf, digest, chunks, graph in parsed:
                language = detect_language(sf.rel)
                if graph is not None:
                    store.put_file_graph(conn, sf.rel, digest, graph.to_blob())
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
                    generation=pending,
                )
                stats.chunks_added += a
                stats.chunks_updated += u
                stats.chunks_removed += r
            for path in removed:
                stats.chunks_removed += store.remove_file(conn, path, generation=pending)
    _backfill_graphs(root, store, {p.sf.rel for p in parsed}, progress)
    t3 = time.perf_counter()
    stats.timings["store"] = t3 - t2

    # 4. BM25 (and HNSW, for texts embedded before) hold both generations
    bm25_dir = index_dir / "bm25"
    try:
        bm25 = TantivyBm25(bm25_dir, create=True)
    except Exception:  # an unreadable engine folder is rebuilt from the store
        log.warning("bm25 index unreadable, rebuilding", extra={"path": str(bm25_dir)})
        bm25 = TantivyBm25.reset(bm25_dir)
    bm25 = _sync_bm25_or_rebuild(store, bm25, progress, recent=recent_only)
    changed = [p.sf.rel for p in parsed] + list(removed)
    after_publish = sync_around_publish(
        store, index_dir, changed if recent_only else None, progress
    )
    spec = _vectors_spec(index_dir, embedder)
    vectors: HnswVectors | None = None
    key = spec[2] if spec is not None else ""
    if spec is not None:
        vectors = add_known_vectors(store, spec, progress)
    t4 = time.perf_counter()
    stats.timings["bm25"] = t4 - t3

    if worker.active:  # the worker's graph records, written before the publish shows them
        records = worker.results()
        with store.transaction() as conn:
            for rel, (digest, blob) in records.items():
                if blob is not None:
                    store.put_file_graph(conn, rel, digest, blob)
        stats.timings["graph_wait"] = time.perf_counter() - t4

    # 5. publish; BM25 then drops the rows the new generation replaced
    stats.generation = store.publish()
    store.set_meta(SCAN_STARTED_META, repr(scan_started))
    stats.chunks_total = store.chunk_count()
    stats.bm25_ready_seconds = time.perf_counter() - t0
    if on_bm25_ready is not None:
        on_bm25_ready()
    _sync_bm25_or_rebuild(store, bm25, progress, recent=recent_only)
    after_publish()
    t5 = time.perf_counter()
    stats.timings["publish"] = t5 - t4

    # 6. embeddings, 7. vectors, then the replaced rows leave the store
    if spec is not None and vectors is None:
        vectors = _open_vectors(spec)
    if embedder is not None:
        assert vectors is not None
        stats.model = embedder.model_id
        try:
            stats.chunks_embedded, stats.embeddings_cached = embed_missing(
                store, embedder, progress, cache, above=since if recent_only else None
            )
            stats.embeddings_computed = stats.chunks_embedded - stats.embeddings_cached
        finally:
            t6 = time.perf_counter()
            stats.timings["embed"] = t6 - t5
            if recent_only:
                sync_recent_vectors(store, vectors, key, since)
            else:
                sync_vectors(store, vectors, key, progress)
            stats.timings["vectors"] = time.perf_counter() - t6
        stats.embeddings_pending = stats.chunks_total - vectors.count()
    elif vectors is not None:  # not embedding now: the vectors still drop replaced rows
        sync_vectors(store, vectors, key, progress)
    collected, orphaned = store.collect_removed()
    stats.chunks_collected = collected

    # 8. stale embeddings and disk space
    t8 = time.perf_counter()
    stats.embeddings_pruned = orphaned + store.prune_stale_embeddings(
        key if embedder is not None else None
    )
    stats.bytes_reclaimed = store.reclaim_space(RECLAIM_SECONDS)
    stats.timings["reclaim"] = time.perf_counter() - t8
    stats.seconds = time.perf_counter() - t0
    return stats


def _backfill_graphs(
    root: Path, store: Store, parsed: Collection[str], progress: ProgressFn
) -> int:
    """Give every published code file a graph record of this extractor's version
    (:func:`~ragloom.index.graphwork.backfill_records`); returns the records written."""
    records = backfill_records(root, store.files_without_graph, parsed, progress)
    if records:
        with store.transaction() as conn:
            for path, digest, blob in records:
                store.put_file_graph(conn, path, digest, blob)
        if store.pending_generation() is None:
            # the graph changed though no chunk did: a new generation tells readers to rebuild
            with store.transaction() as conn:
                store.begin_generation(conn)
    return len(records)


def _check_graph_version(store: Store) -> None:
    """Drop graph records another version of the extractor made (before this update writes
    its own): :func:`_backfill_graphs` makes them again."""
    if store.get_meta(GRAPH_VERSION_META) != str(FILE_GRAPH_VERSION):
        store.clear_file_graphs()
        store.set_meta(GRAPH_VERSION_META, str(FILE_GRAPH_VERSION))
