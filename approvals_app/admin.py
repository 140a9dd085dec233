"""Approvals, hand-offs and the approval policy in the Django admin: read-only, per tenant audited."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from tess_site.admin import ReadOnlyTenantScopedAdmin, TenantFilter, readable_tenant_ids

from .approval_selectors import approvals_in_tenants
from .handoff_selectors import handoffs_in_tenants
from .models import Approval, ApprovalSettings, Handoff


@admin.register(Approval)
class ApprovalAdmin(ReadOnlyTenantScopedAdmin):
    """Approval requests: what was asked, by whom, the decision and the execution. Links are never shown."""

    list_display = ["created_at", "tenant", "action", "target", "requester", "status", "execution", "decided_by"]
    list_filter = [TenantFilter, "status", "execution", "action", ("created_at", admin.DateFieldListFilter)]
    search_fields = ["id", "target_id", "session_id", "correlation_id", "requester__username"]
    list_select_related = ["tenant", "requester", "decided_by"]
    ordering = ["-created_at"]
    exclude = ["consumed_at"]
    readonly_fields = [
        "id",
        "tenant",
        "requester",
        "action",
        "target_type",
        "target_id",
        "parameters",
        "session_id",
        "reason",
        "channel",
        "correlation_id",
        "status",
        "created_at",
        "expires_at",
        "decided_by",
        "decided_at",
        "decision_reason",
        "execution",
        "executed_at",
        "result",
    ]

    @admin.display(description="target", ordering="target_type")
    def target(self, approval: Approval) -> str:
        return f"{approval.target_type}:{approval.target_id}"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Approval]:
        return approvals_in_tenants(tenant_ids=readable_tenant_ids(request))


@admin.register(Handoff)
class HandoffAdmin(ReadOnlyTenantScopedAdmin):
    """Mos hand-offs: what was handed over, by whom, where it stands and what came back. Read-only."""

    list_display = ["created_at", "tenant", "summary", "requester", "status", "adapter", "session_id"]
    list_filter = [TenantFilter, "status", "adapter", ("created_at", admin.DateFieldListFilter)]
    search_fields = ["id", "session_id", "correlation_id", "requester__username"]
    list_select_related = ["tenant", "requester"]
    ordering = ["-created_at"]
    readonly_fields = [
        "id",
        "tenant",
        "requester",
        "session_id",
        "correlation_id",
        "summary",
        "payload",
        "status",
        "adapter",
        "result",
        "created_at",
        "updated_at",
        "attempts",
        "last_error",
    ]
    fields = tuple(readonly_fields)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Handoff]:
        return handoffs_in_tenants(tenant_ids=readable_tenant_ids(request))


@admin.register(ApprovalSettings)
class ApprovalSettingsAdmin(admin.ModelAdmin):
    """Per-tenant approval policy (self-approval); changed by superusers only."""

    list_display = ["tenant", "allow_self_approval"]

    def has_module_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_superuser)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.is_superuser)
