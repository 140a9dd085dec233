"""Confirm cards: the one mechanism by which an operator-owned mutation is proposed and then applied.

A higher app registers a handler for its card ``kind`` in its ``wiring.py`` (memory_app: memory writes)
and proposes cards through ``card_propose``. Listing, confirming and
dismissing are generic: only the card's owner may decide it (anyone else gets 404, as if it did not
exist), and a card is decided once — a conditional UPDATE from ``pending`` — however many confirms race.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ParamSpec, Protocol, TypeVar

from django.db import DatabaseError, IntegrityError, transaction
from django.utils import timezone
from rest_framework import status

from tess_site.errors import Conflict, InvalidInput, NotFound, TessError
from tess_site.scope import Scope

from .card_selectors import cards_restrict
from .events import notify_user_on_commit
from .inbox_items import card_item
from .models import Card
from .notifications import inbox_entered_on_commit, inbox_left_on_commit

logger = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")


class Unavailable(TessError):
    """The store could not be reached or answered with an error; the same request may succeed later."""

    code = "unavailable"
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_message = "The store is unavailable right now; retry shortly."
    retry_after_seconds = 2


class CardAlreadyDecided(Conflict):
    code = "card_already_decided"
    default_message = "This card was already decided; nothing was done."


@dataclass(frozen=True)
class CardApplied:
    """What a handler reports after applying a card.

    ``response`` is returned to the confirming client (it may hold the applied row, text included);
    ``stored`` is kept on the card and must hold ids, counts and codes only.
    """

    response: dict[str, Any]
    stored: dict[str, Any] = field(default_factory=dict)


class CardHandler(Protocol):
    def apply(self, scope: Scope, card: Card) -> CardApplied:
        """Apply a confirmed card inside the caller's transaction. Raise a TessError to refuse it."""

    def scrub(self, payload: dict[str, Any]) -> dict[str, Any]:
        """``payload`` without any text a person wrote: what the card keeps once decided."""


_handlers: dict[str, CardHandler] = {}


def register_card_handler(kind: str, handler: CardHandler) -> None:
    if not kind.isidentifier() or len(kind) > 32:
        raise ValueError(f"card kind {kind!r} is not a short identifier")
    _handlers[kind] = handler


def card_handler(kind: str) -> CardHandler:
    handler = _handlers.get(kind)
    if handler is None:
        raise LookupError(f"no card handler is registered for kind {kind!r}")
    return handler


def loud_database_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Turn a database failure into the typed, retryable ``Unavailable`` — never an empty answer."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except Unavailable:
            raise
        except IntegrityError:
            raise
        except DatabaseError as exc:
            logger.error("database error in %s: %s", fn.__qualname__, exc.__class__.__name__)
            raise Unavailable() from exc

    return wrapper


def _push(card: Card) -> None:
    notify_user_on_commit(
        tenant_id=card.tenant_id,
        user_id=card.owner_id,
        kind="card",
        body={"id": str(card.id), "kind": card.kind, "status": card.status},
    )
    if card.status == Card.Status.PENDING:
        inbox_entered_on_commit(tenant_id=card.tenant_id, user_id=card.owner_id, item=card_item(card))
    else:
        inbox_left_on_commit(tenant_id=card.tenant_id, user_id=card.owner_id, key=f"card:{card.id}")


def card_propose(*, scope: Scope, kind: str, payload: dict[str, Any]) -> Card:
    """Park a pending card for the scope's actor. The caller has validated ``payload``."""
    if scope.actor is None:
        raise InvalidInput("system scopes cannot own cards")
    card_handler(kind)  # a card nobody could apply is a programming error, not a client one
    with transaction.atomic():
        card = Card.objects.create(
            tenant=scope.tenant,
            owner=scope.actor,
            kind=kind,
            payload=payload,
            session_id=scope.session,
            correlation_id=scope.correlation_id,
        )
        _push(card)
    return card


