"""The HTTP API (FastAPI) over one warm :class:`~ragloom.server.engine.ServingEngine`.

``create_app(engine)`` builds the application; :func:`bind_socket` and :func:`serve` run it
under uvicorn (``ragloom serve http`` and the tests use both, so what is tested is what runs).

Why it is shaped this way:

- **One warm index, many threads.** Every engine call is synchronous (ONNX, tantivy, SQLite),
  so it runs in the thread pool (plain ``def`` endpoints, or ``run_in_threadpool``) and the
  event loop keeps accepting connections while queries run; the engine is thread-safe. The two
  hot routes (``/search``, ``/context``) hop to a thread once and return the engine's answer
  as JSON as it is: FastAPI would otherwise re-validate the answer against its response model
  in a second thread hop, about half a millisecond per request on a busy machine. The models
  still document the answers in the OpenAPI schema, and schemathesis checks that the answers
  conform to them.
- **Limits come from the settings** (``settings.server``) and are part of the request models,
  so they are in the OpenAPI schema too (a client, or schemathesis, sees ``maxLength`` and
  ``maximum``). Every refusal, whatever its cause, is one JSON shape:
  ``{"error": {"type": ..., "message": ...}}``.
- **Gatekeeping is plain ASGI middleware**, outermost first: request observation (metrics for
  every answer, refusals included), a last-resort handler (an unexpected exception is a
  generic 500 and a logged traceback, never a stack trace on the wire), the bearer token (a
  request without it is refused before its body is read or parsed), and the body size limit
  (the body is read once, counted, and replayed to the application).
- **Typed errors map to statuses** in one table (:data:`ERROR_STATUS`), the HTTP twin of the
  CLI's exit codes.
"""

# No ``from __future__ import annotations`` here: the request models are built per app (their
# limits come from the engine's settings) and FastAPI must resolve endpoint annotations that
# name them, which only works when annotations are evaluated where they are written.

import hmac
import logging
import os
import socket
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal

from fastapi import FastAPI, Path, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, PlainTextResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ragloom._version import __version__
from ragloom.errors import (
    ChannelError,
    ConfigError,
    IncompatibleIndexError,
    IndexLockedError,
    IndexNotFoundError,
    InputError,
    RagError,
    SearchError,
    TimeoutError_,
    UnknownIdError,
)
from ragloom.server.feedback import MAX_COMMENT_CHARS, MAX_USED_CHUNKS

if TYPE_CHECKING:
    from ragloom.server.engine import ServingEngine

__all__ = ["ERROR_STATUS", "TOKEN_ENV", "api_token", "bind_socket", "create_app", "serve"]

log = logging.getLogger("ragloom.server.http")

TOKEN_ENV = "RAGLOOM_API_TOKEN"
"""The environment variable holding the bearer token (``server.api_token`` in the settings
wins when both are set)."""

OPEN_PATHS = frozenset({"/healthz"})
"""Routes answered without the token (a load balancer's probe has no secret)."""

ERROR_STATUS: tuple[tuple[type[RagError], int, str], ...] = (
    (UnknownIdError, 404, "not_found"),
    (InputError, 400, "input_error"),
    (ConfigError, 400, "config_error"),
    (IndexNotFoundError, 404, "index_not_found"),
    (IndexLockedError, 409, "index_locked"),
    (IncompatibleIndexError, 409, "incompatible_index"),
    (TimeoutError_, 504, "timeout"),
    (ChannelError, 503, "unavailable"),
    (SearchError, 503, "search_unavailable"),
)
"""Typed error -> (HTTP status, error type); the first class the error is an instance of
wins (so subclasses come before their parents). Any other :class:`RagError` is a 500 with its
own message; any other exception a 500 with a generic one."""

QUERY_ID_PATTERN = r"^[0-9a-f]{32}$"
"""A query id is a uuid4 in hex (``ServingEngine.search``/``context`` make them)."""


# -- error bodies --------------------------------------------------------------------------------


class ErrorInfo(BaseModel):
    """What went wrong, in one line."""

    type: str = Field(
        description="A stable, machine-readable error kind.", examples=["input_error"]
    )
    message: str = Field(description="One human-readable line.", examples=["query is empty"])
    details: list[dict[str, Any]] | None = Field(
        default=None,
        description="For request validation errors: each failing field (loc, message, type).",
    )


class ErrorResponse(BaseModel):
    """Every 4xx and 5xx answer of this API has this shape."""

    error: ErrorInfo

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "error": {
                        "type": "validation_error",
                        "message": "top_k: Input should be less than or equal to 100",
                    }
                }
            ]
        }
    )


def error_body(kind: str, message: str, details: list[dict[str, Any]] | None = None) -> bytes:
    """The JSON bytes of an :class:`ErrorResponse` (used where no Response class is at hand)."""
    info = ErrorInfo(type=kind, message=message, details=details)
    return ErrorResponse(error=info).model_dump_json(exclude_none=True).encode()


