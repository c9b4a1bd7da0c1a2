"""The ASGI middleware of the HTTP API, outermost first.

Request observation (metrics for every answer, refusals included), a last-resort handler (an
unexpected exception is a generic 500 and a logged traceback, never a stack trace on the wire),
the part of the bearer-token check a route dependency cannot do (see
:class:`BearerAuthMiddleware`), and the body size limit (the body is read once, counted, and
replayed to the application). All plain ASGI: no per-request task or copy of the request.
"""

import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from fastapi.routing import APIRoute
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ragloom.server.http.auth import CHALLENGE, OPEN_PATHS, authorization, refusal
from ragloom.server.http.errors import send_error

if TYPE_CHECKING:
    from ragloom.server.engine import ServingEngine

log = logging.getLogger("ragloom.server.http")


class ObserveMiddleware:
    """Outermost: time every request and report (route template, status, seconds) to the
    engine's metrics, refusals by the inner gates included. An exception that escapes counts as
    a 500."""

    def __init__(self, app: ASGIApp, engine: "ServingEngine", routes: Sequence[BaseRoute]) -> None:
        self.app = app
        self.engine = engine
        self.routes = routes

    def _route(self, scope: Scope) -> str:
        """The route template (``/jobs/{job_id}``, not the raw path: bounded label values);
        for a request refused before routing, the route it would have reached."""
        route = scope.get("route")
        path = getattr(route, "path", None)
        if isinstance(path, str):
            return path
        partial: str | None = None
        for candidate in self.routes:
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
                await send_error(
                    send, 500, "internal_error", "internal server error (logged on the server)"
                )


class BearerAuthMiddleware:
    """The token check for the requests the routers' dependency
    (:func:`~ragloom.server.http.auth.token_dependency`) cannot judge in time; the others are
    left to it. With the same :func:`~ragloom.server.http.auth.refusal` and the same answer.

    A dependency runs only once a route has matched and, for a route with a body, after the body
    was read and parsed. So this middleware still refuses, before anything else runs:

    - a request that carries a body (or a Content-Length it cannot read), or one to a route that
      takes a body: it is refused before the body is read (the body limit below reads it) or
      parsed (a bad body without the token is a 401, not a 422 or a 413; an unauthenticated
      client learns nothing about its request);
    - a request no guarded route answers: an unknown path, a method a route does not allow, a
      trailing-slash redirect (a 401, not a 404, 405 or 307), and the schema and its viewers
      (``/openapi.json``, ``/docs``, ``/redoc``: FastAPI's own routes, outside the routers).
    """

    def __init__(
        self,
        app: ASGIApp,
        token: str,
        routes: Sequence[BaseRoute],
        dependency: Callable[..., Any],
    ) -> None:
        self.app = app
        self.token = token.encode()
        self.routes = routes
        self.dependency = dependency

    def _left_to_dependency(self, scope: Scope) -> bool:
        """True for a request without a body that a route guarded by the dependency answers,
        and that takes no body (FastAPI would read even an empty one before the dependency)."""
        if _may_have_body(scope):
            return False
        for route in self.routes:
            match, _ = route.matches(scope)
            if match is Match.FULL:
                return (
                    isinstance(route, APIRoute)
                    and route.body_field is None
                    and any(dep.call is self.dependency for dep in route.dependant.dependencies)
                )
        return False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope.get("path") in OPEN_PATHS
            or self._left_to_dependency(scope)
        ):
            await self.app(scope, receive, send)
            return
        message = refusal(authorization(scope), self.token)
        if message is not None:
            await send_error(send, 401, "unauthorized", message, headers=CHALLENGE)
            return
        await self.app(scope, receive, send)


def _may_have_body(scope: Scope) -> bool:
    """Whether :class:`BodyLimitMiddleware` would read (or refuse) a body: a Content-Length
    other than 0 (or one it cannot read), or a chunked body."""
    declared: int | None = None
    chunked = False
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                declared = int(value)
            except ValueError:
                return True
        elif name == b"transfer-encoding":
            chunked = True
    return not (declared == 0 or (declared is None and not chunked))


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
                    await send_error(send, 400, "bad_request", "invalid Content-Length header")
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
        await send_error(
            send,
            413,
            "payload_too_large",
            f"request body larger than {self.max_bytes} bytes (server.max_body_bytes)",
        )
