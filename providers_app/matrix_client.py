"""A small Matrix client-server API client for the Matrix provider (httpx, synchronous).

The access token goes only in the ``Authorization`` header (never a query parameter, so it never appears
in a URL that httpx or a proxy logs) and never in an exception, a log line or ``repr``. Transport errors,
rate limiting (429) and server errors (5xx) are transient (``ProviderUnavailable``); a refused token is
``MatrixUnauthorized``; any other refusal is a ``MatrixRefused`` with the status and Matrix ``errcode``
for the provider to map (a room the bot is not in answers 403 ``M_FORBIDDEN`` or 404).
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import httpx
from rest_framework import status

from .contract import ProviderError, ProviderUnavailable

logger = logging.getLogger(__name__)

CLIENT_V3 = "/_matrix/client/v3"


class MatrixUnauthorized(ProviderError):
    code = "provider_unauthorized"
    status_code = status.HTTP_502_BAD_GATEWAY
    default_message = "The homeserver refused the provider's access token."


class MatrixRefused(Exception):
    """A 4xx answer other than 401/429: ``status`` and the Matrix ``errcode`` (e.g. ``M_FORBIDDEN``)."""

    def __init__(self, status_code: int, errcode: str) -> None:
        super().__init__(f"{status_code} {errcode}")
        self.status_code = status_code
        self.errcode = errcode


def _object(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise ProviderError("The homeserver answered with something other than a JSON object.")
    return body


def segment(value: str) -> str:
    """One path segment: room ids (``!a:b``), user ids and transaction ids are quoted whole."""
    return quote(value, safe="")


def public_url(url: str) -> str:
    """The homeserver URL without any userinfo, fit for health output."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


class MatrixClient:
    def __init__(self, *, homeserver: str, access_token: str, timeout: float) -> None:
        self.homeserver = homeserver.rstrip("/")
        self._http = httpx.Client(
            base_url=self.homeserver,
            timeout=timeout,
            headers={"Authorization": f"Bearer {access_token}"},
            follow_redirects=False,
        )

    def __repr__(self) -> str:
        return f"MatrixClient({public_url(self.homeserver)!r})"

    def get(self, path: str, params: dict[str, Any] | None = None, *, auth: bool = True) -> dict[str, Any]:
        return _object(self._request("GET", path, params=params, auth=auth))

    def get_list(self, path: str) -> list[Any]:
        body = self._request("GET", path)
        if not isinstance(body, list):
            raise ProviderError("The homeserver answered with something other than a JSON list.")
        return body

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return _object(self._request("POST", path, json=body))

    def put(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return _object(self._request("PUT", path, json=body))

    def _request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        json: dict[str, Any] | None = None,
        auth: bool = True,
    ) -> Any:
        request = self._http.build_request(method, path, params=params, json=json)
        if not auth:
            del request.headers["Authorization"]
        try:
            response = self._http.send(request)
        except httpx.TransportError as exc:
            raise ProviderUnavailable(details={"reason": type(exc).__name__}) from None
        if response.status_code == 429 or response.status_code >= 500:
            raise ProviderUnavailable(details={"status": response.status_code})
        if response.status_code == 401:
            raise MatrixUnauthorized()
        try:
            body = response.json()
        except ValueError:
            body = {}
        if response.status_code >= 400:
            errcode = body.get("errcode", "") if isinstance(body, dict) else ""
            raise MatrixRefused(response.status_code, str(errcode))
        return body

    def close(self) -> None:
        self._http.close()
