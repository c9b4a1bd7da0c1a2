"""The one obvious entry point: ``ragloom.open(path)`` returns an :class:`Index`.

>>> import ragloom
>>> idx = ragloom.open("path/to/repo")        # a repository root or an index folder
>>> idx.index()                              # build or update (incremental)
>>> hits = idx.search("decode a JSON document", top_k=5).hits
>>> idx.status().to_dict()
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Collection
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ragloom.embed.cache import VectorCache, open_default_cache
from ragloom.embed.document import embedding_key
from ragloom.errors import (
    ConfigError,
    DbError,
    IncompatibleIndexError,
    IndexNotFoundError,
    InputError,
    RagError,
)
from ragloom.index.bm25 import TantivyBm25
from ragloom.index.file_bm25 import FILE_BM25_DIR
from ragloom.index.indexer import IndexStats, ProgressFn, update_index
from ragloom.index.lock import WriteLock
from ragloom.index.manifest import Manifest, ensure_gitignore, read_manifest, write_manifest
from ragloom.index.store import FileRow, Store
from ragloom.index.tokenize import TOKENIZER_VERSION
from ragloom.index.vectors import HnswVectors, live_vectors
from ragloom.ingest.git import GitState, git_status, state_record
from ragloom.ingest.ids import file_hash
from ragloom.ingest.walker import DEFAULT_MAX_FILE_BYTES, is_binary, walk
from ragloom.paths import existing_dir
from ragloom.retrieve.config import RetrievalStrategy
from ragloom.retrieve.reader import DB_NAME, index_manifest, open_retriever
from ragloom.retrieve.search import DEFAULT_STRATEGY, Retriever, SearchResult

if TYPE_CHECKING:
    from ragloom.assemble import AssembledContext, AssemblyPolicy, TokenBudget, TokenCounter
    from ragloom.assemble.budget import Format
    from ragloom.assemble.snippets import FileReader
    from ragloom.assemble.structure import StructureMode
    from ragloom.embed.base import Embedder
    from ragloom.graph import CodeGraph
    from ragloom.index.postgres import PostgresBackend, RepositoryModel
    from ragloom.index.rows import ChunkRow
    from ragloom.retrieve.adapt import ModelStore
    from ragloom.retrieve.search import SearchResult
    from ragloom.server.feedback import FeedbackBase
    from ragloom.sources.base import ItemStorage
    from ragloom.sources.pg_items import PgItemStorage

CHECKOUT_SAMPLE = 20
"""Indexed paths a PostgreSQL reader looks for under its root to tell a checkout of the
repository from a folder without one (whose contexts then come from the database)."""
MAP_SEED_HITS = 20
"""Hits of the question that personalise the repository map's PageRank."""
MAP_SKIP_KINDS = frozenset({"module"})
"""Definitions the map does not list (a module's remainder has no signature)."""

__all__ = [
    "DEFAULT_INDEX_DIRNAME",
    "Index",
    "IndexStatus",
    "PostgresIndex",
    "find_index_dir",
    "open",
    "open_postgres",
]

log = logging.getLogger("ragloom")

DEFAULT_INDEX_DIRNAME = ".ragloom"


def _load_embedder(spec: str | None) -> Embedder:
    from ragloom.embed.registry import load_embedder

    return load_embedder(spec)


