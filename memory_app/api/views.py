"""Operator memory over the API. Every route acts on the authenticated operator only: no subject exists."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from approvals_app.api.card_serializers import CardSerializer
from approvals_app.api.card_views import RetryAfterMixin
from approvals_app.cards import Unavailable
from tess_site.accounts.api_base import ScopedAPIView

from ..errors import MemoryUnavailable
from ..selectors import ERASURE, PROMPT_CEILINGS, Snapshot, category_policy_view, memory_snapshot
from ..services import memory_forget, memory_propose
from .serializers import (
    ForgetResultSerializer,
    MemoryForgetQuerySerializer,
    MemoryHistorySerializer,
    MemoryProposalSerializer,
    MemoryRowSerializer,
    MemorySnapshotSerializer,
)


def snapshot_data(snapshot: Snapshot) -> dict[str, Any]:
    context = {"now": snapshot.now}
    return {
        "memory_scope": snapshot.memory_scope,
        "served": snapshot.served,
        "categories": category_policy_view(),
        "prompt_ceilings": PROMPT_CEILINGS,
        "erasure": ERASURE,
        "rows": MemoryRowSerializer(snapshot.rows, many=True, context=context).data,
        "history": MemoryHistorySerializer(snapshot.history, many=True).data,
        "invalid_rows": snapshot.invalid,
    }


class MemoryApiMixin(RetryAfterMixin):
    def handle_exception(self, exc: Exception) -> Response:
        if isinstance(exc, Unavailable) and not isinstance(exc, MemoryUnavailable):
            exc = MemoryUnavailable()
        return super().handle_exception(exc)


class MemoryView(MemoryApiMixin, ScopedAPIView):
    """Inspect (GET) or directly forget (DELETE) your own operator memory."""

    # Memory switched off for the caller; no note in the slot named for forgetting.
    error_statuses = {"get": (409,), "delete": (404, 409)}

    @extend_schema(responses=MemorySnapshotSerializer)
    def get(self, request: Request) -> Response:
        return Response(snapshot_data(memory_snapshot(scope=self.scope)))

    # It answers 200 with a body (how many notes went), not the 204 a DELETE is assumed to give.
    @extend_schema(parameters=[MemoryForgetQuerySerializer], responses={200: ForgetResultSerializer})
    def delete(self, request: Request) -> Response:
        query = MemoryForgetQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        outcome = memory_forget(
            self.scope,
            category=query.validated_data.get("category") or None,
            slot=query.validated_data.get("slot") or None,
            forget_all=query.validated_data["all"],
        )
        return Response(
            {"outcome": "deleted", "deleted_count": outcome.deleted_count, "redacted_count": outcome.redacted_count}
        )


class MemoryCardProposeView(MemoryApiMixin, ScopedAPIView):
    """Propose a memory write; it is applied only when you confirm the returned card."""

    # Memory switched off; the slot or category cannot take the note.
    error_statuses = {"post": (409,)}

    @extend_schema(request=MemoryProposalSerializer, responses={201: CardSerializer})
    def post(self, request: Request) -> Response:
        proposal = MemoryProposalSerializer(data=request.data)
        proposal.is_valid(raise_exception=True)
        card = memory_propose(self.scope, data=dict(proposal.validated_data))
        return Response(CardSerializer(card).data, status=status.HTTP_201_CREATED)
