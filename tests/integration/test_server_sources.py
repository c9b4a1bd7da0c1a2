"""The servers expose multi-source retrieval (issue 13 item 6): ``sources`` on the engine's
search/context, on HTTP ``/search`` and ``/context``, and on the MCP ``search_code`` and
``get_context`` tools, over a small git repository indexed with code, docs and commits."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from click.testing import CliRunner
from mcp import Client

from ragloom.cli import cli
from ragloom.errors import InputError
from ragloom.server.engine import ServingEngine
from ragloom.server.http import create_app
from ragloom.server.mcp import build_server
from ragloom.settings import load_settings
from tests.integration.test_http_api import ServerThread
from tests.sources_fixture import git, make_repo

pytestmark = pytest.mark.integration

QUESTION = "retry failed uploads with exponential backoff"


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServingEngine]:
    root = make_repo(tmp_path_factory.mktemp("srv-sources") / "repo")
    out = CliRunner().invoke(
        cli,
        ["index", str(root), "--model", "hashing", "--sources", "code,docs,commits"],
        catch_exceptions=False,
    )
    assert out.exit_code == 0, out.stderr
    eng = ServingEngine.open(root, load_settings(root, env={}).settings)
    yield eng
    eng.close()


def _commit_hit(hits: list[dict[str, Any]], repo: Path) -> dict[str, Any]:
    commits = [h for h in hits if h.get("source") == "commits"]
    assert commits, hits
    top = commits[0]
    assert top["title"] == "Retry failed uploads with exponential backoff"
    assert top["paths"] == ["pkg/upload.py"]
    assert top["attribution"]["commit"] == git(repo, "rev-parse", "HEAD~1")
    return top


def test_engine_search_and_context_with_sources(engine: ServingEngine) -> None:
    plain = engine.search(QUESTION)
    assert "sources" not in plain and all("path" in h for h in plain["hits"])
    answer = engine.search(QUESTION, sources=["code", "docs", "commits"])
    assert [s["source"] for s in answer["sources"]] == ["code", "docs", "commits"]
    assert all(s["status"] == "ok" for s in answer["sources"])
    assert answer["cache_hit"] is False and answer["query_id"]
    _commit_hit(answer["hits"], engine.root)
    code = [h for h in answer["hits"] if h.get("source") == "code"]
    assert code and all("path" in h and "start_line" in h for h in code)
    ctx = engine.context(QUESTION, sources=["code", "commits"], budget=1500)
    assert ctx["stats"]["tokens_total"] <= 1500
    assert git(engine.root, "rev-parse", "--short", "HEAD~1") in ctx["context"]
    assert [s["source"] for s in ctx["sources"]] == ["code", "commits"]
    # feedback works on a multi-source answer too
    rec = engine.record_feedback(answer["query_id"], answer["hits"][0]["id"], "helpful")
    assert rec["in_results"] is True
    few = engine.search(QUESTION, top_k=3, sources=["code", "docs", "commits"])
    assert len(few["hits"]) == 3  # top_k caps the fused answer, not each source's list
    with pytest.raises(InputError, match="unknown source 'wiki'"):
        engine.search(QUESTION, sources=["code", "wiki"])
    assert engine.search(QUESTION, sources=["code"])["hits"] == engine.search(QUESTION)["hits"]


def test_http_and_mcp_take_sources(engine: ServingEngine) -> None:
    with (
        ServerThread(create_app(engine)) as server,
        httpx.Client(base_url=server.url, timeout=30) as c,
    ):
        resp = c.post("/search", json={"query": QUESTION, "sources": ["code", "commits"]})
        assert resp.status_code == 200, resp.text
        _commit_hit(resp.json()["hits"], engine.root)
        ctx = c.post("/context", json={"query": QUESTION, "sources": ["commits"], "budget": 800})
        assert ctx.status_code == 200 and ctx.json()["sources"][0]["source"] == "commits"
        bad = c.post("/search", json={"query": QUESTION, "sources": ["nope"]})
        assert bad.status_code == 400 and "unknown source" in bad.json()["error"]["message"]
        empty = c.post("/search", json={"query": QUESTION, "sources": []})
        assert empty.status_code == 422

    async def mcp_calls() -> None:
        async with Client(build_server(engine)) as client:
            found = await client.call_tool(
                "search_code", {"query": QUESTION, "sources": ["code", "commits"]}
            )
            assert not found.is_error
            assert isinstance(found.structured_content, dict)
            _commit_hit(found.structured_content["hits"], engine.root)
            text = found.content[0].text  # type: ignore[union-attr]
            assert "[commits] Retry failed uploads" in text and "source commits: ok" in text
            ctx = await client.call_tool(
                "get_context", {"query": QUESTION, "sources": ["commits"], "budget": 800}
            )
            assert not ctx.is_error
            bad = await client.call_tool("search_code", {"query": QUESTION, "sources": ["x"]})
            assert bad.is_error

    anyio.run(mcp_calls)
