"""Mos hand-offs over the API: list what you may see; Mos posts results back, signed."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from tess_site.accounts.api_base import ScopedAPIView, query_filters
from tess_site.api_schema import list_schema
from tess_site.errors import InvalidInput

from ..handoff_adapters import SIGNATURE_HEADER, signature_valid
from ..handoff_selectors import handoffs_listed
from ..handoffs import SignatureInvalid, handoff_result_apply
from ..models import Handoff

LIST_LIMIT = 200


class HandoffSerializer(serializers.ModelSerializer[Handoff]):
    requester = serializers.CharField(source="requester.username", read_only=True)

    class Meta:
        model = Handoff
        fields = [
            "id",
            "session_id",
            "correlation_id",
            "summary",
            "status",
            "adapter",
            "result",
            "requester",
            "created_at",
            "updated_at",
        ]


class HandoffListQuerySerializer(serializers.Serializer[Any]):
    status = serializers.ChoiceField(choices=Handoff.Status.choices, required=False)
    session_id = serializers.CharField(required=False, max_length=64)


class HandoffListView(ScopedAPIView):
    """Your hand-offs in this tenant, newest first (a tenant's auditors and admins see all of them)."""

    @extend_schema(parameters=[HandoffListQuerySerializer], responses=list_schema(HandoffSerializer))
    def get(self, request: Request) -> Response:
        query = HandoffListQuerySerializer(data=query_filters(request))
        query.is_valid(raise_exception=True)
        rows = handoffs_listed(self.scope, **query.validated_data)
        return Response({"results": HandoffSerializer(rows[:LIST_LIMIT], many=True).data})


class HandoffResultView(APIView):
    """Mos reports a hand-off's progress. Authenticated by the signature alone: no user, no session."""

    # A bad signature; a transition the hand-off cannot make.
    error_statuses = {"post": (403, 409)}

    authentication_classes: list[Any] = []
    permission_classes = [AllowAny]

    @extend_schema(
        parameters=[
            OpenApiParameter(
                SIGNATURE_HEADER, str, OpenApiParameter.HEADER, required=True, description="sha256=<hex HMAC>"
            )
        ],
        request=None,
        responses={200: OpenApiResponse(description='`{"id", "status"}`: the status now recorded')},
        description='`{"status": "acknowledged" | "completed" | "failed", "result": any JSON}`, signed with '
        "HMAC-SHA256 over the raw body with `TESS_MOS_WEBHOOK_SECRET`. A forged or missing signature is "
        "`403 signature_invalid`; a status that would move backwards is `409 handoff_transition_invalid`.",
    )
    def post(self, request: Request, handoff_id: str) -> Response:
        body = request.body
        if not signature_valid(settings.TESS_MOS_WEBHOOK_SECRET, body, request.headers.get(SIGNATURE_HEADER)):
            raise SignatureInvalid()
        try:
            data = json.loads(body or b"{}")
        except ValueError as exc:
            raise InvalidInput("The body is not JSON.") from exc
        if not isinstance(data, dict):
            raise InvalidInput("The body must be a JSON object.")
        handoff = handoff_result_apply(
            handoff_id=handoff_id, status=str(data.get("status", "")), result=data.get("result"), via="webhook"
        )
        return Response({"id": str(handoff.pk), "status": handoff.status})
