"""Permission-aware reads of reviewed coding memory: a tenant's entries, for that tenant's members only."""

from __future__ import annotations

import uuid

from django.db.models import QuerySet

from tess_site.scope import Scope

from .models import CodingMemoryEntry, CodingMemoryExport
from .services import CodingMemoryNotFound


def coding_memory_entries(
    scope: Scope, *, workspace_key: str | None = None, status: str | None = None
) -> QuerySet[CodingMemoryEntry]:
    """Entries of the scope's tenant (coding memory is shared by the tenant's members, not owned by one)."""
    if not scope.roles:
        return CodingMemoryEntry.objects.none()
    qs = CodingMemoryEntry.objects.filter(tenant=scope.tenant)
    if workspace_key:
        qs = qs.filter(workspace_key=workspace_key)
    if status:
        qs = qs.filter(status=status)
    return qs.order_by("-created_at", "pk")


def coding_memory_entry(scope: Scope, *, entry_id: object) -> CodingMemoryEntry:
    try:
        pk = uuid.UUID(str(entry_id))
    except ValueError:
        raise CodingMemoryNotFound() from None
    entry = coding_memory_entries(scope).prefetch_related("reviews").filter(pk=pk).first()
    if entry is None:
        raise CodingMemoryNotFound()
    return entry


def coding_memory_exports(scope: Scope) -> QuerySet[CodingMemoryExport]:
    if not scope.roles:
        return CodingMemoryExport.objects.none()
    return CodingMemoryExport.objects.filter(tenant=scope.tenant).order_by("-exported_at")
