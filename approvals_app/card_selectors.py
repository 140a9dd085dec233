"""Permission-aware reads of confirm cards: a person sees only their own cards in the scope's tenant.

Every read of a card on behalf of a person starts from ``cards_restrict``, the one place that applies the
tenant and owner rules (deciding a card reads through it too); the other readers here narrow what it returns.
"""

from __future__ import annotations

from typing import Any, Literal

from django.core.exceptions import ValidationError
from django.db.models import QuerySet

from tess_site.errors import NotFound
from tess_site.scope import Scope

from .models import Card

CardAction = Literal["view", "change"]


def cards_restrict(scope: Scope, action: CardAction = "view") -> QuerySet[Card]:
    """The cards the scope's actor may ``action``: to view or to decide (``change``), only their own cards in
    the scope's tenant, whatever their role. A system scope has no cards.
    """
    if scope.actor is None:
        return Card.objects.none()
    return Card.objects.filter(tenant=scope.tenant, owner=scope.actor)


def cards_visible(
    *, scope: Scope, status: str | None = None, kind: str | None = None, session_id: Any = None
) -> QuerySet[Card]:
    """The scope actor's cards, newest first; nobody else's, whatever their role."""
    cards = cards_restrict(scope, "view")
    if session_id is not None:
        cards = cards.filter(session_id=str(session_id))
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
