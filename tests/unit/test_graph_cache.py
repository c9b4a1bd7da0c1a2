"""The resolved code graph kept on disk with the index (ragloom.graph.cache, docs/graph.md,
"The graph on disk"): the stored graph is the resolved one, a new generation is never answered
from an older graph, a file that cannot be read is resolved again, a folder that cannot be
written keeps none."""

from __future__ import annotations

import errno
import io
import json
import shutil
import threading
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import ragloom
from ragloom.cli import cli
from ragloom.graph import CodeGraph, cache
from ragloom.graph.cache import GraphCache, load_graph
from ragloom.graph.code_graph import resolve_snapshot
from ragloom.index.store import Store
from tests.conftest import copy_stdlib_packages
from tests.unit.test_graph import PY_FILES, build, edges, write

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "langs"


def _store(root: Path) -> Store:
    return Store(root / ".ragloom" / "index.sqlite", readonly=True)


def _file(root: Path) -> Path:
    return root / ".ragloom" / cache.GRAPH_CACHE_DIR / cache.GRAPH_CACHE_NAME


def assert_same(a: CodeGraph, b: CodeGraph) -> None:
    """Equal in everything a query reads, node numbers included."""
    assert a.generation == b.generation
    assert a.defs == b.defs
    assert dict(a.chunk_nodes) == dict(b.chunk_nodes)
    assert a.rowid_node == b.rowid_node and a.head_rowid == b.head_rowid
    for name in ("src", "dst", "kind", "line", "conf"):
        x, y = getattr(a.edges, name), getattr(b.edges, name)
        assert x.dtype == y.dtype and np.array_equal(x, y), name
    assert edges(a) == edges(b)


