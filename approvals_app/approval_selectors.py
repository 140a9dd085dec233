"""Permission-aware reads of approval requests: what the caller requested or may decide, nothing else."""

from __future__ import annotations

import uuid
from typing import Any

from django.db.models import Exists, OuterRef, Q, QuerySet

from tess_site.errors import NotFound
from tess_site.scope import Scope

from .models import Approval, ApprovalLink


def approvals_visible(*, scope: Scope) -> QuerySet[Approval]:
    """Approvals of the scope's tenant that the actor requested or holds a link to decide, newest first."""
    if scope.actor is None:
        return Approval.objects.none()
    holds_link = ApprovalLink.objects.filter(approval=OuterRef("pk"), approver=scope.actor)
    return (
        Approval.objects.filter(tenant=scope.tenant)
        .annotate(may_decide=Exists(holds_link))
        .filter(Q(requester=scope.actor) | Q(may_decide=True))
        .select_related("requester", "decided_by")
        .order_by("-created_at", "-pk")
    )


def approval_get(*, scope: Scope, approval_id: Any) -> Approval:
    """One visible approval; anything else (another person's, another tenant's, malformed) is 404."""
    try:
        pk = uuid.UUID(str(approval_id))
    except ValueError as exc:
        raise NotFound() from exc
    approval = approvals_visible(scope=scope).filter(pk=pk).first()
    if approval is None:
        raise NotFound()
    return approval


def can_read_approval(*, scope: Scope, approval_id: str) -> bool:
    """For pinned ``approval:<id>`` references: whether the actor may read that approval now."""
    try:
        approval_get(scope=scope, approval_id=approval_id)
    except NotFound:
        return False
    return True