def _owned(scope: Scope, card_id: Any) -> Any:
    if scope.actor is None:
        raise NotFound()
    return cards_restrict(scope, "change").filter(pk=card_id)


def _already_decided(scope: Scope, card_id: Any) -> TessError:
    card = _owned(scope, card_id).first()
    if card is None:
        return NotFound()
    return CardAlreadyDecided(details={"id": str(card.id), "status": card.status, "outcome": card.outcome})


@loud_database_errors
def card_confirm(*, scope: Scope, card_id: Any) -> tuple[Card, dict[str, Any]]:
    """Decide a pending card of the scope's actor as confirmed and apply it; return it with the response.

    The conditional UPDATE is the claim: of concurrent confirms exactly one changes the row, the others
    wait for its commit, then change nothing and get ``card_already_decided``. A handler's typed refusal is
    the card's outcome (``refused``); a database error rolls everything back and the card stays pending.
    """
    with transaction.atomic():
        now = timezone.now()
        claimed = (
            _owned(scope, card_id)
            .filter(status=Card.Status.PENDING)
            .update(status=Card.Status.CONFIRMED, decided_at=now)
        )
        if claimed != 1:
            raise _already_decided(scope, card_id)
        card = Card.objects.get(pk=card_id)
        handler = card_handler(card.kind)
        try:
            with transaction.atomic():
                applied = handler.apply(scope, card)
        except Unavailable:
            raise
        except TessError as exc:
            error = {"code": exc.code, "message": exc.message, "details": exc.details}
            applied = CardApplied(
                response={"outcome": "refused", "error": error},
                stored={"outcome": "refused", "error": {"code": exc.code}},
            )
        card.payload = handler.scrub(card.payload)
        card.outcome = applied.stored or {"outcome": applied.response.get("outcome")}
        card.save(update_fields=["payload", "outcome"])
        _push(card)
    return card, applied.response


@loud_database_errors
def card_dismiss(*, scope: Scope, card_id: Any) -> Card:
    """Decide a pending card of the scope's actor as dismissed: nothing is applied, its text is scrubbed."""
    with transaction.atomic():
        claimed = (
            _owned(scope, card_id)
            .filter(status=Card.Status.PENDING)
            .update(status=Card.Status.DISMISSED, decided_at=timezone.now())
        )
        if claimed != 1:
            raise _already_decided(scope, card_id)
        card = Card.objects.get(pk=card_id)
        card.payload = card_handler(card.kind).scrub(card.payload)
        card.outcome = {"outcome": "dismissed"}
        card.save(update_fields=["payload", "outcome"])
        _push(card)
    return card


def cards_scrub_pending(
    *, owner_id: int, tenant_id: int | None, kind: str, match: Callable[[dict[str, Any]], bool]
) -> int:
    """Dismiss ``owner_id``'s pending ``kind`` cards (in ``tenant_id``, or every tenant) that ``match``.

    Their text is scrubbed: used when an erasure must leave no copy of a note anywhere. Call inside the
    erasing transaction; returns how many cards were dismissed.
    """
    handler = card_handler(kind)
    cards = Card.objects.filter(owner_id=owner_id, kind=kind, status=Card.Status.PENDING)
    if tenant_id is not None:
        cards = cards.filter(tenant_id=tenant_id)
    count = 0
    # A card locked by a concurrent confirm is being decided right now: its own decision scrubs it, and
    # waiting for it here could deadlock against that confirm waiting for the caller's locks.
    for card in cards.select_for_update(skip_locked=True):
        if not match(card.payload):
            continue
        card.payload = handler.scrub(card.payload)
        card.status = Card.Status.DISMISSED
        card.decided_at = timezone.now()
        card.outcome = {"outcome": "dismissed", "reason": "erased"}
        card.save(update_fields=["payload", "status", "decided_at", "outcome"])
        _push(card)
        count += 1
    return count
