"""The bearer token: where it comes from, how a request's ``Authorization`` header is judged,
and the FastAPI security dependency that guards the routers.

When a token is configured, every route but :data:`OPEN_PATHS` needs
``Authorization: Bearer <token>`` (constant-time comparison). The routers carry
:func:`token_dependency` (``HTTPBearer``, so the OpenAPI schema documents the scheme by itself);
:class:`~ragloom.server.http.middleware.BearerAuthMiddleware` judges, with the same
:func:`refusal`, only the requests the dependency would see too late (see there).
"""

import hmac
import os
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated

from fastapi import Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.types import Scope

from ragloom.server.http.errors import Unauthorized

if TYPE_CHECKING:
    from ragloom.server.engine import ServingEngine

TOKEN_ENV = "RAGLOOM_API_TOKEN"
"""The environment variable holding the bearer token (``server.api_token`` in the settings
wins when both are set)."""

OPEN_PATHS = frozenset({"/healthz"})
"""Routes answered without the token (a load balancer's probe has no secret)."""

MISSING_TOKEN = "missing bearer token: send 'Authorization: Bearer <token>'"
INVALID_TOKEN = "invalid bearer token"
CHALLENGE = {"WWW-Authenticate": "Bearer"}
"""The headers of a 401 refusal."""


def api_token(engine: "ServingEngine") -> str | None:
    """The bearer token in force: ``settings.server.api_token``, else ``$RAGLOOM_API_TOKEN``;
    an empty value means none."""
    secret = getattr(engine.settings.server, "api_token", None)
    token = secret.get_secret_value() if secret is not None else os.environ.get(TOKEN_ENV)
    return token or None


def authorization(scope: Scope) -> bytes:
    """The raw value of the request's first ``Authorization`` header (``b""`` when none)."""
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            return bytes(value)
    return b""


def refusal(given: bytes, token: bytes) -> str | None:
    """Why a request with ``Authorization: given`` is refused, or None when it may pass."""
    if not given:
        return MISSING_TOKEN
    scheme, _, credentials = given.partition(b" ")
    if scheme.lower() != b"bearer" or not hmac.compare_digest(credentials.strip(), token):
        return INVALID_TOKEN
    return None


def token_dependency(token: str) -> Callable[..., Awaitable[None]]:
    """The dependency every guarded router carries: refuses (:class:`Unauthorized`, answered
    401 with ``WWW-Authenticate: Bearer``) a request without the right bearer token."""
    bearer = HTTPBearer(
        auto_error=False,
        scheme_name="bearer",
        description="server.api_token or RAGLOOM_API_TOKEN",
    )
    expected = token.encode()

    async def require_token(
        request: Request,
        credentials: Annotated[HTTPAuthorizationCredentials | None, Security(bearer)],
    ) -> None:
        # HTTPBearer declares the scheme (OpenAPI) and parses the header into text; the verdict
        # is taken on the raw bytes instead, by the same function as the middleware, so both
        # gates refuse alike: HTTPBearer gives None for a missing and for a malformed header
        # alike, strips Unicode whitespace, and compare_digest raises on non-ASCII text.
        del credentials
        message = refusal(authorization(request.scope), expected)
        if message is not None:
            raise Unauthorized(message)

    return require_token
