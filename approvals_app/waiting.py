"""What waits on a person — the inbox — built from the rows that already exist: their pending cards, the pending
requests they may decide, the pending requests they made, and what registered sources add (their sessions
waiting for input, from sessions_app).

``/ws/me/`` sends it first on every (re)connect, so nothing that matters depends on a push arriving while the
socket was down; ``GET /api/v1/inbox/`` and ``/inbox/`` read the same. It carries ids, names and statuses,
never a one-time link: links stay where they are delivered privately.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db.models import Exists, OuterRef
from django.utils import timezone

from tess_site.scope import Role, Scope

from .approval_selectors import approvals_visible
from .approvals import approval_body
from .card_selectors import cards_visible
from .inbox_items import KINDS, approval_item, card_item, inbox_sources
from .models import Approval, ApprovalLink, Card

logger = logging.getLogger(__name__)

# A snapshot names at most this many items of each kind, newest first; a longer backlog is for the lists.
SNAPSHOT_LIMIT = 50


def _pending_approvals(scope: Scope) -> Any:
    return approvals_visible(scope=scope).filter(status=Approval.Status.PENDING, expires_at__gt=timezone.now())


def _to_decide(scope: Scope) -> Any:
    """Pending requests the actor holds an unused link for, while they are an approver here."""
    assert scope.actor is not None
    if not scope.has_role(Role.APPROVER):
        return Approval.objects.none()
    unused = ApprovalLink.objects.filter(approval=OuterRef("pk"), approver=scope.actor, used_at__isnull=True)
    return _pending_approvals(scope).filter(Exists(unused))


def waiting_on(*, scope: Scope) -> dict[str, Any]:
    """``{"cards", "approvals_to_decide", "approvals_requested", "inbox"}`` for the scope's actor."""
    if scope.actor is None:
        return {"cards": [], "approvals_to_decide": [], "approvals_requested": [], "inbox": []}
    cards = cards_visible(scope=scope, status=Card.Status.PENDING)[:SNAPSHOT_LIMIT]
    pending = _pending_approvals(scope)
    holds_link = ApprovalLink.objects.filter(approval=OuterRef("pk"), approver=scope.actor)
    to_decide = pending.filter(Exists(holds_link))[:SNAPSHOT_LIMIT]
    requested = pending.filter(requester=scope.actor)[:SNAPSHOT_LIMIT]
    return {
        "cards": [{"id": str(card.id), "kind": card.kind, "status": card.status} for card in cards],
        "approvals_to_decide": [approval_body(approval) for approval in to_decide],
        "approvals_requested": [approval_body(approval) for approval in requested],
        "inbox": inbox_of(scope=scope),
    }


def inbox_of(*, scope: Scope) -> list[dict[str, Any]]:
    """The scope actor's inbox in this tenant: every item waiting on them, by kind, newest first in a kind.

    Items leave it when decided, expired or no longer waiting. Nobody else's cards, requests or sessions
    ever appear: every part reads through its owner's permission-aware selectors.
    """
    if scope.actor is None:
        return []
    items: list[dict[str, Any]] = []
    items += [approval_item(a, kind="approval_to_decide") for a in _to_decide(scope)[:SNAPSHOT_LIMIT]]
    requested = _pending_approvals(scope).filter(requester=scope.actor)[:SNAPSHOT_LIMIT]
    items += [approval_item(a, kind="approval_requested") for a in requested]
    items += [card_item(card) for card in cards_visible(scope=scope, status=Card.Status.PENDING)[:SNAPSHOT_LIMIT]]
    for source in inbox_sources():
        try:
            items += source(scope)[:SNAPSHOT_LIMIT]
        except Exception:  # a failing source leaves the rest of the inbox readable
            logger.exception("inbox source %r failed", source)
    order = {kind: index for index, kind in enumerate(KINDS)}
    items.sort(key=lambda entry: str(entry["since"]), reverse=True)
    items.sort(key=lambda entry: order.get(entry["kind"], len(order)))
    return items
