"""The MCP tools that look after the index and the engine (``ragloom.server.mcp``):
``index_status``, ``reindex`` (following its job with MCP progress notifications),
``record_feedback`` and ``reload_config``.

No postponed annotations here: the SDK evaluates the signatures to build the schemas.
"""

import threading
import time
from collections.abc import Callable
from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from ragloom.server.engine import ServingEngine
from ragloom.server.feedback import MAX_COMMENT_CHARS
from ragloom.server.mcp_schemas import Rating

__all__ = ["add_admin_tools"]

_POLL_S = 0.1
"""How often ``reindex`` looks at its job to forward progress."""


class _Failure(ToolError):
    """A failure this module reports itself (a reindex job that failed, ...)."""


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


def add_admin_tools(server: MCPServer[Any], engine: ServingEngine, jobs: _JobStarts) -> None:
    """Register ``index_status``, ``reindex``, ``record_feedback`` and ``reload_config`` on
    ``server`` (``build_server`` calls this last); ``jobs`` starts the re-index jobs."""

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
        return engine.status(freshness=bool(freshness))

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