def error_response(
    status: int,
    kind: str,
    message: str,
    *,
    details: list[dict[str, Any]] | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    content: dict[str, Any] = {"type": kind, "message": message}
    if details is not None:
        content["details"] = details
    return JSONResponse({"error": content}, status_code=status, headers=headers)


def classify(exc: RagError) -> tuple[int, str]:
    """HTTP status and error type of a typed ragloom error."""
    for cls, status, kind in ERROR_STATUS:
        if isinstance(exc, cls):
            return status, kind
    return 500, _snake(type(exc).__name__.rstrip("_"))


def _snake(name: str) -> str:
    out = [f"_{ch.lower()}" if ch.isupper() else ch for ch in name]
    return "".join(out).lstrip("_")


# -- response models -----------------------------------------------------------------------------


class _Answer(BaseModel):
    """Fields every search and context answer carries."""

    model_config = ConfigDict(extra="allow")

    query_id: str = Field(
        description="Id of this answer: pass it to POST /feedback and GET /feedback/{query_id}.",
        examples=["3f2b6c1e9a0d4e7f8b1c2d3e4f5a6b7c"],
    )
    latency_ms: float = Field(description="Time the engine took to answer, in milliseconds.")
    cache_hit: bool = Field(description="True when the answer came from the query-result cache.")
    generation: int = Field(
        description="Index generation the whole answer was read from (grows with every update)."
    )
    pending_changes: bool = Field(
        default=False,
        description="True when the server's watcher had seen an edit of the work tree that "
        "this answer's generation does not hold yet (it is being applied; ask again).",
    )
    query: str = Field(description="The query as received.")


class SearchHit(BaseModel):
    """One ranked chunk (the same fields as ``ragloom search --json``)."""

    model_config = ConfigDict(extra="allow")

    id: str = Field(description="Chunk id; pass it to POST /feedback as chunk_id.")
    path: str = Field(description="File path relative to the repository root.")
    start_line: int = Field(description="First line of the chunk (1-based).")
    end_line: int = Field(description="Last line of the chunk (inclusive).")
    kind: str = Field(description="Chunk kind: function, class, method, module, ...")
    symbol: str = Field(description="Qualified symbol name ('' for a file-level chunk).")
    part: str | None = Field(
        default=None, description="'Foo.bar (part 3 of 64)' for a later part of a split symbol."
    )
    language: str
    score: float = Field(description="Fused score (higher is better).")
    ranks: dict[str, int] = Field(description="1-based rank per retrieval modality.")
    scores: dict[str, float] | None = Field(
        default=None, description="Score per modality (explain=true only)."
    )
    explain: dict[str, Any] | None = Field(
        default=None, description="What each ranking stage did (explain=true only)."
    )


class SourceItemHit(BaseModel):
    """One item of a source other than the code index (with ``sources``): a documentation
    section, a commit, an issue or a pull request, with its attribution."""

    model_config = ConfigDict(extra="allow")

    source: str = Field(description="docs | commits | issues | prs | a third-party source.")
    id: str = Field(description="The item's id in its source.")
    title: str = Field(description="Section title path, commit subject, issue or PR title.")
    kind: str
    score: float = Field(description="Fused score (higher is better).")
    date: float | None = Field(description="Unix time of the item (commit, last update).")
    url: str | None = Field(description="Where the item lives, when it has an address.")
    author: str | None = None
    attribution: dict[str, Any] = Field(
        description="Commit hash, issue number, file path: what to cite."
    )
    paths: list[str] = Field(description="Files the item names (a commit's changed files).")


class SourceStatus(BaseModel):
    """How one source did for this answer."""

    model_config = ConfigDict(extra="allow")

    source: str
    count: int = Field(description="Hits it returned.")
    latency_ms: float
    status: str = Field(description="ok | timeout | error | disabled (left out of the answer).")


class SearchResponse(_Answer):
    """Ranked chunks for a query."""

    strategy: str = Field(description="The retrieval strategy used.")
    top_k: int = Field(description="Number of hits asked for.")
    hits: list[SearchHit | SourceItemHit] = Field(
        description="Best first: code chunks, and with `sources` the other sources' items."
    )
    notes: list[str] = Field(description="Remarks about the answer (e.g. a fallback taken).")
    sources: list[SourceStatus] | None = Field(
        default=None, description="With `sources` in the request: each source's status."
    )


class ContextPart(BaseModel):
    """One part of a context: stitched line ranges of one file."""

    model_config = ConfigDict(extra="allow")

    chunk_id: str = Field(description="Id of the (first) hit this part shows; for feedback.")
    path: str = Field(description="File path relative to the repository root.")
    start_line: int
    end_line: int
    ranges: list[list[int]] = Field(description="[start, end] line ranges stitched together.")
    tokens: int = Field(description="Tokens this part takes in the context.")
    text: str


class ContextResponse(_Answer):
    """A deduplicated, stitched, token-budgeted context built from the top hits."""

    format: str = Field(description="Rendering of `context`: xml, markdown, plain or json.")
    strategy: str = Field(description="The retrieval strategy used.")
    top_k: int = Field(description="Number of hits assembled from.")
    budget: int = Field(description="Token budget of the context.")
    context: str = Field(description="The rendered context, ready to paste into a prompt.")
    parts: list[ContextPart] = Field(description="The parts of the context, in order.")
    stats: dict[str, Any] = Field(
        description="Assembly statistics (tokens used, budget, files, coverage, timings)."
    )
    notes: list[str] = Field(description="Remarks about the answer (e.g. a fallback taken).")
    hit_ids: list[str] = Field(
        description="Ids of the ranked hits the context was built from (for POST /feedback)."
    )
    sources: list[SourceStatus] | None = Field(
        default=None, description="With `sources` in the request: each source's status."
    )


class StatusResponse(BaseModel):
    """Index status (as ``ragloom status --json``) plus the serving engine's state."""

    model_config = ConfigDict(extra="allow")

    generation: int = Field(description="Published index generation being served.")
    files: int
    chunks: int


class ConfigResponse(BaseModel):
    """After a reload: the effective settings (secrets masked), where each key came from, the
    files read (as ``ragloom config show --json``) and the keys that changed."""

    model_config = ConfigDict(extra="allow")

    settings: dict[str, dict[str, Any]]
    sources: dict[str, str] = Field(
        description="Dotted key -> default | pyproject.toml | ragloom.toml | env:VAR | "
        "override | running (server keys: fixed while the server runs)."
    )
    files: list[str]
    changed: list[str] = Field(
        default_factory=list, description="Dotted keys whose value the reload changed."
    )


class JobProgress(BaseModel):
    model_config = ConfigDict(extra="allow")

    phase: str | None = Field(default=None, description="Pipeline stage: scan, parse, bm25, ...")
    done: int | None = None
    total: int | None = None


class JobResponse(BaseModel):
    """A background re-index job."""

    model_config = ConfigDict(extra="allow")

    id: str = Field(description="Job id (GET /jobs/{id}).")
    state: Literal["queued", "running", "succeeded", "failed"]
    progress: JobProgress | dict[str, Any] | None = None
    stats: dict[str, Any] | None = Field(
        default=None, description="Index statistics once the job succeeded."
    )
    error: str | None = Field(default=None, description="Why the job failed.")
    created_at: float | None = Field(default=None, description="Unix time.")
    started_at: float | None = Field(default=None, description="Unix time.")
    finished_at: float | None = Field(default=None, description="Unix time.")


class JobAccepted(BaseModel):
    """A re-index job was started (or one already running was returned)."""

    job_id: str = Field(description="Poll GET /jobs/{job_id} for progress.")
    status_url: str = Field(examples=["/jobs/5d1c..."])
    job: JobResponse


class FeedbackRecord(BaseModel):
    """A stored piece of relevance feedback."""

    model_config = ConfigDict(extra="allow")

    query_id: str
    chunk_id: str
    rating: str
    comment: str | None = None


class UsageRecord(BaseModel):
    """Which parts of a context an agent used."""

    model_config = ConfigDict(extra="allow")

    query_id: str


class FeedbackStats(BaseModel):
    """Feedback statistics of one query (tamma ``FeedbackStats``)."""

    model_config = ConfigDict(extra="allow")

    query_id: str
    total: int
    helpful_count: int
    not_helpful_count: int
    partially_helpful_count: int
    avg_rating: float | None = Field(
        description="helpful = 1, partially_helpful = 0.5, not_helpful = 0; null with no feedback."
    )
    used_chunk_ids: list[str] = Field(default_factory=list)


class Health(BaseModel):
    status: Literal["ok"]
    version: str


# -- request models (their limits come from the settings) ----------------------------------------

Rating = Literal["helpful", "not_helpful", "partially_helpful"]
ContextFormat = Literal["xml", "markdown", "plain", "text", "json"]
"""``text`` is the settings' name of ``plain``."""


class _Limits:
    def __init__(self, server: Any) -> None:
        self.max_query_chars = int(server.max_query_chars)
        self.max_top_k = int(server.max_top_k)
        self.max_budget = int(server.max_budget)
        self.max_body_bytes = int(server.max_body_bytes)


def _request_models(limits: _Limits) -> dict[str, type[BaseModel]]:
    """The request models of one app: strict types, no unknown fields, limits from settings."""
    strict = ConfigDict(extra="forbid", strict=True)
    query_field = Field(
        min_length=1,
        max_length=limits.max_query_chars,
        description=f"The question, in natural language or code words (at most "
        f"{limits.max_query_chars} characters).",
        examples=["parse a JSON document from a string"],
    )
    sources_field = Field(
        default=None,
        min_length=1,
        max_length=16,
        description="Sources to ask in parallel and fuse: code, docs, commits, issues, prs "
        "(those the index synced with `ragloom index --sources`; docs/sources.md). Omitted: "
        "the code index alone.",
        examples=[["code", "docs", "commits"]],
    )
    strategy_field = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="hybrid | hybrid-mmr | dense | sparse, optionally +raw, +seed, +changes, +lookup or +no-STEP "
        "[server default: settings.ranking.strategy].",
        examples=["hybrid"],
    )

    class SearchRequest(BaseModel):
        """Search the index: ranked chunks for a query."""

        model_config = ConfigDict(
            extra="forbid",
            strict=True,
            json_schema_extra={
                "examples": [{"query": "parse a JSON document from a string", "top_k": 5}]
            },
        )

        query: str = query_field
        top_k: int | None = Field(
            default=None,
            ge=1,
            le=limits.max_top_k,
            description=f"Number of hits (1..{limits.max_top_k}) "
            "[server default: settings.ranking.top_k].",
        )
        strategy: str | None = strategy_field
        explain: bool = Field(
            default=False, description="Add each modality's scores and the ranking stages."
        )
        sources: list[Annotated[str, Field(min_length=1, max_length=64)]] | None = sources_field

    class ContextRequest(BaseModel):
        """Assemble a token-budgeted context for a query."""

        model_config = ConfigDict(
            extra="forbid",
            strict=True,
            json_schema_extra={
                "examples": [
                    {"query": "parse a JSON document from a string", "budget": 2000},
                    {"query": "retry with backoff", "top_k": 10, "format": "markdown"},
                ]
            },
        )

        query: str = query_field
        top_k: int | None = Field(
            default=None,
            ge=1,
            le=limits.max_top_k,
            description=f"Hits to assemble from (1..{limits.max_top_k}) "
            "[server default: settings.assembly.context_top_k].",
        )
        budget: int | None = Field(
            default=None,
            ge=1,
            le=limits.max_budget,
            description=f"Token budget (1..{limits.max_budget}) "
            "[server default: settings.assembly.budget].",
        )
        strategy: str | None = strategy_field
        format: ContextFormat | None = Field(
            default=None,
            description="Rendering of the context [server default: settings.assembly.format].",
        )
        sources: list[Annotated[str, Field(min_length=1, max_length=64)]] | None = sources_field
        structure: Literal["off", "signatures", "bodies"] | None = Field(
            default=None,
            description="Add the signatures (or bodies) of what the selected code calls and of "
            "what calls it, within the same budget, each part marked with its relation "
            "[server default: settings.assembly.structure].",
        )

    class FeedbackRequest(BaseModel):
        """Relevance feedback on one chunk of an answer."""

        model_config = ConfigDict(
            extra="forbid",
            strict=True,
            json_schema_extra={
                "examples": [
                    {
                        "query_id": "3f2b6c1e9a0d4e7f8b1c2d3e4f5a6b7c",
                        "chunk_id": "d3fafb1b-6511-536b-a2c0-74df8245c3bc",
                        "rating": "helpful",
                        "comment": "exactly the function I needed",
                    }
                ]
            },
        )

        query_id: str = Field(
            pattern=QUERY_ID_PATTERN, description="query_id of a /search or /context answer."
        )
        chunk_id: str = Field(
            min_length=1, max_length=2000, description="id of a hit (or a part's hit id)."
        )
        rating: Rating
        comment: str | None = Field(default=None, max_length=MAX_COMMENT_CHARS)

    class UsageRequest(BaseModel):
        """Which chunks of a /context answer were actually used (implicit feedback)."""

        model_config = ConfigDict(
            extra="forbid",
            strict=True,
            json_schema_extra={
                "examples": [
                    {
                        "query_id": "3f2b6c1e9a0d4e7f8b1c2d3e4f5a6b7c",
                        "used_chunk_ids": ["d3fafb1b-6511-536b-a2c0-74df8245c3bc"],
                    }
                ]
            },
        )

        query_id: str = Field(pattern=QUERY_ID_PATTERN)
        used_chunk_ids: list[Annotated[str, Field(min_length=1, max_length=2000)]] = Field(
            max_length=MAX_USED_CHUNKS, description="Chunk ids (hit_ids or parts' chunk_id)."
        )

    class GraphRequest(BaseModel):
        """A symbol of the code graph: a name, ``Class.method``, a chunk id or ``path:line``."""

        model_config = ConfigDict(
            extra="forbid",
            strict=True,
            json_schema_extra={"examples": [{"symbol": "Client.send", "limit": 50}]},
        )

        symbol: str = Field(min_length=1, max_length=2000, description="The symbol asked about.")
        path: str | None = Field(
            default=None, max_length=4000, description="Only definitions in this file."
        )
        min_confidence: float | None = Field(
            default=None,
            ge=0.0,
            le=1.0,
            description="Leave out references resolved with less confidence (default 0.5; 1.0: "
            "by scope or import, 0.9: through self or a class, lower: by name alone).",
        )
        limit: int = Field(default=200, ge=1, le=10_000, description="Most rows returned.")

    class MapRequest(BaseModel):
        """A repository map: files with their most relevant signatures within a budget."""

        model_config = ConfigDict(
            extra="forbid",
            strict=True,
            json_schema_extra={"examples": [{"query": "retry a failed request", "budget": 1024}]},
        )

        query: str | None = Field(
            default=None,
            min_length=1,
            max_length=limits.max_query_chars,
            description="Personalise the ranking to this question (omitted: the whole "
            "repository's PageRank).",
        )
        budget: int | None = Field(
            default=None,
            ge=1,
            le=limits.max_budget,
            description="Token budget of the map, counted exactly and never exceeded "
            "[server default: a quarter of settings.assembly.budget].",
        )
        format: Literal["text", "markdown", "json"] = Field(
            default="text", description="Rendering of the map text."
        )

    del strict
    return {
        "map": MapRequest,
        "search": SearchRequest,
        "context": ContextRequest,
        "feedback": FeedbackRequest,
        "usage": UsageRequest,
        "graph": GraphRequest,
    }


