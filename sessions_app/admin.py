"""Sessions in the Django admin: read-only, for the auditors and admins of each session's tenant.

Sessions change only through the session coordinator (``services.py``); the admin is for browsing.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from approvals_app.admin import readable_tenant_ids

from .models import Session


@admin.register(Session)
class SessionAdmin(admin.ModelAdmin):
    list_display = ["title", "tenant", "owner", "status", "provider_instance", "runtime_id", "last_seq", "created_at"]
    list_filter = ["status", "provider_instance"]
    search_fields = ["title", "runtime_id", "owner__username"]
    list_select_related = ["tenant", "owner"]
    readonly_fields = [f.name for f in Session._meta.fields]
    actions = None

    def get_queryset(self, request: HttpRequest) -> QuerySet[Session]:
        queryset = super().get_queryset(request)
        ids = readable_tenant_ids(request)
        return queryset if ids is None else queryset.filter(tenant_id__in=ids)

    def has_module_permission(self, request: HttpRequest) -> bool:
        return self.has_view_permission(request)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        ids = readable_tenant_ids(request)
        if ids is None:
            return True
        return obj.tenant_id in ids if obj is not None else bool(ids)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
