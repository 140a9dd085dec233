"""HTTP middleware: correlation ids, the API error envelope, and refusal of caller-supplied identity."""

from __future__ import annotations

import ipaddress
import json
import logging
from collections.abc import Callable, Sequence
from urllib.parse import parse_qsl

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from .addresses import address_in
from .context import accept_correlation_id, set_correlation_id
from .errors import (
    DATABASE_ERRORS,
    IdentityFieldForbidden,
    database_unavailable,
    error_response,
    service_unavailable_response,
)

logger = logging.getLogger("tess.request")

API_PREFIX = "/api/"
CORRELATION_HEADER = "X-Correlation-ID"

# Top-level keys that would let a client name who it is. The server derives identity from the credential;
# a request that tries is refused outright (DESIGN.md), not silently corrected.
IDENTITY_FIELDS = frozenset(
    {"owner", "owner_id", "actor", "actor_id", "subject", "user_id", "tenant", "tenant_id", "operator"}
)

GetResponse = Callable[[HttpRequest], HttpResponse]


class CorrelationIdMiddleware:
    """Accept a well-formed ``X-Correlation-ID`` or make one; bind it for logs; echo it on the response."""

    def __init__(self, get_response: GetResponse) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        correlation_id = accept_correlation_id(request.headers.get(CORRELATION_HEADER))
        request.correlation_id = correlation_id  # type: ignore[attr-defined]
        # Left bound until request_finished (tess_site.apps), so Django's own response logging, which runs
        # after the middleware chain, still carries the id.
        set_correlation_id(correlation_id)
        response = self.get_response(request)
        response[CORRELATION_HEADER] = correlation_id
        return response


_FORWARDED_HEADERS = ("HTTP_X_FORWARDED_FOR", "HTTP_X_FORWARDED_PROTO", "HTTP_X_FORWARDED_HOST", "HTTP_FORWARDED")


def client_address(meta: dict[str, object], trusted: Sequence[str]) -> str:
    """The address of the client behind the configured proxies.

    ``X-Forwarded-For`` is believed only when the direct peer is a trusted proxy, and then only up to the
    first address (from the right, the proxy's own end) that is not itself a trusted proxy: anything left of
    it was written by the client and proves nothing.
    """
    peer = str(meta.get("REMOTE_ADDR") or "")
    if not address_in(peer, trusted):
        return peer
    hops = [hop.strip() for hop in str(meta.get("HTTP_X_FORWARDED_FOR") or "").split(",") if hop.strip()]
    for hop in reversed(hops):
        if not address_in(hop, trusted):
            try:
                return str(ipaddress.ip_address(hop))
            except ValueError:
                return peer  # a malformed hop: the proxy's own view is all that can be trusted
    return hops[0] if hops else peer


class ClientAddressMiddleware:
    """``REMOTE_ADDR`` becomes the client's address, as far as ``TESS_TRUSTED_PROXIES`` vouch for it.

    Throttles, sign-in limits and logs use ``REMOTE_ADDR``; a client that sends its own ``X-Forwarded-For``
    past no trusted proxy changes nothing. Forwarded headers from an untrusted peer are dropped, so nothing
    later (``X-Forwarded-Proto`` for HTTPS included) can be told a story by the client itself.
    """

    def __init__(self, get_response: GetResponse) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        trusted = settings.TESS_TRUSTED_PROXIES
        meta = request.META
        meta["TESS_PEER_ADDR"] = meta.get("REMOTE_ADDR", "")
        if address_in(str(meta.get("REMOTE_ADDR") or ""), trusted):
            meta["REMOTE_ADDR"] = client_address(meta, trusted)
        else:
            for header in _FORWARDED_HEADERS:
                meta.pop(header, None)
        return self.get_response(request)


class ApiErrorMiddleware:
    """No HTML error pages and no stack traces from ``/api/``: unexpected errors become a 500 envelope."""

    def __init__(self, get_response: GetResponse) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        # A path that resolves to nothing never reaches handler404 while DEBUG is on: Django renders its
        # debug page (the URL patterns included). /api/ answers in the one envelope in every mode.
        if (
            response.status_code == 404
            and request.path.startswith(API_PREFIX)
            and not response.get("Content-Type", "").startswith("application/json")
        ):
            return error_response("not_found", "Not found.", 404)
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not request.path.startswith(API_PREFIX):
            return None
        if isinstance(exception, DATABASE_ERRORS):
            return service_unavailable_response(database_unavailable(exception))
        logger.exception("unhandled error in %s %s", request.method, request.path)
        return error_response("server_error", "Something went wrong on our side; the error was logged.", 500)


def identity_fields_in(request: HttpRequest) -> list[str]:
    """The identity keys at the top level of the request's query string and body, sorted."""
    found = {key for key, _ in parse_qsl(request.META.get("QUERY_STRING", ""), keep_blank_values=True)}
    if request.method in ("POST", "PUT", "PATCH", "DELETE") and request.body:
        content_type = request.content_type or ""
        if content_type == "application/json" or content_type.endswith("+json"):
            try:
                body = json.loads(request.body)
            except (ValueError, UnicodeDecodeError):
                body = None  # the view's parser reports malformed JSON in the envelope
            if isinstance(body, dict):
                found.update(body.keys())
        elif content_type in ("application/x-www-form-urlencoded", "multipart/form-data"):
            found.update(request.POST.keys())
    return sorted(found & IDENTITY_FIELDS)


class RefuseIdentityFieldsMiddleware:
    """One mechanism for every API route, present and future: identity keys get a typed 400."""

    def __init__(self, get_response: GetResponse) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path.startswith(API_PREFIX):
            fields = identity_fields_in(request)
            if fields:
                err = IdentityFieldForbidden(details={"fields": fields})
                return error_response(err.code, err.message, err.status_code, err.details)
        return self.get_response(request)
