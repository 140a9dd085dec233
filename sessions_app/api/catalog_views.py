"""Invoking an operator tool: ``POST /api/v1/catalog/{id}/invoke/`` (the gateway's policy decides what happens)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from approvals_app.api.approval_serializers import ApprovalSerializer
from tess_site.accounts.api_base import ScopedAPIView

from ..gateway_tools import Invocation, catalog_invoke
from ..idempotency import IDEMPOTENCY_PARAMETER, KeyHold, idempotent_in_steps


class InvokeSerializer(serializers.Serializer[Any]):
    input = serializers.DictField(default=dict, help_text="The tool's input; must satisfy its `input_schema`.")
    session = serializers.UUIDField(
        required=False, allow_null=True, help_text="The session you are working in (the stream notes the call)."
    )


INVOCATION = inline_serializer(
    name="CatalogInvocation",
    fields={
        "tool": serializers.CharField(),
        "authority": serializers.ChoiceField(choices=["tess", "human_approval", "mos"]),
        "status": serializers.ChoiceField(choices=["done", "approval_requested", "handed_off"]),
        "result": serializers.DictField(allow_null=True, help_text="`tess` tools: what the tool returned."),
        "approval": ApprovalSerializer(allow_null=True, help_text="`human_approval` tools: the pending request."),
        "handoff": serializers.DictField(allow_null=True, help_text="`mos` tools: the hand-off's id and status."),
    },
)


class CatalogInvokeView(ScopedAPIView):
    idempotency: KeyHold

    @extend_schema(
        request=InvokeSerializer,
        responses={
            200: INVOCATION,
            202: INVOCATION,
            400: OpenApiResponse(description="`catalog_input_invalid`: details name the path of the error"),
            501: OpenApiResponse(description="`capability_unsupported`: the capability is absent here"),
        },
        parameters=[IDEMPOTENCY_PARAMETER],
        description=(
            "Invoke an operator tool of `GET /api/v1/catalog/`. By the entry's authority: `tess` (read-only) "
            "runs now and answers 200 with `result`; `human_approval` answers 202 with a pending approval of "
            "exactly this action and target — it runs once, after an approver approved; `mos` answers 202 "
            "with a Mos hand-off. Needs the operator role. Every invocation is audited."
        ),
    )
    @idempotent_in_steps
    def post(self, request: Request, tool_id: str) -> Response:
        body = InvokeSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        session = body.validated_data.get("session")
        invocation = catalog_invoke(
            self.scope,
            tool_id=tool_id,
            data=body.validated_data["input"],
            session_id=str(session) if session is not None else None,
            # A tool may wait on a provider or an MCP server: no transaction is held while it runs, and the
            # stored outcome commits with the invocation's record.
            finish=lambda done: self.idempotency.finish(done.http_status, _body(done)),
        )
        return Response(_body(invocation), status=invocation.http_status)


def _body(invocation: Invocation) -> dict[str, Any]:
    approval = ApprovalSerializer(invocation.approval).data if invocation.approval is not None else None
    return invocation.body(approval)
