"""Retrieval routes: ``POST /search`` and ``POST /context``.

The two hot routes hand the question to the engine's query pool once and await it
(:meth:`ServingEngine.answer_async`: every engine call is synchronous, ONNX, tantivy, SQLite),
and return the engine's answer as JSON as it is: FastAPI would otherwise re-validate the
answer against its response model in a second thread hop, about half a millisecond per request
on a busy machine. The models still document the answers in the OpenAPI schema, and
schemathesis checks that the answers conform to them.
"""

# No ``from __future__ import annotations``: FastAPI must resolve endpoint annotations that
# name the per-app request models, which only works when they are evaluated where written.

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, params
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from ragloom.server.http.errors import documented_errors
from ragloom.server.http.schemas import ContextResponse, SearchResponse

if TYPE_CHECKING:
    from ragloom.server.engine import ServingEngine

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


def router(
    engine: "ServingEngine",
    models: dict[str, type[BaseModel]],
    dependencies: Sequence[params.Depends],
) -> APIRouter:
    """``/search`` and ``/context`` over ``engine``, with the app's request models."""
    SearchRequest = models["search"]
    ContextRequest = models["context"]
    router = APIRouter(dependencies=dependencies)

    @router.post(
        "/search",
        tags=["retrieval"],
        response_model=SearchResponse,
        responses={200: {"links": _SEARCH_LINKS}, **documented_errors(503, 504)},
        summary="Ranked chunks for a query",
        operation_id="search",
    )
    async def search(body: SearchRequest) -> JSONResponse:  # type: ignore[valid-type]
        """Hybrid (BM25 + dense) retrieval: the top_k chunks (functions, classes, ...) that
        answer the query, best first. Use it to find *where* something is; use /context to get
        the code itself within a token budget."""
        b: Any = body
        answer = await engine.answer_async(
            "search",
            b.query,
            top_k=b.top_k,
            strategy=b.strategy,
            explain=b.explain,
            sources=b.sources,
        )
        return JSONResponse(answer)

    @router.post(
        "/context",
        tags=["retrieval"],
        response_model=ContextResponse,
        responses={200: {"links": _CONTEXT_LINKS}, **documented_errors(503, 504)},
        summary="A token-budgeted context for a query",
        operation_id="get_context",
    )
    async def context(body: ContextRequest) -> JSONResponse:  # type: ignore[valid-type]
        """Search, then deduplicate, stitch and trim the best chunks into one context that fits
        the token budget, rendered for a prompt (`context`), with its parts and statistics."""
        b: Any = body
        answer = await engine.answer_async(
            "context",
            b.query,
            top_k=b.top_k,
            budget=b.budget,
            strategy=b.strategy,
            format=b.format,
            sources=b.sources,
            structure=b.structure,
            counter=b.counter,
        )
        return JSONResponse(answer)

    return router
