"""What waits on a person, built from the rows that already exist: their pending cards, the pending requests
they may decide, and the pending requests they made.

``/ws/me/`` sends it first on every (re)connect, so nothing that matters depends on a push arriving while the
socket was down. It carries ids, names and statuses, never a one-time link: links stay where they are
delivered privately.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Exists, OuterRef
from django.utils import timezone

from tess_site.scope import Scope

from .approval_selectors import approvals_visible
from .approvals import approval_body
from .card_selectors import cards_visible
from .models import Approval, ApprovalLink, Card

# A snapshot names at most this many items of each kind, newest first; a longer backlog is for the lists.
SNAPSHOT_LIMIT = 50


def waiting_on(*, scope: Scope) -> dict[str, Any]:
    """``{"cards": [...], "approvals_to_decide": [...], "approvals_requested": [...]}`` for the scope's actor."""
    if scope.actor is None:
        return {"cards": [], "approvals_to_decide": [], "approvals_requested": []}
    cards = cards_visible(scope=scope, status=Card.Status.PENDING)[:SNAPSHOT_LIMIT]
    pending = approvals_visible(scope=scope).filter(status=Approval.Status.PENDING, expires_at__gt=timezone.now())
    holds_link = ApprovalLink.objects.filter(approval=OuterRef("pk"), approver=scope.actor)
    to_decide = pending.filter(Exists(holds_link))[:SNAPSHOT_LIMIT]
    requested = pending.filter(requester=scope.actor)[:SNAPSHOT_LIMIT]
    return {
        "cards": [{"id": str(card.id), "kind": card.kind, "status": card.status} for card in cards],
        "approvals_to_decide": [approval_body(approval) for approval in to_decide],
        "approvals_requested": [approval_body(approval) for approval in requested],
    }
