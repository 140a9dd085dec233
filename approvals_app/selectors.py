"""Permission-aware reads of the approvals app."""

from __future__ import annotations

from django.db.models import QuerySet

from tess_site.errors import Forbidden
from tess_site.scope import Role, Scope

from .models import AuditEvent


def audit_events_visible(*, scope: Scope) -> QuerySet[AuditEvent]:
    """The scope's tenant feed, for auditors and admins only."""
    if not scope.has_role(Role.AUDITOR, Role.ADMIN):
        raise Forbidden("Reading the audit feed needs the auditor or admin role.")
    return AuditEvent.objects.filter(tenant=scope.tenant)
