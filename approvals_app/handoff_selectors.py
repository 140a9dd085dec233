"""Permission-aware reads of Mos hand-offs: a requester sees their own; a tenant's auditors and admins all.

Every read of a hand-off on behalf of a person starts from ``handoffs_restrict``, the one place that applies
the tenant, owner and grant rules; the other readers here narrow what it returns.
"""

from __future__ import annotations

import uuid
from typing import Literal

from django.db.models import QuerySet

from tess_site.scope import Role, Scope

from .models import Handoff

HandoffAction = Literal["view"]


def handoffs_restrict(scope: Scope, action: HandoffAction = "view") -> QuerySet[Handoff]:
    """The hand-offs the scope may ``action``.

    ``view``: in the scope's tenant, the actor's own; a tenant's auditors and admins, and system work, see
    all of the tenant's.
    """
    rows = Handoff.objects.filter(tenant=scope.tenant)
    if scope.actor is None or scope.has_role(Role.AUDITOR, Role.ADMIN):
        return rows
    return rows.filter(requester=scope.actor)


def handoffs_listed(scope: Scope, *, status: str | None = None, session_id: str | None = None) -> QuerySet[Handoff]:
    """The hand-off list: what the scope may view, with requesters, newest first; optionally one status or
    one session's."""
    rows = handoffs_restrict(scope, "view").select_related("requester")
    if status is not None:
        rows = rows.filter(status=status)
    if session_id is not None:
        rows = rows.filter(session_id=session_id)
    return rows.order_by("-created_at", "-pk")


def handoff_readable(scope: Scope, handoff_id: str) -> bool:
    """For pinned ``handoff:<id>`` references: whether the scope may view that hand-off now."""
    try:
        pk = uuid.UUID(handoff_id)
    except ValueError:
        return False
    return handoffs_restrict(scope, "view").filter(pk=pk).exists()


def handoffs_readable_many(scope: Scope, handoff_ids: list[str]) -> set[str]:
    """``handoff_readable`` for many references in one query: the ids (as given) the scope may view."""
    pks = []
    for raw in handoff_ids:
        try:
            pks.append(uuid.UUID(raw))
        except ValueError:
            continue
    found = handoffs_restrict(scope, "view").filter(pk__in=pks).values_list("pk", flat=True)
    readable = {str(pk) for pk in found}
    return {raw for raw in handoff_ids if raw in readable or raw.lower() in readable}


def handoffs_in_tenants(*, tenant_ids: frozenset[int] | None) -> QuerySet[Handoff]:
    """Where there is no Scope (the read-only Django admin): the hand-offs of ``tenant_ids`` (``None``: all)."""
    handoffs = Handoff.objects.select_related("tenant", "requester")
    return handoffs if tenant_ids is None else handoffs.filter(tenant_id__in=tenant_ids)
