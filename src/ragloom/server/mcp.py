"""``ragloom serve mcp``: the warm index as an MCP server (official ``mcp`` SDK, 2.x).

Agents plug tools in over the Model Context Protocol; this module gives them six tools over
one :class:`~ragloom.server.engine.ServingEngine` that stays open (index, BM25 engine and
embedding model loaded once) for the life of the process:

``search_code``     ranked chunks (path, lines, symbol, score, chunk id) for a query
``get_context``     the assembled, deduplicated, token-budgeted context for a query
``index_status``    counts, freshness, generation, cache hit rates, running jobs
``reindex``         incremental refresh; MCP progress notifications while it runs
``record_feedback`` rate a chunk of an earlier answer (by its ``query_id``)
``reload_config``   re-read ragloom.toml and apply ranking/assembly/cache settings live

The input limits (query length, ``top_k``, ``budget``) come from ``settings.server`` and are
published in each tool's JSON schema, so a client sees them before it calls. Every ragloom
error, and every argument the schema rejects, comes back as a tool result with ``isError``
and one line of text; the server keeps answering.

Transports: stdio (the default; stdout is the protocol channel, so nothing else may write
there: the SDK points fd 1 at stderr while it serves and logs go to stderr) and streamable
HTTP (``/mcp`` on 127.0.0.1 unless told otherwise).

The tools' output schemas and text formatters are in ``ragloom.server.mcp_schemas``, the
code-graph and map tools in ``ragloom.server.mcp_graph``, the status, reindex, feedback and
reload tools in ``ragloom.server.mcp_admin``.
"""

import asyncio
import hmac
import json
import logging
import signal
import sys
import threading
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import ConfigDict, Field, ValidationError

from ragloom.assemble.budget import Format
from ragloom.errors import RagError
from ragloom.server.engine import ServingEngine
from ragloom.server.mcp_admin import _POLL_S as _POLL_S
from ragloom.server.mcp_admin import _epoch as _epoch
from ragloom.server.mcp_admin import _Failure, _JobStarts, add_admin_tools
from ragloom.server.mcp_admin import _follow_job as _follow_job
from ragloom.server.mcp_graph import add_graph_tools
from ragloom.server.mcp_schemas import ContextOutput, SearchOutput, _context_output, _search_text
from ragloom.server.mcp_schemas import Rating as Rating
from ragloom.server.mcp_schemas import _Open as _Open

__all__ = ["DEFAULT_MCP_PORT", "BearerGate", "build_server", "run_mcp"]

log = logging.getLogger(__name__)

DEFAULT_MCP_PORT = 8766
"""Streamable-HTTP port when none is given (the HTTP API's default is 8765)."""
_MAX_STRATEGY_CHARS = 200

INSTRUCTIONS = """\
ragloom answers questions about one code repository from a warm hybrid (BM25 + dense) index.
Use get_context when you want to read the relevant code: it returns ready-to-read source
excerpts that fit a token budget. Use search_code when you only need to know where things
are (paths, line ranges, symbols) or want to choose files yourself. Each answer carries a
query_id; after using an answer, call record_feedback with that query_id and the chunk ids
you found helpful or not. Call index_status to see whether the index is stale, and reindex
after the repository's files changed (incremental, usually seconds)."""


# --- the server ------------------------------------------------------------------------------


class _RagloomMCP(MCPServer[Any]):
    """MCPServer whose tool errors are the one-line ragloom message.

    The SDK reports a tool's failure as ``Error executing tool NAME: ...`` and hides the text
    of any exception it did not expect (a :class:`~ragloom.errors.RagError` among them), and
    a schema violation as pydantic's multi-line report. An agent acts on one clear line, so
    the cause is looked up and re-raised as a :class:`ToolError` carrying just that line.
    """

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            message = _one_line_cause(name, exc)
            if message is None:
                raise
            raise ToolError(message) from exc


def _one_line_cause(tool: str, exc: ToolError) -> str | None:
    """The message to show for a failed call, or None to keep the SDK's.

    A crash (:class:`UnexpectedToolError`) shows its cause only when that is a ragloom error;
    a pydantic error under a crash is a result that failed the output schema, not the
    caller's arguments, and stays hidden (logged with its traceback).
    """
    crash = isinstance(exc, UnexpectedToolError)
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, RagError):
            return " ".join(str(seen).split())
        if isinstance(seen, ValidationError) and not crash:
            return f"{tool}: invalid arguments: " + _validation_line(seen)
        if isinstance(seen, _Failure):
            return str(seen)
        seen = seen.__cause__
    return None


