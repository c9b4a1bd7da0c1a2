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
"""

import hmac
import json
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal, get_args

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ragloom.api import Index
from ragloom.assemble.budget import Format
from ragloom.errors import RagError
from ragloom.server.engine import ServingEngine
from ragloom.server.feedback import MAX_COMMENT_CHARS, RATING_VALUES

__all__ = ["DEFAULT_MCP_PORT", "BearerGate", "build_server", "run_mcp"]

log = logging.getLogger(__name__)

DEFAULT_MCP_PORT = 8766
"""Streamable-HTTP port when none is given (the HTTP API's default is 8765)."""
_POLL_S = 0.1
"""How often ``reindex`` looks at its job to forward progress."""
_MAX_STRATEGY_CHARS = 200

Rating = Literal["helpful", "not_helpful", "partially_helpful"]
if set(get_args(Rating)) != set(RATING_VALUES):  # the schema's enum is the store's
    raise ImportError(f"MCP ratings {get_args(Rating)} differ from the feedback store's")

INSTRUCTIONS = """\
ragloom answers questions about one code repository from a warm hybrid (BM25 + dense) index.
Use get_context when you want to read the relevant code: it returns ready-to-read source
excerpts that fit a token budget. Use search_code when you only need to know where things
are (paths, line ranges, symbols) or want to choose files yourself. Each answer carries a
query_id; after using an answer, call record_feedback with that query_id and the chunk ids
you found helpful or not. Call index_status to see whether the index is stale, and reindex
after the repository's files changed (incremental, usually seconds)."""


# --- structured outputs: the published outputSchema of each tool ------------------------


class _Open(BaseModel):
    """Extra keys the engine adds later flow through unchanged (only adding is allowed)."""

    model_config = ConfigDict(extra="allow")


# The hits and parts are published as plain objects with their keys in the description:
# clients validate every result against the output schema (the SDK's client does, with
# jsonschema), and typed properties on each of 10 to 20 items cost ~5 ms per call there,
# more than the answer itself on a cache hit.


class SearchOutput(_Open):
    query_id: str = Field(description="Id of this answer, for record_feedback.")
    generation: int = Field(description="Index generation the answer was read from.")
    latency_ms: float
    cache_hit: bool
    strategy: str
    hits: list[dict[str, Any]] = Field(
        description=(
            "Best first. Each: id (chunk id, for record_feedback), path (relative to the "
            "repository root), start_line, end_line (1-based, inclusive), kind (function, "
            "class, method, module, doc, ...), symbol, part, language, score (fused, higher "
            "is better), ranks (rank per retriever), generation."
        )
    )
    notes: list[str] = Field(default_factory=list, description="Warnings about this answer.")
    sources: list[dict[str, Any]] | None = Field(
        default=None,
        description=(
            "With sources in the call: each source's status (source, count, latency_ms, "
            "status ok | timeout | error | disabled). Hits of other sources carry source, "
            "title, date, url, attribution and paths instead of path and lines."
        ),
    )


class ContextOutput(_Open):
    query_id: str = Field(description="Id of this answer, for record_feedback.")
    generation: int = Field(description="Index generation the answer was read from.")
    latency_ms: float
    cache_hit: bool
    format: str
    context: str = Field(description="The rendered context text (also the first content block).")
    tokens_used: int = Field(description="Tokens the context uses (by the configured counter).")
    budget: int | None = Field(default=None, description="Token budget the context had to fit.")
    parts: list[dict[str, Any]] = Field(
        description=(
            "Parts in the order shown, without their text. Each: chunk_id (for "
            "record_feedback), path, start_line, end_line, ranges ([start, end] pairs shown), "
            "kind, symbol, symbols, language, score, tokens, trimmed, hit_ids."
        )
    )
    stats: dict[str, Any] = Field(
        default_factory=dict,
        description="Assembly statistics: tokens, budget, files, duplicates dropped, timings.",
    )
    sources: list[dict[str, Any]] | None = Field(
        default=None, description="With sources in the call: each source's status."
    )


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


class _Failure(ToolError):
    """A failure this module reports itself (a reindex job that failed, ...)."""


def _search_text(result: Mapping[str, Any]) -> str:
    """A compact ranked list an agent can read without parsing JSON."""
    hits = result.get("hits", [])
    head = (
        f"query_id={result.get('query_id')} generation={result.get('generation')} "
        f"hits={len(hits)} strategy={result.get('strategy')}"
    )
    lines = [head]
    for i, h in enumerate(hits, 1):
        if "path" not in h:  # an item of another source: a doc section, commit, issue, PR
            where = h.get("url") or ", ".join(h.get("paths", [])[:5])
            lines.append(
                f"{i}. [{h.get('source')}] {h.get('title', '')} {where} "
                f"score={h['score']:.4f} id={h['id']}".replace("  ", " ")
            )
            continue
        label = h.get("part") or h.get("symbol") or ""
        lines.append(
            f"{i}. {h['path']}:{h['start_line']}-{h['end_line']} {h.get('kind', '')} "
            f"{label} score={h['score']:.4f} id={h['id']}".replace("  ", " ")
        )
    for st in result.get("sources") or []:
        lines.append(
            f"source {st.get('source')}: {st.get('status')}, {st.get('count')} hits, "
            f"{float(st.get('latency_ms', 0.0)):.0f} ms"
        )
    for note in result.get("notes", []):
        lines.append(f"note: {note}")
    if not hits:
        lines.append("no results")
    return "\n".join(lines)


def _context_output(result: Mapping[str, Any]) -> dict[str, Any]:
    """The engine's context answer plus ``tokens_used``, with the parts' text dropped (it is
    already in ``context``: sending it twice would double what an agent reads)."""
    stats = result.get("stats") or {}
    out = dict(result)
    out["tokens_used"] = int(stats.get("tokens_total", 0))
    if out.get("budget") is None:
        out["budget"] = (stats.get("budget") or {}).get("total")
    out["parts"] = [{k: v for k, v in p.items() if k != "text"} for p in result.get("parts", [])]
    return out


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
            Format | None,
            Field(
                description=(
                    "How the context is rendered: xml (default; <chunk path=... lines=...> elements), "
                    "markdown (fenced code), plain (==> path:lines <== headers) or json."
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

    symbol_doc = (
        "The symbol: a name (send), a qualified name (Client.send), a chunk id from "
        "search_code, or path:line (the innermost definition there)."
    )
    graph_tools = {
        "find_definitions": (
            "defs",
            "Find definitions",
            "Where a symbol is defined: path, lines, kind and chunk id of every definition "
            "the name matches (a bare name matches methods and functions of that name).",
        ),
        "find_references": (
            "refs",
            "Find references",
            "Every reference to a symbol across the repository (calls, uses as a value, "
            "imports, inheritance, type uses): path, line, the definition it sits in and "
            "the confidence of its resolution (1.0 scope or import, 0.9 through self or a "
            "class, lower by name alone). Use it before changing a signature.",
        ),
        "find_callers": (
            "callers",
            "Find callers",
            "The functions and methods that call a symbol (or pass it as a value), most "
            "certain first.",
        ),
        "find_callees": (
            "callees",
            "Find callees",
            "The functions and methods a symbol calls (or uses as a value), most certain first.",
        ),
    }

    def _graph_tool(tool: str, query: str, title: str, description: str) -> None:
        def run(
            symbol: Annotated[str, Field(min_length=1, max_length=2000, description=symbol_doc)],
            path: Annotated[
                str | None, Field(max_length=4000, description="Only definitions in this file.")
            ] = None,
            min_confidence: Annotated[
                float | None,
                Field(ge=0.0, le=1.0, description="Leave out less certain references [0.5]."),
            ] = None,
            limit: Annotated[int, Field(ge=1, le=10_000, description="Most rows.")] = 200,
        ) -> CallToolResult:
            from ragloom.graph.views import graph_text

            result = engine.graph(
                query, symbol, path=path, min_confidence=min_confidence, limit=limit
            )
            return CallToolResult(
                content=[TextContent(type="text", text=graph_text(result, query))],  # type: ignore[arg-type]
                structured_content=result,
            )

        server.tool(
            name=tool,
            title=title,
            description=description,
            annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
        )(run)

    for tool_name, (graph_query, tool_title, tool_doc) in graph_tools.items():
        _graph_tool(tool_name, graph_query, tool_title, tool_doc)

    @server.tool(
        name="repo_map",
        title="Repository map",
        description=(
            "An overview of the repository: files with the signatures of their most relevant "
            "functions, classes and methods, ranked by PageRank over the code graph "
            "(personalised to a question when you give one), filling a token budget exactly. "
            "Use it first on an unfamiliar repository, then get_context for the code."
        ),
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )
    def repo_map(
        query: Annotated[
            str | None,
            Field(
                min_length=1,
                max_length=max_chars,
                description="Rank for this question; omit for the whole repository.",
            ),
        ] = None,
        budget: Annotated[
            int | None,
            Field(
                ge=1,
                le=max_budget,
                description="Token budget of the map; omit for a quarter of the context budget.",
            ),
        ] = None,
    ) -> CallToolResult:
        result = engine.repo_map(query, budget=budget)
        return CallToolResult(
            content=[TextContent(type="text", text=str(result.get("text", "")))],
            structured_content=result,
        )

    @server.tool(
        name="index_status",
        title="Index status",
        description=(
            "Report the index: files and chunks (by kind and language), embedding model, BM25 "
            "and vector readiness, index generation, query-cache and embedding-cache hit "
            "rates, and the number of running reindex jobs. With freshness=true it also walks "
            "the repository and lists the files changed, added or removed since they were "
            "indexed (stale_files, stale): if there are any, call reindex. Cheap without "
            "freshness; with it, a directory walk (a second or so on a large repository)."
        ),
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )
    def index_status(
        freshness: Annotated[
            bool,
            Field(
                description=("Also compare the files on disk with the index (stale_files, stale).")
            ),
        ] = False,
    ) -> dict[str, Any]:
        out = engine.status()
        if freshness:
            idx = Index(engine.root, engine.index_dir)
            try:
                stale = idx.stale_files()
            finally:
                idx.close()
            out["stale"] = stale
            out["stale_files"] = sum(len(v) for v in stale.values())
        return out

    @server.tool(
        name="reindex",
        title="Refresh the index",
        description=(
            "Bring the index up to date with the files on disk, incrementally (only changed "
            "files are re-chunked and re-embedded). Sends MCP progress notifications while it "
            "runs (pass a progressToken to receive them) and returns the finished job: state, "
            "stats (files/chunks added, changed, removed; timings) and the new generation. "
            "Queries keep answering from the previous generation until it finishes. If a "
            "reindex is already running, this call follows that job instead of starting "
            "another (joined_running=true). Use it after editing files, or when index_status "
            "(freshness=true) reports stale files; a run with nothing to do takes about a second."
        ),
        annotations=ToolAnnotations(
            read_only_hint=False,
            destructive_hint=False,
            idempotent_hint=True,
            open_world_hint=False,
        ),
    )
    async def reindex(ctx: Context[Any, Any]) -> dict[str, Any]:
        job_id, joined = await anyio.to_thread.run_sync(jobs.start)
        out = await _follow_job(engine, job_id, ctx.report_progress)
        out["joined_running"] = joined
        return out

    @server.tool(
        name="record_feedback",
        title="Record relevance feedback",
        description=(
            "Tell ragloom whether a chunk of an earlier answer helped: query_id from a "
            "search_code or get_context answer, chunk_id from one of its hits (id) or context "
            "parts (chunk_id), rating helpful | not_helpful | partially_helpful, and an optional "
            "comment. Stored beside the index (per-query statistics: `ragloom feedback stats`); "
            "returns the stored record. An unknown query_id is an error. "
            "Call it once per chunk you judged."
        ),
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=False, open_world_hint=False
        ),
    )
    def record_feedback(
        query_id: Annotated[
            str,
            Field(
                min_length=1,
                max_length=200,
                description="query_id of the search_code or get_context answer.",
            ),
        ],
        chunk_id: Annotated[
            str,
            Field(
                min_length=1,
                max_length=1000,
                description="Chunk id: a search_code hit's id or a get_context part's chunk_id.",
            ),
        ],
        rating: Annotated[Rating, Field(description="How useful the chunk was.")],
        comment: Annotated[
            str | None,
            Field(max_length=MAX_COMMENT_CHARS, description="Optional free text: why."),
        ] = None,
    ) -> dict[str, Any]:
        return engine.record_feedback(query_id, chunk_id, rating, comment)

    @server.tool(
        name="reload_config",
        title="Reload the configuration",
        description=(
            "Re-read the repository's ragloom.toml / [tool.ragloom] and the RAGLOOM_* "
            "environment and apply them without a restart: ranking (strategy, top_k), "
            "assembly (budget, format, counter) and cache settings take effect for the next "
            "call. Server settings (limits, token) keep their running values. Returns the keys "
            "that changed, every effective value (secrets masked) and its source. A bad "
            "configuration is an error naming the key, and nothing changes. Only needed after "
            "editing the configuration when the server was started with server.reload = false "
            "(otherwise edits are picked up within about a second)."
        ),
        annotations=ToolAnnotations(
            read_only_hint=False,
            destructive_hint=False,
            idempotent_hint=True,
            open_world_hint=False,
        ),
    )
    def reload_config() -> dict[str, Any]:
        return engine.reload_settings()

    return server


class _JobStarts:
    """Starts re-index jobs and tells whether a call started its job or joined a running one.

    The engine hands every caller the running job's id; a job this server already handed out
    (a concurrent ``reindex`` call) or one created before the call (by another client of the
    engine) was joined. Starts are serialised so two concurrent calls cannot both claim one.
    """

    def __init__(self, engine: ServingEngine) -> None:
        self._engine = engine
        self._lock = threading.Lock()
        self._seen: set[str] = set()

    def start(self) -> tuple[str, bool]:
        with self._lock:
            before = time.time()
            job_id = self._engine.start_reindex()
            job = self._engine.job(job_id) or {}
            created = _epoch(job.get("created_at", job.get("started_at")))
            joined = job_id in self._seen or (created is not None and created < before)
            self._seen.add(job_id)
            return job_id, joined


async def _follow_job(
    engine: ServingEngine,
    job_id: str,
    report: Callable[[float, float | None, str | None], Any],
) -> dict[str, Any]:
    """Poll the engine's job until it ends, forwarding its progress.

    MCP progress must increase with every notification, but a job's ``done`` restarts at 0 in
    each phase, so the reported value is the work finished in earlier phases plus ``done``;
    the total grows as phases appear. A first notification is sent at once and a last one at
    the end, so even an instant refresh reports progress.
    """
    sent = -1.0
    earlier = 0.0
    phase: str | None = None
    phase_total = 0.0
    await report(0.0, None, f"reindex job {job_id} started")
    sent = 0.0
    while True:
        job = engine.job(job_id)
        if job is None:
            raise _Failure(f"reindex job {job_id} disappeared")
        progress = job.get("progress") or {}
        name = progress.get("phase")
        done = float(progress.get("done") or 0)
        total = float(progress.get("total") or 0)
        if name != phase:
            if phase is not None:
                earlier += phase_total
            phase = name
        phase_total = max(total, done)
        value = earlier + done
        if value > sent:
            whole = earlier + phase_total if phase_total else None
            await report(value, whole, f"{name}: {int(done)}/{int(total)}")
            sent = value
        state = job.get("state")
        if state in ("succeeded", "failed"):
            break
        await anyio.sleep(_POLL_S)
    await report(sent + 1, sent + 1, f"reindex {state}")
    if state == "failed":
        raise _Failure(f"reindex failed: {job.get('error') or 'unknown error'}")
    return dict(job)


def _epoch(value: Any) -> float | None:
    """``started_at`` as seconds since the epoch (the engine gives a number or ISO text)."""
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        from datetime import datetime

        try:
            return datetime.fromisoformat(value).timestamp()
        except ValueError:
            return None
    return None


def _version() -> str:
    from ragloom._version import __version__

    return str(__version__)


def run_mcp(
    engine: ServingEngine,
    *,
    transport: Literal["stdio", "http"] = "stdio",
    host: str = "127.0.0.1",
    port: int = DEFAULT_MCP_PORT,
) -> None:
    """Serve ``engine`` over MCP until the client disconnects (stdio: end of input), or
    SIGINT / SIGTERM; then return, so the caller closes the engine (its query log is flushed
    there). Logs go to stderr; on stdio, stdout carries only the protocol.

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
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler) if main else None
    try:
        if transport == "stdio":
            server.run("stdio")
        else:
            _serve_http(server, engine, host, port)
    except KeyboardInterrupt:
        log.info("MCP server stopped by a signal")
    finally:
        if main:
            signal.signal(signal.SIGTERM, previous)


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
