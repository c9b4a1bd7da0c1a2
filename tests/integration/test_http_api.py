"""The HTTP API end to end (issue 12 item 3): the real uvicorn server on a loopback port, a
real index (two stdlib packages, embedded with the packaged model), httpx as the client.

One server runs with a bearer token and small limits, so the token check and every limit are
exercised on the same routes an agent calls; ``ragloom serve http`` is started as a process of
its own at the end. Every route, every limit, the error shapes and statuses, a background
re-index to completion and a cache hit on a repeated query are checked.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

import ragloom
from ragloom.server.engine import ServingEngine
from ragloom.server.http import bind_socket, create_app, url_of
from ragloom.settings import load_settings
from tests.conftest import copy_stdlib_packages, run_cli

pytestmark = pytest.mark.integration

TOKEN = "test-token-7f3a"
LIMITS = {
    "server.api_token": TOKEN,
    "server.max_query_chars": 200,
    "server.max_top_k": 20,
    "server.max_budget": 6000,
    "assembly.budget": 4000,  # a default within the limit (a default above it is refused)
    "server.max_body_bytes": 4096,
}
NEW_FUNCTION = "zebra_quantum_marker"


class ServerThread:
    """uvicorn serving ``app`` in a thread on a free loopback port (the same uvicorn and the
    same socket binding as ``ragloom serve http``)."""

    def __init__(self, app: Any) -> None:
        self.sock = bind_socket("127.0.0.1", 0)
        self.url = url_of(self.sock)
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )

    def __enter__(self) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert self.thread.is_alive(), "uvicorn stopped during start-up"
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=20)
        self.sock.close()


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = copy_stdlib_packages(tmp_path_factory.mktemp("httprepo"), ["json", "textwrap"])
    ragloom.open(root).index()
    return root


@pytest.fixture(scope="module")
def engine(repo: Path) -> Iterator[ServingEngine]:
    settings = load_settings(repo, overrides=LIMITS, env={}).settings
    eng = ServingEngine.open(repo, settings)
    yield eng
    eng.close()


@pytest.fixture(scope="module")
def base_url(engine: ServingEngine) -> Iterator[str]:
    with ServerThread(create_app(engine)) as server:
        yield server.url


@pytest.fixture()
def client(base_url: str) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=base_url, headers=headers, timeout=30) as c:
        yield c


@pytest.fixture()
def anon(base_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base_url, timeout=30) as c:
        yield c


def error_of(resp: httpx.Response, status: int) -> dict[str, Any]:
    """The error body of a refusal, after checking its status and shape."""
    assert resp.status_code == status, (resp.status_code, resp.text)
    assert resp.headers["content-type"].startswith("application/json")
    err = resp.json()["error"]
    assert isinstance(err["type"], str) and err["type"]
    assert isinstance(err["message"], str) and err["message"]
    assert "\n" not in err["message"] and "Traceback" not in err["message"]
    return dict(err)


def answer_fields(body: dict[str, Any]) -> None:
    assert re.fullmatch(r"[0-9a-f]{32}", body["query_id"])
    assert isinstance(body["latency_ms"], float | int) and body["latency_ms"] >= 0
    assert isinstance(body["cache_hit"], bool)
    assert isinstance(body["generation"], int) and body["generation"] >= 1


# -- auth ----------------------------------------------------------------------------------------


def test_token_required_everywhere_but_health(anon: httpx.Client) -> None:
    health = anon.get("/healthz")
    assert health.status_code == 200 and health.json()["status"] == "ok"
    for method, path in [
        ("GET", "/status"),
        ("POST", "/search"),
        ("POST", "/context"),
        ("POST", "/index"),
        ("GET", "/jobs/x"),
        ("POST", "/feedback"),
        ("GET", "/feedback/" + "0" * 32),
        ("GET", "/feedback"),
        ("GET", "/metrics"),
        ("GET", "/openapi.json"),
    ]:
        resp = anon.request(method, path, json={"query": "json"})
        err = error_of(resp, 401)
        assert err["type"] == "unauthorized"
        assert resp.headers["www-authenticate"] == "Bearer"
    wrong = anon.post("/search", json={"query": "json"}, headers={"Authorization": "Bearer nope"})
    assert error_of(wrong, 401)["message"] == "invalid bearer token"
    basic = anon.get("/status", headers={"Authorization": f"Basic {TOKEN}"})
    error_of(basic, 401)
    # refused before the body is read: a bad body without the token is still a 401
    bad = anon.post("/search", content=b"{not json", headers={"content-type": "application/json"})
    error_of(bad, 401)


# -- retrieval -----------------------------------------------------------------------------------


def test_search(client: httpx.Client) -> None:
    resp = client.post("/search", json={"query": "decode a JSON document", "top_k": 5})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    answer_fields(body)
    assert body["query"] == "decode a JSON document"
    assert 1 <= len(body["hits"]) <= 5
    top = body["hits"][0]
    assert top["path"].startswith("json/")
    assert {"id", "path", "start_line", "end_line", "kind", "symbol", "score", "ranks"} <= set(top)
    assert "explain" not in top
    explained = client.post(
        "/search", json={"query": "dedent lines of text", "top_k": 3, "explain": True}
    ).json()
    assert explained["hits"] and "scores" in explained["hits"][0]


def test_context_and_cache_hit(client: httpx.Client) -> None:
    req = {"query": "wrap text into lines of a given width", "budget": 1500, "format": "markdown"}
    first = client.post("/context", json=req)
    assert first.status_code == 200, first.text
    a = first.json()
    answer_fields(a)
    assert a["format"] == "markdown"
    assert "textwrap" in a["context"]
    assert a["parts"] and a["stats"]["tokens_total"] <= 1500
    second = client.post("/context", json=req).json()
    assert second["cache_hit"] is True
    assert second["generation"] == a["generation"]
    assert second["query_id"] != a["query_id"]
    assert second["context"] == a["context"]


def test_context_counter(client: httpx.Client) -> None:
    """The budget is counted with the counter asked for (it was the settings' one only: the CLI
    had `--counter`, HTTP and MCP nothing)."""
    from ragloom.assemble.tokens import get_counter

    req = {"query": "wrap text into lines of a given width", "budget": 300, "format": "plain"}
    for name in ("approx", "o200k", "cl100k"):
        a = client.post("/context", json={**req, "counter": name}).json()
        assert a["stats"]["tokens_total"] == get_counter(name).count(a["context"]) <= 300, name
    bad = client.post("/context", json={**req, "counter": "gpt2"})
    assert bad.status_code == 422 and "counter" in bad.text


# -- limits and errors ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/search", {"query": "x" * 201}, "query"),
        ("/search", {"query": ""}, "query"),
        ("/search", {"query": "json", "top_k": 21}, "top_k"),
        ("/search", {"query": "json", "top_k": 0}, "top_k"),
        ("/context", {"query": "json", "budget": 6001}, "budget"),
        ("/context", {"query": "json", "top_k": 500}, "top_k"),
        ("/context", {"query": "json", "format": "html"}, "format"),
        ("/search", {"query": "json", "top_k": "5"}, "top_k"),
        ("/search", {"query": "json", "unknown": 1}, "unknown"),
        ("/search", {}, "query"),
    ],
)
def test_limits_are_422(client: httpx.Client, path: str, body: dict[str, Any], field: str) -> None:
    err = error_of(client.post(path, json=body), 422)
    assert err["type"] == "validation_error"
    assert err["message"].startswith(f"{field}:"), err["message"]
    assert err["details"][0]["loc"] == [field]


def test_body_too_large_is_413(client: httpx.Client) -> None:
    big = {"query": "json", "pad": "x" * 5000}
    err = error_of(client.post("/search", json=big), 413)
    assert err["type"] == "payload_too_large" and "4096" in err["message"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it streams
        yield b'{"query": "json", "pad": "'
        for _ in range(10):
            yield b"y" * 1000
        yield b'"}'

    streamed = client.post(
        "/search", content=chunks(), headers={"content-type": "application/json"}
    )
    error_of(streamed, 413)


def test_error_statuses(client: httpx.Client) -> None:
    bad_json = client.post(
        "/search", content=b'{"query": ', headers={"content-type": "application/json"}
    )
    assert error_of(bad_json, 422)["type"] == "validation_error"
    latin1 = client.post(  # not UTF-8: was a 400 of an undocumented type
        "/search", content='{"query": "café"}'.encode("latin-1"),
        headers={"content-type": "application/json"},
    )  # fmt: skip
    assert error_of(latin1, 422)["message"] == "request body is not valid JSON (it must be UTF-8)"
    assert error_of(client.get("/jobs/no-such-job"), 404)["type"] == "not_found"
    assert error_of(client.get("/nowhere"), 404)["type"] == "not_found"
    assert error_of(client.get("/search"), 405)["type"] == "method_not_allowed"
    bad_strategy = client.post("/search", json={"query": "json", "strategy": "telepathy"})
    assert error_of(bad_strategy, 400)["type"] == "input_error"
    unknown = error_of(client.get("/feedback/" + "f" * 32), 404)
    assert unknown["type"] == "not_found" and "unknown query_id" in unknown["message"]
    malformed = client.get("/feedback/not-a-query-id")
    error_of(malformed, 422)
    too_long = client.post("/search", json={"query": "x" * 201})
    assert error_of(too_long, 422)["message"].endswith("(server.max_query_chars)")


# -- feedback ------------------------------------------------------------------------------------


def test_overloaded_is_a_quick_503_with_retry_after(
    client: httpx.Client, engine: ServingEngine
) -> None:
    cached = {"query": "decode a JSON document", "top_k": 3}
    assert client.post("/search", json=cached).status_code == 200
    before = client.get("/status").json()["fallbacks"]["overloaded"]
    limit = engine.settings.server.max_inflight
    assert limit > 0
    engine._computing = limit  # as if that many new answers were being computed
    try:
        t0 = time.perf_counter()
        resp = client.post("/search", json={"query": "a question nobody asked before 7f3c"})
        took = time.perf_counter() - t0
        err = error_of(resp, 503)
        assert err["type"] == "overloaded" and "max_inflight" in err["message"]
        assert resp.headers["retry-after"] == "1"
        assert took < 5.0  # refused at once, not after the time limit
        ctx = client.post("/context", json={"query": "another new question 9a1e"})
        assert ctx.status_code == 503
        # a cached answer needs no computation: it is still served
        assert client.post("/search", json=cached).status_code == 200
    finally:
        engine._computing = 0
    assert client.get("/status").json()["fallbacks"]["overloaded"] == before + 2
    assert client.post("/search", json={"query": "a question nobody asked before 7f3c"}).is_success


def test_graph_routes(client: httpx.Client) -> None:
    callers = client.post("/callers", json={"symbol": "JSONDecoder.raw_decode"})
    assert callers.status_code == 200, callers.text
    body = callers.json()
    assert {c["symbol"] for c in body["callers"]} >= {"JSONDecoder.decode"}
    refs = client.post("/refs", json={"symbol": "py_scanstring", "limit": 5}).json()
    assert 0 < len(refs["references"]) <= 5 and refs["references_total"] >= 1
    assert client.post("/defs", json={"symbol": "JSONEncoder"}).json()["definitions"]
    callees = client.post("/callees", json={"symbol": "JSONDecoder.decode"}).json()
    assert any(c["symbol"] == "JSONDecoder.raw_decode" for c in callees["callees"])
    err = error_of(client.post("/refs", json={"symbol": "no_such_function_here"}), 404)
    assert "no definition named" in err["message"]
    error_of(client.post("/refs", json={"symbol": "x", "min_confidence": 2}), 422)
    m = client.post("/map", json={"query": "decode JSON", "budget": 400}).json()
    assert 0 < m["tokens"] <= 400 and m["files"]
    ctx = client.post(
        "/context", json={"query": "decode a JSON document", "budget": 2000, "structure": "bodies"}
    ).json()
    assert ctx["stats"]["tokens_total"] <= 2000 and "structure" in ctx
    assert any(p.get("relation") for p in ctx["parts"]) == (ctx["structure"]["related"] > 0)


def test_feedback_roundtrip(client: httpx.Client) -> None:
    answer = client.post("/context", json={"query": "JSON encoder for Python objects"}).json()
    qid = answer["query_id"]
    chunk = answer["parts"][0]["chunk_id"]
    assert chunk in answer["hit_ids"]
    rec = client.post(
        "/feedback", json={"query_id": qid, "chunk_id": chunk, "rating": "helpful", "comment": "ok"}
    )
    assert rec.status_code == 201, rec.text
    assert rec.json()["rating"] == "helpful"
    client.post("/feedback", json={"query_id": qid, "chunk_id": chunk, "rating": "not_helpful"})
    used = client.post("/feedback/usage", json={"query_id": qid, "used_chunk_ids": [chunk]})
    assert used.status_code == 201, used.text
    stats = client.get(f"/feedback/{qid}").json()
    assert stats["total"] == 2 and stats["helpful_count"] == 1
    assert stats["not_helpful_count"] == 1 and stats["avg_rating"] == pytest.approx(0.5)
    assert stats["used_chunk_ids"] == [chunk]
    whole = client.get("/feedback").json()
    assert whole["answers"] >= 1 and whole["rated_answers"] >= 1 and whole["used_chunks"] >= 1
    assert whole["total"] >= 2 and whole["helpful_count"] >= 1
    bad = client.post("/feedback", json={"query_id": qid, "chunk_id": chunk, "rating": "meh"})
    assert error_of(bad, 422)["message"].startswith("rating:")
    unknown = client.post(
        "/feedback", json={"query_id": "e" * 32, "chunk_id": chunk, "rating": "helpful"}
    )
    assert "unknown query_id" in error_of(unknown, 404)["message"]


# -- status, metrics, openapi --------------------------------------------------------------------


def test_status_metrics_openapi(client: httpx.Client, base_url: str) -> None:
    # what the metrics below must show, asked here so the test holds on its own (``-k``)
    assert client.post("/search", json={"query": "json"}).status_code == 200
    with httpx.Client(base_url=base_url, timeout=30) as anon:
        assert anon.get("/status").status_code == 401
    status = client.get("/status")
    assert status.status_code == 200
    st = status.json()
    assert st["chunks"] > 0 and st["generation"] >= 1
    assert "cache" in st
    assert st["stale_files"] is None  # not checked without ?freshness=true
    fresh = client.get("/status", params={"freshness": "true"}).json()
    assert fresh["stale_files"] == 0 and set(fresh["stale"]) == {"changed", "added", "removed"}
    metrics = client.get("/metrics")
    assert metrics.status_code == 200
    assert metrics.headers["content-type"].startswith("text/plain")
    assert 'route="/search"' in metrics.text
    assert 'status="401"' in metrics.text  # refusals are observed too
    schema = client.get("/openapi.json").json()
    paths = schema["paths"]
    for path in ("/search", "/context", "/status", "/index", "/jobs/{job_id}", "/feedback"):
        assert path in paths
    search = schema["components"]["schemas"]["SearchRequest"]
    assert search["properties"]["query"]["maxLength"] == 200
    assert search["properties"]["top_k"]["anyOf"][0]["maximum"] == 20
    assert search.get("examples")
    assert paths["/search"]["post"]["security"] == [{"bearer": []}]
    assert "security" not in paths["/healthz"]["get"]
    assert "422" in paths["/search"]["post"]["responses"]


# -- background re-index -------------------------------------------------------------------------


def test_reindex_job_to_completion(client: httpx.Client, repo: Path) -> None:
    before = client.get("/status").json()["generation"]
    (repo / "textwrap.py").write_text(
        (repo / "textwrap.py").read_text()
        + f"\n\ndef {NEW_FUNCTION}(x):\n    '''Quantum zebra marker.'''\n    return x\n"
    )
    started = client.post("/index")
    assert started.status_code == 202, started.text
    job_id = started.json()["job_id"]
    assert started.headers["location"] == f"/jobs/{job_id}"
    deadline = time.monotonic() + 60
    job: dict[str, Any] = {}
    states = set()
    while time.monotonic() < deadline:
        job = client.get(f"/jobs/{job_id}").json()
        states.add(job["state"])
        if job["state"] in ("succeeded", "failed"):
            break
        time.sleep(0.05)
    assert job["state"] == "succeeded", job
    assert job["stats"] is not None
    hits = client.post("/search", json={"query": NEW_FUNCTION, "top_k": 3}).json()
    assert hits["generation"] > before
    assert hits["hits"][0]["symbol"] == NEW_FUNCTION


# -- configuration -------------------------------------------------------------------------------


def test_config_reload_on_request(client: httpx.Client, anon: httpx.Client, repo: Path) -> None:
    """POST /config/reload re-reads ragloom.toml and applies it to the next request; a bad
    file is a 400 naming the key and changes nothing; server settings keep running values."""
    config = repo / "ragloom.toml"
    assert anon.post("/config/reload").status_code == 401
    try:
        config.write_text('[ranking]\ntop_k = 4\n[embedding]\nmodel = "hashing:8"\n')
        body = client.post("/config/reload").json()
        assert "ranking.top_k" in body["changed"]
        # the query model is the index's while the server runs: not reported as changed
        assert "embedding.model" not in body["changed"]
        assert body["sources"]["embedding.model"] == "running"
        assert body["sources"]["ranking.top_k"] == "ragloom.toml"
        assert body["sources"]["server.api_token"] == "running"
        assert TOKEN not in str(body)  # masked
        assert body["settings"]["server"]["max_top_k"] == LIMITS["server.max_top_k"]
        assert client.post("/search", json={"query": "decode JSON"}).json()["top_k"] == 4
        config.write_text("[ranking]\ntop_k = 0\n")
        bad = error_of(client.post("/config/reload"), 400)
        assert bad["type"] == "config_error" and "ranking.top_k" in bad["message"]
        assert client.post("/search", json={"query": "decode JSON"}).json()["top_k"] == 4
    finally:
        config.unlink(missing_ok=True)
        assert client.post("/config/reload").status_code == 200  # back to the defaults


# -- the command ---------------------------------------------------------------------------------


def test_serve_http_command(repo: Path, tmp_path: Path) -> None:
    """``ragloom serve http``: a missing index is one error line; otherwise it prints its URL,
    answers with the repository's configuration, applies an edit of ``ragloom.toml`` live, and
    stops gracefully on SIGTERM."""
    missing = run_cli("serve", "http", str(tmp_path))
    assert missing.returncode == 21
    assert missing.stderr.startswith("error: no index at") and missing.stderr.count("\n") == 1

    config = repo / "ragloom.toml"
    config.write_text("[ranking]\ntop_k = 3\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGLOOM_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ragloom.cli", "serve", "http", str(repo), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(r"on (http://127\.0\.0\.1:\d+)", line)
        assert match, (line, proc.stderr.read() if proc.poll() is not None else "")
        with httpx.Client(base_url=match.group(1), timeout=30) as c:
            assert c.get("/healthz").status_code == 200
            resp = c.post("/search", json={"query": "decode JSON"})
            assert resp.status_code == 200, resp.text
            assert resp.json()["top_k"] == 3 and len(resp.json()["hits"]) == 3
            config.write_text("[ranking]\ntop_k = 2\n")  # live reload, no restart
            deadline = time.monotonic() + 20
            while c.post("/search", json={"query": "decode JSON"}).json()["top_k"] != 2:
                assert time.monotonic() < deadline, "the configuration edit was not applied"
                time.sleep(0.2)
    finally:
        config.unlink()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err  # a graceful stop: the engine is closed, the log flushed
    assert "configuration reloaded from" in err


# -- the serving benchmark's client --------------------------------------------------------------


def test_bench_client_burst(base_url: str) -> None:
    """The benchmark's raw HTTP client against the real server: a burst of concurrent /context
    requests, all answered; the same burst again, all from the cache; without the token, all
    refused and counted as errors."""
    import asyncio

    from ragloom.bench.serving import RawClient, Sample, burst, summarize

    queries = [f"split text into words, variant {i}" for i in range(8)]

    async def run(token: str | None) -> tuple[list[Sample], list[Sample]]:
        client = RawClient(base_url, len(queries), token=token)
        await client.open()
        try:
            return await burst(client, queries, 800), await burst(client, queries, 800)
        finally:
            await client.close()

    first, again = asyncio.run(run(TOKEN))
    assert summarize("first", first, 1.0, 1).errors == 0
    assert not any(s.cache_hit for s in first)
    assert all(s.cache_hit for s in again)
    assert {s.generation for s in first} == {s.generation for s in again}
    refused, _ = asyncio.run(run(None))
    assert {s.status for s in refused} == {401}
    assert summarize("refused", refused, 1.0, 1).errors == len(queries)
