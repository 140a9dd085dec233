"""Websocket authentication and correlation for the ASGI router.

Two ways in, never a token in the URL:
- ``Authorization: Bearer <token>`` header (the CLI, which sends no Origin): the token is the credential;
- the browser's session cookie: only from an allowed Origin, so another site cannot ride the cookie.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl

from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from channels.security.websocket import AllowedHostsOriginValidator, WebsocketDenier

from tess_site.accounts.authentication import bearer_token
from tess_site.accounts.services import token_authenticate

from .context import accept_correlation_id

ASGIApp = Any


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


class TessWebsocketAuth:
    """Resolve the websocket's user and correlation id before any consumer runs."""

    def __init__(self, inner: ASGIApp) -> None:
        self.inner = inner
        self.cookie_app = AllowedHostsOriginValidator(AuthMiddlewareStack(inner))

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        scope = dict(scope, correlation_id=accept_correlation_id(_header(scope, b"x-correlation-id")))
        query = {key for key, _ in parse_qsl(scope.get("query_string", b"").decode("latin-1"))}
        if query & {"token", "access_token", "auth"}:
            # Tokens in URLs end up in proxy logs and browser history; refuse rather than ignore.
            return await WebsocketDenier()(scope, receive, send)
        authorization = _header(scope, b"authorization")
        if authorization is not None:
            plaintext = bearer_token(authorization)
            token = await database_sync_to_async(token_authenticate)(plaintext=plaintext) if plaintext else None
            if token is None:
                return await WebsocketDenier()(scope, receive, send)
            return await self.inner(dict(scope, user=token.user, tess_auth=token, session=None), receive, send)
        return await self.cookie_app(scope, receive, send)
