"""The HTTP API (FastAPI) over one warm :class:`~ragloom.server.engine.ServingEngine`.

``create_app(engine)`` builds the application; :func:`bind_socket` and :func:`serve` run it
under uvicorn (``ragloom serve http`` and the tests use both, so what is tested is what runs).

One module per concern:

- :mod:`~ragloom.server.http.schemas`: request and response models. Limits come from the
  settings (``settings.server``) and are part of the request models, built per app, so they
  are in the OpenAPI schema too (a client, or schemathesis, sees ``maxLength`` and
  ``maximum``).
- :mod:`~ragloom.server.http.errors`: typed errors map to statuses in one table
  (:data:`ERROR_STATUS`), the HTTP twin of the CLI's exit codes; every refusal, whatever its
  cause, is one JSON shape: ``{"error": {"type": ..., "message": ...}}``.
- :mod:`~ragloom.server.http.auth`: the bearer token, a FastAPI security dependency
  (``HTTPBearer``) on every router but the health check, so OpenAPI documents it.
- :mod:`~ragloom.server.http.middleware`: plain ASGI, outermost first: request observation
  (metrics for every answer, refusals included), a last-resort handler (an unexpected
  exception is a generic 500 and a logged traceback, never a stack trace on the wire), the
  token check for what the dependency cannot judge in time (a request with a body is refused
  before its body is read or parsed; an unknown path is refused, not answered 404), and the
  body size limit (the body is read once, counted, and replayed to the application).
- :mod:`~ragloom.server.http.routes`: one ``APIRouter`` per resource (retrieval, graph,
  index, feedback, operations). Every engine call is synchronous (ONNX, tantivy, SQLite), so
  it runs in the thread pool (plain ``def`` endpoints, or ``run_in_threadpool``) and the event
  loop keeps accepting connections while queries run; the engine is thread-safe.
- :mod:`~ragloom.server.http.app`: :func:`create_app`; :mod:`~ragloom.server.http.run`:
  :func:`bind_socket`, :func:`url_of` and :func:`serve`.
"""

# The names of __all__, and (``name as name``: re-exported too) what was importable from here when
# this package was one module: url_of (ragloom.cli.serve, ragloom.server.mcp, the tests), the
# models, the middleware and the error helpers.
from ragloom.server.http.app import (
    DESCRIPTION as DESCRIPTION,
)
from ragloom.server.http.app import (
    create_app,
)
from ragloom.server.http.auth import (
    OPEN_PATHS as OPEN_PATHS,
)
from ragloom.server.http.auth import (
    TOKEN_ENV,
    api_token,
)
from ragloom.server.http.errors import (
    ERROR_STATUS,
)
from ragloom.server.http.errors import (
    classify as classify,
)
from ragloom.server.http.errors import (
    error_body as error_body,
)
from ragloom.server.http.errors import (
    error_response as error_response,
)
from ragloom.server.http.middleware import (
    BearerAuthMiddleware as BearerAuthMiddleware,
)
from ragloom.server.http.middleware import (
    BodyLimitMiddleware as BodyLimitMiddleware,
)
from ragloom.server.http.middleware import (
    CatchAllMiddleware as CatchAllMiddleware,
)
from ragloom.server.http.middleware import (
    ObserveMiddleware as ObserveMiddleware,
)
from ragloom.server.http.run import (
    bind_socket,
    serve,
)
from ragloom.server.http.run import (
    url_of as url_of,
)
from ragloom.server.http.schemas import (
    QUERY_ID_PATTERN as QUERY_ID_PATTERN,
)
from ragloom.server.http.schemas import (
    ConfigResponse as ConfigResponse,
)
from ragloom.server.http.schemas import (
    ContextFormat as ContextFormat,
)
from ragloom.server.http.schemas import (
    ContextPart as ContextPart,
)
from ragloom.server.http.schemas import (
    ContextResponse as ContextResponse,
)
from ragloom.server.http.schemas import (
    ErrorInfo as ErrorInfo,
)
from ragloom.server.http.schemas import (
    ErrorResponse as ErrorResponse,
)
from ragloom.server.http.schemas import (
    FeedbackRecord as FeedbackRecord,
)
from ragloom.server.http.schemas import (
    FeedbackStats as FeedbackStats,
)
from ragloom.server.http.schemas import (
    Health as Health,
)
from ragloom.server.http.schemas import (
    JobAccepted as JobAccepted,
)
from ragloom.server.http.schemas import (
    JobProgress as JobProgress,
)
from ragloom.server.http.schemas import (
    JobResponse as JobResponse,
)
from ragloom.server.http.schemas import (
    Rating as Rating,
)
from ragloom.server.http.schemas import (
    SearchHit as SearchHit,
)
from ragloom.server.http.schemas import (
    SearchResponse as SearchResponse,
)
from ragloom.server.http.schemas import (
    SourceItemHit as SourceItemHit,
)
from ragloom.server.http.schemas import (
    SourceStatus as SourceStatus,
)
from ragloom.server.http.schemas import (
    StatusResponse as StatusResponse,
)
from ragloom.server.http.schemas import (
    UsageRecord as UsageRecord,
)

__all__ = ["ERROR_STATUS", "TOKEN_ENV", "api_token", "bind_socket", "create_app", "serve"]
