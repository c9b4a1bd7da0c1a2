"""``ragloom serve mcp`` driven by the official MCP SDK's own client, as an agent would.

The server runs as a real subprocess: over stdio started exactly as the README's
``mcpServers`` snippet says (the ``ragloom`` console script), and over streamable HTTP
(``python -m ragloom.cli serve mcp --transport http``) on a loopback port. Every tool is
called, the schemas are read back with their limits, bad arguments come back as ``isError``
results without killing the server, a reindex sends progress notifications, and stdout
carries nothing but JSON-RPC.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent

from tests.conftest import copy_stdlib_packages, run_cli

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
TOOLS = {
    "search_code",
    "get_context",
    "find_definitions",
    "find_references",
    "find_callers",
    "find_callees",
    "repo_map",
    "index_status",
    "reindex",
    "record_feedback",
    "reload_config",
}
QUERY = "decode a JSON document into Python objects"
NEW_FILE_SYMBOL = "frobnicate_widget_registry"
TOKEN = "mcp-test-token"


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("mcp-repo")
    copy_stdlib_packages(root, ["json"])
    run_cli("index", str(root), check=True)
    return root


def serve_argv(root: Path, *extra: str) -> list[str]:
    """The server command (the CLI entry point of the interpreter running the tests)."""
    return [sys.executable, "-m", "ragloom.cli", "serve", "mcp", str(root), *extra]


def readme_mcp_servers() -> dict[str, Any]:
    """The first ```json block of README.md that holds ``mcpServers``."""
    text = (REPO / "README.md").read_text()
    for block in re.findall(r"```json\n(.*?)```", text, flags=re.S):
        if "mcpServers" in block:
            config = json.loads(block)
            assert isinstance(config, dict)
            return config
    raise AssertionError("README.md has no ```json block with mcpServers")


def readme_params(repo: Path) -> StdioServerParameters:
    """Exactly the README's client configuration, the repository path filled in."""
    entry = readme_mcp_servers()["mcpServers"]["ragloom"]
    assert set(entry) <= {"command", "args", "env", "cwd"}
    command = entry["command"]
    args = [str(repo) if a == "/path/to/repo" else a for a in entry["args"]]
    assert args[:2] == ["serve", "mcp"] and str(repo) in args, args
    if os.sep not in command:
        # `ragloom` is the console script installed next to the interpreter (on PATH in
        # an activated virtualenv, which the test process need not be)
        command = str(Path(sys.executable).parent / command)
    return StdioServerParameters(command=command, args=args, env=entry.get("env"))


def _env() -> dict[str, str]:
    # the repository's own sources, whatever directory the client starts the server in
    return {"PYTHONPATH": str(REPO / "src")}


def run(fn: Callable[[], Awaitable[None]]) -> None:
    anyio.run(fn)


def text_of(result: CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, TextContent))


