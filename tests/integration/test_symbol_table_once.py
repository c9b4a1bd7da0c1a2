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
        real = retriever.store.symbol_table_rows

        def counting():  # type: ignore[no-untyped-def]
            nonlocal calls
            with lock:
                calls += 1
            time.sleep(0.05)  # a large index's read: the window the other threads arrive in
            return real()

        retriever.store.symbol_table_rows = counting  # type: ignore[method-assign]
        retriever._symbols.forget()  # as after a new generation
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


def test_a_small_update_derives_the_table_and_it_equals_a_rebuild(tmp_path: Path) -> None:
    from ragloom.ingest.chunker import is_part
    from ragloom.retrieve.query.entities import InMemorySymbolTable

    root = copy_stdlib_packages(tmp_path / "repo", ["json"])
    (root / "json" / "extra_module.py").write_text("def brand_new_helper():\n    return 1\n")
    with Index.at(root) as writer:
        writer.index(embed=False)
        with Index.at(root) as reader:  # a long-lived reader, as a server's
            retriever = reader.retriever
            retriever.symbol_table()
            (root / "json" / "extra_module.py").write_text("def renamed_helper():\n    return 1\n")
            (root / "json" / "tool.py").unlink()
            writer.index(embed=False)

            def no_rebuild():  # type: ignore[no-untyped-def]
                raise AssertionError("a one-file update rebuilt the whole table")

            real = retriever.store.symbol_table_rows
            retriever.store.symbol_table_rows = no_rebuild  # type: ignore[method-assign]
            derived = retriever.symbol_table()
            rows = [r for r in real().values() if not is_part(r[2])]
            rebuilt = InMemorySymbolTable(rows)
            names = {r[0] for r in rows} | {"brand_new_helper", "main", "renamed_helper"}
            for name in names:
                assert sorted(derived.lookup(name)) == sorted(rebuilt.lookup(name)), name
            assert derived.lookup("renamed_helper") and not derived.lookup("brand_new_helper")
            assert derived.has_path("json/extra_module.py") and not derived.has_path("tool.py")
