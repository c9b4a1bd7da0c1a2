"""Feedback routes: ``POST /feedback``, ``POST /feedback/usage``, ``GET /feedback/{query_id}``
(tamma phase 7) and ``GET /feedback`` (the whole index's figures)."""

# No ``from __future__ import annotations``: FastAPI must resolve endpoint annotations that
# name the per-app request models, which only works when they are evaluated where written.

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Path, params
from pydantic import BaseModel

from ragloom.server.http.errors import documented_errors
from ragloom.server.http.schemas import (
    QUERY_ID_PATTERN,
    FeedbackRecord,
    FeedbackStats,
    FeedbackSummary,
    UsageRecord,
)

if TYPE_CHECKING:
    from ragloom.server.engine import ServingEngine


def router(
    engine: "ServingEngine",
    models: dict[str, type[BaseModel]],
    dependencies: Sequence[params.Depends],
) -> APIRouter:
    """Relevance feedback over ``engine``, with the app's request models."""
    FeedbackRequest = models["feedback"]
    UsageRequest = models["usage"]
    router = APIRouter(dependencies=dependencies)

    @router.post(
        "/feedback",
        tags=["feedback"],
        status_code=201,
        response_model=FeedbackRecord,
        responses=documented_errors(404, 503),
        summary="Rate one chunk of an answer",
        operation_id="record_feedback",
    )
    def feedback(body: FeedbackRequest) -> dict[str, Any]:  # type: ignore[valid-type]
        """Record whether a chunk was helpful, not helpful or partially helpful for the query
        of `query_id` (stored in the index's database)."""
        b: Any = body
        return engine.record_feedback(b.query_id, b.chunk_id, b.rating, b.comment)

    @router.post(
        "/feedback/usage",
        tags=["feedback"],
        status_code=201,
        response_model=UsageRecord,
        responses=documented_errors(404, 503),
        summary="Record which chunks of a context were used",
        operation_id="track_context_usage",
    )
    def usage(body: UsageRequest) -> dict[str, Any]:  # type: ignore[valid-type]
        """Implicit feedback: the chunk ids of a /context answer that the caller actually used
        (tamma `trackContextUsage`)."""
        b: Any = body
        return engine.track_context_usage(b.query_id, list(b.used_chunk_ids))

    @router.get(
        "/feedback",
        tags=["feedback"],
        response_model=FeedbackSummary,
        responses=documented_errors(503),
        summary="Feedback statistics of the whole index",
        operation_id="feedback_summary",
    )
    def feedback_summary() -> dict[str, Any]:
        """Answers logged, answers rated or used, totals per rating, the average rating and
        the chunks reported as used, over every answer (the per-repository adaptation learns
        from the rated ones: `status` says how many arrived since it was fitted)."""
        return engine.feedback_summary()

    @router.get(
        "/feedback/{query_id}",
        tags=["feedback"],
        response_model=FeedbackStats,
        responses=documented_errors(404, 503),
        summary="Feedback statistics of one query",
        operation_id="feedback_stats",
    )
    def feedback_stats(
        query_id: str = Path(pattern=QUERY_ID_PATTERN, description="query_id of an answer."),
    ) -> dict[str, Any]:
        """Totals per rating, the average rating and the chunk ids reported as used."""
        return engine.feedback_stats(query_id)

    return router