def structured(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, text_of(result)
    assert isinstance(result.structured_content, dict)
    return result.structured_content


def test_readme_configuration_every_tool_over_stdio(repo: Path) -> None:
    """The README's ``mcpServers`` snippet, exactly (its command and args, the repository
    path filled in), started by the SDK's client; every tool called. Every line the server
    writes on stdout must parse as JSON-RPC: one that does not reaches the message handler."""
    stream_faults: list[Exception] = []

    async def on_message(message: object) -> None:
        if isinstance(message, Exception):
            stream_faults.append(message)

    async def body() -> None:
        async with Client(
            readme_params(repo), read_timeout_seconds=60, message_handler=on_message
        ) as client:
            assert client.server_info is not None and client.server_info.name == "ragloom"
            assert "get_context" in (client.instructions or "")

            # tools, schemas, limits, descriptions
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert set(tools) == TOOLS
            for tool in tools.values():
                assert tool.description and len(tool.description) > 80, tool.name
                for name, prop in tool.input_schema.get("properties", {}).items():
                    assert prop.get("description"), f"{tool.name}.{name} has no description"
                assert tool.input_schema.get("additionalProperties") is False, tool.name
            search = tools["search_code"].input_schema
            assert search["required"] == ["query"]
            assert search["properties"]["query"]["maxLength"] == 65_536
            assert search["properties"]["query"]["minLength"] == 1
            top_k = search["properties"]["top_k"]["anyOf"][0]
            assert (top_k["minimum"], top_k["maximum"]) == (1, 100)
            ctx_schema = tools["get_context"].input_schema["properties"]
            assert ctx_schema["budget"]["anyOf"][0]["maximum"] == 200000
            assert set(ctx_schema["counter"]["anyOf"][0]["enum"]) == {"cl100k", "o200k", "approx"}
            assert set(ctx_schema["format"]["anyOf"][0]["enum"]) == {
                "xml",
                "markdown",
                "plain",
                "json",
            }
            rating = tools["record_feedback"].input_schema["properties"]["rating"]
            assert set(rating["enum"]) == {"helpful", "not_helpful", "partially_helpful"}
            assert tools["search_code"].output_schema is not None
            assert tools["search_code"].annotations is not None
            assert tools["search_code"].annotations.read_only_hint is True

            # search_code: ranked hits with locations and a query id
            found = await client.call_tool("search_code", {"query": QUERY, "top_k": 5})
            answer = structured(found)
            assert re.fullmatch(r"[0-9a-f]{32}", answer["query_id"])
            assert 1 <= len(answer["hits"]) <= 5
            top = answer["hits"][0]
            assert top["path"].startswith("json/") and top["path"].endswith(".py")
            assert 1 <= top["start_line"] <= top["end_line"]
            assert {"id", "symbol", "score", "kind"} <= set(top)
            scores = [h["score"] for h in answer["hits"]]
            assert scores == sorted(scores, reverse=True)
            assert f"{top['path']}:{top['start_line']}-{top['end_line']}" in text_of(found)
            assert answer["query_id"] in text_of(found)

            # get_context: the text first, a summary second, the parts without their text
            got = await client.call_tool(
                "get_context", {"query": QUERY, "budget": 1200, "format": "markdown"}
            )
            ctx = structured(got)
            assert isinstance(got.content[0], TextContent)
            assert got.content[0].text == ctx["context"]
            assert "```" in ctx["context"] and "json/" in ctx["context"]
            assert 0 < ctx["tokens_used"] <= 1200 and ctx["budget"] == 1200
            assert ctx["parts"] and all("text" not in p for p in ctx["parts"])
            assert ctx["query_id"] != answer["query_id"]
            assert f"query_id={ctx['query_id']}" in text_of(got)
            assert ctx["generation"] == answer["generation"]

            # the code graph: callers of the decoder, a map within its budget, structure
            callers = structured(
                await client.call_tool("find_callers", {"symbol": "JSONDecoder.raw_decode"})
            )
            assert callers["definitions"] and callers["definitions"][0]["path"].startswith("json/")
            assert any(c["symbol"] == "JSONDecoder.decode" for c in callers["callers"])
            refs = await client.call_tool("find_references", {"symbol": "py_scanstring"})
            assert structured(refs)["references"] and "json/" in text_of(refs)
            missing = await client.call_tool("find_definitions", {"symbol": "no_such_thing_x"})
            assert missing.is_error and "no definition named" in text_of(missing)
            rmap = structured(await client.call_tool("repo_map", {"budget": 300}))
            assert 0 < rmap["tokens"] <= 300 and "json/" in rmap["text"]
            sctx = structured(
                await client.call_tool(
                    "get_context", {"query": QUERY, "budget": 2000, "structure": "signatures"}
                )
            )
            assert sctx["tokens_used"] <= 2000 and "structure" in sctx

            # index_status
            status = structured(await client.call_tool("index_status", {}))
            assert status["chunks"] > 20 and status["files"] >= 5
            assert "cache" in status and status["generation"] == answer["generation"]
            assert status["stale_files"] is None  # no directory walk unless asked

            # record_feedback with ids from an earlier answer
            fb = structured(
                await client.call_tool(
                    "record_feedback",
                    {
                        "query_id": ctx["query_id"],
                        "chunk_id": ctx["parts"][0]["chunk_id"],
                        "rating": "helpful",
                        "comment": "the decoder entry point",
                    },
                )
            )
            assert fb["query_id"] == ctx["query_id"] and fb["rating"] == "helpful"

            # concurrent calls on one session: each its own answer
            answers: list[dict[str, Any]] = []

            async def ask(q: str) -> None:
                answers.append(structured(await client.call_tool("get_context", {"query": q})))

            asks = [f"{QUERY} {word}" for word in ("scanner", "errors", "floats", "strict")]
            async with anyio.create_task_group() as tg:
                for q in asks:
                    tg.start_soon(ask, q)
            assert sorted(a["query"] for a in answers) == sorted(asks)
            assert len({a["query_id"] for a in answers}) == len(asks)

            # bad input: isError with one line, and the server still answers afterwards
            bad_calls: list[tuple[str, dict[str, Any], str]] = [
                ("search_code", {"query": ""}, "query"),
                ("search_code", {"query": QUERY, "top_k": 101}, "top_k"),
                ("get_context", {"query": QUERY, "budget": 0}, "budget"),
                ("get_context", {"query": "x" * 65_537}, "query"),
                ("search_code", {"query": QUERY, "strategy": "no-such-strategy"}, "strategy"),
                (
                    "record_feedback",
                    {"query_id": "q", "chunk_id": "c", "rating": "great"},
                    "rating",
                ),
                ("search_code", {}, "query"),
                # an argument the tool does not take (a typo) was ignored without a word
                ("search_code", {"query": QUERY, "topk": 3}, "topk"),
                ("get_context", {"query": QUERY, "budjet": 500}, "budjet"),
                ("get_context", {"query": QUERY, "counter": "gpt2"}, "counter"),
            ]
            for tool, args, word in bad_calls:
                bad = await client.call_tool(tool, args)
                assert bad.is_error, (tool, args)
                message = text_of(bad)
                assert message and "\n" not in message, message
                assert word in message, message
                assert "Traceback" not in message
            again = structured(await client.call_tool("search_code", {"query": QUERY}))
            assert again["hits"][0]["id"] == top["id"]

            # reindex: a new file is picked up, with progress notifications on the way
            (repo / "widgets.py").write_text(
                f"def {NEW_FILE_SYMBOL}(registry):\n"
                '    """Frobnicate every widget in the registry, in order."""\n'
                "    return [w.frobnicate() for w in registry]\n"
            )
            fresh = structured(await client.call_tool("index_status", {"freshness": True}))
            assert fresh["stale_files"] == 1 and fresh["stale"]["added"] == ["widgets.py"]
            progress: list[tuple[float, float | None, str | None]] = []
            running = anyio.Event()

            async def on_progress(value: float, total: float | None, message: str | None) -> None:
                progress.append((value, total, message))
                running.set()

            # two reindex calls at once: one job, the second call follows it. The second is
            # sent once the first job reports progress (it is running then), not after a fixed
            # sleep: on an idle machine the job of one new file can end within 50 ms.
            jobs: list[dict[str, Any]] = []

            async def reindex(callback: Any) -> None:
                got = await client.call_tool("reindex", {}, progress_callback=callback)
                jobs.append(structured(got))

            async def follow() -> None:
                await running.wait()
                await reindex(None)

            async with anyio.create_task_group() as tg:
                tg.start_soon(reindex, on_progress)
                tg.start_soon(follow)
            job = jobs[0] if not jobs[0]["joined_running"] else jobs[1]
            assert {j["id"] for j in jobs} == {job["id"]}, jobs
            assert sorted(j["joined_running"] for j in jobs) == [False, True], jobs
            assert job["state"] == "succeeded", job
            assert len(progress) >= 2, progress
            values = [p[0] for p in progress]
            assert values == sorted(values) and len(set(values)) == len(values), progress
            assert all(p[2] for p in progress)
            assert job["stats"]["files_changed"] == 1, job
            fresh = structured(await client.call_tool("index_status", {"freshness": True}))
            assert fresh["stale_files"] == 0
            after = structured(
                await client.call_tool("search_code", {"query": NEW_FILE_SYMBOL, "top_k": 3})
            )
            assert after["generation"] > answer["generation"]
            assert after["hits"][0]["path"] == "widgets.py"

            # live reload: an edit of the repository's ragloom.toml reaches the running server
            (repo / "ragloom.toml").write_text("[ranking]\ntop_k = 2\n", encoding="utf-8")
            deadline = time.monotonic() + 20.0
            while True:
                live = structured(await client.call_tool("search_code", {"query": QUERY}))
                if len(live["hits"]) == 2 or time.monotonic() > deadline:
                    break
                await anyio.sleep(0.3)
            assert len(live["hits"]) == 2, "ragloom.toml's ranking.top_k was not applied live"
            # ... and on request: the reload_config tool
            (repo / "ragloom.toml").write_text("[ranking]\ntop_k = 3\n", encoding="utf-8")
            reloaded = structured(await client.call_tool("reload_config", {}))
            assert reloaded["sources"]["ranking.top_k"] == "ragloom.toml"
            live = structured(await client.call_tool("search_code", {"query": QUERY}))
            assert len(live["hits"]) == 3
            (repo / "ragloom.toml").write_text("[ranking]\ntop_k = -1\n", encoding="utf-8")
            refused = await client.call_tool("reload_config", {})
            assert refused.is_error and "ranking.top_k" in text_of(refused)

    try:
        run(body)
    finally:
        (repo / "widgets.py").unlink(missing_ok=True)
        (repo / "ragloom.toml").unlink(missing_ok=True)
    assert stream_faults == []


def test_streamable_http_with_token(repo: Path) -> None:
    """``--transport http --port 0``: the URL on stderr, the bearer token of the HTTP API
    required when set, limits from ``RAGLOOM_SERVER__*`` in the schemas, every tool
    answering, SIGTERM a clean exit."""
    errlog_path = repo.parent / "mcp-http-stderr.log"
    env = {
        **os.environ,
        **_env(),
        "RAGLOOM_API_TOKEN": TOKEN,
        # limits from the settings reach the published schemas
        "RAGLOOM_SERVER__MAX_TOP_K": "50",
        "RAGLOOM_SERVER__MAX_QUERY_CHARS": "300",
    }
    with (
        errlog_path.open("w") as errlog,
        subprocess.Popen(
            serve_argv(repo, "--transport", "http", "--port", "0"),
            stdout=subprocess.DEVNULL,
            stderr=errlog,
            env=env,
        ) as proc,
    ):
        try:
            deadline = time.monotonic() + 60
            while not (
                m := re.search(r"at (http://127\.0\.0\.1:\d+/mcp)", errlog_path.read_text())
            ):
                assert proc.poll() is None, errlog_path.read_text()
                assert time.monotonic() < deadline, "HTTP MCP server did not start"
                time.sleep(0.1)
            url = m.group(1)
            assert "(bearer token required)" in errlog_path.read_text()
            refused = httpx.post(url, json=RAW_INITIALIZE, timeout=10)
            assert refused.status_code == 401
            wrong = httpx.post(
                url, json=RAW_INITIALIZE, headers={"Authorization": "Bearer nope"}, timeout=10
            )
            assert wrong.status_code == 401
            run(lambda: _http_session(url))
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=20) == 0, errlog_path.read_text()
        finally:
            if proc.poll() is None:
                proc.kill()


