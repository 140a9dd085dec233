"""``GET /api/v1/approvals/`` and ``GET /api/v1/approvals/{id}/``: what you requested or may decide.

Deciding happens only on the one-time link page (``/approvals/<token>/``), never through the API.
"""

from __future__ import annotations

from django.db.models import Q
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework.pagination import CursorPagination
from rest_framework.request import Request
from rest_framework.response import Response

from tess_site.accounts.api_base import ScopedAPIView, query_filters
from tess_site.api_schema import list_schema

from ..approval_selectors import approval_get, approvals_visible
from ..models import Approval
from .approval_serializers import ApprovalListQuerySerializer, ApprovalSerializer


class ApprovalCursor(CursorPagination):
    ordering = "-created_at"
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200


class ApprovalListView(ScopedAPIView):
    """Approvals you requested or hold a link to decide, newest first; ``?status=pending`` to filter."""

    @extend_schema(parameters=[ApprovalListQuerySerializer], responses=list_schema(ApprovalSerializer, cursor=True))
    def get(self, request: Request) -> Response:
        query = ApprovalListQuerySerializer(data=query_filters(request))
        query.is_valid(raise_exception=True)
        approvals = approvals_visible(scope=self.scope, session_id=query.validated_data.get("session_id"))
        wanted = query.validated_data.get("status")
        now = timezone.now()
        if wanted == Approval.Status.PENDING:
            approvals = approvals.filter(status=wanted, expires_at__gt=now)
        elif wanted == Approval.Status.EXPIRED:
            approvals = approvals.filter(Q(status=wanted) | Q(status=Approval.Status.PENDING, expires_at__lte=now))
        elif wanted:
            approvals = approvals.filter(status=wanted)
        paginator = ApprovalCursor()
        page = paginator.paginate_queryset(approvals, request, view=self)
        return paginator.get_paginated_response(ApprovalSerializer(page, many=True).data)


class ApprovalDetailView(ScopedAPIView):
    """One approval you requested or may decide; anything else is 404."""

    @extend_schema(responses=ApprovalSerializer)
    def get(self, request: Request, approval_id: str) -> Response:
        return Response(ApprovalSerializer(approval_get(scope=self.scope, approval_id=approval_id)).data)
