"""Reviewed coding memory over the API (``/api/v1/coding-memory/``). Roles are checked in the services."""

from __future__ import annotations

import json

from django.http import HttpResponse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from tess_site.accounts.api_base import ScopedAPIView, query_filters
from tess_site.api_schema import list_schema

from ..coding.selectors import coding_memory_entries, coding_memory_entry
from ..coding.services import (
    coding_memory_apply,
    coding_memory_export,
    coding_memory_reject,
    coding_memory_request_review,
    coding_memory_retire,
    coding_memory_write,
)
from .coding_serializers import (
    CodingMemoryDetailSerializer,
    CodingMemoryEntrySerializer,
    CodingMemoryListQuerySerializer,
    CodingMemoryReviewSerializer,
    CodingMemoryWriteSerializer,
    ExportQuerySerializer,
    RationaleSerializer,
    ReviewRequestSerializer,
)

LIST_LIMIT = 200


class CodingMemoryListView(ScopedAPIView):
    """List the tenant's coding memory (any member), or write a candidate (operator, approver, admin)."""

    @extend_schema(parameters=[CodingMemoryListQuerySerializer], responses=list_schema(CodingMemoryEntrySerializer))
    def get(self, request: Request) -> Response:
        query = CodingMemoryListQuerySerializer(data=query_filters(request))
        query.is_valid(raise_exception=True)
        entries = coding_memory_entries(
            self.scope,
            workspace_key=query.validated_data.get("workspace"),
            status=query.validated_data.get("status"),
        )[:LIST_LIMIT]
        return Response({"results": CodingMemoryEntrySerializer(entries, many=True).data})

    @extend_schema(request=CodingMemoryWriteSerializer, responses={201: CodingMemoryEntrySerializer})
    def post(self, request: Request) -> Response:
        body = CodingMemoryWriteSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        entry = coding_memory_write(self.scope, data=dict(body.validated_data))
        return Response(CodingMemoryEntrySerializer(entry).data, status=status.HTTP_201_CREATED)


class CodingMemoryDetailView(ScopedAPIView):
    @extend_schema(responses=CodingMemoryDetailSerializer)
    def get(self, request: Request, entry_id: str) -> Response:
        return Response(CodingMemoryDetailSerializer(coding_memory_entry(self.scope, entry_id=entry_id)).data)


class CodingMemoryReviewRequestView(ScopedAPIView):
    @extend_schema(request=ReviewRequestSerializer, responses={201: CodingMemoryReviewSerializer})
    def post(self, request: Request, entry_id: str) -> Response:
        body = ReviewRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        review = coding_memory_request_review(self.scope, entry_id=entry_id, note=body.validated_data["note"])
        return Response(CodingMemoryReviewSerializer(review).data, status=status.HTTP_201_CREATED)


class _DecisionView(ScopedAPIView):
    # A transition the entry cannot make.
    error_statuses = {"post": (409,)}
    decide = staticmethod(coding_memory_apply)

    @extend_schema(request=RationaleSerializer, responses=CodingMemoryEntrySerializer)
    def post(self, request: Request, entry_id: str) -> Response:
        body = RationaleSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        entry = type(self).decide(self.scope, entry_id=entry_id, rationale=body.validated_data["rationale"])
        return Response(CodingMemoryEntrySerializer(entry).data)


class CodingMemoryApplyView(_DecisionView):
    """Activate a candidate (human approver or admin)."""

    decide = staticmethod(coding_memory_apply)


class CodingMemoryRejectView(_DecisionView):
    decide = staticmethod(coding_memory_reject)


class CodingMemoryRetireView(_DecisionView):
    decide = staticmethod(coding_memory_retire)


class CodingMemoryExportView(ScopedAPIView):
    """Download a workspace's exportable entries as JSON Lines of ``CodingPlastMemBridgeRecordV1``.

    POST, not GET: every export is recorded (and may be ingested), and a GET must change nothing.
    """

    @extend_schema(request=ExportQuerySerializer, responses={200: OpenApiResponse(description="application/x-ndjson")})
    def post(self, request: Request) -> HttpResponse:
        body = ExportQuerySerializer(data=request.data)
        body.is_valid(raise_exception=True)
        result = coding_memory_export(self.scope, workspace_key=body.validated_data["workspace"], via="api")
        lines = "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in result.records)
        response = HttpResponse(lines, content_type="application/x-ndjson; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="coding-memory-{result.export.pk}.jsonl"'
        response["X-Export-Id"] = str(result.export.pk)
        return response