RAW_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}


async def _http_session(url: str) -> None:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as http,
        Client(streamable_http_client(url, http_client=http), read_timeout_seconds=60) as client,
    ):
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == TOOLS
        props = tools["get_context"].input_schema["properties"]
        assert props["top_k"]["anyOf"][0]["maximum"] == 50
        assert props["query"]["maxLength"] == 300
        over = await client.call_tool("search_code", {"query": QUERY, "top_k": 51})
        assert over.is_error and "top_k" in text_of(over) and "50" in text_of(over)
        ctx = structured(await client.call_tool("get_context", {"query": QUERY}))
        assert "json/" in ctx["context"] and ctx["parts"]
        progress: list[float] = []

        async def on_progress(value: float, total: float | None, msg: str | None) -> None:
            progress.append(value)

        job = structured(await client.call_tool("reindex", {}, progress_callback=on_progress))
        assert job["state"] == "succeeded" and progress
        bad = await client.call_tool("get_context", {"query": QUERY, "top_k": 0})
        assert bad.is_error and "top_k" in text_of(bad)
        status = structured(await client.call_tool("index_status", {}))
        assert status["chunks"] > 20


INIT = {
    "protocolVersion": "2025-03-26",
    "capabilities": {},
    "clientInfo": {"name": "t", "version": "1"},
}


