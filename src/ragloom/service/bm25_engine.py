"""What the BM25 actor works with: the engine contract (:class:`Bm25Engine`, one folder per
engine, tantivy by default) and where a Rebuild reads documents (:class:`DocumentSource`, an
index's SQLite store by default).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from ragloom.index.bm25 import TantivyBm25, bm25_source_document, tokenise_document
from ragloom.index.store import Store

__all__ = [
    "Bm25Engine",
    "DocumentSource",
    "EngineFactory",
    "StoreDocumentSource",
    "tantivy_engine",
    "tokenised",
]


class Bm25Engine(Protocol):
    """What the actor needs from a BM25 engine that lives in one folder."""

    directory: Path

    def search(self, query: str, k: int) -> list[tuple[int, float]]: ...

    def rowids(self) -> np.ndarray: ...

    def apply(self, add: Iterable[tuple[int, str]], remove: Sequence[int]) -> int: ...


EngineFactory = Callable[[Path, bool], Bm25Engine]
"""``factory(folder, create)``: a new empty engine (``create``) or the one stored there."""


def tantivy_engine(directory: Path, create: bool) -> Bm25Engine:
    """The default engine: :class:`~ragloom.index.bm25.TantivyBm25` in ``directory``."""
    return TantivyBm25.reset(directory) if create else TantivyBm25(directory)


class DocumentSource(Protocol):
    """Where a Rebuild reads documents from: batches of ``(rowid, document text)``."""

    def batches(self) -> Iterable[Sequence[tuple[int, str]]]: ...

    def generation(self) -> int | None: ...


class StoreDocumentSource:
    """Documents of an index's SQLite store, as the indexer feeds BM25.

    The text of each document is :func:`ragloom.index.bm25.bm25_source_document` of the chunk,
    which the actor tokenises with :func:`ragloom.index.bm25.tokenise_document`; that is
    exactly :func:`ragloom.index.bm25.bm25_document`, so the actor's index equals the indexer's.
    """

    def __init__(self, db_path: Path, *, batch: int = 2000) -> None:
        self.db_path = db_path
        self.batch = batch

    def batches(self) -> Iterable[Sequence[tuple[int, str]]]:
        """Every chunk in rowid order, ``batch`` at a time (read-only connection)."""
        store = Store(self.db_path, readonly=True)
        try:
            for rows in store.iter_chunk_texts(self.batch):
                # symbol and path apart (a symbol may hold spaces): one keyed read per batch
                src = store.bm25_sources([rowid for rowid, _, _ in rows])
                # a row deleted between the two reads (a concurrent publish) is skipped
                yield [
                    (rowid, bm25_source_document(*src[rowid]))
                    for rowid, _, _ in rows
                    if rowid in src
                ]
        finally:
            store.close()

    def generation(self) -> int | None:
        """The store's generation (bumped by every index run that changed chunks)."""
        store = Store(self.db_path, readonly=True)
        try:
            return store.generation()
        finally:
            store.close()


def tokenised(docs: Iterable[tuple[int, str]]) -> Iterable[tuple[int, str]]:
    """``(rowid, text)`` -> ``(rowid, code tokens joined by spaces)``, field by field (see
    :func:`ragloom.index.bm25.tokenise_document`), as the engine indexes them."""
    for rowid, text in docs:
        yield int(rowid), tokenise_document(text)
