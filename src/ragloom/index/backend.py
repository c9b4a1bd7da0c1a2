"""The storage contract: what ragloom needs from the place an index lives.

Two backends implement it:

* the embedded backend (the default, no server): the SQLite store (``index/store.py``) plus the
  hnswlib vector file and the folder's write lock, adapted by :class:`EmbeddedBackend` without
  changing how ``ragloom index`` writes them (``update_index`` still drives the store directly);
* the PostgreSQL backend (``index/postgres.py``): one database, many repositories, pgvector.

The contract is deliberately narrow. Readers see one *published generation* at a time
(docs/consistency.md); a writer holds the repository's write lock, opens an
:class:`IndexUpdate` (generation ``G + 1``, invisible to readers), writes files' chunk sets and
publishes them atomically. Embeddings are a cache keyed by (embedding key, node hash): they can
be written before or after a publish, and vector search covers the published chunks whose text
has one. ``tests/contract/test_storage_contract.py`` runs the same tests against every backend.

:class:`ReadStore`, :class:`SparseIndex` and :class:`VectorIndex` are what the
:class:`~ragloom.retrieve.search.Retriever` reads; both backends' readers satisfy them.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from contextlib import AbstractContextManager, ExitStack, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from ragloom.index.lock import WriteLock
from ragloom.index.store import ChunkRow, FileRow, GraphDefRow, Store

if TYPE_CHECKING:
    import sqlite3

    from ragloom.index.vectors import HnswVectors
    from ragloom.types import Chunk

__all__ = [
    "EmbeddedBackend",
    "IndexUpdate",
    "ReadStore",
    "SparseIndex",
    "StorageBackend",
    "VectorIndex",
]


class ReadStore(Protocol):
    """The published generation of one index, as the retriever reads it."""

    def generation(self) -> int: ...

    def published(self) -> tuple[int, int]:
        """(generation, watermark): the rows a query may show have rowid <= watermark."""
        ...

    def data_version(self) -> int:
        """Changes whenever something a reader caches may have changed."""
        ...

    def hidden_rowids(self, generation: int) -> list[int]:
        """Rows below the watermark that ``generation`` does not show."""
        ...

    def chunk_count(self) -> int: ...

    def file_count(self) -> int: ...

    def files(self) -> dict[str, FileRow]: ...

    def chunks_for_path(self, path: str) -> list[ChunkRow]: ...

    def chunks_by_rowids(self, rowids: Sequence[int]) -> dict[int, ChunkRow]: ...

    def chunks_by_ids(self, ids: Sequence[str]) -> dict[str, ChunkRow]: ...

    def texts_by_rowids(self, rowids: Sequence[int]) -> dict[int, str]: ...

    def symbol_table(self) -> list[tuple[str, str, str]]: ...

    def kind_counts(self) -> dict[str, int]: ...

    def language_counts(self) -> dict[str, int]: ...

    def vectors_for_rowids(self, model_id: str, rowids: Sequence[int], dim: int) -> np.ndarray: ...


class SparseIndex(Protocol):
    """A BM25 engine as the retriever uses it (rowid-labelled)."""

    def search(self, query: str | Sequence[tuple[str, float]], k: int) -> list[tuple[int, float]]:
        """Top ``k`` (rowid, score), best first."""
        ...

    def reload(self) -> None:
        """Catch up with the published generation (called when it changed)."""
        ...

    def doc_count(self) -> int: ...


class VectorIndex(Protocol):
    """Dense search as the retriever uses it (rowid-labelled, cosine similarity)."""

    def search(self, vector: np.ndarray, k: int) -> list[tuple[int, float]]: ...

    def get(self, rowids: Sequence[int]) -> dict[int, np.ndarray]: ...

    def count(self) -> int: ...

    def refreshed(self) -> VectorIndex: ...


class IndexUpdate(Protocol):
    """Generation ``published + 1`` being written: invisible to readers until :meth:`publish`.

    A writer that dies before publishing leaves the published generation as it was; the next
    writer starts from it (the embedded backend rolls the leftovers back, PostgreSQL never
    committed them)."""

    @property
    def generation(self) -> int: ...

    def replace_file(
        self,
        path: str,
        chunks: Sequence[Chunk],
        *,
        file_hash: str,
        size: int,
        mtime: float,
        language: str | None,
        source: str,
        graph: bytes | None = None,
        content: bytes | None = None,
    ) -> tuple[int, int, int, int]:
        """Write one file's new chunk set; (added, updated, removed, kept) chunk counts. A chunk
        whose id and node hash are unchanged keeps its rowid.
        ``graph``: the file's code graph record (``FileGraph.to_blob()``; None: it has none).
        ``content``: the file's bytes as indexed, for a backend that keeps them
        (:attr:`StorageBackend.keeps_content`)."""
        ...

    def put_file_graph(self, path: str, file_hash: str, data: bytes) -> None:
        """Keep the graph record of a published file whose chunks are unchanged (a backfill)."""
        ...

    def remove_file(self, path: str) -> int:
        """Remove a file, its chunks and its graph record; returns the chunks removed."""
        ...

    def publish(self) -> int:
        """Make this generation the one readers see, atomically; returns its number."""
        ...

    def abort(self) -> None:
        """Drop everything written (the published generation stays)."""
        ...


class StorageBackend(ReadStore, Protocol):
    """Everything an indexer and a reader need: the contract both backends pass."""

    name: str
    keeps_content: bool
    """Whether the indexer hands it each file's bytes (PostgreSQL: a serving node may have no
    checkout to read them from; a folder index always sits beside its tree)."""

    def write_lock(self, wait_s: float = 0.0) -> AbstractContextManager[object]:
        """Exclusive writer of this index; :class:`~ragloom.errors.IndexLockedError` when
        another process holds it past ``wait_s`` seconds (released when the holder dies, even
        by SIGKILL)."""
        ...

    def begin_update(self) -> IndexUpdate:
        """Start writing the next generation (caller holds :meth:`write_lock`)."""
        ...

    def missing_embeddings(self, key: str) -> list[tuple[str, str]]:
        """(node hash, embedding text) of published chunks without a vector for ``key``."""
        ...

    def put_embeddings(self, key: str, items: Iterable[tuple[str, np.ndarray]]) -> None:
        """Store vectors by node hash (committed at once; resumable); the published chunks
        with those texts become searchable by :meth:`vector_search`."""
        ...

    def vector_search(self, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
        """Top ``k`` (rowid, cosine similarity) among the published generation's chunks."""
        ...

    def files_without_graph(self, languages: Collection[str]) -> list[tuple[str, str]]:
        """(path, hash) of published files in ``languages`` without a current graph record."""
        ...

    def files_without_content(self) -> list[tuple[str, str]]:
        """(path, hash) of published files whose bytes it does not keep yet (indexed before it
        kept them); always empty for a backend that does not keep them."""
        ...

    def put_file_contents(self, items: Iterable[tuple[str, str, bytes]]) -> int:
        """Keep the bytes of published files that have none, each (path, hash, bytes) only
        while the file is still that version; returns the files given their bytes. Outside
        any update: the bytes are those of the published version, so no generation changes."""
        ...

    def finish_index(self, rows_written: int) -> None:
        """Upkeep after an index run that wrote ``rows_written`` chunk rows (added, updated,
        removed or given a vector): PostgreSQL's planner statistics; nothing for a folder."""
        ...

    def graph_snapshot(
        self, languages: Collection[str]
    ) -> tuple[int, list[GraphDefRow], list[tuple[str, str, bytes]]]:
        """The published generation's code graph input, read in one snapshot
        (:meth:`ragloom.index.store.Store.graph_snapshot`)."""
        ...

    def graph_manifests(self) -> list[tuple[str, str]]:
        """(path, text) of the published ``go.mod`` and ``package.json`` files
        (:meth:`ragloom.index.store.Store.graph_manifests`)."""
        ...

    def close(self) -> None: ...


