"""Operations routes: ``GET /metrics`` (Prometheus) and ``GET /healthz`` (liveness, the one
route that never needs the token: it has a router of its own, without the token dependency).
``POST /config/reload`` is in :mod:`ragloom.server.http.routes.index` (see there)."""

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, params
from fastapi.responses import PlainTextResponse

from ragloom._version import __version__
from ragloom.server.http.errors import ERRORS
from ragloom.server.http.schemas import Health

if TYPE_CHECKING:
    from ragloom.server.engine import ServingEngine


def router(engine: "ServingEngine", dependencies: Sequence[params.Depends]) -> APIRouter:
    """``/metrics`` over ``engine``."""
    router = APIRouter(dependencies=dependencies)

    @router.get(
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
                "description": ERRORS[401]["description"],
                "content": {
                    "application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}
                },
            },
            500: {
                "description": ERRORS[500]["description"],
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

    return router


def health_router() -> APIRouter:
    """``/healthz``: include it without the token dependency."""
    router = APIRouter()

    @router.get(
        "/healthz",
        tags=["operations"],
        response_model=Health,
        summary="Liveness",
        operation_id="healthz",
    )
    async def healthz() -> dict[str, Any]:
        """Always 200 while the process serves; never needs the token."""
        return {"status": "ok", "version": __version__}

    return router
