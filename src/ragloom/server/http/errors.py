"""Error mapping of the HTTP API: typed errors to statuses, the one JSON shape of every
refusal (``{"error": {"type": ..., "message": ...}}``), the exception handlers and the error
answers each route documents in the OpenAPI schema.

Typed errors map to statuses in one table (:data:`ERROR_STATUS`), the HTTP twin of the CLI's
exit codes.
"""

import logging
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Send

from ragloom.errors import (
    ChannelError,
    ConfigError,
    FeedbackUnavailableError,
    IncompatibleIndexError,
    IndexLockedError,
    IndexNotFoundError,
    InputError,
    OverloadedError,
    RagError,
    SearchError,
    TimeoutError_,
    UnknownIdError,
)
from ragloom.server.http.schemas import ErrorInfo, ErrorResponse

log = logging.getLogger("ragloom.server.http")


ERROR_STATUS: tuple[tuple[type[RagError], int, str], ...] = (
    (UnknownIdError, 404, "not_found"),
    (FeedbackUnavailableError, 503, "feedback_unavailable"),
    (InputError, 400, "input_error"),
    (ConfigError, 400, "config_error"),
    (IndexNotFoundError, 404, "index_not_found"),
    (IndexLockedError, 409, "index_locked"),
    (IncompatibleIndexError, 409, "incompatible_index"),
    (TimeoutError_, 504, "timeout"),
    (OverloadedError, 503, "overloaded"),
    (ChannelError, 503, "unavailable"),
    (SearchError, 503, "search_unavailable"),
)
"""Typed error -> (HTTP status, error type); the first class the error is an instance of
wins (so subclasses come before their parents). Any other :class:`RagError` is a 500 with its
own message; any other exception a 500 with a generic one."""


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


def _raw_headers(body: bytes, headers: Mapping[str, str] | None) -> list[tuple[bytes, bytes]]:
    raw_headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    raw_headers += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    return raw_headers


async def send_error(
    send: Send,
    status: int,
    kind: str,
    message: str,
    headers: Mapping[str, str] | None = None,
) -> None:
    """Answer a refusal straight on the ASGI channel (for the middleware)."""
    body = error_body(kind, message)
    raw_headers = _raw_headers(body, headers)
    await send({"type": "http.response.start", "status": status, "headers": raw_headers})
    await send({"type": "http.response.body", "body": body})


def raw_error_response(
    status: int, kind: str, message: str, headers: Mapping[str, str] | None = None
) -> Response:
    """The same answer as :func:`send_error`, byte for byte and header for header (order
    included), as a Response: a refusal looks the same whether the middleware or a route's
    dependency gave it."""
    body = error_body(kind, message)
    response = Response(body, status_code=status)
    response.raw_headers = _raw_headers(body, headers)
    return response


class Unauthorized(Exception):
    """Raised by the bearer-token dependency; answered 401 ``unauthorized`` with
    ``WWW-Authenticate: Bearer``."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def install_error_handlers(app: FastAPI) -> None:
    """Every refusal FastAPI or a route raises becomes an :class:`ErrorResponse`."""

    @app.exception_handler(RagError)
    async def on_rag_error(request: Request, exc: RagError) -> JSONResponse:
        status, kind = classify(exc)
        if isinstance(exc, OverloadedError):  # refused at once, not failed: no error log
            retry = {"Retry-After": str(exc.retry_after_s)}
            return error_response(status, kind, str(exc), headers=retry)
        if status >= 500:
            log.error("%s on %s: %s", type(exc).__name__, request.url.path, exc)
        return error_response(status, kind, str(exc) or type(exc).__name__)

    @app.exception_handler(RequestValidationError)
    async def on_validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        details = validation_details(exc)
        return error_response(422, "validation_error", validation_message(details), details=details)

    @app.exception_handler(StarletteHTTPException)
    async def on_http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        kinds = {404: "not_found", 405: "method_not_allowed"}
        kind = kinds.get(exc.status_code, "http_error")
        message = str(exc.detail) if exc.detail else "error"
        if exc.status_code == 400 and message.startswith("There was an error parsing the body"):
            # a body the framework cannot decode (not UTF-8): bad JSON, as any other
            return error_response(
                422, "validation_error", "request body is not valid JSON (it must be UTF-8)"
            )
        if exc.status_code == 404 and message == "Not Found":
            message = f"no route {request.url.path}"
        elif exc.status_code == 405:
            allowed = (exc.headers or {}).get("allow", (exc.headers or {}).get("Allow", ""))
            message = f"method {request.method} not allowed on {request.url.path}" + (
                f" (allowed: {allowed})" if allowed else ""
            )
        return error_response(exc.status_code, kind, message, headers=exc.headers)

    @app.exception_handler(Unauthorized)
    async def on_unauthorized(request: Request, exc: Unauthorized) -> Response:
        return raw_error_response(
            401, "unauthorized", exc.message, headers={"WWW-Authenticate": "Bearer"}
        )


LIMIT_SETTINGS = {
    "query": "server.max_query_chars",
    "top_k": "server.max_top_k",
    "budget": "server.max_budget",
}
"""Request fields whose upper limit is a setting: a refusal names the setting."""


def validation_details(exc: RequestValidationError) -> list[dict[str, Any]]:
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
        setting = LIMIT_SETTINGS.get(str(loc[0])) if len(loc) == 1 else None
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


def validation_message(details: list[dict[str, Any]]) -> str:
    parts = []
    for d in details[:3]:
        where = ".".join(str(p) for p in d["loc"])
        parts.append(f"{where}: {d['message']}" if where else str(d["message"]))
    more = f" (+{len(details) - 3} more)" if len(details) > 3 else ""
    return "; ".join(parts) + more if parts else "invalid request"


ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorResponse, "description": text}
    for code, text in (
        (400, "Bad input (InputError, ConfigError): for example an unknown strategy."),
        (401, "Missing or wrong bearer token (only when a token is configured)."),
        (413, "Request body larger than server.max_body_bytes."),
        (422, "Request validation failed: bad JSON, a wrong type, a limit exceeded."),
        (404, "Not found (unknown job or query id, no index)."),
        (409, "The index is locked by another writer, or incompatible."),
        (500, "Internal error (details in the server log)."),
        (
            503,
            "The index cannot answer right now (BM25 not ready, service unavailable), or the server is computing as many answers as it admits (`overloaded`, with `Retry-After`: ask again then), or it keeps no ratings (`feedback_unavailable`: a read-only index folder).",
        ),
        (504, "The query exceeded its time limit (settings.timeouts.query_ms)."),
    )
}


def documented_errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The documented error answers of a route: the common ones plus ``codes``."""
    return {c: ERRORS[c] for c in sorted({400, 401, 413, 422, 500, *codes})}