def _validation_line(err: ValidationError) -> str:
    """``top_k: Input should be less than or equal to 100; query: Field required``."""
    items = []
    for e in err.errors(include_url=False):
        loc = ".".join(str(p) for p in e["loc"]) or "arguments"
        items.append(f"{loc}: {e['msg']}")
    return "; ".join(items)


def build_server(engine: ServingEngine) -> MCPServer[Any]:
    """An MCP server whose six tools answer from ``engine`` (which the caller keeps open).

    The schemas' limits are read from ``engine.settings.server`` here, once: the SDK validates
    every call against them before the engine sees it (the engine keeps its own hard bounds).
    """
    limits = engine.settings.server
    max_chars = int(limits.max_query_chars)
    max_top_k = int(limits.max_top_k)
    max_budget = int(limits.max_budget)

    jobs = _JobStarts(engine)
    server = _RagloomMCP(
        "ragloom",
        title="ragloom code retrieval",
        instructions=INSTRUCTIONS,
        version=_version(),
        log_level="WARNING",
    )

    # The limits are runtime values, so each parameter's Annotated[...] is written inline (a
    # module-level alias could not carry them, and this module does not use postponed
    # annotations: the SDK evaluates the signatures to build the schemas).
    query_doc = (
        "What you are looking for, in words or identifiers: a question "
        "('where are retries configured'), a symbol name, an error message. "
        f"1..{max_chars} characters."
    )
    top_k_doc = f"How many chunks to consider, 1..{max_top_k}; omit for the server default."
    sources_doc = (
        "Also ask other sources the index synced (ragloom index --sources) and fuse them: "
        "code, docs (documentation sections), commits (git history), issues, prs. Use it "
        "when the question is about why or when something changed, or what the docs or an "
        "issue say. Omit for the code index alone (the fast, cached path)."
    )
    strategy_doc = (
        "Retrieval strategy: hybrid (default: BM25 + dense, fused), hybrid-mmr "
        "(more diverse), sparse (BM25 only: exact identifiers), dense (embeddings "
        "only: paraphrases). Omit unless you have a reason."
    )

    @server.tool(
        name="search_code",
        title="Search code",
        description=(
            "Find where something is in the repository. Returns ranked chunks, best first: "
            "path, start_line-end_line, kind, symbol, score and the chunk id, plus a query_id "
            "for record_feedback. No source text is returned: use get_context to read code, "
            "or this tool when you only need locations (to open files yourself, to list "
            "candidates, to check whether a symbol exists). Fast (tens of milliseconds on a "
            f"warm index). Limits: query <= {max_chars} characters, top_k <= {max_top_k}."
        ),
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )
    def search_code(
        query: Annotated[str, Field(min_length=1, max_length=max_chars, description=query_doc)],
        top_k: Annotated[int | None, Field(ge=1, le=max_top_k, description=top_k_doc)] = None,
        strategy: Annotated[
            str | None,
            Field(min_length=1, max_length=_MAX_STRATEGY_CHARS, description=strategy_doc),
        ] = None,
        sources: Annotated[
            list[Annotated[str, Field(min_length=1, max_length=64)]] | None,
            Field(min_length=1, max_length=16, description=sources_doc),
        ] = None,
    ) -> Annotated[CallToolResult, SearchOutput]:
        result = engine.search(query, top_k=top_k, strategy=strategy, sources=sources)
        return CallToolResult(
            content=[TextContent(type="text", text=_search_text(result))],
            structured_content=result,
        )

    @server.tool(
        name="get_context",
        title="Get code context",
        description=(
            "Read the code relevant to a question. Searches, then assembles the best chunks "
            "into one deduplicated context of whole functions/classes with file paths and "
            "line numbers, cut to fit a token budget. The first content block is the context "
            "text, ready to read; the second a one-line summary (query_id, generation, tokens "
            "used, parts). Prefer this to search_code when you need to see the code. Limits: "
            f"query <= {max_chars} characters, top_k <= {max_top_k}, budget <= {max_budget} "
            "tokens (default from the server's settings, usually 8000)."
        ),
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )
    def get_context(
        query: Annotated[str, Field(min_length=1, max_length=max_chars, description=query_doc)],
        budget: Annotated[
            int | None,
            Field(
                ge=1,
                le=max_budget,
                description=(
                    f"Token budget for the context, 1..{max_budget}; omit for the server default."
                ),
            ),
        ] = None,
        top_k: Annotated[int | None, Field(ge=1, le=max_top_k, description=top_k_doc)] = None,
        format: Annotated[
            Format | Literal["text"] | None,
            Field(
                description=(
                    "How the context is rendered: xml (default; <chunk path=... lines=...> elements), "
                    "markdown (fenced code), plain (==> path:lines <== headers; text is the same) "
                    "or json."
                )
            ),
        ] = None,
        strategy: Annotated[
            str | None,
            Field(min_length=1, max_length=_MAX_STRATEGY_CHARS, description=strategy_doc),
        ] = None,
        sources: Annotated[
            list[Annotated[str, Field(min_length=1, max_length=64)]] | None,
            Field(min_length=1, max_length=16, description=sources_doc),
        ] = None,
        structure: Annotated[
            Literal["off", "signatures", "bodies"] | None,
            Field(
                description=(
                    "Also show what the selected code calls and what calls it: their "
                    "signatures or whole bodies, within the same budget, each marked with "
                    "relation=callee|caller. Use signatures before changing a function."
                )
            ),
        ] = None,
        counter: Annotated[
            Literal["cl100k", "o200k", "approx"] | None,
            Field(
                description=(
                    "Token counter the budget is counted with: cl100k (GPT-4), o200k (GPT-4o) "
                    "or approx (a fast estimate); omit for the server default."
                )
            ),
        ] = None,
    ) -> Annotated[CallToolResult, ContextOutput]:
        result = _context_output(
            engine.context(
                query,
                top_k=top_k,
                budget=budget,
                strategy=strategy,
                format=format,
                sources=sources,
                structure=structure,
                counter=counter,
            )
        )
        summary = (
            f"query_id={result.get('query_id')} generation={result.get('generation')} "
            f"tokens={result['tokens_used']}/{result['budget']} parts={len(result['parts'])} "
            f"cache_hit={str(result.get('cache_hit')).lower()}"
        )
        return CallToolResult(
            content=[
                TextContent(type="text", text=result.get("context", "")),
                TextContent(type="text", text=summary),
            ],
            structured_content=result,
        )

    add_graph_tools(server, engine, max_chars, max_budget)
    add_admin_tools(server, engine, jobs)
    _refuse_unknown_arguments(server)
    return server