class _EmbeddedUpdate:
    """The embedded backend's update: one SQLite transaction writes the pending generation
    (``Store.replace_file`` with ``generation``), then :meth:`publish` commits it and makes it
    visible in a second small transaction, the order ``update_index`` uses."""

    def __init__(self, backend: EmbeddedBackend) -> None:
        self._backend = backend
        self._stack = ExitStack()
        store = backend.store
        store.rollback_pending()
        self._conn: sqlite3.Connection = self._stack.enter_context(store.transaction())
        self._generation = store.begin_generation(self._conn)

    @property
    def generation(self) -> int:
        return self._generation

    def replace_file(
        self,
        path: str,
        chunks: Sequence[Chunk],
        *,
        file_hash: str,
        size: int,
        mtime: float,
        language: str | None,
        source: str,
        graph: bytes | None = None,
        content: bytes | None = None,
    ) -> tuple[int, int, int, int]:
        if graph is not None:  # keyed by (path, hash): the old version's goes at collection
            self._backend.store.put_file_graph(self._conn, path, file_hash, graph)
        return self._backend.store.replace_file(
            self._conn,
            path,
            chunks,
            file_hash=file_hash,
            size=size,
            mtime=mtime,
            language=language,
            source=source,
            generation=self._generation,
        )

    def put_file_graph(self, path: str, file_hash: str, data: bytes) -> None:
        self._backend.store.put_file_graph(self._conn, path, file_hash, data)

    def remove_file(self, path: str) -> int:
        return self._backend.store.remove_file(self._conn, path, generation=self._generation)

    def publish(self) -> int:
        self._stack.close()  # commits the pending generation (still invisible)
        store = self._backend.store
        generation = store.publish()
        self._backend.sync_vectors()
        store.collect_removed()
        return generation

    def abort(self) -> None:
        with suppress(RuntimeError):
            self._stack.__exit__(RuntimeError, RuntimeError("update aborted"), None)


