"""The app factory: :func:`create_app` builds the FastAPI application serving one warm
:class:`~ragloom.server.engine.ServingEngine`, from the routers, the error handlers, the bearer
token (when one is in force) and the middleware."""

from typing import TYPE_CHECKING

from fastapi import Depends, FastAPI

from ragloom._version import __version__
from ragloom.server.http.auth import api_token, token_dependency
from ragloom.server.http.errors import install_error_handlers
from ragloom.server.http.middleware import (
    BearerAuthMiddleware,
    BodyLimitMiddleware,
    CatchAllMiddleware,
    ObserveMiddleware,
)
from ragloom.server.http.routes import feedback, graph, index, operations, retrieval
from ragloom.server.http.schemas import Limits, request_models

if TYPE_CHECKING:
    from ragloom.server.engine import ServingEngine

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
    """The FastAPI application serving ``engine`` (see :mod:`ragloom.server.http`)."""
    limits = Limits(engine.settings.server)
    models = request_models(limits)
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
    install_error_handlers(app)

    # -- routes: every router but the health check needs the token, when one is in force ------
    # (the dependency is given to each router, so that its routes carry it themselves)
    require_token = token_dependency(token) if token is not None else None
    guarded = [Depends(require_token)] if require_token is not None else []
    routers = (
        retrieval.router(engine, models, guarded),
        graph.router(engine, models, guarded),
        index.router(engine, guarded),
        feedback.router(engine, models, guarded),
        operations.router(engine, guarded),
        operations.health_router(),
    )
    routes = list(app.router.routes)  # FastAPI's own: the schema and its viewers
    for router in routers:
        app.include_router(router)
        routes += router.routes
    # ``routes``, in the order they match, for the middleware that looks a request's route up
    # before routing (how ``app.router.routes`` holds included routers varies with FastAPI)

    # -- middleware: the last added is the outermost ---------------------------------------
    app.add_middleware(BodyLimitMiddleware, max_bytes=limits.max_body_bytes)
    if token is not None and require_token is not None:
        app.add_middleware(
            BearerAuthMiddleware, token=token, routes=routes, dependency=require_token
        )
    app.add_middleware(CatchAllMiddleware)
    app.add_middleware(ObserveMiddleware, engine=engine, routes=routes)
    return app