def _refuse_unknown_arguments(server: MCPServer[Any]) -> None:
    """Every tool refuses an argument it does not take, and its published schema says so
    (``additionalProperties: false``). The SDK's argument models ignored one: an agent's
    ``{"query": ..., "topk": 3}`` was answered with the default ``top_k`` and no word, where
    the HTTP API answers 422. (Its reading of a JSON text as the value it holds, ``"5"`` for
    5, stays: some clients send every argument as text.)"""
    for tool in server._tool_manager.list_tools():
        meta = tool.fn_metadata
        base = meta.arg_model
        strict: type[ArgModelBase] = type(
            base.__name__,
            (base,),
            {"model_config": ConfigDict(**{**base.model_config, "extra": "forbid"})},
        )
        meta.arg_model = strict
        tool.parameters = strict.model_json_schema(by_alias=True)


def _version() -> str:
    from ragloom._version import __version__

    return str(__version__)


def run_mcp(
    engine: ServingEngine,
    *,
    transport: Literal["stdio", "http"] = "stdio",
    host: str = "127.0.0.1",
    port: int = DEFAULT_MCP_PORT,
) -> bool:
    """Serve ``engine`` over MCP until the client disconnects (stdio: end of input), or
    SIGINT / SIGTERM; then return, so the caller closes the engine (its query log is flushed
    there). Logs go to stderr; on stdio, stdout carries only the protocol. Returns True when
    a signal stopped it: on stdio a thread may still be blocked reading the client's input,
    and the process then ends only when that input closes, unless the caller exits at once.

    HTTP: streamable HTTP at ``http://HOST:PORT/mcp`` (port 0 picks a free one); the URL is
    printed on stderr. When a bearer token is configured (``settings.server.api_token`` or
    ``RAGLOOM_API_TOKEN``, as for ``ragloom serve http``) every request must carry it.
    """
    from ragloom.logs import configure_logging

    configure_logging()
    server = build_server(engine)
    if transport not in ("stdio", "http"):
        raise ValueError(f"unknown MCP transport {transport!r} (stdio | http)")
    # SIGTERM (what MCP clients send after closing stdin, and what service managers send)
    # ends the server like Ctrl-C: the event loop unwinds and this function returns.
    main = threading.current_thread() is threading.main_thread()
    # Both raise KeyboardInterrupt where the loop is. With Python's own SIGINT handler in
    # place, asyncio would instead cancel the server's tasks and wait for them, and the task
    # reading stdin waits in a thread that cannot be cancelled: Ctrl-C hung while the
    # client's input stayed open.
    previous = (
        {sig: signal.signal(sig, _interrupt) for sig in (signal.SIGTERM, signal.SIGINT)}
        if main
        else {}
    )
    try:
        if transport == "stdio":
            import anyio

            anyio.run(_run_stdio, server)
        else:
            _serve_http(server, engine, host, port)
    except KeyboardInterrupt:
        log.info("MCP server stopped by a signal")
        return True
    except BaseExceptionGroup as group:  # the signal raised inside one of the server's tasks
        if not _only_interrupts(group):
            raise
        log.info("MCP server stopped by a signal")
        return True
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return False


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _only_interrupts(exc: BaseException | None) -> bool:
    """Whether ``exc`` is the stopping signal: a KeyboardInterrupt, or a group of nothing else."""
    if isinstance(exc, KeyboardInterrupt):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return all(_only_interrupts(e) for e in exc.exceptions)
    return False