class EmbeddedBackend:
    """The embedded SQLite + hnswlib index of a folder, seen through the storage contract.

    A thin adapter: every read is the :class:`~ragloom.index.store.Store`'s, the lock is the
    folder's ``flock`` (:class:`~ragloom.index.lock.WriteLock`), vectors live in the folder's
    hnswlib index for ``key`` (dimension ``dim``)."""

    name = "embedded"
    keeps_content = False

    def __init__(self, index_dir: Path, *, key: str = "", dim: int = 0) -> None:
        index_dir.mkdir(parents=True, exist_ok=True)
        self.index_dir = index_dir
        self.key = key
        self.dim = dim
        self.store = Store(index_dir / "index.sqlite")  # ragloom.retrieve.reader.DB_NAME
        self._vectors: HnswVectors | None = None

    # -- reads: the store's -----------------------------------------------------------------
    def generation(self) -> int:
        return self.store.generation()

    def published(self) -> tuple[int, int]:
        return self.store.published()

    def data_version(self) -> int:
        return self.store.data_version()

    def hidden_rowids(self, generation: int) -> list[int]:
        return self.store.hidden_rowids(generation)

    def chunk_count(self) -> int:
        return self.store.chunk_count()

    def file_count(self) -> int:
        return self.store.file_count()

    def files(self) -> dict[str, FileRow]:
        return self.store.files()

    def chunks_for_path(self, path: str) -> list[ChunkRow]:
        return self.store.chunks_for_path(path)

    def chunks_by_rowids(self, rowids: Sequence[int]) -> dict[int, ChunkRow]:
        return self.store.chunks_by_rowids(rowids)

    def chunks_by_ids(self, ids: Sequence[str]) -> dict[str, ChunkRow]:
        return self.store.chunks_by_ids(ids)

    def texts_by_rowids(self, rowids: Sequence[int]) -> dict[int, str]:
        return self.store.texts_by_rowids(rowids)

    def symbol_table(self) -> list[tuple[str, str, str]]:
        return self.store.symbol_table()

    def kind_counts(self) -> dict[str, int]:
        return self.store.kind_counts()

    def language_counts(self) -> dict[str, int]:
        return self.store.language_counts()

    def vectors_for_rowids(self, model_id: str, rowids: Sequence[int], dim: int) -> np.ndarray:
        return self.store.vectors_for_rowids(model_id, rowids, dim)

    # -- writes ---------------------------------------------------------------------------
    def write_lock(self, wait_s: float = 0.0) -> AbstractContextManager[object]:
        return WriteLock(self.index_dir, wait_s=wait_s)

    def begin_update(self) -> IndexUpdate:
        return _EmbeddedUpdate(self)

    def missing_embeddings(self, key: str) -> list[tuple[str, str]]:
        return self.store.missing_embeddings(key)

    def put_embeddings(self, key: str, items: Iterable[tuple[str, np.ndarray]]) -> None:
        self.store.put_embeddings(key, items)
        if key == self.key:
            self.sync_vectors()

    def finish_index(self, rows_written: int) -> None:
        """Nothing to keep up: SQLite plans these queries by their indexes alone."""

    def files_without_content(self) -> list[tuple[str, str]]:
        """None: a folder index reads its files from the tree beside it."""
        return []

    def put_file_contents(self, items: Iterable[tuple[str, str, bytes]]) -> int:
        """Nothing kept: a folder index reads its files from the tree beside it."""
        return 0

    def vectors(self) -> HnswVectors | None:
        """The folder's hnswlib index for :attr:`key` (None without a key and dimension)."""
        from ragloom.index.vectors import HnswVectors

        if not self.key or not self.dim:
            return None
        if self._vectors is None:
            self._vectors = HnswVectors(self.index_dir / "vectors", self.dim, self.key)
        return self._vectors

    def sync_vectors(self) -> None:
        """Bring the hnswlib index in line with the store (``indexer.sync_vectors``)."""
        from ragloom.index.indexer import sync_vectors

        vectors = self.vectors()
        if vectors is not None:
            sync_vectors(self.store, vectors, self.key)

    def vector_search(self, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
        vectors = self.vectors()
        if vectors is None or k <= 0:
            return []
        gen, watermark = self.store.published()
        hidden = set(self.store.hidden_rowids(gen))
        query = np.asarray(vector, dtype=np.float32)
        fetch = k + len(hidden)
        while True:  # rows of a pending generation may crowd the list: ask deeper
            hits = vectors.search(query, fetch)
            out = [(r, s) for r, s in hits if r <= watermark and r not in hidden]
            if len(out) >= k or len(hits) < fetch:
                return out[:k]
            fetch *= 2

    def files_without_graph(self, languages: Collection[str]) -> list[tuple[str, str]]:
        """The store's (the extractor version is checked by ``update_index``)."""
        return self.store.files_without_graph(languages)

    def graph_snapshot(
        self, languages: Collection[str]
    ) -> tuple[int, list[GraphDefRow], list[tuple[str, str, bytes]]]:
        return self.store.graph_snapshot(languages)

    def graph_manifests(self) -> list[tuple[str, str]]:
        return self.store.graph_manifests()

    def close(self) -> None:
        self.store.close()
