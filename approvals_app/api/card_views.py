"""Confirm cards over the API: list your own, confirm or dismiss one (DESIGN.md routes)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from django.db import DatabaseError, IntegrityError
from drf_spectacular.utils import extend_schema
from rest_framework.pagination import CursorPagination
from rest_framework.request import Request
from rest_framework.response import Response

from tess_site.accounts.api_base import ScopedAPIView, query_filters
from tess_site.api_schema import list_schema

from ..card_selectors import card_get, cards_visible
from ..cards import Unavailable, card_confirm, card_dismiss
from .card_serializers import CardDecisionSerializer, CardListQuerySerializer, CardSerializer


class RetryAfterMixin:
    """Adds ``Retry-After`` to the envelope of a retryable ``Unavailable`` (503)."""

    def handle_exception(self, exc: Exception) -> Response:
        if isinstance(exc, DatabaseError) and not isinstance(exc, IntegrityError):
            exc = Unavailable()
        response: Response = super().handle_exception(exc)  # type: ignore[misc]
        if isinstance(exc, Unavailable):
            response["Retry-After"] = str(exc.retry_after_seconds)
        return response


class CardCursor(CursorPagination):
    ordering = "-created_at"
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200


class CardListView(RetryAfterMixin, ScopedAPIView):
    """Your cards in this tenant, newest first; ``?status=pending`` for the ones awaiting you."""

    @extend_schema(parameters=[CardListQuerySerializer], responses=list_schema(CardSerializer, cursor=True))
    def get(self, request: Request) -> Response:
        query = CardListQuerySerializer(data=query_filters(request))
        query.is_valid(raise_exception=True)
        paginator = CardCursor()
        cards = cards_visible(scope=self.scope, **query.validated_data)
        page = paginator.paginate_queryset(cards, request, view=self)
        return paginator.get_paginated_response(CardSerializer(page, many=True).data)


def _decision(card: Any, result: dict[str, Any]) -> dict[str, Any]:
    return {**result, "card": CardSerializer(card).data}


class CardConfirmView(RetryAfterMixin, ScopedAPIView):
    """Confirm one of your pending cards; the response is the server's result of applying it."""

    # Already decided; applying the card conflicts with memory as it is now.
    error_statuses = {"post": (409,)}

    @extend_schema(request=None, responses=CardDecisionSerializer)
    def post(self, request: Request, card_id: UUID) -> Response:
        card, result = card_confirm(scope=self.scope, card_id=card_id)
        return Response(_decision(card, result))


class CardDismissView(RetryAfterMixin, ScopedAPIView):
    """Dismiss one of your pending cards: nothing is applied."""

    # Already decided.
    error_statuses = {"post": (409,)}

    @extend_schema(request=None, responses=CardDecisionSerializer)
    def post(self, request: Request, card_id: UUID) -> Response:
        card = card_dismiss(scope=self.scope, card_id=card_id)
        return Response(_decision(card, {"outcome": "dismissed"}))


class CardDetailView(RetryAfterMixin, ScopedAPIView):
    @extend_schema(responses=CardSerializer)
    def get(self, request: Request, card_id: UUID) -> Response:
        return Response(CardSerializer(card_get(scope=self.scope, card_id=card_id)).data)