# -- middleware ----------------------------------------------------------------------------------


async def _send_error(
    send: Send,
    status: int,
    kind: str,
    message: str,
    headers: Mapping[str, str] | None = None,
) -> None:
    body = error_body(kind, message)
    raw_headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    raw_headers += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw_headers})
    await send({"type": "http.response.body", "body": body})


class ObserveMiddleware:
    """Outermost: time every request and report (route template, status, seconds) to the
    engine's metrics, refusals by the inner gates included. An exception that escapes counts as
    a 500."""

    def __init__(self, app: ASGIApp, engine: "ServingEngine", fastapi_app: FastAPI) -> None:
        self.app = app
        self.engine = engine
        self.fastapi_app = fastapi_app

    def _route(self, scope: Scope) -> str:
        """The route template (``/jobs/{job_id}``, not the raw path: bounded label values);
        for a request refused before routing, the route it would have reached."""
        route = scope.get("route")
        path = getattr(route, "path", None)
        if isinstance(path, str):
            return path
        partial: str | None = None
        for candidate in self.fastapi_app.router.routes:
            match, _ = candidate.matches(scope)
            if match is Match.FULL:
                return str(getattr(candidate, "path", "unmatched"))
            if match is Match.PARTIAL and partial is None:
                partial = str(getattr(candidate, "path", "unmatched"))
        return partial or "unmatched"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500
        start = time.perf_counter()

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            elapsed = time.perf_counter() - start
            try:
                self.engine.observe_request(self._route(scope), status, elapsed)
            except Exception:  # metrics must never turn an answer into an error
                log.warning("observe_request failed", exc_info=True)


