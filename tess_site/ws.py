"""Websocket authentication and correlation for the ASGI router.

Two ways in, never a token in the URL:
- ``Authorization: Bearer <token>`` header (the CLI, which sends no Origin): the token is the credential;
- the browser's session cookie: only from an allowed Origin, so another site cannot ride the cookie.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host

from tess_site.accounts.authentication import bearer_token
from tess_site.accounts.services import token_authenticate
from tess_site.errors import DATABASE_ERRORS

from .context import accept_correlation_id

ASGIApp = Any
logger = logging.getLogger(__name__)

# RFC 6455's "try again later": the websocket's 503. Clients reconnect after it as after any other close that
# is not one of Tess's refusals (4401, 4403, 4404).
CLOSE_TRY_AGAIN_LATER = 1013


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


_DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin_of(url: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of an http(s) URL, the port made explicit; None for anything else."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    return scheme, parts.hostname.lower(), port or _DEFAULT_PORTS[scheme]


def origin_allowed(scope: dict[str, Any]) -> bool:
    """Whether a cookie-carrying websocket comes from a page of Tess itself.

    As Django's CSRF check does for forms, scheme, host and port must all match: the socket's own origin
    (its Host header under an allowed host name, with the scheme it arrived on), ``TESS_PUBLIC_URL``, or one
    of ``CSRF_TRUSTED_ORIGINS``. A socket without an Origin header is refused.
    """
    origin = _header(scope, b"origin")
    claimed = _origin_of(origin) if origin else None
    if claimed is None:
        return False
    allowed = {_origin_of(url) for url in [settings.TESS_PUBLIC_URL, *settings.CSRF_TRUSTED_ORIGINS]}
    host = _header(scope, b"host")
    if host and validate_host(split_domain_port(host)[0], settings.ALLOWED_HOSTS):
        scheme = "https" if scope.get("scheme") in ("wss", "https") else "http"
        allowed.add(_origin_of(f"{scheme}://{host}"))
    return claimed in allowed


class TessWebsocketAuth:
    """Resolve the websocket's user and correlation id before any consumer runs."""

    def __init__(self, inner: ASGIApp) -> None:
        self.inner = inner
        self.cookie_app = AuthMiddlewareStack(inner)

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
        if not origin_allowed(scope):
            return await WebsocketDenier()(scope, receive, send)
        return await self.cookie_app(scope, receive, send)


class DatabaseUnavailableClose:
    """A socket that finds the database unavailable (down, restarting, or every pooled connection busy past
    ``TESS_DB_POOL_TIMEOUT``), at the handshake or later, is closed with 1013 "try again later", as HTTP answers
    503: not refused with a 500 at the handshake, nor closed with 1011 as if Tess had a bug."""

    def __init__(self, inner: ASGIApp) -> None:
        self.inner = inner

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        seen: set[str] = set()

        async def receiving() -> Any:
            message = await receive()
            seen.add(message["type"])
            return message

        async def sending(message: dict[str, Any]) -> None:
            seen.add(message["type"])
            await send(message)

        try:
            return await self.inner(scope, receiving, sending)
        except DATABASE_ERRORS as exc:
            if seen & {"websocket.close", "websocket.disconnect"}:
                return None  # already ended: nothing to tell the client
            logger.warning("websocket %s closed 1013: the database is unavailable (%s)", scope.get("path"), exc)
            with contextlib.suppress(Exception):  # the client may have gone meanwhile
                if "websocket.connect" not in seen:
                    await receiving()  # the handshake request, which a consumer reads before it answers
                if "websocket.accept" not in seen:
                    await send({"type": "websocket.accept"})  # a close code reaches the client only after it
                await send({"type": "websocket.close", "code": CLOSE_TRY_AGAIN_LATER})
            return None
