"""Permission-aware reads of confirm cards: a person sees only their own cards in the scope's tenant."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db.models import QuerySet

from tess_site.errors import NotFound
from tess_site.scope import Scope

from .models import Card


def cards_visible(*, scope: Scope, status: str | None = None, kind: str | None = None) -> QuerySet[Card]:
    """The scope actor's cards, newest first; nobody else's, whatever their role."""
    if scope.actor is None:
        return Card.objects.none()
    cards = Card.objects.filter(tenant=scope.tenant, owner=scope.actor)
    if status is not None:
        cards = cards.filter(status=status)
    if kind is not None:
        cards = cards.filter(kind=kind)
    return cards.order_by("-created_at", "-id")


def card_get(*, scope: Scope, card_id: Any) -> Card:
    """One of the scope actor's cards; another person's card is answered as if it did not exist."""
    try:
        card = cards_visible(scope=scope).filter(pk=card_id).first()
    except ValidationError:  # not a UUID
        card = None
    if card is None:
        raise NotFound()
    return card