class CatchAllMiddleware:
    """An exception nothing else handled: log its traceback, answer a generic 500 (when no
    answer has started yet), and do not let it reach the server's own error page."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def send_wrapper(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        except Exception:
            log.exception("internal error on %s %s", scope.get("method"), scope.get("path"))
            if not started:
                await _send_error(
                    send, 500, "internal_error", "internal server error (logged on the server)"
                )


class BearerAuthMiddleware:
    """When a token is configured, every route but :data:`OPEN_PATHS` needs
    ``Authorization: Bearer <token>`` (constant-time comparison). Checked before the body is
    read, so an unauthenticated client learns nothing about its request."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        given = b""
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                given = value
                break
        scheme, _, credentials = given.partition(b" ")
        if not given:
            await self._refuse(send, "missing bearer token: send 'Authorization: Bearer <token>'")
            return
        if scheme.lower() != b"bearer" or not hmac.compare_digest(credentials.strip(), self.token):
            await self._refuse(send, "invalid bearer token")
            return
        await self.app(scope, receive, send)

    @staticmethod
    async def _refuse(send: Send, message: str) -> None:
        await _send_error(
            send, 401, "unauthorized", message, headers={"WWW-Authenticate": "Bearer"}
        )


class BodyLimitMiddleware:
    """Refuse a body larger than ``max_bytes`` with 413: at once from Content-Length, else by
    counting a streamed body as it arrives. The accepted body is replayed to the application."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared: int | None = None
        chunked = False
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    await _send_error(send, 400, "bad_request", "invalid Content-Length header")
                    return
            elif name == b"transfer-encoding":
                chunked = True
        if declared is not None and declared > self.max_bytes:
            await self._too_large(send)
            return
        if declared == 0 or (declared is None and not chunked):  # no body to count
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._too_large(send)
                return
            chunks.append(chunk)
            more = bool(message.get("more_body", False))
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _too_large(self, send: Send) -> None:
        await _send_error(
            send,
            413,
            "payload_too_large",
            f"request body larger than {self.max_bytes} bytes (server.max_body_bytes)",
        )


# -- the application -----------------------------------------------------------------------------


def api_token(engine: "ServingEngine") -> str | None:
    """The bearer token in force: ``settings.server.api_token``, else ``$RAGLOOM_API_TOKEN``;
    an empty value means none."""
    secret = getattr(engine.settings.server, "api_token", None)
    token = secret.get_secret_value() if secret is not None else os.environ.get(TOKEN_ENV)
    return token or None


_LIMIT_SETTINGS = {
    "query": "server.max_query_chars",
    "top_k": "server.max_top_k",
    "budget": "server.max_budget",
}
"""Request fields whose upper limit is a setting: a refusal names the setting."""


def _validation_details(exc: RequestValidationError) -> list[dict[str, Any]]:
    """Each failing field as {loc, message, type}: JSON-safe (pydantic's own entries may hold
    the offending input and exception objects)."""
    out: list[dict[str, Any]] = []
    for err in exc.errors():
        kind = str(err.get("type", "invalid"))
        loc = list(err.get("loc", ()))
        message = str(err.get("msg", "invalid"))
        if kind == "json_invalid":  # loc is ("body", <character offset>)
            reason = (err.get("ctx") or {}).get("error", "")
            where = loc[-1] if loc and isinstance(loc[-1], int) else None
            at = f" at character {where}" if where is not None else ""
            message = f"request body is not valid JSON{at}" + (f": {reason}" if reason else "")
            loc = []
        elif loc and loc[0] == "body":
            loc = loc[1:]
        setting = _LIMIT_SETTINGS.get(str(loc[0])) if len(loc) == 1 else None
        if setting is not None and kind in ("less_than_equal", "string_too_long"):
            message = f"{message} ({setting})"
        out.append(
            {
                "loc": [p if isinstance(p, int) else str(p) for p in loc],
                "message": message,
                "type": kind,
            }
        )
    return out


def _validation_message(details: list[dict[str, Any]]) -> str:
    parts = []
    for d in details[:3]:
        where = ".".join(str(p) for p in d["loc"])
        parts.append(f"{where}: {d['message']}" if where else str(d["message"]))
    more = f" (+{len(details) - 3} more)" if len(details) > 3 else ""
    return "; ".join(parts) + more if parts else "invalid request"


_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorResponse, "description": text}
    for code, text in (
        (400, "Bad input (InputError, ConfigError): for example an unknown strategy."),
        (401, "Missing or wrong bearer token (only when a token is configured)."),
        (413, "Request body larger than server.max_body_bytes."),
        (422, "Request validation failed: bad JSON, a wrong type, a limit exceeded."),
        (404, "Not found (unknown job or query id, no index)."),
        (409, "The index is locked by another writer, or incompatible."),
        (500, "Internal error (details in the server log)."),
        (503, "The index cannot answer right now (BM25 not ready, service unavailable)."),
        (504, "The query exceeded its time limit (settings.timeouts.query_ms)."),
    )
}


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The documented error answers of a route: the common ones plus ``codes``."""
    return {c: _ERRORS[c] for c in sorted({400, 401, 413, 422, 500, *codes})}


