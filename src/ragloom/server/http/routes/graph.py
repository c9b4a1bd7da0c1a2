"""Code-graph routes: ``POST /defs``, ``/refs``, ``/callers``, ``/callees`` and ``/map``
(docs/graph.md)."""

# No ``from __future__ import annotations``: FastAPI must resolve endpoint annotations that
# name the per-app request models, which only works when they are evaluated where written.

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, params
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from ragloom.server.http.errors import documented_errors

if TYPE_CHECKING:
    from ragloom.server.engine import ServingEngine


def router(
    engine: "ServingEngine",
    models: dict[str, type[BaseModel]],
    dependencies: Sequence[params.Depends],
) -> APIRouter:
    """The graph queries and the repository map over ``engine``."""
    GraphRequest = models["graph"]
    MapRequest = models["map"]
    router = APIRouter(dependencies=dependencies)

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
        router.post(
            f"/{query}",
            tags=["graph"],
            responses=documented_errors(404, 503, 504),
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

    @router.post(
        "/map",
        tags=["graph"],
        responses=documented_errors(503, 504),
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

    return router
