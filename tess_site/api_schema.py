"""OpenAPI generation details shared by every API view (drf-spectacular).

- The two ways to authenticate appear as security schemes (a personal token as a bearer token, the browser's
  session cookie), so the schema says how to call each route.
- A GET that answers a list (``list_schema``) gets an operation id ending in ``_list``, so a
  collection and its item (``/sessions/`` and ``/sessions/{id}/``) do not share one.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import build_bearer_security_scheme_object
from drf_spectacular.utils import inline_serializer
from rest_framework import serializers

LIST_ANSWER = "_tess_list_answer"


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
