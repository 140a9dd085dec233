"""OpenAPI generation details shared by every API view (drf-spectacular).

- The two ways to authenticate appear as security schemes (a personal token as a bearer token, the browser's
  session cookie), so the schema says how to call each route.
- A GET that answers a list (``tess_site.api.list_schema``) gets an operation id ending in ``_list``, so a
  collection and its item (``/sessions/`` and ``/sessions/{id}/``) do not share one.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import build_bearer_security_scheme_object

LIST_ANSWER = "_tess_list_answer"


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
