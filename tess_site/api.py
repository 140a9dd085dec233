"""Base classes every API view stands on: authenticated, tenant-scoped, enveloped errors."""

from __future__ import annotations

from drf_spectacular.utils import inline_serializer
from rest_framework import serializers
from rest_framework.views import APIView

from tess_site.accounts.permissions import request_scope
from tess_site.api_schema import LIST_ANSWER
from tess_site.scope import Scope


class ScopedAPIView(APIView):
    """An API view whose ``scope`` is the verified caller's Scope (permissions have already required one)."""

    @property
    def scope(self) -> Scope:
        scope = request_scope(self.request)
        assert scope is not None, "permission classes must require a tenant member before the view runs"
        return scope


def list_schema(serializer: type[serializers.Serializer], *, cursor: bool = False) -> serializers.Serializer:
    """The OpenAPI shape of a list answer: ``{"results": [...]}``, plus ``next``/``previous`` when cursor-paged."""
    fields: dict[str, serializers.Field] = {"results": serializer(many=True)}
    if cursor:
        fields["next"] = serializers.URLField(allow_null=True, help_text="The next page, or null at the end.")
        fields["previous"] = serializers.URLField(allow_null=True, help_text="The previous page, or null.")
    name = serializer.__name__.removesuffix("Serializer") + ("Page" if cursor else "List")
    answer = inline_serializer(name=name, fields=fields)
    setattr(answer, LIST_ANSWER, True)  # its GET gets a `_list` operation id (tess_site.api_schema)
    return answer
