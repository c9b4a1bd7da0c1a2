"""The index's symbol table, kept per index generation for query processing (entities, exact
match): one rebuild per generation however many threads ask, and with the SQLite store the next
generation's table derived from the previous one by the rows they differ in."""

from __future__ import annotations

import threading

import numpy as np

from ragloom.index.backend import ReadStore
from ragloom.index.store import Store
from ragloom.ingest.chunker import is_part
from ragloom.retrieve.query import InMemorySymbolTable

__all__ = ["SymbolCache"]


class SymbolCache:
    """The symbol table of a store's published generation, cached per generation."""

    def __init__(self) -> None:
        self._table: tuple[int, InMemorySymbolTable] | None = None
        self._rows: tuple[np.ndarray, dict[int, tuple[str, str, str]]] | None = None
        """(sorted rowids, rowid -> row) the current table was made of, when the store can say
        which rows a generation added and dropped (the next one is derived)."""
        self._lock = threading.Lock()
        """One rebuild per generation: without it, every request thread of a server rebuilt the
        table at once after a re-index (40 threads: 40 rebuilds, 45.8 s, the process stalled;
        docs/serving.md)."""

    def forget(self) -> None:
        """Drop the cached table (the next call builds it again, derived when it can be)."""
        self._table = None

    def table(self, store: ReadStore, generation: int | None = None) -> InMemorySymbolTable:
        """The symbols and paths of ``store``'s published generation (``generation``: the one
        the caller's query answers from, read already; default: the store's)."""
        gen = store.generation() if generation is None else generation
        cached = self._table
        if cached is not None and cached[0] == gen:
            return cached[1]
        with self._lock:
            cached = self._table  # another thread may have rebuilt it while this one waited
            if cached is None or cached[0] != gen:
                cached = (gen, self._next(store, cached[1] if cached else None))
                self._table = cached
            return cached[1]

    def _next(self, store: ReadStore, previous: InMemorySymbolTable | None) -> InMemorySymbolTable:
        """The published generation's symbol table. A split symbol is one definition: it is
        listed once, as its first part (the one with the definition line), so 64 parts neither
        make its name look ambiguous (which halves an entity's confidence) nor all get fetched
        and boosted. With the SQLite store the table is derived from the previous one by the
        rows the generations differ in (a one-file edit at 100k chunks: ~60 ms instead of
        ~1 s of rebuilding); a change of more than a tenth of the rows rebuilds it."""
        if not isinstance(store, Store):
            return InMemorySymbolTable(r for r in store.symbol_table() if not is_part(r[2]))
        now = np.sort(store.visible_rowids())
        last = self._rows
        if previous is not None and last is not None:
            before, rows = last
            gone = np.setdiff1d(before, now, assume_unique=True)
            new = np.setdiff1d(now, before, assume_unique=True)
            if len(gone) + len(new) <= max(1000, len(now) // 10):
                fresh = store.symbol_rows(new.tolist())
                if len(fresh) == len(new):  # else rows went while reading: rebuild
                    removed = [rows.pop(int(r)) for r in gone if int(r) in rows]
                    rows.update(fresh)
                    self._rows = (now, rows)
                    return previous.derived(
                        (r for r in removed if not is_part(r[2])),
                        (r for r in fresh.values() if not is_part(r[2])),
                    )
        all_rows = store.symbol_table_rows()
        self._rows = (np.array(sorted(all_rows), dtype=np.int64), all_rows)
        return InMemorySymbolTable(r for r in all_rows.values() if not is_part(r[2]))
