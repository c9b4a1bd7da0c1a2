"""Request and response schemas of the HTTP API.

The response models document the answers in the OpenAPI schema (the hot routes send the
engine's answer as it is; schemathesis checks that it conforms). The request models are built
per app by :func:`request_models`: their limits come from the engine's settings
(``settings.server``), so they are in the OpenAPI schema too.
"""

# No ``from __future__ import annotations`` here: the request models are built per app and
# pydantic must resolve the annotations of classes defined inside a function, which only works
# when annotations are evaluated where they are written.

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ragloom.server.feedback import MAX_COMMENT_CHARS, MAX_USED_CHUNKS

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
    stale: bool = Field(
        default=False,
        description="The file changed since indexing: the chunk's lines may have moved.",
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


class FeedbackSummary(BaseModel):
    """Feedback statistics of the whole index (every answer logged)."""

    model_config = ConfigDict(extra="allow")

    answers: int = Field(description="answers in the query log")
    rated_answers: int = Field(description="answers rated, or with chunks reported as used")
    total: int = Field(description="ratings")
    helpful_count: int
    not_helpful_count: int
    partially_helpful_count: int
    avg_rating: float | None = Field(
        description="helpful = 1, partially_helpful = 0.5, not_helpful = 0; null with no feedback."
    )
    used_chunks: int = Field(description="chunks reported as used")


class Health(BaseModel):
    status: Literal["ok"]
    version: str


# -- request models (their limits come from the settings) ----------------------------------------

Rating = Literal["helpful", "not_helpful", "partially_helpful"]
ContextFormat = Literal["xml", "markdown", "plain", "text", "json"]
"""``text`` is the settings' name of ``plain``."""


class Limits:
    def __init__(self, server: Any) -> None:
        self.max_query_chars = int(server.max_query_chars)
        self.max_top_k = int(server.max_top_k)
        self.max_budget = int(server.max_budget)
        self.max_body_bytes = int(server.max_body_bytes)


def request_models(limits: Limits) -> dict[str, type[BaseModel]]:
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
        description="hybrid | hybrid-mmr | dense | sparse, optionally +raw, +seed, +changes, +lookup, +learned, +handset, +graph or +no-STEP "
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
        counter: Literal["cl100k", "o200k", "approx"] | None = Field(
            default=None,
            description="Token counter the budget is counted with: cl100k (GPT-4), o200k "
            "(GPT-4o) or approx (a fast estimate) [server default: settings.assembly.counter].",
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