@dataclass(slots=True)
class IndexStatus:
    """``ragloom status``: counts, model, readiness and freshness (a stable JSON contract)."""

    root: str
    index_dir: str
    ragloom_version: str
    schema_version: int
    files: int
    chunks: int
    chunks_by_kind: dict[str, int]
    chunks_by_language: dict[str, int]
    model: str
    dim: int
    bm25_status: str
    bm25_docs: int
    """Documents in the BM25 engine, those of an unfinished update included."""
    vectors: int
    vectors_ready: bool
    stale_files: int | None
    stale: dict[str, list[str]] = field(default_factory=dict)
    disk_bytes: int = 0
    generation: int = 0
    bm25: dict[str, object] = field(default_factory=dict)
    """BM25 service state: live engine status and the saved snapshot (``ragloom.service``)."""
    history: dict[str, object] = field(default_factory=dict)
    """The change history the ``history`` ranking step reads (empty when the index keeps
    none): ``commits``, ``last_commit``, ``newest_commit_date`` (epoch seconds) and
    ``ranking`` (whether searches use it: False when no commit touched a file under the
    root)."""
    ranking_model: dict[str, object] = field(default_factory=dict)
    """The model the learned stage (``+learned``) ranks with: ``model`` ``global`` (shipped)
    or ``repository`` (``ragloom adapt``), then its ``digest``, ``base_digest``, ``examples``
    (history questions it was fitted on), ``feedback_answers``, ``feedback_used`` and
    ``newest_commit``; ``global`` with ``set_aside`` (why) when the repository's model file is
    there but not used (fitted over another global model: run ``ragloom adapt``)."""
    git: dict[str, object] | None = None
    """The git state (null outside a git work tree): ``branch`` (null when detached) and
    ``head`` of the work tree now, ``indexed_branch`` and ``indexed_head`` (what the last
    ``index`` saw; null when it recorded none), ``head_moved`` and ``dirty_paths`` (files that
    differ from HEAD, untracked ones included; null without freshness)."""
    vectors_current: bool = True
    """False when the folder's vectors were saved under another model (or embedding-text
    format) than the manifest names (a model switch stopped between the two): they are not
    searched, and the next ``ragloom index`` rebuilds them from the stored embeddings."""
    bm25_unpublished: int = 0
    """Of ``bm25_docs``, those of no published chunk: an update stopped (killed, or a crash)
    after its BM25 commit and before it published. Searches never see them; the next
    ``ragloom index`` finishes the update or rolls it back."""
    checkout: bool = True
    """Whether ``root`` holds the repository's files (a folder index: always). False for a
    PostgreSQL reader on a machine without a checkout: freshness is not checked there
    (``stale_files`` null) and contexts come from the files as indexed."""

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def find_index_dir(start: Path | None = None) -> Path:
    """The nearest ``.ragloom`` folder at or above ``start`` (default: the current directory)."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / DEFAULT_INDEX_DIRNAME
        if (candidate / DB_NAME).exists():
            return candidate
    raise IndexNotFoundError(
        f"no ragloom index found at or above {here}; create one with `ragloom index PATH`"
    )


def _dir_size(path: Path) -> int:
    total = 0
    for dirpath, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.path.getsize(os.path.join(dirpath, name))
    return total


def _declaration_lines(sig: str) -> str:
    """A Python signature from its ``def``/``class`` line on (decorators left out), or as it
    is when it has none."""
    lines = sig.splitlines()
    at = next(
        (
            i
            for i, ln in enumerate(lines)
            if ln.lstrip().startswith(("def ", "async def ", "class "))
        ),
        0,
    )
    return "\n".join(lines[at:])


def _second_part_signature(store: Store | PostgresBackend, chunk_id: str, kind: str) -> str | None:
    """The signature of the second part of the split Python symbol ``chunk_id`` (None when it
    was not split)."""
    from ragloom.assemble.signature import signature
    from ragloom.ingest.chunker import part_id

    row = store.chunks_by_ids([part_id(chunk_id, 2)]).get(part_id(chunk_id, 2))
    if row is None:
        return None
    text = store.texts_by_rowids([row.rowid]).get(row.rowid)
    return signature(text, "python", kind, doc=False) if text else None


SAME_BYTES_MAX = 4096
"""Files :meth:`Index.changed_since_indexed` remembers as touched but unchanged."""


class Index:
    """An index of one repository root, stored in ``index_dir``."""

    def __init__(self, root: Path, index_dir: Path, *, embedder: str | Embedder | None = None):
        self.root = root.resolve()
        self.index_dir = index_dir.resolve()
        self._embedder_arg = embedder
        self._retriever: Retriever | None = None
        self._store: Store | None = None
        self._graph: CodeGraph | None = None
        self._graph_lock = threading.Lock()
        self._same_bytes: dict[tuple[str, int, int, str], bool] = {}
        """(path, size, mtime_ns, indexed hash) -> whether the file still has those bytes."""
        self._file_rows: tuple[int, dict[str, FileRow | None]] = (-1, {})
        """(generation, path -> its file row then) for :meth:`changed_since_indexed`."""
        self._file_rows_lock = threading.Lock()

    # -- construction -------------------------------------------------------------------
    @classmethod
    def at(cls, path: str | os.PathLike[str], *, embedder: str | Embedder | None = None) -> Index:
        """Open by a repository root (its ``.ragloom`` folder) or by an index folder."""
        p = existing_dir(path)
        if (p / DB_NAME).exists():
            manifest = read_manifest(p)
            root = (p / manifest.root).resolve() if manifest else p.parent
            return cls(root, p, embedder=embedder)
        return cls(p, p / DEFAULT_INDEX_DIRNAME, embedder=embedder)

    @property
    def exists(self) -> bool:
        return (self.index_dir / DB_NAME).exists()

    def _manifest(self) -> Manifest:
        return index_manifest(self.index_dir, self.root)

    def _reader_store(self) -> Store:
        if self._store is None:
            self._manifest()
            self._store = Store(self.index_dir / DB_NAME, readonly=True)
        return self._store

    def _graph_store(self) -> Store | PostgresBackend:
        """What the graph and its answers (map, structure) read: the folder's store here."""
        return self._reader_store()

    def chunks_by_ids(self, ids: Collection[str]) -> dict[str, ChunkRow]:
        """The chunks of ``ids`` that the published generation holds, by id."""
        return self._graph_store().chunks_by_ids(sorted(ids))

    def open_feedback(self) -> FeedbackBase | None:
        """This index's feedback store (ratings, context usage, the query log) for reading:
        the folder's ``feedback.sqlite`` opened read-only here (it takes no lock beside the
        servers writing to it), None while it has none; the database's tables for
        :class:`PostgresIndex`. The caller closes it."""
        from ragloom.server.feedback import FEEDBACK_DB_NAME, FeedbackStore

        if not (self.index_dir / FEEDBACK_DB_NAME).is_file():
            return None
        return FeedbackStore(self.index_dir, readonly=True)

    def _ranking_model_status(self) -> dict[str, object]:
        """``status``'s ``ranking_model`` (:func:`ragloom.retrieve.adapt.describe`), with
        ``ratings_since_fit`` for a repository model: the answers rated since it was fitted
        (``ragloom index`` fits it again from 20 on)."""
        from ragloom.retrieve.adapt import describe, feedback_window, repository_model_state

        model, set_aside = repository_model_state(self.ranking_model_store())
        out = describe(model, set_aside)
        if model is not None:
            since, counted = feedback_window(model)
            try:
                store = self.open_feedback()
                if store is not None:
                    try:
                        out["ratings_since_fit"] = max(0, store.rated_count(since) - counted)
                    finally:
                        store.close()
                else:
                    out["ratings_since_fit"] = 0
            except RagError as exc:  # the count is a hint: status goes on without it
                log.warning("cannot count the ratings since the repository model: %s", exc)
        return out

    def ranking_model_store(self) -> ModelStore:
        """Where this repository's own ranking model is kept (``ragloom adapt``,
        :mod:`ragloom.learn.adapt`): ``ranker-adapted.json`` in the index folder here, a row of
        the database for :class:`PostgresIndex`."""
        from ragloom.retrieve.adapt import FileModelStore

        return FileModelStore(self.index_dir)

    def source_storage(self) -> ItemStorage | None:
        """Where this index's stored sources (docs, commits, issues, prs) keep their items
        when not in ``<index>/sources/`` (None here: the folder; the database for
        :class:`PostgresIndex`)."""
        return None

    @property
    def retriever(self) -> Retriever:
        if self._retriever is None:
            from ragloom.retrieve.adapt import RepositoryRanker
            from ragloom.sources.commit_history import CommitHistory

            retriever = open_retriever(
                self.index_dir,
                self._manifest(),
                self._reader_store,
                root=self.root,
                embedder=self._embedder_arg,
            )
            retriever.history = CommitHistory.open(self.index_dir, self.root)
            if retriever.history is None:  # commits synced after this reader opened
                index_dir, root = self.index_dir, self.root
                retriever.attach_history_later(lambda: CommitHistory.open(index_dir, root))
            retriever.ranker = RepositoryRanker(self.ranking_model_store())
            self._retriever = retriever
        return self._retriever

    def graph(self) -> CodeGraph:
        """The code graph of the published generation (docs/graph.md): definitions, references,
        callers and callees. Built when first asked for and again once a newer generation is
        published; the graph returned is never changed afterwards."""
        from ragloom.graph import load_graph

        if self._retriever is not None:  # the one the ranking stage uses: built once
            shared = self._retriever.code_graph()
            if shared is not None:
                return shared
        with self._graph_lock:  # concurrent requests build it once
            store = self._graph_store()
            if self._graph is None or self._graph.generation != store.generation():
                self._graph = load_graph(store)
            return self._graph

    def repo_map(
        self,
        query: str | None = None,
        *,
        budget: int = 2048,
        format: str = "text",
        counter: str | TokenCounter = "cl100k",
        top_k: int = MAP_SEED_HITS,
    ) -> dict[str, object]:
        """A repository map within ``budget`` tokens exactly (docs/graph.md, "Repository map"):
        files with their most relevant signatures, ranked by PageRank over the code graph,
        personalised to ``query``'s first ``top_k`` hits when a query is given."""
        from ragloom.assemble import get_counter
        from ragloom.assemble.repomap import MapEntry, build_map
        from ragloom.assemble.signature import signature
        from ragloom.errors import InputError

        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
            raise InputError(f"budget must be a positive number of tokens, got {budget!r}")
        if format not in ("text", "markdown", "json"):
            raise InputError(f"format must be text, markdown or json, got {format!r}")
        tc = get_counter(counter) if isinstance(counter, str) else counter
        graph = self.graph()
        seeds: dict[int, float] = {}
        if query is not None and query.strip():
            hits = self.search(query, top_k=top_k).hits
            for rank, h in enumerate(hits):
                n = graph.node(h.id)
                if n is not None:
                    seeds[n] = seeds.get(n, 0.0) + 1.0 / (1 + rank)
        rank_of = graph.pagerank(seeds or None)
        shown = [i for i, d in enumerate(graph.defs) if d.kind not in MAP_SKIP_KINDS]
        file_scores: dict[str, float] = {}
        for i, d in enumerate(graph.defs):
            file_scores[d.path] = file_scores.get(d.path, 0.0) + float(rank_of[i])
        # the text of the entries that could fit at all (~8 tokens a signature at the least)
        shown.sort(key=lambda i: (-float(rank_of[i]), graph.defs[i].path, graph.defs[i].start_line))
        total = len(shown)
        shown = shown[: max(16, budget // 8)]
        store = self._graph_store()
        rows = store.chunks_by_ids([graph.defs[i].id for i in shown])
        texts = store.texts_by_rowids([r.rowid for r in rows.values()])
        entries: list[MapEntry] = []
        for i in shown:
            d = graph.defs[i]
            row = rows.get(d.id)
            text = texts.get(row.rowid) if row is not None else None
            if text is None:
                continue
            sig = signature(text, d.language, d.kind, doc=False)
            if d.language == "python":  # decorators cost a map more than they tell
                sig = _declaration_lines(sig)
                if sig.startswith("@"):
                    # decorators longer than a chunk: the def is in the symbol's second part
                    sig = _declaration_lines(_second_part_signature(store, d.id, d.kind) or sig)
            if sig.strip():
                entries.append(
                    MapEntry(d.path, d.symbol, d.kind, d.start_line, sig, float(rank_of[i]))
                )
        m = build_map(entries, file_scores, budget, tc, fmt=format)  # type: ignore[arg-type]
        return {
            "query": query,
            "budget": budget,
            "tokens": m.tokens,
            "generation": graph.generation,
            "entries_total": total,
            "entries_shown": m.entries_shown,
            "truncated": m.truncated,
            "files": [
                {
                    "path": f.path,
                    "score": round(f.score, 6),
                    "entries": [
                        {
                            "symbol": e.symbol,
                            "kind": e.kind,
                            "line": e.line,
                            "signature": e.signature,
                            "score": round(e.score, 6),
                        }
                        for e in f.entries
                    ],
                }
                for f in m.files
            ],
            "text": m.text,
        }

    # -- operations ---------------------------------------------------------------------
    def index(
        self,
        *,
        rebuild: bool = False,
        embed: bool = True,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        progress: ProgressFn | None = None,
        history: bool = True,
        verify: Collection[str] | None = None,
        recent_only: bool = False,
        keep_model: bool = False,
        wait_s: float = 0.0,
    ) -> IndexStats:
        """Build the index or bring it up to date (only changed files are re-parsed).

        ``wait_s``: how long to wait for another writer (a watcher's batch, another ``index``)
        before :class:`IndexLockedError` (0: refuse at once).

        ``keep_model`` (a watcher's batch): an index now embedded with another model than
        this writer's (another process re-indexed it with ``--model``) is refused with
        :class:`IncompatibleIndexError` and left as it is, instead of being switched back to
        this writer's model (which deleted the other model's vectors).

        With ``history`` (the default) and a root inside a git work tree, the commit history is
        synced too (incrementally): the ``history`` ranking step reads it. ``verify`` (paths
        relative to the root that a file watcher saw change) reads only those files and the
        ones whose size or modification time differ from the index, instead of every file
        (:func:`~ragloom.index.indexer.scan_tree`); ``recent_only`` embeds and adds vectors
        for this update's new rows only (a watcher's batch; :func:`update_index`)."""
        if not self.root.is_dir():
            raise InputError(f"not a directory: {self.root}")
        if (self.root / DB_NAME).is_file() and (self.root / "manifest.json").is_file():
            raise InputError(
                f"{self.root} is a ragloom index folder; index the repository it belongs to"
            )
        try:
            self.index_dir.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError) as exc:
            raise InputError(f"index folder {self.index_dir} is not a directory") from exc
        except OSError as exc:  # permission, a missing parent under /proc, a read-only disk
            raise InputError(f"cannot create the index folder {self.index_dir}: {exc}") from exc
        # git ignores the folder from its first moment: a first run that fails (a model that
        # cannot be loaded) left it with a lock file only, shown by `git status`
        ensure_gitignore(self.index_dir)
        with WriteLock(self.index_dir, wait_s=wait_s):
            self.close()
            # A rebuild of an index this version can read is one more generation: every file
            # re-parsed and every chunk written anew, published at once, so readers keep the
            # old index until then and an interrupted rebuild leaves it as it was. Only an
            # index it cannot read (another format, a damaged database) is deleted first.
            in_place = rebuild and self._rebuildable()
            kept: Manifest | None = None
            if rebuild and not in_place:
                # the model the index was made with survives a rebuild from nothing (it went
                # back to the default model, re-embedding everything with it)
                with contextlib.suppress(RagError):
                    kept = read_manifest(self.index_dir)
                self._delete_index_files()
            old = read_manifest(self.index_dir) if self.exists else None
            if self._embedder_arg is None and kept is not None and kept.embedding_spec:
                self._embedder_arg = kept.embedding_spec
            emb_arg = self._embedder_arg
            if isinstance(emb_arg, str) or emb_arg is None:
                # A new index without --model: None lets RAGLOOM_EMBEDDING_PROVIDER choose.
                asked = emb_arg or (old.embedding_spec if old else None)
                embedder: Embedder = _load_embedder(asked)
                # The manifest keeps the embedder's full spec (``openai`` alone would need the
                # same environment variables at search time).
                spec = getattr(embedder, "spec", None) or asked or "default"
            else:
                embedder = emb_arg
                spec = getattr(emb_arg, "spec", embedder.model_id)
            # the dimension first: a remote model that cannot be reached fails here, before
            # anything of the index is changed (its vectors were deleted before). A run that
            # embeds nothing (--no-embed) with the index's own model takes the dimension the
            # manifest records: it must work while an embedding server is down
            if not embed and old is not None and embedder.model_id == old.embedding_model:
                dim = old.embedding_dim
            else:
                dim = embedder.dim
            model_changed = old is not None and (
                old.embedding_model != embedder.model_id or old.embedding_dim != dim
            )
            if model_changed and keep_model and old is not None:
                raise IncompatibleIndexError(
                    f"the index is now embedded with {old.embedding_model} "
                    f"({old.embedding_dim}-d), not this writer's {embedder.model_id} ({dim}-d): "
                    "another process re-indexed it with another model; nothing was changed"
                )
            # a switch to another model, embedding now: the index goes on answering with its
            # own model and vectors while the new ones are built beside them, and switches at
            # the end (docs/embedding.md "Switching models"); without embedding (--no-embed)
            # the old vectors go at once
            staged = model_changed and embed and old is not None
            if model_changed:
                import shutil

                log.warning(
                    "embedding model changed from %s to %s: every chunk will be re-embedded%s",
                    old.embedding_model if old else "",
                    embedder.model_id,
                    " (the index answers with the old model until it is done)" if staged else "",
                )
                if not staged:
                    shutil.rmtree(self.index_dir / "vectors", ignore_errors=True)
            if old is not None and old.tokenizer_version != TOKENIZER_VERSION:
                import shutil

                shutil.rmtree(self.index_dir / "bm25", ignore_errors=True)
                shutil.rmtree(self.index_dir / FILE_BM25_DIR, ignore_errors=True)
            store = Store(self.index_dir / DB_NAME)
            try:
                try:
                    rel_root = os.path.relpath(self.root, self.index_dir)
                except ValueError:
                    rel_root = str(self.root)
                manifest = Manifest.new(rel_root, embedder.model_id, dim, str(spec))
                if old is not None:
                    manifest = Manifest(**{**asdict(manifest), "created_at": old.created_at})
                if not staged:
                    write_manifest(self.index_dir, manifest)
                cache = open_default_cache() if embed else None
                try:
                    stats = update_index(
                        self.root,
                        self.index_dir,
                        store,
                        embedder if embed and not staged else None,
                        max_file_bytes=max_file_bytes,
                        progress=progress or (lambda *_: None),
                        model_changed=model_changed,
                        cache=cache,
                        verify=verify,
                        recent_only=recent_only,
                        rebuild=in_place,
                    )
                    if staged:
                        self._switch_model(store, embedder, manifest, stats, cache, progress)
                finally:
                    if cache is not None:
                        cache.close()
                if not embed:
                    stats.model = embedder.model_id
                    stats.embeddings_pending = (
                        stats.chunks_total - HnswVectors(self.index_dir / "vectors", dim).count()
                    )
                self._store_graph(store, stats)
                if history:
                    t_history = time.perf_counter()
                    stats.history_commits = self._sync_history(stats)
                    # a timing of its own: ``seconds`` is the index's own work
                    stats.timings["history"] = time.perf_counter() - t_history
                store.set_meta("last_index_stats", _json(stats.to_dict()))
                store.set_meta("last_indexed_at", str(time.time()))
                store.set_meta("git_state", _json(state_record(self.root)))
                self._refresh_bm25_snapshot(store, stats)
            finally:
                store.close()
        return stats

    def _switch_model(
        self,
        store: Store,
        embedder: Embedder,
        manifest: Manifest,
        stats: IndexStats,
        cache: VectorCache | None,
        progress: ProgressFn | None,
    ) -> None:
        """The second half of a model switch, after the code index was brought up to date
        with the old model's vectors: every chunk embedded with ``embedder`` and its vectors
        built beside the old ones (readers keep answering with the old model), then the
        manifest naming the new model, the new vectors put in place, and the old model's
        embeddings dropped. Killed anywhere before the manifest, the index is the old model's,
        whole; the next switch takes the embeddings already made from the store."""
        from ragloom.index.indexer import RECLAIM_SECONDS
        from ragloom.index.sync import stage_model_switch, switch_vectors

        t0 = time.perf_counter()
        embedded, cached, vectors = stage_model_switch(
            store, self.index_dir, embedder, progress or (lambda *_: None), cache
        )
        t1 = time.perf_counter()
        write_manifest(self.index_dir, manifest)
        switch_vectors(store, self.index_dir)
        key = embedding_key(embedder.model_id)
        stats.model = embedder.model_id
        stats.chunks_embedded, stats.embeddings_cached = embedded, cached
        stats.embeddings_computed = embedded - cached
        stats.embeddings_pending = stats.chunks_total - vectors.count()
        stats.embeddings_pruned += store.prune_stale_embeddings(key)
        stats.bytes_reclaimed += store.reclaim_space(RECLAIM_SECONDS)  # the old model's space
        stats.timings["embed"] = t1 - t0
        stats.timings["vectors"] = time.perf_counter() - t1
        stats.seconds += time.perf_counter() - t0

    @staticmethod
    def _store_graph(store: Store, stats: IndexStats) -> None:
        """Resolve the new generation's code graph and keep it in the folder
        (:mod:`ragloom.graph.cache`) when that costs little beside the update
        (:func:`~ragloom.graph.cache.worth_storing`), so the first graph command finds it; a
        timing of its own, ``graph``. A graph that cannot be made leaves the index as it is:
        the first graph command reports it."""
        from ragloom.graph import load_graph
        from ragloom.graph.cache import worth_storing

        changed = stats.files_changed or stats.files_removed
        if not changed or not worth_storing(stats.seconds, stats.chunks_total):
            return
        t0 = time.perf_counter()
        try:
            load_graph(store)
        except RagError as exc:
            log.warning("code graph not stored: %s", exc)
        stats.timings["graph"] = time.perf_counter() - t0

    def _rebuildable(self) -> bool:
        """Whether a rebuild can be written as a new generation of the index there: its
        manifest is this format's, and its database opens (migrated when older) and passes
        SQLite's ``quick_check`` (a second or so at 100k chunks, against minutes of rebuild).
        False when there is no index: nothing to keep."""
        import sqlite3

        if not (self.index_dir / DB_NAME).is_file():
            return False
        try:
            if read_manifest(self.index_dir) is None:
                return False
            store = Store(self.index_dir / DB_NAME)
            try:
                check = store.quick_check()
            finally:
                store.close()
        except (RagError, sqlite3.Error, OSError) as exc:
            log.warning("the index cannot be read, rebuilt from nothing: %s", exc)
            return False
        if check != "ok":
            log.warning("the index database is damaged, rebuilt from nothing: %s", check)
            return False
        return True

    def _delete_index_files(self) -> None:
        """The database, its manifest and the engines' folders, the stored graph's too
        (feedback, the repository model and the sources stay)."""
        import shutil

        from ragloom.graph.cache import GRAPH_CACHE_DIR

        for name in (DB_NAME, f"{DB_NAME}-wal", f"{DB_NAME}-shm", "manifest.json"):
            (self.index_dir / name).unlink(missing_ok=True)
        for sub in ("bm25", FILE_BM25_DIR, "vectors", GRAPH_CACHE_DIR):
            shutil.rmtree(self.index_dir / sub, ignore_errors=True)

    def _sync_history(self, stats: IndexStats) -> int | None:
        """Sync the commits source when the root is in a git work tree; the commit count, or
        None (not a repository, or a failure, logged: the code index is never lost to it)."""
        from ragloom.sources.base import SourceContext
        from ragloom.sources.commits import CommitsSource, git_dir_of

        if git_dir_of(self.root) is None:
            return None
        t0 = time.perf_counter()
        source = CommitsSource(SourceContext(self.root, self.index_dir, self.source_storage()))
        try:
            report = source.sync()
        except Exception as exc:
            log.warning("change history not synced: %s", exc)
            return None
        finally:
            source.store.close()
        stats.timings["history"] = time.perf_counter() - t0
        return report.total

    def _refresh_bm25_snapshot(self, store: Store, stats: IndexStats) -> None:
        """Keep a saved BM25 snapshot (``ragloom.service``'s warm start) in step with the index.

        The snapshot is a cache of ``<index>/bm25``: after an update that changed anything it is
        re-saved (a few ms), so a service loading it never answers from a stale BM25 state.
        """
        from ragloom.service.persist import DEFAULT_SNAPSHOT_NAME, save_snapshot

        snap = self.index_dir / DEFAULT_SNAPSHOT_NAME
        changed = stats.files_changed or stats.files_removed or stats.model_changed
        if not snap.exists() or not changed:
            return
        try:
            save_snapshot(
                self.index_dir / "bm25",
                snap,
                doc_count=TantivyBm25(self.index_dir / "bm25").doc_count(),
                source_generation=store.generation(),
            )
        except DbError as exc:
            log.warning("could not refresh the BM25 snapshot, removing it: %s", exc)
            snap.unlink(missing_ok=True)

    def search(
        self,
        query: str,
        *,
        top_k: int = 10,
        strategy: str | RetrievalStrategy = DEFAULT_STRATEGY,
        explain: bool = False,
    ) -> SearchResult:
        """Search the index; see :class:`~ragloom.retrieve.search.SearchResult`. ``strategy``
        None is the default."""
        return self.retriever.search(
            _query_text(query), top_k=top_k, strategy=strategy or DEFAULT_STRATEGY, explain=explain
        )

    def get_context(
        self,
        query: str,
        *,
        top_k: int = 15,
        budget: int | TokenBudget = 8000,
        strategy: str | RetrievalStrategy = DEFAULT_STRATEGY,
        format: Format = "xml",
        counter: str | TokenCounter = "cl100k",
        include_scores: bool = False,
        policy: AssemblyPolicy | None = None,
        structure: StructureMode = "off",
    ) -> AssembledContext:
        """Search, then assemble a deduplicated, stitched, budgeted context (AssembledContext).

        ``budget`` is a token count or a :class:`ragloom.assemble.TokenBudget`; ``counter`` a
        counter name (``cl100k``, ``o200k``, ``approx``) or a TokenCounter; ``policy`` overrides
        ``format`` and ``include_scores`` with a full :class:`ragloom.assemble.AssemblyPolicy`.
        ``structure`` (``signatures`` or ``bodies``) adds, within the same budget, what the
        selected code calls and what calls it (docs/graph.md, "Structural context").
        """
        from ragloom.assemble import AssemblyPolicy, TokenBudget, get_counter

        _query_text(query)
        if isinstance(budget, int):
            if isinstance(budget, bool) or budget < 1:
                raise ConfigError(f"budget must be a positive number of tokens, got {budget}")
            budget = TokenBudget.for_total(budget)
        tc = get_counter(counter) if isinstance(counter, str) else counter
        result = self.search(query, top_k=top_k, strategy=strategy)
        if policy is None:
            policy = AssemblyPolicy(format=format, include_scores=include_scores)
        return self.assemble(query, result, budget=budget, policy=policy, counter=tc,
                             structure=structure)  # fmt: skip

    def assemble(
        self,
        query: str,
        result: SearchResult,
        *,
        budget: TokenBudget,
        policy: AssemblyPolicy,
        counter: TokenCounter,
        structure: StructureMode = "off",
    ) -> AssembledContext:
        """Assemble a search's hits into a context (what :meth:`get_context` does after its
        search; the serving engine calls it with the search it cached). With ``structure``
        the main parts get the budget less its held-back share and the related definitions
        fill the rest; when none is added and parts were left out, the context is assembled
        again with the whole budget."""
        from ragloom.assemble import assemble_context
        from ragloom.assemble.structure import structure_budget

        retriever = self.retriever
        embeddings = result.embeddings
        if len(embeddings) < len(result.hits):
            embeddings = retriever.embeddings_for_hits(result.hits, result.rowids)

        def build(b: TokenBudget) -> AssembledContext:
            return assemble_context(
                query,
                result.hits,
                root=self.root,
                budget=b,
                policy=policy,
                counter=counter,
                embeddings=embeddings,
                read_files=self._file_reader(),
            )

        with retriever.telemetry.span("assembly", {"hits": len(result.hits)}) as span:
            main = structure_budget(budget, structure)
            ctx = build(main)
            if structure != "off":
                ctx = self.add_structure(ctx, structure, budget, policy, counter)
                info = ctx.structure or {}
                if main is not budget and not info.get("related") and ctx.stats.truncated:
                    # nothing related to show: the held-back share goes to the main parts
                    ctx = build(budget)
                    ctx.structure = dict(info)
            span.set_attribute("parts", len(ctx.parts))
            span.set_attribute("tokens", ctx.stats.tokens_total)
        ctx.notes = [*result.notes, *ctx.stats.shortfall_notes()]
        return ctx

    def _file_reader(self) -> FileReader | None:
        """Where a context's files are read from when not from :attr:`root` (None: the tree;
        a folder index always sits beside it)."""
        return None

    def has_checkout(self) -> bool:
        """Whether :attr:`root` holds the repository's files (a folder index: always)."""
        return True

    def add_structure(
        self,
        ctx: AssembledContext,
        mode: StructureMode,
        budget: TokenBudget,
        policy: AssemblyPolicy,
        counter: TokenCounter,
    ) -> AssembledContext:
        """``ctx`` with the callees and callers of its parts (:mod:`ragloom.assemble.structure`)."""
        from ragloom.assemble.structure import add_related, file_lines, related_parts

        graph = self.graph()
        seeds: list[tuple[str, float]] = []
        for rank, hid in enumerate(dict.fromkeys(h for p in ctx.parts for h in p.hit_ids)):
            seeds.append((hid, 1.0 / (1 + rank)))
        store = self._graph_store()
        related = related_parts(
            graph, seeds, store, mode, file_lines(self.root, self._file_reader())
        )
        return add_related(ctx, related, budget, policy, counter)

    def status(self, *, freshness: bool = True) -> IndexStatus:
        """Counts, model, BM25/vector readiness and (optionally) on-disk freshness."""
        manifest = self._manifest()
        store = self._reader_store()
        chunks = store.chunk_count()
        from ragloom.service.index_state import bm25_state_for_index

        bm25_state = bm25_state_for_index(self.index_dir)
        bm25_status = str(bm25_state.get("live_status", "uninitialized"))
        live_docs = bm25_state.get("live_docs", 0)
        bm25_docs = live_docs if isinstance(live_docs, int) else 0
        unpublished = bm25_state.get("live_unpublished", 0)
        vec_dir = self.index_dir / "vectors"
        # the label list answers without loading the graph (~0.5 s and the graph's memory at
        # 100k vectors, on every `status` of a server); the graph only when the list does not
        # describe the file there
        labels = HnswVectors.stored_labels(vec_dir)
        live = live_vectors(vec_dir, manifest.embedding_dim)
        if live is not None:  # a watching server's index, ahead of its file
            held = live.rowids()
        elif labels is not None:
            held = labels
        else:
            held = HnswVectors(vec_dir, manifest.embedding_dim).rowids()
        # the published chunks that have a vector: a batch publishes its new rows before it
        # embeds them, while the label list still holds the rows they replace (as many)
        vectors = (
            int(np.isin(store.published_rowids(), held, assume_unique=True).sum())
            if len(held)
            else 0
        )
        # vectors made under another embedding key (model or text format) are not ready
        vectors_current = vectors == 0 or HnswVectors.stored_key(vec_dir) == embedding_key(
            manifest.embedding_model
        )
        stale: dict[str, list[str]] = {}
        stale_count: int | None = None
        if freshness:
            stale = self.stale_files()
            stale_count = sum(len(v) for v in stale.values())
        return IndexStatus(
            root=str(self.root),
            index_dir=str(self.index_dir),
            ragloom_version=manifest.ragloom_version,
            schema_version=store.schema_version(),
            files=store.file_count(),
            chunks=chunks,
            chunks_by_kind=store.kind_counts(),
            chunks_by_language=store.language_counts(),
            model=manifest.embedding_model,
            dim=manifest.embedding_dim,
            bm25_status=bm25_status,
            bm25_docs=bm25_docs,
            bm25_unpublished=unpublished if isinstance(unpublished, int) else 0,
            vectors=vectors,
            vectors_ready=vectors >= chunks and vectors_current,
            vectors_current=vectors_current,
            stale_files=stale_count,
            stale=stale,
            disk_bytes=_dir_size(self.index_dir),
            generation=store.generation(),
            bm25=bm25_state,
            history=self._history_status(),
            ranking_model=self._ranking_model_status()
            | {"file_bm25": (self.index_dir / FILE_BM25_DIR / "engine").is_dir()},
            git=git_status(
                self.root,
                GitState.from_dict(store.get_meta_json("git_state")),
                dirty=freshness,
                exclude=(self.index_dir,),
            ),
        )

    def _history_status(self) -> dict[str, object]:
        from ragloom.sources.base import SourceContext
        from ragloom.sources.commit_history import CommitHistory
        from ragloom.sources.itemstore import BaseItemStore, has_item_store, open_item_store

        ctx = SourceContext(self.root, self.index_dir, self.source_storage())
        if not has_item_store(ctx, "commits"):
            return {}
        hist = CommitHistory.attach(open_item_store(ctx, "commits"), self.root)
        store: BaseItemStore
        if hist is None:
            store, used = open_item_store(ctx, "commits"), False
        else:
            store, used = hist.store, True
        try:
            return {
                "commits": store.count(),
                "last_commit": store.get_meta("last_commit"),
                "newest_commit_date": store.newest(),
                "ranking": used,
            }
        finally:
            store.close()

    def stale_files(self) -> dict[str, list[str]]:
        """Files on disk that differ from the index: changed, added, removed."""
        return _stale_files(self.root, self.index_dir, self._reader_store().files())

    def changed_since_indexed(
        self, paths: Collection[str], generation: int | None = None
    ) -> set[str]:
        """Those of ``paths`` (indexed, relative to the root) whose file now differs from its
        indexed version, or is gone: a hit's lines there may have moved. A ``stat`` each, and
        a read only where size or time changed; empty without a checkout here.
        ``generation``: the one the hits were read from; the file rows are then read once
        for it (a server asks on every answer: no database round trip for a cached one)."""
        if not paths or not self.has_checkout():
            return set()
        wanted = sorted(set(paths))
        if generation is None:
            known = self._graph_store().files_at(wanted)
        else:
            with self._file_rows_lock:  # request threads of one server share it
                if self._file_rows[0] != generation:
                    self._file_rows = (generation, {})
                rows = self._file_rows[1]
                todo = [p for p in wanted if p not in rows]
                if todo:
                    got = self._graph_store().files_at(todo)
                    rows.update({p: got.get(p) for p in todo})
                known = {p: row for p in wanted if (row := rows.get(p)) is not None}
        out: set[str] = set()
        for rel in sorted(set(paths)):
            old = known.get(rel)
            if old is None:
                continue
            try:
                st = (self.root / rel).stat()
                if st.st_size == old.size and st.st_mtime == old.mtime:
                    continue
                # touched but maybe the same bytes (a branch switched and back): hashed once
                # per (file version on disk, indexed version), not on every answer
                seen = (rel, st.st_size, st.st_mtime_ns, old.hash)
                same = self._same_bytes.get(seen)
                if same is None:
                    same = file_hash((self.root / rel).read_bytes()) == old.hash
                    if len(self._same_bytes) >= SAME_BYTES_MAX:
                        self._same_bytes.clear()
                    self._same_bytes[seen] = same
                if same:
                    continue
            except OSError:
                pass  # gone or unreadable: its lines cannot be trusted either
            out.add(rel)
        return out

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
        self._store = None
        history = self._retriever.history if self._retriever is not None else None
        if history is not None and callable(getattr(history, "close", None)):
            history.close()  # type: ignore[attr-defined]
        self._retriever = None

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class PostgresIndex(Index):
    """One repository in a PostgreSQL + pgvector database (docs/postgres.md): the same search,
    context, index and status operations as :class:`Index`, with chunks, vectors and
    generations in the database and BM25 rebuilt locally under ``cache_dir`` for the
    database's current generation. ``root`` is the repository's source tree (indexing reads it;
    context assembly reads snippets from it, as for a folder index)."""

    def __init__(
        self,
        root: Path,
        dsn: str,
        repository: str,
        *,
        embedder: str | Embedder | None = None,
        cache_dir: Path | None = None,
        ef_search: int | None = None,
        pool_size: int = 1,
    ) -> None:
        super().__init__(root, root / DEFAULT_INDEX_DIRNAME, embedder=embedder)
        from ragloom.index.postgres import DEFAULT_EF_SEARCH, bm25_cache_dir

        self.dsn = dsn
        self.repository = repository
        self.ef_search = ef_search or DEFAULT_EF_SEARCH
        self.pool_size = pool_size
        """Read connections to the database (1: the backend's own; a serving node uses more,
        ``storage.pool_size``)."""
        self.cache_dir = bm25_cache_dir(dsn, repository, cache_dir)
        self._backend: PostgresBackend | None = None
        self._checkout: bool | None = None
        """Whether :attr:`root` is a checkout of the repository (None: not asked yet)."""
        self._sources: PgItemStorage | None = None

    def source_storage(self) -> PgItemStorage:
        """The stored sources and the commit history of this repository in the database
        (docs/postgres.md, "Sources and change history"), BM25 under ``cache_dir``."""
        if self._sources is None:
            from ragloom.sources.pg_items import PgItemStorage

            self._open()  # the repository row the source tables are keyed by
            self._sources = PgItemStorage(self.dsn, self.repository, self.cache_dir)
        return self._sources

    def open_feedback(self) -> FeedbackBase:
        """The database's feedback tables of this repository (shared by every server)."""
        from ragloom.server.feedback_pg import PgFeedbackStore

        return PgFeedbackStore(self.dsn, self.repository)

    def ranking_model_store(self) -> ModelStore:
        """The repository's row of the database's ``ranking_models`` (every server of a team
        ranks with the one model ``ragloom adapt --backend postgres`` wrote)."""
        from ragloom.retrieve.adapt import RowModelStore

        return RowModelStore(self._open())

    def _graph_store(self) -> Store | PostgresBackend:
        """The repository in the database: :meth:`graph` (from ``file_graph`` and the code
        chunks, cached per generation as for a folder), ``repo_map`` and structure read it."""
        return self._open()

    def _open(self, *, create: bool = False) -> PostgresBackend:
        from ragloom.index.postgres import PostgresBackend

        if self._backend is None or create:
            if self._backend is not None:
                self._backend.close()
            self._backend = PostgresBackend(
                self.dsn,
                self.repository,
                create=create,
                ef_search=self.ef_search,
                pool_size=1 if create else self.pool_size,
            )
        return self._backend

    @property
    def exists(self) -> bool:
        try:
            self._open()
        except IndexNotFoundError:
            return False
        return True

    def _file_reader(self) -> FileReader | None:
        """A node without the source tree (no checkout at :attr:`root`) reads a context's files
        as they were indexed, from the database (``files.content``, migration 8). :attr:`root`
        is a checkout when it holds any of the first :data:`CHECKOUT_SAMPLE` indexed paths
        (asked once per index object); the current folder of a node without a checkout holds
        none."""
        return None if self.has_checkout() else self._open().file_contents

    def has_checkout(self) -> bool:
        """Whether :attr:`root` is a checkout of the repository: it holds any of the first
        :data:`CHECKOUT_SAMPLE` indexed paths (asked once per index object)."""
        if self._checkout is None:
            root = self.root
            self._checkout = root.is_dir() and any(
                (root / p).is_file() for p in self._open().sample_paths(CHECKOUT_SAMPLE)
            )
        return self._checkout

    @property
    def recorded_root(self) -> Path:
        """The source tree the repository was last indexed from (as that machine saw it)."""
        return Path(self._open().info.root)

    @property
    def retriever(self) -> Retriever:
        if self._retriever is None:
            from ragloom.retrieve.adapt import RepositoryRanker
            from ragloom.retrieve.reader import open_postgres_retriever
            from ragloom.sources.commit_history import CommitHistory

            retriever = open_postgres_retriever(
                self._open(), cache_dir=self.cache_dir, root=self.root, embedder=self._embedder_arg
            )
            storage = self.source_storage()
            root = self.root

            def history() -> CommitHistory | None:
                if not storage.has_store("commits"):
                    return None
                return CommitHistory.attach(storage.open_store("commits"), root)

            retriever.history = history()
            if retriever.history is None:  # commits synced after this reader opened
                retriever.attach_history_later(history)
            retriever.ranker = RepositoryRanker(self.ranking_model_store())
            self._retriever = retriever
        return self._retriever

    def index(
        self,
        *,
        rebuild: bool = False,
        embed: bool = True,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        progress: ProgressFn | None = None,
        history: bool = True,
        verify: Collection[str] | None = None,
        recent_only: bool = False,
        keep_model: bool = False,
        wait_s: float = 0.0,
    ) -> IndexStats:
        """Build or update the repository in the database (one transaction per generation;
        ``rebuild`` re-parses every file and replaces every chunk in that one transaction).
        With ``history`` and a root in a git work tree the commit history is synced into the
        database too (:meth:`source_storage`), as for a folder index; ``recent_only`` is
        accepted for the same signature (embeddings are looked for store-wide here)."""
        from ragloom._version import __version__
        from ragloom.index.backend_index import index_into

        if not self.root.is_dir():
            raise InputError(f"not a directory: {self.root}")
        self.close()
        backend = self._open(create=True)
        info = backend.info
        emb_arg = self._embedder_arg
        if isinstance(emb_arg, str) or emb_arg is None:
            asked = emb_arg or info.embedding_spec or None
            embedder: Embedder = _load_embedder(asked)
            spec = getattr(embedder, "spec", None) or asked or "default"
        else:
            embedder = emb_arg
            spec = getattr(emb_arg, "spec", embedder.model_id)
        if (
            keep_model
            and info.embedding_model
            and (info.embedding_model != embedder.model_id or info.embedding_dim != embedder.dim)
        ):
            raise IncompatibleIndexError(
                f"the repository is now embedded with {info.embedding_model}, not this "
                f"writer's {embedder.model_id}: nothing was changed"
            )
        # a switch to another model, embedding now: the repository goes on answering with its
        # own model while the new vectors are cached beside it, and switches in one
        # transaction at the end (docs/embedding.md "Switching models")
        staged = bool(embed and info.embedding_model) and (
            info.embedding_model != embedder.model_id or info.embedding_dim != embedder.dim
        )
        new_model: RepositoryModel = {
            "root": str(self.root),
            "embedding_key": embedding_key(embedder.model_id),
            "embedding_dim": embedder.dim,
            "embedding_model": embedder.model_id,
            "embedding_spec": str(spec),
            "tokenizer_version": TOKENIZER_VERSION,
            "ragloom_version": __version__,
        }
        kept: RepositoryModel = {
            **new_model,
            "embedding_key": info.embedding_key,
            "embedding_dim": info.embedding_dim,
            "embedding_model": info.embedding_model,
            "embedding_spec": info.embedding_spec,
        }
        model_changed = backend.set_repository(**(kept if staged else new_model)) or staged
        stats = index_into(
            self.root,
            backend,
            embedder if embed and not staged else None,
            skip_dir=self.index_dir,
            max_file_bytes=max_file_bytes,
            progress=progress or (lambda *_: None),
            model_changed=model_changed,
            rebuild=rebuild,
            verify=verify,
            wait_s=wait_s,
        )
        if staged:
            self._switch_repository_model(backend, embedder, new_model, stats, progress, wait_s)
        stats.model = embedder.model_id
        if not embed:
            stats.embeddings_pending = len(backend.missing_embeddings(backend.info.embedding_key))
        if history:
            t_history = time.perf_counter()
            stats.history_commits = self._sync_history(stats)
            # a timing of its own: ``seconds`` is the index's own work
            stats.timings["history"] = time.perf_counter() - t_history
        backend.set_git_state(state_record(self.root))
        return stats

    @staticmethod
    def _switch_repository_model(
        backend: PostgresBackend,
        embedder: Embedder,
        new_model: RepositoryModel,
        stats: IndexStats,
        progress: ProgressFn | None,
        wait_s: float,
    ) -> None:
        """The second half of a model switch, under the repository's write lock: every
        chunk's text embedded with ``embedder`` into the shared vector cache (the chunks keep
        the old model's vectors, and readers their answers), then, in one transaction, the
        repository's model and every chunk's vector replaced. Stopped before it, the
        repository is the old model's, whole; the next switch embeds only what is left."""
        from ragloom.index.backend_index import embed_texts

        t0 = time.perf_counter()
        key = new_model["embedding_key"]
        with backend.write_lock(wait_s):
            missing = backend.missing_embeddings(key, staged=True)
            embed_texts(backend, embedder, missing, stats, progress or (lambda *_: None))
            t1 = time.perf_counter()
            backend.set_repository(**new_model, fill=True)
        stats.embeddings_pending = len(backend.missing_embeddings(key))
        stats.timings["embed"] = t1 - t0
        stats.timings["vectors"] = time.perf_counter() - t1
        stats.seconds += time.perf_counter() - t0

    def status(self, *, freshness: bool = True) -> IndexStatus:
        """Counts, model and generation of the repository in the database."""
        from ragloom.index.postgres import SCHEMA_VERSION

        backend = self._open()
        backend.refresh_info()
        info = backend.info
        chunks = backend.chunk_count()
        stale: dict[str, list[str]] = {}
        stale_count: int | None = None
        checkout = self.has_checkout()
        if freshness and checkout:  # a folder without the repository's files: nothing to compare
            stale = self.stale_files()
            stale_count = sum(len(v) for v in stale.values())
        return IndexStatus(
            checkout=checkout,
            # without a checkout here, the tree the repository was indexed from (this folder
            # holds none of it)
            root=str(self.root) if checkout or not info.root else info.root,
            index_dir=f"postgres:{self.repository}",
            ragloom_version=info.ragloom_version,
            schema_version=SCHEMA_VERSION,
            files=backend.file_count(),
            chunks=chunks,
            chunks_by_kind=backend.kind_counts(),
            chunks_by_language=backend.language_counts(),
            model=info.embedding_model,
            dim=info.embedding_dim,
            bm25_status="rebuilt-from-db",
            bm25_docs=chunks,
            vectors=info.n_embedded,
            vectors_ready=info.n_embedded >= chunks,
            stale_files=stale_count,
            stale=stale,
            disk_bytes=0,
            generation=info.generation,
            bm25={"backend": "postgres", "cache_dir": str(self.cache_dir)},
            history=self._history_status(),
            # built with its BM25 over whole files
            ranking_model=self._ranking_model_status() | {"file_bm25": True},
            git=git_status(
                self.root,
                GitState.from_dict(backend.git_state()),
                dirty=freshness,
                exclude=(self.index_dir,),
            ),
        )

    def stale_files(self) -> dict[str, list[str]]:
        return _stale_files(self.root, self.index_dir, self._open().files())

    def close(self) -> None:
        if self._retriever is not None:
            self._retriever.close()
        self._retriever = None
        if self._backend is not None:
            self._backend.close()
        self._backend = None
        if self._sources is not None:
            self._sources.close()
        self._sources = None


def _stale_files(root: Path, index_dir: Path, known: dict[str, FileRow]) -> dict[str, list[str]]:
    """Files on disk that differ from ``known``: changed, added, removed."""
    walked = walk(root, index_dir=index_dir)
    changed: list[str] = []
    added: list[str] = []
    seen: set[str] = set()
    for sf in walked.files:
        old = known.get(sf.rel)
        if old is not None and old.size == sf.size and old.mtime == sf.mtime:
            seen.add(sf.rel)
            continue
        try:
            data = sf.abs.read_bytes()
        except OSError:
            continue
        if is_binary(data):
            continue
        seen.add(sf.rel)
        if old is None:
            added.append(sf.rel)
        elif old.hash != file_hash(data):
            changed.append(sf.rel)
    removed = sorted(set(known) - seen)
    return {"changed": changed, "added": added, "removed": removed}


def open_postgres(
    path: str | os.PathLike[str] | None = None,
    *,
    dsn: str | None = None,
    repository: str | None = None,
    embedder: str | Embedder | None = None,
    cache_dir: Path | None = None,
    ef_search: int | None = None,
    create: bool = False,
) -> PostgresIndex:
    """A repository in PostgreSQL: ``dsn`` (default ``RAGLOOM_DSN``), ``repository`` (default:
    the name of ``path``'s folder; for reading (``create`` false), the database's only
    repository when it holds none by that name). ``path`` is the source tree (default: the
    current folder; for reading, the root recorded at indexing when it exists here)."""
    from ragloom.errors import ConfigError
    from ragloom.index.postgres import DSN_ENV, connect, dsn_from_env, list_repositories

    dsn = dsn or dsn_from_env()
    if not dsn:
        raise ConfigError(f"the postgres backend needs a DSN: --dsn postgresql://... or {DSN_ENV}")
    root = Path(path if path is not None else ".").resolve()
    name = repository or root.name
    if repository is None and not create:
        with connect(dsn) as conn:
            names = list_repositories(conn)
        if name not in names and len(names) == 1:
            name = names[0]
        elif name not in names and len(names) > 1:
            raise ConfigError(
                f"no repository {name!r} in the database; choose one of "
                f"{', '.join(names)} with --repo NAME"
            )
    index = PostgresIndex(
        root, dsn, name, embedder=embedder, cache_dir=cache_dir, ef_search=ef_search
    )
    if path is None and not create and index.exists:
        recorded = index.recorded_root
        if recorded.is_dir():
            index.root = recorded
            index.index_dir = recorded / DEFAULT_INDEX_DIRNAME
    return index


def _query_text(query: object) -> str:
    """The question, or InputError for anything but a string (bytes, None: a caller's slip
    that otherwise fails deep in query processing with a TypeError)."""
    if not isinstance(query, str):
        raise InputError(f"the query must be a string, got {type(query).__name__}")
    return query


def _json(obj: object) -> str:
    import json

    return json.dumps(obj, sort_keys=True)


def open(path: str | os.PathLike[str] = ".", *, embedder: str | Embedder | None = None) -> Index:
    """Open the index of a repository root (``<root>/.ragloom``) or an index folder."""
    return Index.at(path, embedder=embedder)
