"""Permission-aware reads of approval requests: what the caller requested or may decide, nothing else.

Every read of an approval on behalf of a person starts from ``approvals_restrict``, the one place that
applies the tenant, owner and grant rules; the other readers here narrow what it returns.
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

from django.db.models import Exists, OuterRef, QuerySet

from tess_site.errors import NotFound
from tess_site.scope import Scope

from .models import Approval, ApprovalLink

ApprovalAction = Literal["view"]


def approvals_restrict(scope: Scope, action: ApprovalAction = "view") -> QuerySet[Approval]:
    """The approvals the scope's actor may ``action``.

    ``view``: in the scope's tenant, requested by the actor or holding a link for the actor to decide.
    A system scope reads nothing here: system work reads the rows it was handed by id.
    """
    if scope.actor is None:
        return Approval.objects.none()
    # ``pk IN (requested UNION ALL linked)``, each part through its own index (``(tenant, requester,
    # created_at)`` and the links' ``(approver, created_at)``): the cost follows the actor's approvals. An OR
    # of the two would scan every approval of the tenant.
    requested = Approval.objects.filter(tenant=scope.tenant, requester=scope.actor).order_by().values("pk")
    linked = ApprovalLink.objects.filter(approver=scope.actor).order_by().values("approval_id")
    holds_link = ApprovalLink.objects.filter(approval=OuterRef("pk"), approver=scope.actor)
    return Approval.objects.filter(tenant=scope.tenant, pk__in=requested.union(linked, all=True)).annotate(
        may_decide=Exists(holds_link)
    )


def approvals_visible(*, scope: Scope, session_id: Any = None) -> QuerySet[Approval]:
    """The approvals the actor may view, with requester and decider, newest first (``session_id``: about that
    session only)."""
    approvals = approvals_restrict(scope, "view").select_related("requester", "decided_by")
    if session_id is not None:
        approvals = approvals.filter(session_id=str(session_id))
    return approvals.order_by("-created_at", "-pk")


def approvals_in_tenants(*, tenant_ids: frozenset[int] | None) -> QuerySet[Approval]:
    """Where there is no Scope (the read-only Django admin): the approvals of ``tenant_ids`` (``None``: all)."""
    approvals = Approval.objects.select_related("tenant", "requester", "decided_by")
    return approvals if tenant_ids is None else approvals.filter(tenant_id__in=tenant_ids)


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
