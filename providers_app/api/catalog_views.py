"""The operator-tool catalog: ``GET /api/v1/catalog/`` lists every tool, what it needs and who decides."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from tess_site.accounts.api_base import ScopedAPIView

from ..capabilities import available_capabilities
from ..catalog import catalog_for
from ..registry import instances_for_tenant

CATALOG_ENTRY = inline_serializer(
    name="CatalogEntry",
    fields={
        "id": serializers.CharField(),
        "family": serializers.CharField(),
        "title": serializers.CharField(),
        "description": serializers.CharField(),
        "authority": serializers.ChoiceField(choices=["tess", "mos", "human_approval"]),
        "input_schema": serializers.DictField(help_text="JSON Schema (2020-12) the input is validated against"),
        "read_only": serializers.BooleanField(),
        "capability": serializers.CharField(help_text="the capability the tool needs"),
        "operation": serializers.CharField(help_text="the capability's operation it calls"),
        "available": serializers.BooleanField(help_text="whether that capability and operation are on offer now"),
        "allowed_by_policy": serializers.BooleanField(
            help_text="whether TESS_TOOL_POLICY lets Tess use the tool's authority (read_only: tess tools only)"
        ),
        "choices": serializers.DictField(
            child=serializers.ListField(child=serializers.CharField()),
            help_text="names your tenant may pass in name fields (repo, command, server)",
        ),
    },
    many=True,
)


class CatalogView(ScopedAPIView):
    """Operator tools: GitOps, fleet diagnostics, runtime bootstrap, Discord, MCP discovery."""

    @extend_schema(
        responses=inline_serializer(
            name="Catalog",
            fields={
                "results": CATALOG_ENTRY,
                "capabilities": inline_serializer(
                    name="CapabilityDescriptor",
                    fields={
                        "name": serializers.CharField(),
                        "instance": serializers.CharField(allow_null=True, help_text="null: Tess-wide"),
                        "operations": serializers.ListField(child=serializers.CharField()),
                        "read_only": serializers.BooleanField(),
                    },
                    many=True,
                ),
            },
        ),
        description=(
            "Every operator tool with its authority (`tess` runs read-only tools now, `human_approval` asks "
            "an approver first, `mos` hands the work to Mos), its input schema, whether it only reads, and "
            "the capability it needs. Invoke one with `POST /api/v1/catalog/{id}/invoke/`; a tool whose "
            "capability is not `available` fails closed with `capability_unsupported` (501)."
        ),
    )
    def get(self, request: Request) -> Response:
        instances = instances_for_tenant(self.scope.tenant.slug)
        capabilities = [d.describe() for d in available_capabilities(instances=instances)]
        return Response({"results": catalog_for(self.scope), "capabilities": capabilities})
