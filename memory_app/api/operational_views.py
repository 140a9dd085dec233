"""Operational memory over the API: the owner lists, searches, inspects stats of and deletes their records.

Captures are made by Tess at lifecycle boundaries, never through the API.
"""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from tess_site.accounts.api_base import ScopedAPIView

from ..plugin import operator_memory_plugin
from .coding_serializers import OperationalQuerySerializer


class OperationalMemoryView(ScopedAPIView):
    """Your recent records (newest first), or with ``q`` your records ranked by relevance."""

    @extend_schema(parameters=[OperationalQuerySerializer], responses=OpenApiTypes.OBJECT)
    def get(self, request: Request) -> Response:
        query = OperationalQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        plugin = operator_memory_plugin()
        q, limit = query.validated_data["q"].strip(), query.validated_data["limit"]
        records = plugin.search(self.scope, query=q, limit=limit) if q else plugin.recent(self.scope, limit=limit)
        return Response({"results": [record.as_dict() for record in records]})


class OperationalMemoryStatsView(ScopedAPIView):
    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request: Request) -> Response:
        return Response(operator_memory_plugin().stats(self.scope))


class OperationalMemoryRecordView(ScopedAPIView):
    # An adapter without a delete route.
    error_statuses = {"delete": (501,)}

    @extend_schema(responses={204: None})
    def delete(self, request: Request, record_id: str) -> Response:
        operator_memory_plugin().delete(self.scope, record_id=record_id)
        return Response(status=status.HTTP_204_NO_CONTENT)
