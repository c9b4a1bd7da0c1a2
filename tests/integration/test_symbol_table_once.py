"""After a generation change, a Retriever shared by many threads rebuilds its symbol table once.

A server's request threads all notice a re-index together; each used to rebuild the table
(40 threads: 40 rebuilds and a 45 s stall on a 67k-chunk index, docs/serving.md)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from ragloom.api import Index
from tests.conftest import copy_stdlib_packages


def test_concurrent_threads_rebuild_the_symbol_table_once(tmp_path: Path) -> None:
    root = copy_stdlib_packages(tmp_path / "repo", ["json", "csv"])
    with Index.at(root) as idx:
        idx.index(embed=False)
        retriever = idx.retriever
        first = retriever.symbol_table()
        calls = 0
        lock = threading.Lock()
        real = retriever.store.symbol_table

        def counting():  # type: ignore[no-untyped-def]
            nonlocal calls
            with lock:
                calls += 1
            time.sleep(0.05)  # a large index's read: the window the other threads arrive in
            return real()

        retriever.store.symbol_table = counting  # type: ignore[method-assign]
        retriever._symbols = None  # as after a new generation
        barrier = threading.Barrier(24)
        tables = []

        def worker() -> None:
            barrier.wait()
            tables.append(retriever.symbol_table())

        threads = [threading.Thread(target=worker) for _ in range(24)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert calls == 1
        assert len({id(t) for t in tables}) == 1
        assert type(tables[0]) is type(first)
