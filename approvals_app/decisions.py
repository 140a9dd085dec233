"""Deciding an approval through its one-time link: the link's checks, the page view's audit, and the decision.

The approval page (``views.py``) and every other caller decide through ``approval_decide``, the one place
that runs the link and approver checks before a decision; opening the page runs the link's own checks
through ``approval_link_viewed``.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from tess_site.audit.services import record_audit
from tess_site.errors import InvalidInput
from tess_site.scope import Role, Scope

from .approvals import (
    REASON_MAX,
    ApprovalAlreadyDecided,
    ApprovalExpired,
    ApprovalLinkNotYours,
    ApprovalLinkUnknown,
    announce_decided,
    display_status,
    token_hash,
)
from .executions import queue_execution
from .models import Approval, ApprovalLink


def link_for_token(token: str) -> ApprovalLink:
    """The link behind ``token`` (404 ``approval_link_unknown`` if none)."""
    if not token or len(token) > 128:
        raise ApprovalLinkUnknown()
    link = (
        ApprovalLink.objects.select_related("approval", "approval__requester", "approval__tenant", "approver")
        .filter(token_hash=token_hash(token))
        .first()
    )
    if link is None:
        raise ApprovalLinkUnknown()
    return link


def link_check(link: ApprovalLink, *, user_id: int, now: Any = None) -> None:
    """Raise the typed refusal that applies to ``user_id`` opening ``link`` now, if any (403, 409, 410)."""
    moment = now or timezone.now()
    if link.approver_id != user_id:
        raise ApprovalLinkNotYours()
    approval = link.approval
    if approval.status == Approval.Status.EXPIRED:  # written as expired by the sweep: still 410, not 409
        raise ApprovalExpired()
    if link.used_at is not None or approval.status != Approval.Status.PENDING:
        raise ApprovalAlreadyDecided(details={"status": display_status(approval, moment)})
    if approval.expires_at <= moment:
        raise ApprovalExpired()


def _approver_scope(scope: Scope, approval: Approval) -> None:
    if scope.actor is None or scope.tenant.pk != approval.tenant_id:
        raise ApprovalLinkNotYours()
    if not scope.has_role(Role.APPROVER):
        raise ApprovalLinkNotYours("You are no longer an approver in this tenant; nothing was done.")


def approval_link_viewed(scope: Scope, *, link: ApprovalLink) -> None:
    """Check the link for the scope's actor, then audit that they opened it.

    Changes nothing else (mail scanners follow links). Raises the typed refusal ``link_check`` gives.
    """
    assert scope.actor is not None
    link_check(link, user_id=scope.actor.pk)
    record_audit(
        scope,
        action="approval.viewed",
        target_type="approval",
        target_id=str(link.approval_id),
        outcome="ok",
        metadata={"link_id": link.pk},
    )


def approval_decide(scope: Scope, *, token: str, approve: bool, reason: str = "") -> Approval:
    """Decide the approval behind ``token`` as the scope's actor, who must be the link's approver.

    The link's ``used_at`` and the request's ``status`` change by conditional UPDATEs in one transaction:
    of concurrent decisions exactly one changes both; the others change nothing and get 409 (or 410 if
    the request expired). An approval queues one execution item, run after commit.
    """
    reason = (reason or "").strip()
    if not approve and not reason:
        raise InvalidInput("A denial needs a reason.", details={"field": "reason"})
    if len(reason) > REASON_MAX:
        raise InvalidInput(f"The reason is longer than {REASON_MAX} characters.", details={"field": "reason"})
    link = link_for_token(token)
    assert scope.actor is not None
    link_check(link, user_id=scope.actor.pk)
    _approver_scope(scope, link.approval)
    approval_id = link.approval_id
    decision = Approval.Status.APPROVED if approve else Approval.Status.DENIED
    with transaction.atomic():
        now = timezone.now()
        if ApprovalLink.objects.filter(pk=link.pk, used_at__isnull=True).update(used_at=now) != 1:
            raise ApprovalAlreadyDecided()
        changed = Approval.objects.filter(pk=approval_id, status=Approval.Status.PENDING, expires_at__gt=now).update(
            status=decision,
            decided_by=scope.actor,
            decided_at=now,
            decision_reason=reason,
            execution=Approval.Execution.QUEUED if approve else Approval.Execution.NONE,
        )
        if changed != 1:
            current = Approval.objects.get(pk=approval_id)
            if current.status in (Approval.Status.PENDING, Approval.Status.EXPIRED):
                raise ApprovalExpired()
            raise ApprovalAlreadyDecided(details={"status": display_status(current, now)})
        approval = Approval.objects.get(pk=approval_id)
        record_audit(
            scope,
            action="approval.approved" if approve else "approval.denied",
            target_type=approval.target_type,
            target_id=approval.target_id,
            outcome="ok",
            metadata={"approval_id": str(approval.id), "link_id": link.pk, "session_id": approval.session_id},
        )
        if approve:
            queue_execution(approval)
        announce_decided(approval)
    return approval