_STATS_LINK = {
    "operationId": "feedback_stats",
    "parameters": {"query_id": "$response.body#/query_id"},
    "description": "Feedback statistics of this answer.",
}
_SEARCH_LINKS: dict[str, Any] = {
    "FeedbackStats": _STATS_LINK,
    "RateTopHit": {
        "operationId": "record_feedback",
        "requestBody": {
            "query_id": "$response.body#/query_id",
            "chunk_id": "$response.body#/hits/0/id",
            "rating": "helpful",
        },
        "description": "Rate the first hit of this answer.",
    },
}
"""OpenAPI links: how an answer's ids feed the feedback routes (clients and schemathesis'
stateful phase follow them)."""
_CONTEXT_LINKS: dict[str, Any] = {
    "FeedbackStats": _STATS_LINK,
    "RateFirstHit": {
        "operationId": "record_feedback",
        "requestBody": {
            "query_id": "$response.body#/query_id",
            "chunk_id": "$response.body#/hit_ids/0",
            "rating": "partially_helpful",
        },
        "description": "Rate the first hit the context was built from.",
    },
    "TrackUsage": {
        "operationId": "track_context_usage",
        "requestBody": {
            "query_id": "$response.body#/query_id",
            "used_chunk_ids": "$response.body#/hit_ids",
        },
        "description": "Report the hits of this context as used.",
    },
}
_JOB_LINKS: dict[str, Any] = {
    "JobProgress": {
        "operationId": "get_job",
        "parameters": {"job_id": "$response.body#/job_id"},
        "description": "Progress of the started job.",
    }
}


