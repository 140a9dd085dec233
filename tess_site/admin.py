"""The base of the read-only admin every app uses for auditors, and the audit feed's own page.

Each person sees only the tenants they audit. Nobody adds, changes or deletes audit rows here, superusers
included: the feed is append-only (DESIGN.md, "The authority model") and ``record_audit`` is its only
writer. The chain head is not registered at all. This lives beside ``tess_site.audit`` rather than in it
because it lists tenants, and ``tess_site.accounts`` records into the feed.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.http import urlencode
from django.utils.safestring import SafeString

from tess_site.accounts.models import Tenant
from tess_site.audit.models import AuditEvent
from tess_site.audit.selectors import audit_events_readable, audit_tenant_ids_readable


def readable_tenant_ids(request: HttpRequest) -> frozenset[int] | None:
    """The tenants ``request.user`` may audit (``None``: all), looked up once per request.

    The admin asks for view permission many times while rendering one page (sidebar, index, each filter).
    """
    if not hasattr(request, "_tess_audit_tenant_ids"):
        request._tess_audit_tenant_ids = audit_tenant_ids_readable(user=request.user)  # type: ignore[attr-defined]
    ids: frozenset[int] | None = request._tess_audit_tenant_ids  # type: ignore[attr-defined]
    return ids


class TenantFilter(admin.SimpleListFilter):
    """Filter by tenant, offering only the tenants the user may audit.

    Django's related-field filter would list every tenant, naming tenants the user is not part of.
    """

    title = "tenant"
    parameter_name = "tenant_slug"
    tenant_path = "tenant"  # subclasses name the path from their rows to the tenant

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        ids = readable_tenant_ids(request)
        tenants = Tenant.objects.order_by("slug")
        if ids is not None:
            tenants = tenants.filter(pk__in=ids)
        return [(tenant.slug, tenant.name) for tenant in tenants]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        return queryset.filter(**{f"{self.tenant_path}__slug": value}) if value else queryset


class ReadOnlyAdminMixin:
    """Rows that change only through their services: the admin never adds, edits or deletes them."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ReadOnlyTenantScopedAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Read-only for everyone, superusers included, and limited to the tenants the person audits.

    Subclasses whose rows reach their tenant another way override ``tenant_of``.
    """

    actions = None  # no bulk delete, and nothing else to do to many rows at once

    def tenant_of(self, obj: Any) -> int:
        return int(obj.tenant_id)

    def has_module_permission(self, request: HttpRequest) -> bool:
        return self.has_view_permission(request)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        ids = readable_tenant_ids(request)
        if ids is None:
            return True
        return self.tenant_of(obj) in ids if obj is not None else bool(ids)


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyTenantScopedAdmin):
    list_display = [
        "created_at",
        "tenant",
        "seq",
        "actor_label",
        "channel",
        "action",
        "target",
        "outcome",
        "correlation",
    ]
    list_filter = [
        TenantFilter,
        "action",
        "target_type",
        "outcome",
        "channel",
        ("created_at", admin.DateFieldListFilter),
    ]
    # correlation_id is searched, not filtered: a filter would list every id ever issued.
    # The actor is searched by name (actor_label), like the correlation id.
    search_fields = ["action", "target_type", "target_id", "correlation_id", "actor_label"]
    list_select_related = ["tenant"]
    ordering = ["-id"]
    # Counting a large feed on every page is slow, and the count adds nothing to an audit.
    show_full_result_count = False
    list_per_page = 100

    @admin.display(description="target", ordering="target_type")
    def target(self, event: AuditEvent) -> str:
        return f"{event.target_type}:{event.target_id}" if event.target_id else event.target_type

    @admin.display(description="correlation id", ordering="correlation_id")
    def correlation(self, event: AuditEvent) -> SafeString:
        # One click shows everything that happened under the same correlation id.
        return format_html(
            '<a href="?{}">{}</a>', urlencode({"correlation_id": event.correlation_id}), event.correlation_id
        )

    def get_queryset(self, request: HttpRequest) -> QuerySet[AuditEvent]:
        return audit_events_readable(tenant_ids=readable_tenant_ids(request)).select_related("tenant")


# Every admin page, the approval and Memory pages included, says whose console this is.
admin.site.site_header = "Tess"
admin.site.site_title = "Tess"
admin.site.index_title = "Administration"
admin.site.site_url = None  # Tess has no public site besides the admin: no "View site" link