def _raw_stdio(repo: Path) -> subprocess.Popen[bytes]:
    """The stdio server with pipes of its own, driven line by line (no SDK client)."""
    return subprocess.Popen(
        serve_argv(repo, "--no-watch"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **_env()},
    )


def _exchange(proc: subprocess.Popen[bytes], line: str) -> dict[str, Any]:
    """Send one line, read the one line that answers it (30 s at most)."""
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(line.encode() + b"\n")
    proc.stdin.flush()
    ready, _, _ = select.select([proc.stdout], [], [], 30)
    assert ready, f"no answer to {line!r}"
    answer: dict[str, Any] = json.loads(proc.stdout.readline())
    return answer


def _initialize(proc: subprocess.Popen[bytes]) -> None:
    req = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}
    first = _exchange(proc, json.dumps(req))
    assert first["id"] == 1 and "result" in first


def test_a_line_that_is_not_a_message_gets_a_json_rpc_error(repo: Path) -> None:
    """Over stdio, a line that is not JSON gets -32700 and one that is JSON but no JSON-RPC
    message -32600, each with ``id`` null, and the session goes on (the SDK's transport only
    logged them, so the client waited for ever)."""
    proc = _raw_stdio(repo)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        _initialize(proc)
        proc.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        assert _exchange(proc, "{this is not json") == {
            "jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}
        }  # fmt: skip
        assert _exchange(proc, '{"neither": "a request"}')["error"]["code"] == -32600
        tools = _exchange(proc, json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
        assert tools["id"] == 2 and {t["name"] for t in tools["result"]["tools"]} == TOOLS
    finally:
        proc.stdin.close()
        code = proc.wait(timeout=30)
        proc.stdout.close()
        if proc.stderr is not None:
            proc.stderr.close()
    assert code == 0


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_the_stdio_server_while_its_input_is_open(repo: Path, sig: int) -> None:
    """Ctrl-C or SIGTERM end the stdio server at once, its query log flushed, even while
    the client keeps its input open (both hung: the SDK's reader thread waits on stdin, and
    asyncio waited for it)."""
    proc = _raw_stdio(repo)
    _initialize(proc)
    proc.send_signal(sig)
    try:
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        _, err = proc.communicate()
    assert code == 0 and b"Traceback" not in err, (code, err.decode(errors="replace")[-2000:])