def _no_resolving(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(store: object) -> CodeGraph:
        raise AssertionError("resolved again instead of loaded")

    monkeypatch.setattr(cache, "resolve_snapshot", refuse)


@pytest.fixture
def pyrepo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    write(root, PY_FILES)
    return root


def test_index_stores_the_graph_when_it_costs_little() -> None:
    # measured at 56,601 chunks: a first index of 59 s, a one-file update of 1.6 s
    assert cache.worth_storing(59.1, 56_601)
    assert not cache.worth_storing(1.6, 56_601)


def test_stored_graph_is_the_resolved_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = copy_stdlib_packages(tmp_path / "repo", ["json", "email", "argparse"])
    shutil.copytree(FIXTURES, root / "langs")
    # how long this index takes decides (the test above): stored here whatever it took
    monkeypatch.setattr(cache, "worth_storing", lambda *_: True)
    idx = build(root)
    assert _file(root).is_file()
    store = _store(root)
    fresh = resolve_snapshot(store)
    assert len(fresh) > 500 and fresh.edge_count > 1000
    assert len({d.language for d in fresh.defs}) >= 6
    _no_resolving(monkeypatch)
    stored = GraphCache(store).read()
    assert stored is not None
    assert_same(stored, fresh)
    # the API and the ranking stage load it too
    assert_same(ragloom.open(root).graph(), fresh)
    code = idx.retriever.code_graph()
    assert code is not None
    assert_same(code, fresh)


def test_a_changed_file_is_seen_by_the_next_command(
    pyrepo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build(pyrepo).graph()
    monkeypatch.chdir(pyrepo)
    runner = CliRunner()

    def callers() -> set[str]:
        out = runner.invoke(cli, ["callers", "helper", "--json"])
        assert out.exit_code == 0, out.output
        return {c["symbol"] for c in json.loads(out.output)["callers"]}

    assert "more" not in callers()
    # an update that does not store the graph (a few files of a large index) leaves the
    # older generation's file: the next command does not use it, and stores the new one
    monkeypatch.setattr(cache, "worth_storing", lambda *_: False)
    before = _file(pyrepo).read_bytes()
    (pyrepo / "pkg/extra.py").write_text("from .util import helper\n\ndef more():\n    helper(4)\n")
    ragloom.open(pyrepo).index(embed=False, history=False)
    assert _file(pyrepo).read_bytes() == before
    assert "more" in callers()
    assert _file(pyrepo).read_bytes() != before
    _no_resolving(monkeypatch)
    assert "more" in callers()  # and now from the file
    # a rebuild from nothing counts generations from 1 again: its graph is not the old one's
    monkeypatch.undo()
    monkeypatch.chdir(pyrepo)
    old = json.loads(np.load(_file(pyrepo))["doc"].tobytes())["key"]
    (pyrepo / ".ragloom" / "index.sqlite").write_bytes(b"damaged")
    ragloom.open(pyrepo).index(embed=False, history=False, rebuild=True)
    assert GraphCache(_store(pyrepo)).key != old
    assert "more" in callers()


def test_another_generation_is_not_written(pyrepo: Path) -> None:
    build(pyrepo)
    _file(pyrepo).unlink(missing_ok=True)
    store = _store(pyrepo)
    stale = GraphCache(store)
    graph = resolve_snapshot(store)
    (pyrepo / "main.py").write_text("def other():\n    return 1\n")
    ragloom.open(pyrepo).index(embed=False, history=False)
    # resolved for the generation published before: not kept as the new one's
    assert not stale.write(graph)
    assert GraphCache(store).read() is not None  # the update stored its own
    assert_same(load_graph(store), resolve_snapshot(store))


def _pickled() -> bytes:
    buf = io.BytesIO()
    np.savez(buf, doc=np.array([{"key": 1}], dtype=object))
    return buf.getvalue()


@pytest.mark.parametrize(
    "damage",
    ["truncated", "flipped", "garbage", "pickled", "empty", "other format", "foreign key"],
)
def test_a_damaged_file_is_resolved_again(pyrepo: Path, damage: str) -> None:
    build(pyrepo).graph()
    path = _file(pyrepo)
    good = path.read_bytes()
    if damage == "truncated":
        path.write_bytes(good[: len(good) // 2])
    elif damage == "flipped":  # a symbol still valid JSON ("xelper"): its CRC fails
        at = good.index(b'"helper"') + 1
        path.write_bytes(good[:at] + bytes([good[at] ^ 0x10]) + good[at + 1 :])
    elif damage == "garbage":
        path.write_bytes(b"\x93NUMPY not really" * 50)
    elif damage == "pickled":
        path.write_bytes(_pickled())
    elif damage == "empty":
        path.write_bytes(b"")
    else:  # a whole file, of another layout or with its arrays out of range
        with np.load(path) as z:
            arrays = {name: z[name] for name in z.files}
        doc = json.loads(arrays["doc"].tobytes())
        if damage == "other format":
            doc["key"] = doc["key"].replace('"format": 1', '"format": 0')
        else:
            arrays["src"] = arrays["src"] + len(doc["ids"])
        arrays["doc"] = np.frombuffer(json.dumps(doc).encode(), dtype=np.uint8)
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        path.write_bytes(buf.getvalue())
    store = _store(pyrepo)
    assert GraphCache(store).read() is None
    assert_same(load_graph(store), resolve_snapshot(store))
    assert path.read_bytes() != b"" and GraphCache(store).read() is not None  # written anew


def test_a_folder_that_cannot_be_written_keeps_no_graph(
    pyrepo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def read_only(path: Path, data: bytes) -> None:
        raise OSError(errno.EROFS, "Read-only file system", str(path))

    monkeypatch.setattr(cache, "atomic_write_bytes", read_only)
    idx = build(pyrepo)  # the index itself is written: only its graph is not stored
    assert not _file(pyrepo).exists()
    g = idx.graph()
    assert g.callers(g.definitions("helper")[0].id)
    assert not _file(pyrepo).exists()
    assert_same(ragloom.open(pyrepo).graph(), g)


def test_concurrent_readers_store_one_whole_graph(pyrepo: Path) -> None:
    build(pyrepo)
    _file(pyrepo).unlink(missing_ok=True)
    want = resolve_snapshot(_store(pyrepo))
    got: list[CodeGraph] = []
    errors: list[BaseException] = []

    def read() -> None:
        try:
            got.append(load_graph(_store(pyrepo)))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=read) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(got) == 6
    for g in got:
        assert_same(g, want)
    stored = GraphCache(_store(pyrepo)).read()
    assert stored is not None
    assert_same(stored, want)
    assert [p.name for p in _file(pyrepo).parent.iterdir()] == [cache.GRAPH_CACHE_NAME]
