"""Reaching a pending request from the inbox: a fresh one-time link for its approver, and a resend to all of them.

An approver who was offline when the request was made (no e-mail address, no open drawer) opens it from their
inbox: ``approval_link_open`` mints a new token for their own link row and returns the page's URL to them
alone. A link row is unique per approver and request, and only the hash of its current token is kept, so
minting replaces the token: the approver's older, unused link stops working at once. ``approval_resend`` does
the same for every approver of a request, on its requester's behalf, and delivers the fresh links through
each approver's private channels (``approvals_app.delivery``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.core.cache import cache
from django.db import transaction
from django.utils import timezone
from rest_framework import status

from tess_site.audit.services import record_audit
from tess_site.errors import NotFound, TessError
from tess_site.scope import Role, Scope

from .approval_selectors import approval_get
from .approvals import (
    ApprovalAlreadyDecided,
    ApprovalExpired,
    display_status,
    eligible_approvers,
    new_token,
    token_hash,
)
from .delivery import deliver_links_on_commit, link_url
from .inbox_items import approval_item
from .models import Approval, ApprovalLink
from .notifications import inbox_entered_on_commit

if TYPE_CHECKING:
    from django.contrib.auth.models import User

# One resend per request in this many seconds: each one mails and messages every approver.
RESEND_COOLDOWN_SECONDS = 30


class ResendTooSoon(TessError):
    code = "rate_limited"
    status_code = status.HTTP_429_TOO_MANY_REQUESTS
    default_message = f"The approvers were sent fresh links less than {RESEND_COOLDOWN_SECONDS} seconds ago."


def _still_pending(approval: Approval) -> None:
    if approval.status == Approval.Status.PENDING and approval.expires_at > timezone.now():
        return
    if display_status(approval) == Approval.Status.EXPIRED:
        raise ApprovalExpired()
    raise ApprovalAlreadyDecided(details={"status": display_status(approval)})


def _reissue(scope: Scope, approval: Approval, approver_id: int, via: str) -> str | None:
    """Replace the token of ``approver_id``'s unused link to ``approval``; the new token, or None if none."""
    token = new_token()
    changed = ApprovalLink.objects.filter(approval=approval, approver_id=approver_id, used_at__isnull=True).update(
        token_hash=token_hash(token), created_at=timezone.now()
    )
    if changed != 1:
        return None
    record_audit(
        scope,
        action="approval.link_issued",
        target_type="approval",
        target_id=str(approval.id),
        outcome="ok",
        metadata={"approver_id": approver_id, "reissued": True, "via": via},
    )
    return token


def approval_link_open(scope: Scope, *, approval_id: Any) -> str:
    """A fresh one-time link to ``approval_id`` for the scope's actor, who must hold a link to decide it.

    Anyone else (the requester alone, another tenant, someone no longer an approver) gets 404, as if the
    request did not exist; a decided request 409, an expired one 410. Audited as ``approval.link_issued``.
    """
    approval = approval_get(scope=scope, approval_id=approval_id)
    if not getattr(approval, "may_decide", False) or not scope.has_role(Role.APPROVER):
        raise NotFound()
    assert scope.actor is not None
    with transaction.atomic():
        approval = Approval.objects.select_for_update().get(pk=approval.pk)
        _still_pending(approval)
        token = _reissue(scope, approval, scope.actor.pk, via="inbox")
        if token is None:  # the actor's link was used: they decided it
            raise ApprovalAlreadyDecided(details={"status": display_status(approval)})
    return link_url(token)


def approval_resend(scope: Scope, *, approval_id: Any) -> int:
    """Send every approver of the scope actor's pending request a fresh link, privately; returns how many.

    Only the requester may resend (anyone else: 404), once per ``RESEND_COOLDOWN_SECONDS`` (429). Approvers
    who lost the role or were deactivated since get nothing. Each approver's older link stops working; the
    request is back at the top of their inbox.
    """
    approval = approval_get(scope=scope, approval_id=approval_id)
    if scope.actor is None or approval.requester_id != scope.actor.pk:
        raise NotFound()
    _still_pending(approval)
    if not cache.add(f"approvals:resend:{approval.pk}", 1, timeout=RESEND_COOLDOWN_SECONDS):
        raise ResendTooSoon(details={"retry_after_seconds": RESEND_COOLDOWN_SECONDS})
    with transaction.atomic():
        approval = Approval.objects.select_for_update(of=("self",)).select_related("requester").get(pk=approval.pk)
        _still_pending(approval)
        holders = set(
            ApprovalLink.objects.filter(approval=approval, used_at__isnull=True).values_list("approver_id", flat=True)
        )
        eligible = eligible_approvers(tenant_id=approval.tenant_id, requester_id=approval.requester_id)
        approvers = [approver for approver in eligible if approver.pk in holders]
        tokens: list[tuple[User, str]] = []
        for approver in approvers:
            token = _reissue(scope, approval, approver.pk, via="resend")
            if token is not None:
                tokens.append((approver, token))
        deliver_links_on_commit(approval, tokens)
        for approver, _ in tokens:
            inbox_entered_on_commit(
                tenant_id=approval.tenant_id,
                user_id=approver.pk,
                item=approval_item(approval, kind="approval_to_decide"),
            )
    return len(tokens)