DESCRIPTION = """\
Code retrieval over one warm ragloom index: ranked chunks (`/search`), a token-budgeted
context ready for a prompt (`/context`), index status and background re-indexing, relevance
feedback, Prometheus metrics.

Every `/search` and `/context` answer carries `query_id` (for feedback), `latency_ms`,
`cache_hit` and the index `generation` it was read from. Every error is
`{"error": {"type": ..., "message": ...}}`. When a token is configured
(`server.api_token` or `RAGLOOM_API_TOKEN`), every route but `/healthz` needs
`Authorization: Bearer <token>`.
"""


def create_app(engine: "ServingEngine") -> FastAPI:
    """The FastAPI application serving ``engine`` (see the module docstring)."""
    limits = _Limits(engine.settings.server)
    models = _request_models(limits)
    SearchRequest = models["search"]
    ContextRequest = models["context"]
    FeedbackRequest = models["feedback"]
    UsageRequest = models["usage"]
    GraphRequest = models["graph"]
    MapRequest = models["map"]
    token = api_token(engine)

    app = FastAPI(
        title="ragloom",
        version=__version__,
        description=DESCRIPTION,
        openapi_tags=[
            {"name": "retrieval", "description": "Search and context assembly."},
            {"name": "index", "description": "Status and background re-indexing."},
            {
                "name": "graph",
                "description": "The code graph: definitions, references, callers, callees "
                "and the repository map (docs/graph.md).",
            },
            {"name": "feedback", "description": "Relevance feedback (tamma phase 7)."},
            {"name": "operations", "description": "Health and metrics."},
        ],
    )
    app.state.engine = engine

    # -- error handlers --------------------------------------------------------------------
    @app.exception_handler(RagError)
    async def on_rag_error(request: Request, exc: RagError) -> JSONResponse:
        status, kind = classify(exc)
        if status >= 500:
            log.error("%s on %s: %s", type(exc).__name__, request.url.path, exc)
        return error_response(status, kind, str(exc) or type(exc).__name__)

    @app.exception_handler(RequestValidationError)
    async def on_validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        details = _validation_details(exc)
        return error_response(
            422, "validation_error", _validation_message(details), details=details
        )

    @app.exception_handler(StarletteHTTPException)
    async def on_http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        kinds = {404: "not_found", 405: "method_not_allowed"}
        kind = kinds.get(exc.status_code, "http_error")
        message = str(exc.detail) if exc.detail else "error"
        if exc.status_code == 404 and message == "Not Found":
            message = f"no route {request.url.path}"
        elif exc.status_code == 405:
            allowed = (exc.headers or {}).get("allow", (exc.headers or {}).get("Allow", ""))
            message = f"method {request.method} not allowed on {request.url.path}" + (
                f" (allowed: {allowed})" if allowed else ""
            )
        return error_response(exc.status_code, kind, message, headers=exc.headers)

    # -- routes ----------------------------------------------------------------------------
    @app.post(
        "/search",
        tags=["retrieval"],
        response_model=SearchResponse,
        responses={200: {"links": _SEARCH_LINKS}, **_errors(503, 504)},
        summary="Ranked chunks for a query",
        operation_id="search",
    )
    async def search(body: SearchRequest) -> JSONResponse:  # type: ignore[valid-type]
        """Hybrid (BM25 + dense) retrieval: the top_k chunks (functions, classes, ...) that
        answer the query, best first. Use it to find *where* something is; use /context to get
        the code itself within a token budget."""
        b: Any = body
        answer = await run_in_threadpool(
            engine.search,
            b.query,
            top_k=b.top_k,
            strategy=b.strategy,
            explain=b.explain,
            sources=b.sources,
        )
        return JSONResponse(answer)

    @app.post(
        "/context",
        tags=["retrieval"],
        response_model=ContextResponse,
        responses={200: {"links": _CONTEXT_LINKS}, **_errors(503, 504)},
        summary="A token-budgeted context for a query",
        operation_id="get_context",
    )
    async def context(body: ContextRequest) -> JSONResponse:  # type: ignore[valid-type]
        """Search, then deduplicate, stitch and trim the best chunks into one context that fits
        the token budget, rendered for a prompt (`context`), with its parts and statistics."""
        b: Any = body
        answer = await run_in_threadpool(
            engine.context,
            b.query,
            top_k=b.top_k,
            budget=b.budget,
            strategy=b.strategy,
            format=b.format,
            sources=b.sources,
            structure=b.structure,
        )
        return JSONResponse(answer)

    def _graph_route(query: str, summary: str, doc: str) -> None:
        async def route(body: GraphRequest) -> JSONResponse:  # type: ignore[valid-type]
            b: Any = body
            answer = await run_in_threadpool(
                engine.graph,
                query,
                b.symbol,
                path=b.path,
                min_confidence=b.min_confidence,
                limit=b.limit,
            )
            return JSONResponse(answer)

        route.__doc__ = doc
        app.post(
            f"/{query}",
            tags=["graph"],
            responses=_errors(404, 503, 504),
            summary=summary,
            operation_id=f"graph_{query}",
        )(route)

    _graph_route(
        "defs",
        "Where a symbol is defined",
        "The definitions a symbol names (a bare name matches the last component).",
    )
    _graph_route(
        "refs",
        "Every reference to a symbol",
        "Calls, uses as a value, imports, inheritance and type uses of the symbol, each with "
        "its path, line, the definition it sits in and how sure its resolution is.",
    )
    _graph_route(
        "callers",
        "What calls a symbol",
        "The definitions that call the symbol (or use it as a value), most certain first.",
    )
    _graph_route(
        "callees",
        "What a symbol calls",
        "The definitions the symbol calls (or uses as a value), most certain first.",
    )

    @app.post(
        "/map",
        tags=["graph"],
        responses=_errors(503, 504),
        summary="A repository map within a token budget",
        operation_id="repo_map",
    )
    async def repo_map(body: MapRequest) -> JSONResponse:  # type: ignore[valid-type]
        """Files with their most relevant signatures (functions, classes, methods), ranked by
        PageRank over the code graph personalised to the question, filling the budget exactly
        (never over it): an overview of the repository for an agent's first step."""
        b: Any = body
        answer = await run_in_threadpool(engine.repo_map, b.query, budget=b.budget, format=b.format)
        return JSONResponse(answer)

    @app.get(
        "/status",
        tags=["index"],
        response_model=StatusResponse,
        responses=_errors(),
        summary="Index and engine status",
        operation_id="index_status",
    )
    def status() -> dict[str, Any]:
        """Files, chunks, model, BM25 and vector readiness, the served generation, cache hit
        rates and running jobs."""
        return engine.status()

    @app.post(
        "/config/reload",
        tags=["operations"],
        response_model=ConfigResponse,
        responses=_errors(),
        summary="Re-read the configuration and apply it live",
        operation_id="reload_config",
    )
    def reload_config() -> dict[str, Any]:
        """Re-read the repository's ragloom.toml / [tool.ragloom] and the environment; ranking,
        assembly and cache settings apply to the next request without a restart (server
        settings keep their running values). A bad configuration answers 400 with the key
        path and changes nothing."""
        return engine.reload_settings()

    @app.post(
        "/index",
        tags=["index"],
        status_code=202,
        response_model=JobAccepted,
        responses={202: {"links": _JOB_LINKS}, **_errors(409)},
        summary="Start an incremental re-index (background job)",
        operation_id="reindex",
    )
    def reindex() -> JSONResponse:
        """Bring the index up to date with the files on disk, in the background; queries keep
        being answered from the previous generation until the new one is published. Answers
        202 with the job id at once; while a job runs, the running job is returned."""
        job_id = engine.start_reindex()
        job = engine.job(job_id) or {"id": job_id, "state": "queued"}
        url = f"/jobs/{job_id}"
        payload = JobAccepted.model_validate(
            {"job_id": job_id, "status_url": url, "job": job}
        ).model_dump(mode="json")
        return JSONResponse(payload, status_code=202, headers={"Location": url})

    @app.get(
        "/jobs/{job_id}",
        tags=["index"],
        response_model=JobResponse,
        responses=_errors(404),
        summary="Progress of a background job",
        operation_id="get_job",
    )
    def job(
        job_id: str = Path(min_length=1, max_length=128, description="Id from POST /index."),
    ) -> dict[str, Any]:
        """State (queued, running, succeeded, failed), progress (phase, done, total), the index
        statistics once done, or the error."""
        found = engine.job(job_id)
        if found is None:
            raise StarletteHTTPException(404, f"no job {job_id!r}")
        return found

    @app.post(
        "/feedback",
        tags=["feedback"],
        status_code=201,
        response_model=FeedbackRecord,
        responses=_errors(404),
        summary="Rate one chunk of an answer",
        operation_id="record_feedback",
    )
    def feedback(body: FeedbackRequest) -> dict[str, Any]:  # type: ignore[valid-type]
        """Record whether a chunk was helpful, not helpful or partially helpful for the query
        of `query_id` (stored in the index's database)."""
        b: Any = body
        return engine.record_feedback(b.query_id, b.chunk_id, b.rating, b.comment)

    @app.post(
        "/feedback/usage",
        tags=["feedback"],
        status_code=201,
        response_model=UsageRecord,
        responses=_errors(404),
        summary="Record which chunks of a context were used",
        operation_id="track_context_usage",
    )
    def usage(body: UsageRequest) -> dict[str, Any]:  # type: ignore[valid-type]
        """Implicit feedback: the chunk ids of a /context answer that the caller actually used
        (tamma `trackContextUsage`)."""
        b: Any = body
        return engine.track_context_usage(b.query_id, list(b.used_chunk_ids))

    @app.get(
        "/feedback/{query_id}",
        tags=["feedback"],
        response_model=FeedbackStats,
        responses=_errors(404),
        summary="Feedback statistics of one query",
        operation_id="feedback_stats",
    )
    def feedback_stats(
        query_id: str = Path(pattern=QUERY_ID_PATTERN, description="query_id of an answer."),
    ) -> dict[str, Any]:
        """Totals per rating, the average rating and the chunk ids reported as used."""
        return engine.feedback_stats(query_id)

    @app.get(
        "/metrics",
        tags=["operations"],
        response_class=PlainTextResponse,
        responses={
            200: {
                "description": "Prometheus text exposition format.",
                "content": {"text/plain": {"schema": {"type": "string"}}},
            },
            # the route's class is PlainTextResponse: spell out that refusals are JSON
            401: {
                "description": _ERRORS[401]["description"],
                "content": {
                    "application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}
                },
            },
            500: {
                "description": _ERRORS[500]["description"],
                "content": {
                    "application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}
                },
            },
        },
        summary="Prometheus metrics",
        operation_id="metrics",
    )
    def metrics() -> PlainTextResponse:
        """Request counts and latencies per route and status, cache hit rates, BM25 status and
        fallbacks."""
        return PlainTextResponse(
            engine.metrics_text(), media_type="text/plain; version=0.0.4; charset=utf-8"
        )

    @app.get(
        "/healthz",
        tags=["operations"],
        response_model=Health,
        summary="Liveness",
        operation_id="healthz",
    )
    async def healthz() -> dict[str, Any]:
        """Always 200 while the process serves; never needs the token."""
        return {"status": "ok", "version": __version__}

    # -- OpenAPI: the bearer scheme, when one is in force -------------------------------------
    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = get_openapi(
            title=app.title,
            version=app.version,
            description=app.description,
            routes=app.routes,
            tags=app.openapi_tags,
        )
        if token is not None:
            components = schema.setdefault("components", {})
            components.setdefault("securitySchemes", {})["bearer"] = {
                "type": "http",
                "scheme": "bearer",
                "description": "server.api_token or RAGLOOM_API_TOKEN",
            }
            for path, ops in schema.get("paths", {}).items():
                if path in OPEN_PATHS:
                    continue
                for op in ops.values():
                    op["security"] = [{"bearer": []}]
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]

    # -- middleware: the last added is the outermost ---------------------------------------
    app.add_middleware(BodyLimitMiddleware, max_bytes=limits.max_body_bytes)
    if token is not None:
        app.add_middleware(BearerAuthMiddleware, token=token)
    app.add_middleware(CatchAllMiddleware)
    app.add_middleware(ObserveMiddleware, engine=engine, fastapi_app=app)
    return app


