"""DRF authentication: personal tokens (CLI) and the Django session (browser, CSRF enforced)."""

from __future__ import annotations

from typing import Any

from rest_framework import authentication, exceptions
from rest_framework.request import Request

from .services import token_authenticate_with_roles


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, or ``None`` if there is no such header."""
    if not authorization:
        return None
    scheme, _, value = authorization.partition(" ")
    if scheme.lower() != "bearer":
        return None
    return value.strip()


class PersonalTokenAuthentication(authentication.BaseAuthentication):
    """``Authorization: Bearer tess_…``. A token in the URL is never accepted."""

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        plaintext = bearer_token(request.headers.get("Authorization"))
        if plaintext is None:
            return None
        found = token_authenticate_with_roles(plaintext=plaintext)
        if found is None:
            raise exceptions.AuthenticationFailed("The token is unknown, revoked or expired.")
        token, roles = found
        # Read with the token in one query; this request's Scope takes them (``permissions.request_scope``).
        request._request.tess_token_roles = roles  # type: ignore[attr-defined]
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="tess"'


class TenantSessionAuthentication(authentication.SessionAuthentication):
    """The browser's Django session; CSRF is enforced for unsafe methods as usual."""
