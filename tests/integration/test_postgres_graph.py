"""The code graph kept in PostgreSQL (``file_graph``, migration 5): the same edges as a folder
index of the same tree, after a first load and after a one-file edit and a file removal; the
records of a repository indexed before the graph (or by another extractor version) made again
by the next ``index``; the CLI graph commands on ``--backend postgres``.

Edges are compared by what they join (caller path:symbol, callee path:symbol, kind, line,
confidence): rowids and node numbers differ between the backends.
"""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner

import ragloom
from ragloom.api import PostgresIndex, open_postgres
from ragloom.cli import cli
from tests.unit.test_graph import PY_FILES, edges, write

pytestmark = pytest.mark.integration

MODEL = "hashing"


@pytest.fixture(autouse=True)
def bm25_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Serving nodes keep their BM25 folders under the test's tmp."""
    monkeypatch.setenv("RAGLOOM_CACHE_DIR", str(tmp_path / "ragloom-cache"))


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    write(root, {**PY_FILES, "README.md": "# demo\n\nCalls `helper` from `Impl.run`.\n"})
    return root


def folder_index(root: Path) -> ragloom.Index:
    idx = ragloom.open(root, embedder=MODEL)
    idx.index(embed=False, history=False)
    return idx


def pg_index(root: Path, dsn: str) -> PostgresIndex:
    idx = open_postgres(root, dsn=dsn, embedder=MODEL, create=True)
    idx.index(embed=False)
    return idx


def test_same_edges_as_a_folder_index_through_an_edit_and_a_removal(
    repo: Path, pg_dsn: str
) -> None:
    folder = folder_index(repo)
    writer = pg_index(repo, pg_dsn)
    reader = open_postgres(repo, dsn=pg_dsn)
    try:
        first = edges(folder.graph())
        g1 = reader.graph()
        assert g1.generation == 1 and first and edges(g1) == first
        assert reader.graph() is g1  # cached for its generation
        assert len(g1) == len(folder.graph())
        # a one-file edit and a file removal, re-indexed into both
        core = repo / "pkg/core.py"
        core.write_text(core.read_text().replace("        self.step()\n", "        make()\n"))
        (repo / "main.py").unlink()
        folder.index(embed=False, history=False)
        assert writer.index(embed=False).generation == 2
        second = edges(folder.graph())
        assert second != first and not any("main.py" in e[0] for e in second)
        g2 = reader.graph()
        assert g2.generation == 2 and edges(g2) == second
        # a reader whose retriever is open shares the retriever's graph
        assert reader.search("helper", top_k=3, strategy="sparse").hits
        assert edges(reader.graph()) == second
        # unchanged code files keep their records; the edited one has its new version's
        with psycopg.connect(pg_dsn) as conn:
            rows = dict(
                conn.execute(
                    "SELECT g.path, g.hash = f.hash FROM file_graph g JOIN files f "
                    "ON f.repo_id = g.repo_id AND f.path = g.path"
                ).fetchall()
            )
        assert rows == {"pkg/util.py": True, "pkg/core.py": True}  # empty __init__: none
    finally:
        reader.close()
        writer.close()
        folder.close()


def test_records_are_made_again_for_a_repository_without_them(repo: Path, pg_dsn: str) -> None:
    want = edges(folder_index(repo).graph())
    writer = pg_index(repo, pg_dsn)
    try:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute("DELETE FROM file_graph")  # as indexed before the graph was kept
        stale = open_postgres(repo, dsn=pg_dsn)
        assert stale.graph().edge_count == 0
        stale.close()
        stats = writer.index(embed=False)
        # no chunk changed, but the records' publish is a generation readers rebuild for
        assert stats.generation == 2 and stats.chunks_added == 0
        assert edges(writer.graph()) == want
        # nothing left to make (the empty __init__.py has no record): no new generation
        assert writer.index(embed=False).generation == 2
        # a record of another file version, and records of another extractor version
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute("UPDATE file_graph SET hash = 'old' WHERE path = 'pkg/util.py'")
        assert writer.index(embed=False).generation == 3
        assert edges(writer.graph()) == want
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute("UPDATE repositories SET graph_version = 0")
        assert writer.index(embed=False).generation == 4
        assert edges(writer.graph()) == want
        with psycopg.connect(pg_dsn) as conn:
            row = conn.execute("SELECT graph_version FROM repositories").fetchone()
        from ragloom.ingest.filegraph import FILE_GRAPH_VERSION

        assert row == (FILE_GRAPH_VERSION,)
    finally:
        writer.close()


def test_cli_graph_commands_on_postgres(
    repo: Path, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder_index(repo).close()
    pg_index(repo, pg_dsn).close()
    monkeypatch.chdir(repo)
    runner = CliRunner()
    want = runner.invoke(cli, ["callers", "helper", "--json"])
    assert want.exit_code == 0, want.output
    out = runner.invoke(
        cli, ["callers", "helper", "--backend", "postgres", "--dsn", pg_dsn, "--json"]
    )
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    assert doc["callers"] == json.loads(want.output)["callers"]
    assert {c["symbol"] for c in doc["callers"]} >= {"Base.run", "Impl.run"}
    out = runner.invoke(
        cli, ["map", "--dsn", pg_dsn, "--repo", "repo", "--budget", "300", "--json"]
    )
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    assert doc["tokens"] <= 300 and {f["path"] for f in doc["files"]} & {"pkg/util.py"}
    out = runner.invoke(cli, ["defs", "nothing_like_this", "--dsn", pg_dsn])
    assert out.exit_code == 4 and "no definition named" in out.output