# -- running it ----------------------------------------------------------------------------------


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening-ready socket bound to ``host:port`` (port 0: a free one, read it back with
    ``getsockname()``). Binding before uvicorn starts lets the caller print the real URL."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise InputError(f"cannot resolve host {host!r}: {exc.strerror}") from exc
    family, socktype, proto, _, addr = infos[0]
    sock = socket.socket(family, socktype, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(addr)
    except OSError as exc:
        sock.close()
        raise InputError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    sock.listen(2048)  # connections queue from now on, even before uvicorn's loop runs
    return sock


def url_of(sock: socket.socket) -> str:
    """``http://host:port`` of a bound socket (IPv6 hosts in brackets)."""
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


class _Stopped(Exception):
    """Raised by our SIGINT/SIGTERM handler once uvicorn has shut down gracefully."""


def serve(app: FastAPI, sock: socket.socket, *, log_level: str = "warning") -> None:
    """Run ``app`` under uvicorn on ``sock`` until SIGINT or SIGTERM; blocks, then returns.

    uvicorn shuts down gracefully on those signals and then re-raises the signal under the
    handler that was in place before it started; by default SIGTERM would end the process
    right there, skipping the caller's clean-up (the engine's query log is flushed on close).
    A handler of ours is in place instead, so this function simply returns.
    """
    import signal
    import threading

    import uvicorn

    config = uvicorn.Config(app, log_level=log_level, access_log=False, lifespan="off")
    server = uvicorn.Server(config)
    if threading.current_thread() is not threading.main_thread():
        server.run(sockets=[sock])
        return

    def stopped(signum: int, frame: object) -> None:
        raise _Stopped(signum)

    signals = (signal.SIGINT, signal.SIGTERM)
    previous = {sig: signal.signal(sig, stopped) for sig in signals}
    try:
        server.run(sockets=[sock])
    except _Stopped:
        pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
