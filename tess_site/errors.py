"""The one error envelope of the API and the typed errors services raise.

Every error from ``/api/`` looks like::

    {"error": {"code": "not_found", "message": "...", "correlation_id": "...", "details": {...}}}

Codes are stable: clients branch on ``code``, people read ``message``.
"""

from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.db import InterfaceError, OperationalError
from django.http import Http404, JsonResponse
from rest_framework import exceptions as drf_exceptions
from rest_framework import status
from rest_framework.response import Response

from .context import get_correlation_id

logger = logging.getLogger(__name__)


class TessError(Exception):
    """Base of the typed errors services raise; views turn them into the envelope unchanged."""

    code = "error"
    status_code: int = status.HTTP_400_BAD_REQUEST
    default_message = "The request could not be completed."

    def __init__(self, message: str | None = None, *, details: dict[str, Any] | None = None) -> None:
        self.message = message or self.default_message
        self.details = details or {}
        super().__init__(self.message)


class NotFound(TessError):
    code = "not_found"
    status_code = status.HTTP_404_NOT_FOUND
    default_message = "Not found."


class Forbidden(TessError):
    code = "permission_denied"
    status_code = status.HTTP_403_FORBIDDEN
    default_message = "You do not have permission to do that."


class ToolPolicyRefused(Forbidden):
    """What was asked needs an authority ``TESS_TOOL_POLICY`` does not let Tess use (``tess_site.tool_policy``)."""

    code = "tool_policy_refused"
    default_message = "The tool policy does not allow this; nothing was requested."


class InvalidInput(TessError):
    code = "validation_error"
    default_message = "The request is not valid."


class IdentityFieldForbidden(TessError):
    code = "identity_field_forbidden"
    default_message = "The server derives who you are from your credential; do not send identity fields."


class Conflict(TessError):
    code = "conflict"
    status_code = status.HTTP_409_CONFLICT
    default_message = "The request conflicts with the current state."


class Unsupported(TessError):
    code = "unsupported"
    status_code = status.HTTP_501_NOT_IMPLEMENTED
    default_message = "This operation is not supported."


class ServiceUnavailable(TessError):
    """A dependency failed for this request; nothing was committed and a retry may succeed (``Retry-After``)."""

    code = "service_unavailable"
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_message = "The service is briefly unavailable; nothing was changed. Retry shortly."
    retry_after_seconds = 2


class DatabaseUnavailable(ServiceUnavailable):
    code = "database_unavailable"
    default_message = "The database is briefly unavailable; nothing was changed. Retry shortly."


# A dropped or refused connection, a database restart, a deadlock victim: transient, typed, never a 500.
DATABASE_ERRORS: tuple[type[Exception], ...] = (OperationalError, InterfaceError)


def database_unavailable(exc: Exception) -> DatabaseUnavailable:
    """The typed error for a database failure ``exc`` (logged without the statement or its parameters)."""
    logger.warning("database unavailable: %s: %s", exc.__class__.__name__, (str(exc).splitlines() or [""])[0][:200])
    return DatabaseUnavailable(details={"retry_after_seconds": DatabaseUnavailable.retry_after_seconds})


def envelope(code: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "error": {
            "code": code,
            "message": message,
            "correlation_id": get_correlation_id(),
            "details": details or {},
        }
    }


def error_response(code: str, message: str, http_status: int, details: dict[str, Any] | None = None) -> JsonResponse:
    """The envelope as a plain Django response, for middleware and URL-level handlers."""
    return JsonResponse(envelope(code, message, details), status=http_status)


def service_unavailable_response(err: ServiceUnavailable) -> JsonResponse:
    """The envelope of ``err`` as a plain Django response, with ``Retry-After``."""
    response = error_response(err.code, err.message, err.status_code, err.details)
    response["Retry-After"] = str(err.retry_after_seconds)
    return response


# DRF exception classes to stable codes. Anything not listed keeps DRF's own default_code.
_DRF_CODES: dict[type[Exception], str] = {
    drf_exceptions.ValidationError: "validation_error",
    drf_exceptions.ParseError: "parse_error",
    drf_exceptions.NotAuthenticated: "not_authenticated",
    drf_exceptions.AuthenticationFailed: "authentication_failed",
    drf_exceptions.PermissionDenied: "permission_denied",
    drf_exceptions.NotFound: "not_found",
    drf_exceptions.MethodNotAllowed: "method_not_allowed",
    drf_exceptions.NotAcceptable: "not_acceptable",
    drf_exceptions.UnsupportedMediaType: "unsupported_media_type",
    drf_exceptions.Throttled: "throttled",
}


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's EXCEPTION_HANDLER: every handled error leaves in the envelope."""
    # Imported here: rest_framework.views imports the authentication classes, which import this module.
    from rest_framework.views import exception_handler as drf_default_handler

    if isinstance(exc, DATABASE_ERRORS):
        exc = database_unavailable(exc)
    if isinstance(exc, ServiceUnavailable):
        headers = {"Retry-After": str(exc.retry_after_seconds)}
        return Response(envelope(exc.code, exc.message, exc.details), status=exc.status_code, headers=headers)
    if isinstance(exc, TessError):
        return Response(envelope(exc.code, exc.message, exc.details), status=exc.status_code)
    if isinstance(exc, Http404):
        exc = drf_exceptions.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = drf_exceptions.PermissionDenied()
    response = drf_default_handler(exc, context)
    if response is None:
        return None  # unexpected: ApiErrorMiddleware answers with a 500 envelope and logs it
    assert isinstance(exc, drf_exceptions.APIException)
    code = next((c for cls, c in _DRF_CODES.items() if isinstance(exc, cls)), str(exc.default_code))
    details: dict[str, Any] = {}
    if isinstance(exc, drf_exceptions.ValidationError):
        details = {"fields": exc.detail} if isinstance(exc.detail, dict) else {"errors": exc.detail}
        message = "The request is not valid."
    else:
        message = str(exc.detail)
    wait = getattr(exc, "wait", None)
    if isinstance(exc, drf_exceptions.Throttled) and wait is not None:
        details["retry_after_seconds"] = int(wait)
    response.data = envelope(code, message, details)
    return response
