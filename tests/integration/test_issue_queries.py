"""A whole GitHub issue as the question (issue 21, part 3), at every entry point: a synthetic
25,000-character issue is accepted and answered by the Python API, the CLI (``search --json``,
``context``), HTTP ``/search`` and ``/context`` and the MCP ``search_code`` / ``get_context``
tools, all with the default settings; a question over ``server.max_query_chars`` still gets
the clear error at the servers.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest
from click.testing import CliRunner
from mcp import Client

import ragloom
from ragloom.cli import cli
from ragloom.server.engine import ServingEngine
from ragloom.server.http import create_app
from ragloom.server.mcp import build_server
from ragloom.settings import ServerSettings, load_settings
from tests.conftest import copy_stdlib_packages
from tests.integration.test_http_api import ServerThread
from tests.issue_texts import long_issue

pytestmark = pytest.mark.integration

ISSUE = long_issue(25_000)
LIMIT = ServerSettings().max_query_chars
TOO_LONG = "x" * (LIMIT + 1)


def test_default_limit_takes_a_whole_issue() -> None:
    assert len(ISSUE) == 25_000 and LIMIT >= 65_536


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = copy_stdlib_packages(tmp_path_factory.mktemp("issuerepo"), ["json"])
    ragloom.open(root).index()
    return root


@pytest.fixture(scope="module")
def engine(repo: Path) -> Iterator[ServingEngine]:
    settings = load_settings(repo, overrides={}, env={}).settings
    assert settings.server.max_query_chars == LIMIT
    eng = ServingEngine.open(repo, settings)
    yield eng
    eng.close()


def test_python_api(repo: Path) -> None:
    index = ragloom.open(repo)
    result = index.search(ISSUE, top_k=5)
    assert 1 <= len(result.hits) <= 5
    assert result.hits[0].path.startswith("json/")
    ctx = index.get_context(ISSUE, budget=1500)
    assert ctx.parts


def test_cli_search_and_context(repo: Path) -> None:
    runner = CliRunner()
    index_dir = str(repo / ".ragloom")
    found = runner.invoke(cli, ["search", ISSUE, "--json", "-k", "5", "--index-dir", index_dir])
    assert found.exit_code == 0, found.output
    hits = json.loads(found.stdout)
    assert 1 <= len(hits) <= 5 and hits[0]["path"].startswith("json/")
    ctx = runner.invoke(cli, ["context", ISSUE, "--budget", "1500", "--index-dir", index_dir])
    assert ctx.exit_code == 0, ctx.output
    assert "json/" in ctx.stdout


def test_http_search_and_context(engine: ServingEngine) -> None:
    with (
        ServerThread(create_app(engine)) as server,
        httpx.Client(base_url=server.url, timeout=60) as c,
    ):
        found = c.post("/search", json={"query": ISSUE, "top_k": 5})
        assert found.status_code == 200, found.text
        assert found.json()["hits"]
        ctx = c.post("/context", json={"query": ISSUE, "budget": 1500})
        assert ctx.status_code == 200, ctx.text
        assert ctx.json()["parts"]
        refused = c.post("/search", json={"query": TOO_LONG})
        assert refused.status_code == 422, refused.text
        message = refused.json()["error"]["message"]
        assert message.endswith("(server.max_query_chars)") and str(LIMIT) in message


def test_mcp_search_and_context(engine: ServingEngine) -> None:
    async def calls() -> None:
        async with Client(build_server(engine)) as client:
            found = await client.call_tool("search_code", {"query": ISSUE, "top_k": 5})
            assert not found.is_error
            assert isinstance(found.structured_content, dict)
            assert found.structured_content["hits"]
            ctx = await client.call_tool("get_context", {"query": ISSUE, "budget": 1500})
            assert not ctx.is_error
            assert isinstance(ctx.structured_content, dict)
            assert ctx.structured_content["parts"]
            refused = await client.call_tool("get_context", {"query": TOO_LONG})
            assert refused.is_error
            text = refused.content[0].text  # type: ignore[union-attr]
            assert "query" in text and "\n" not in text

    anyio.run(calls)
