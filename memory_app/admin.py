"""Admin: the runtime kill switch only. Nobody browses another person's notes here (DESIGN.md, auditors)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from .models import MemorySwitch
from .switch import memory_switch_set


@admin.register(MemorySwitch)
class MemorySwitchAdmin(admin.ModelAdmin):
    """Turning memory off here stops it for every operator of every tenant, so only superusers may."""

    list_display = ["__str__", "enabled", "changed_at", "changed_by"]
    fields = ["enabled", "changed_at", "changed_by"]
    readonly_fields = ["changed_at", "changed_by"]

    def has_module_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_active and request.user.is_superuser)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_module_permission(request)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_module_permission(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return self.has_module_permission(request) and not MemorySwitch.objects.exists()

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: MemorySwitch, form: Any, change: bool) -> None:
        memory_switch_set(enabled=obj.enabled, changed_by=f"admin:{request.user.get_username()}")


# --- reviewed coding memory ------------------------------------------------------------------------------
# Staff see the entries of tenants where they hold a role; activating and rejecting go through the same
# services as the API, so only approvers and admins of the entry's tenant succeed.

from django.contrib import messages  # noqa: E402
from django.db.models import QuerySet  # noqa: E402

from tess_site.accounts.models import Membership  # noqa: E402
from tess_site.accounts.selectors import roles_for  # noqa: E402
from tess_site.admin import ReadOnlyAdminMixin  # noqa: E402
from tess_site.errors import TessError  # noqa: E402
from tess_site.scope import Channel, Scope  # noqa: E402

from .coding.models import CodingMemoryEntry, CodingMemoryExport  # noqa: E402
from .coding.services import coding_memory_apply, coding_memory_reject  # noqa: E402


def _admin_scope(request: HttpRequest, entry: CodingMemoryEntry) -> Scope:
    return Scope(
        tenant=entry.tenant,
        actor=request.user,  # type: ignore[arg-type]
        channel=Channel.WEB,
        correlation_id=getattr(request, "correlation_id", "") or "admin",
        roles=roles_for(user=request.user, tenant=entry.tenant),
    )


class _TenantMemberAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        tenants = Membership.objects.filter(user_id=request.user.pk or 0).values("tenant_id")
        return super().get_queryset(request).filter(tenant_id__in=tenants)

    def has_module_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_active and request.user.is_staff)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_module_permission(request)


@admin.register(CodingMemoryEntry)
class CodingMemoryEntryAdmin(_TenantMemberAdmin):
    list_display = ["workspace_key", "kind", "status", "human_verified", "reviewer", "created_at"]
    list_filter = ["status", "kind"]
    search_fields = ["workspace_key"]
    actions = ["activate", "reject"]

    def _decide(self, request: HttpRequest, queryset: QuerySet[CodingMemoryEntry], decide: Any, verb: str) -> None:
        done = 0
        for entry in queryset:
            try:
                decide(_admin_scope(request, entry), entry_id=entry.pk, rationale=f"{verb} in the admin review list")
                done += 1
            except TessError as exc:
                self.message_user(request, f"{entry}: {exc.message}", level=messages.ERROR)
        if done:
            self.message_user(request, f"{verb} {done} entries.")

    @admin.action(description="Activate (human-verified) selected candidates")
    def activate(self, request: HttpRequest, queryset: QuerySet[CodingMemoryEntry]) -> None:
        self._decide(request, queryset, coding_memory_apply, "Activated")

    @admin.action(description="Reject selected candidates")
    def reject(self, request: HttpRequest, queryset: QuerySet[CodingMemoryEntry]) -> None:
        self._decide(request, queryset, coding_memory_reject, "Rejected")


@admin.register(CodingMemoryExport)
class CodingMemoryExportAdmin(_TenantMemberAdmin):
    list_display = ["workspace_key", "exported_at", "exported_by", "via", "record_count", "ingestion"]
    list_filter = ["ingestion", "via"]
    exclude = ["records"]


# --- operator memory: metadata only -------------------------------------------------------------------------
# seed 002: only the operator reads their own notes. Auditors and admins of a tenant see that notes exist (whose,
# which category, revision, salience, confirmation, expiry, last use) and never a value, a slot name or a pinned
# reference, not even superusers. There is no detail page (its title would name the slot) and no search (a
# search over values would be an oracle for them).

from tess_site.admin import TenantFilter, readable_tenant_ids  # noqa: E402

from .models import OperatorMemory  # noqa: E402

METADATA_FIELDS = [
    "memory_id",
    "tenant",
    "operator",
    "category",
    "revision",
    "salience",
    "confirmed_at",
    "reauthorized_at",
    "expires_at",
    "last_used_at",
]


class _ListOnlyAdmin(admin.ModelAdmin):
    """A read-only list of ``shown`` columns, limited to the tenants the viewer may read: no detail page, no
    actions, no writes. The rows' other columns (memory text) are never loaded."""

    shown: list[str] = []
    owner_field = "operator_id"
    list_display_links = None
    actions = None

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        queryset = super().get_queryset(request).only(*self.shown, "tenant_id", self.owner_field)
        ids = readable_tenant_ids(request)
        return queryset if ids is None else queryset.filter(tenant_id__in=ids)

    def has_module_permission(self, request: HttpRequest) -> bool:
        ids = readable_tenant_ids(request)
        return ids is None or bool(ids)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return obj is None and self.has_module_permission(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(OperatorMemory)
class OperatorMemoryMetadataAdmin(_ListOnlyAdmin):
    shown = METADATA_FIELDS
    list_display = tuple(METADATA_FIELDS)
    list_filter = [TenantFilter, "category"]
    list_select_related = ["tenant", "operator"]


# --- operational memory (lifecycle captures): ids only ---------------------------------------------------------
# Auditors see that a boundary was recorded (an approval executed, a checkpoint after a compaction, a session
# ended): the record's id, whose namespace, which session, the source and when. Never the captured text, which
# is the owner's memory (DESIGN.md, auditors).

from .plugin.models import OperationalMemoryRecord  # noqa: E402

CAPTURE_FIELDS = ["id", "tenant", "owner", "session", "source", "channel", "correlation_id", "captured_at"]


@admin.register(OperationalMemoryRecord)
class OperationalMemoryRecordAdmin(_ListOnlyAdmin):
    shown = CAPTURE_FIELDS
    owner_field = "owner_id"
    list_display = tuple(CAPTURE_FIELDS)
    list_filter = [TenantFilter, "source"]
    list_select_related = ["tenant", "owner"]