def _quiet_interrupts(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The event loop's exception handler: the signal that stops the server, raised inside a
    task, is met again as the loop shuts down ("unhandled exception during asyncio.run()
    shutdown", with a traceback on stderr); it is not an error. Anything else is reported
    as asyncio reports it."""
    if _only_interrupts(context.get("exception")):
        log.debug("MCP: the stopping signal, met again at shutdown: %s", context.get("message"))
        return
    loop.default_exception_handler(context)


async def _run_stdio(server: MCPServer[Any]) -> None:
    """``server.run("stdio")``, except that a line that is not a JSON-RPC message gets the
    error JSON-RPC asks for (-32700 parse error, -32600 invalid request, ``id`` null) instead
    of nothing: the SDK's transport passes it on as an exception, which its session only
    logs, and a client waiting on that line waited for ever."""
    import anyio
    from mcp.server.stdio import stdio_server
    from mcp.shared.message import SessionMessage
    from mcp.types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError
    from pydantic import ValidationError

    asyncio.get_running_loop().set_exception_handler(_quiet_interrupts)
    low = server._lowlevel_server  # what MCPServer.run_stdio_async runs, the same way
    async with stdio_server() as (read, write):
        inbox_send, inbox = anyio.create_memory_object_stream[SessionMessage | Exception](0)

        async def sift() -> None:
            async with inbox_send:
                async for item in read:
                    if not isinstance(item, Exception):
                        await inbox_send.send(item)
                        continue
                    parse = isinstance(item, ValidationError) and any(
                        e.get("type") == "json_invalid" for e in item.errors()
                    )
                    code, text = (
                        (PARSE_ERROR, "Parse error")
                        if parse
                        else (INVALID_REQUEST, "Invalid Request")
                    )
                    log.info("MCP: answered a line that is not a message", extra={"code": code})
                    await write.send(
                        SessionMessage(
                            JSONRPCError(
                                jsonrpc="2.0", id=None, error=ErrorData(code=code, message=text)
                            )
                        )
                    )

        async with anyio.create_task_group() as tg:
            tg.start_soon(sift)
            await low.run(inbox, write, low.create_initialization_options())
            tg.cancel_scope.cancel()


def _serve_http(server: MCPServer[Any], engine: ServingEngine, host: str, port: int) -> None:
    import uvicorn

    from ragloom.server.http import api_token, bind_socket, url_of

    sock = bind_socket(host, port)
    try:
        app: Any = server.streamable_http_app(host=host)
        token = api_token(engine)
        if token is not None:
            app = BearerGate(app, token)
        auth = " (bearer token required)" if token else ""
        print(f"ragloom: MCP over streamable HTTP at {url_of(sock)}/mcp{auth}", file=sys.stderr)
        config = uvicorn.Config(app, log_level="warning", access_log=False)
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()


class BearerGate:
    """ASGI wrapper: HTTP requests without ``Authorization: Bearer <token>`` get 401.

    The same token as the HTTP API's, compared in constant time; lifespan events pass (the
    MCP app starts its session manager there).
    """

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = dict(scope.get("headers") or []).get(b"authorization", b"")
        if hmac.compare_digest(given, self._expected):
            await self.app(scope, receive, send)
            return
        body = json.dumps({"error": "missing or wrong bearer token"}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", b"Bearer"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
