"""OpenAPI generation details shared by every API view (drf-spectacular).

- The two ways to authenticate appear as security schemes (a personal token as a bearer token, the browser's
  session cookie), so the schema says how to call each route.
- A GET that answers a list (``list_schema``) gets an operation id ending in ``_list``, so a
  collection and its item (``/sessions/`` and ``/sessions/{id}/``) do not share one.
- Every operation lists the error answers it can give, each with the one error envelope (``ErrorEnvelope``,
  ``tess_site.errors``) as its body. What follows from the route itself is derived here (see
  ``TessAutoSchema.error_statuses``); a view that can refuse in more ways names them in its own
  ``error_statuses`` attribute, so a client (and schemathesis) can rely on the list being complete.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import build_bearer_security_scheme_object
from drf_spectacular.utils import OpenApiResponse, inline_serializer
from rest_framework import serializers

LIST_ANSWER = "_tess_list_answer"

ERROR_ENVELOPE = inline_serializer(
    name="ErrorEnvelope",
    fields={
        "error": inline_serializer(
            name="ErrorBody",
            fields={
                "code": serializers.CharField(help_text="Stable; clients branch on it (e.g. `not_found`)."),
                "message": serializers.CharField(help_text="For people; may change."),
                "correlation_id": serializers.CharField(help_text="The request's X-Correlation-ID, for the logs."),
                "details": serializers.DictField(help_text="Per-code details (field errors, retry_after_seconds)."),
            },
        )
    },
)

ERROR_DESCRIPTIONS = {
    400: "Invalid input: `validation_error`, `parse_error`, `invalid_characters`, `identity_field_forbidden` "
    "(identity comes from the credential, never the request), among others.",
    401: "Not authenticated, or the credential is not valid (`not_authenticated`, `authentication_failed`).",
    403: "Authenticated, but not allowed (`permission_denied`; CSRF for the session cookie).",
    404: "No such object, or not one the caller may see (`not_found`).",
    409: "Conflicts with the current state (an idempotent request still running, an object already decided).",
    410: "Gone (an approval that has expired).",
    413: "The body is larger than the server accepts (`request_too_large`).",
    422: "Understood but refused (an Idempotency-Key reused with another body, a request Tess does not do).",
    429: "Too many requests (`throttled`); retry after `Retry-After` seconds.",
    501: "The capability is not supported here (`unsupported`, `capability_unsupported`).",
    502: "An upstream (a runtime provider, a model) failed (`provider_error`).",
    503: "A dependency is briefly unavailable (`database_unavailable`, `service_unavailable`); nothing was "
    "changed. Retry after `Retry-After` seconds.",
}
# What an operation that reaches a runtime provider can add (providers_app.contract): no such provider instance
# or runtime, the runtime is not in a state that allows it, the provider does not support it, or it failed.
PROVIDER_ERRORS = (404, 409, 501, 502)
# Answers that tell the client when to retry.
RETRY_AFTER_STATUSES = frozenset({429, 503})
BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def list_schema(serializer: type[serializers.Serializer], *, cursor: bool = False) -> serializers.Serializer:
    """The OpenAPI shape of a list answer: ``{"results": [...]}``, plus ``next``/``previous`` when cursor-paged."""
    fields: dict[str, serializers.Field] = {"results": serializer(many=True)}
    if cursor:
        fields["next"] = serializers.URLField(allow_null=True, help_text="The next page, or null at the end.")
        fields["previous"] = serializers.URLField(allow_null=True, help_text="The previous page, or null.")
    name = serializer.__name__.removesuffix("Serializer") + ("Page" if cursor else "List")
    answer = inline_serializer(name=name, fields=fields)
    setattr(answer, LIST_ANSWER, True)  # its GET gets a `_list` operation id (TessAutoSchema below)
    return answer


def _is_list_answer(responses: Any) -> bool:
    if isinstance(responses, dict):
        return any(_is_list_answer(response) for response in responses.values())
    return bool(getattr(responses, LIST_ANSWER, False))


class TessAutoSchema(AutoSchema):
    def get_operation(self, *args: Any, **kwargs: Any) -> dict[str, Any] | None:
        operation = super().get_operation(*args, **kwargs)
        if operation is None:
            return None
        responses = operation["responses"]
        for status_code in sorted(self.error_statuses(operation)):
            # A view's own declaration of an error answer (its description) stands.
            if str(status_code) not in responses:
                responses[str(status_code)] = self._error_response(status_code)
        return operation

    def error_statuses(self, operation: Mapping[str, Any]) -> set[int]:
        """The error statuses this operation can answer with, from the route and the view's own list."""
        # Any route: identity fields in the query (middleware), unparseable or invalid input, and a
        # database or other dependency outage (a typed 503, never a 500).
        statuses = {400, 503}
        if self.method in BODY_METHODS:
            statuses.add(413)  # tess_site.input_guard
        security = operation.get("security") or []
        if security and {} not in security:
            statuses |= {401, 403}
        if "{" in self.path:
            statuses.add(404)
        if getattr(self.view, "throttle_classes", None):
            statuses.add(429)
        if any(p.get("in") == "header" and p.get("name") == "Idempotency-Key" for p in operation.get("parameters", [])):
            statuses |= {409, 422}  # still running with this key; the key reused with another body
        declared: Mapping[str, tuple[int, ...]] = getattr(self.view, "error_statuses", {})
        statuses.update(declared.get(self.method.lower(), ()))
        return statuses

    def _error_response(self, status_code: int) -> dict[str, Any]:
        answer = OpenApiResponse(response=ERROR_ENVELOPE, description=ERROR_DESCRIPTIONS.get(status_code, ""))
        response: dict[str, Any] = self._get_response_for_code(answer, str(status_code))
        if status_code in RETRY_AFTER_STATUSES:
            response["headers"] = {
                "Retry-After": {"schema": {"type": "integer"}, "description": "Seconds to wait before retrying."}
            }
        return response

    def get_operation_id(self) -> str:
        operation_id = super().get_operation_id()
        if (
            self.method == "GET"
            and operation_id.endswith("_retrieve")
            and _is_list_answer(self.get_response_serializers())
        ):
            return operation_id.removesuffix("_retrieve") + "_list"
        return operation_id


class PersonalTokenScheme(OpenApiAuthenticationExtension):
    target_class = "tess_site.accounts.authentication.PersonalTokenAuthentication"
    name = "personalToken"

    def get_security_definition(self, auto_schema: AutoSchema) -> dict[str, Any]:
        definition = build_bearer_security_scheme_object(header_name="Authorization", token_prefix="Bearer")
        definition["description"] = "A personal access token (`tess token` or the admin), sent as `Bearer tess_…`."
        return dict(definition)


class TenantSessionScheme(OpenApiAuthenticationExtension):
    target_class = "tess_site.accounts.authentication.TenantSessionAuthentication"
    name = "sessionCookie"

    def get_security_definition(self, auto_schema: AutoSchema) -> dict[str, Any]:
        return {
            "type": "apiKey",
            "in": "cookie",
            "name": settings.SESSION_COOKIE_NAME,
            "description": "The browser's signed-in session; unsafe methods also need the CSRF token.",
        }
