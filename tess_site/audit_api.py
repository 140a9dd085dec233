"""GET /api/v1/audit/: the read-only audit feed API.

Beside the ``tess_site.audit`` package rather than inside it: the view authenticates through
``tess_site.accounts``, which itself records into the feed.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.pagination import CursorPagination
from rest_framework.request import Request
from rest_framework.response import Response

from tess_site.accounts.api_base import ScopedAPIView
from tess_site.accounts.permissions import has_role
from tess_site.api_schema import list_schema
from tess_site.scope import Role

from .audit.models import AuditEvent
from .audit.selectors import audit_events_visible


class AuditEventSerializer(serializers.ModelSerializer):
    class Meta:
        model = AuditEvent
        fields = [
            "seq",
            "actor_label",
            "channel",
            "action",
            "target_type",
            "target_id",
            "outcome",
            "correlation_id",
            "metadata",
            "created_at",
            "prev_hash",
            "hash",
        ]
        read_only_fields = fields


class AuditCursor(CursorPagination):
    ordering = "-seq"
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200


class AuditListView(ScopedAPIView):
    """The audit feed of your tenant, newest first (auditor or admin role)."""

    permission_classes = [has_role(Role.AUDITOR, Role.ADMIN)]

    @extend_schema(responses=list_schema(AuditEventSerializer, cursor=True))
    def get(self, request: Request) -> Response:
        paginator = AuditCursor()
        page = paginator.paginate_queryset(audit_events_visible(scope=self.scope), request, view=self)
        return paginator.get_paginated_response(AuditEventSerializer(page, many=True).data)
