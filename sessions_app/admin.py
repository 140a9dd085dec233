"""Sessions and their events in the Django admin: read-only, for the auditors and admins of each tenant.

Sessions change only through the session coordinator (``services.py``); the admin is for browsing. Filters
offer only the tenants and people the viewer may audit; a search term that is a correlation id finds the
sessions (and their events) the audit feed recorded under it.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from tess_site.admin import ReadOnlyTenantScopedAdmin, TenantFilter, readable_tenant_ids
from tess_site.audit.models import AuditEvent

from .models import Session, SessionEvent, SessionMigration, UsageRecord


class _ActorFilter(admin.SimpleListFilter):
    """The session owner, among owners of sessions in tenants the viewer may audit."""

    title = "actor"
    parameter_name = "actor"
    session_path = ""

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        sessions = Session.objects.all()
        ids = readable_tenant_ids(request)
        if ids is not None:
            sessions = sessions.filter(tenant_id__in=ids)
        names = sessions.order_by("owner__username").values_list("owner__username", flat=True).distinct()
        return [(name, name) for name in names]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        return queryset.filter(**{f"{self.session_path}owner__username": value}) if value else queryset


class _EventTenantFilter(TenantFilter):
    tenant_path = "session__tenant"


class _EventActorFilter(_ActorFilter):
    session_path = "session__"


def _sessions_of_correlation(term: str) -> list[str]:
    """Session ids the audit feed names under correlation id ``term`` (its target or its session)."""
    rows = AuditEvent.objects.filter(correlation_id=term.strip()).values_list("target_type", "target_id", "metadata")
    found: list[str] = []
    for target_type, target_id, metadata in rows[:500]:
        if target_type == "session" and target_id:
            found.append(target_id)
        session_id = (metadata or {}).get("session_id") if isinstance(metadata, dict) else None
        if session_id:
            found.append(str(session_id))
    return found


class _ReadOnlyTenantAdmin(ReadOnlyTenantScopedAdmin):
    tenant_field = "tenant_id"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        queryset = super().get_queryset(request)
        ids = readable_tenant_ids(request)
        return queryset if ids is None else queryset.filter(**{f"{self.tenant_field}__in": ids})


@admin.register(Session)
class SessionAdmin(_ReadOnlyTenantAdmin):
    list_display = [
        "title",
        "tenant",
        "owner",
        "status",
        "agent_state",
        "agent_state_since",
        "provider_instance",
        "runtime_id",
        "last_seq",
        "created_at",
    ]
    list_filter = [
        TenantFilter,
        _ActorFilter,
        "status",
        "agent_state",
        "provider_instance",
        ("created_at", admin.DateFieldListFilter),
    ]
    search_fields = ["title", "runtime_id", "owner__username"]
    search_help_text = "Title, runtime id, owner, session id or a correlation id from the audit feed."
    list_select_related = ["tenant", "owner"]
    # The checkpoint keeps the runtime's summary of its compacted context: the owner's memory, not the auditor's.
    # The admin shows which entries it points at, never its text.
    exclude = ["checkpoint"]
    readonly_fields = [*(f.name for f in Session._meta.fields if f.name != "checkpoint"), "checkpoint_ids"]
    date_hierarchy = "created_at"

    @admin.display(description="checkpoint (ids only)")
    def checkpoint_ids(self, obj: Session) -> str:
        checkpoint = obj.checkpoint if isinstance(obj.checkpoint, dict) else {}
        if not checkpoint:
            return "-"
        shown = ("kind", "entry_id", "first_kept_entry_id", "tokens_before", "cursor")
        return ", ".join(f"{key}={checkpoint[key]}" for key in shown if key in checkpoint)

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Any], search_term: str
    ) -> tuple[QuerySet[Any], bool]:
        found, distinct = super().get_search_results(request, queryset, search_term)
        extra = _sessions_of_correlation(search_term) if search_term else []
        if search_term and _is_uuid(search_term.strip()):
            extra.append(search_term.strip())
        if extra:
            found = found | queryset.filter(pk__in=[e for e in extra if _is_uuid(e)])
        return found, distinct


@admin.register(SessionEvent)
class SessionEventAdmin(_ReadOnlyTenantAdmin):
    """The stream as recorded: kind (the action), time, session. Bodies carry ids, never memory text."""

    tenant_field = "session__tenant_id"
    list_display = ["ts", "session", "seq", "kind"]
    list_filter = [_EventTenantFilter, _EventActorFilter, "kind", ("ts", admin.DateFieldListFilter)]
    search_fields = ["kind"]
    search_help_text = "Kind, session id or a correlation id from the audit feed."
    list_select_related = ["session"]
    readonly_fields = ["session", "seq", "kind", "ts", "body"]
    date_hierarchy = "ts"
    ordering = ["-ts", "-seq"]

    def tenant_of(self, obj: Any) -> int:
        return int(obj.session.tenant_id)

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Any], search_term: str
    ) -> tuple[QuerySet[Any], bool]:
        found, distinct = super().get_search_results(request, queryset, search_term)
        extra = _sessions_of_correlation(search_term) if search_term else []
        if search_term and _is_uuid(search_term.strip()):
            extra.append(search_term.strip())
        if extra:
            found = found | queryset.filter(session_id__in=[e for e in extra if _is_uuid(e)])
        return found, distinct


@admin.register(SessionMigration)
class SessionMigrationAdmin(_ReadOnlyTenantAdmin):
    """Cutovers between runtimes and their rollbacks: who moved which bindings from where to where."""

    list_display = ["created_at", "source", "target", "status", "created_by", "rolled_back_at"]
    list_filter = [TenantFilter, "status", ("created_at", admin.DateFieldListFilter)]
    list_select_related = ["source", "target", "created_by"]
    readonly_fields = [f.name for f in SessionMigration._meta.fields]
    date_hierarchy = "created_at"


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


@admin.register(UsageRecord)
class UsageRecordAdmin(_ReadOnlyTenantAdmin):
    """The usage ledger, read-only: rows are only ever appended by the sources that report them."""

    list_display = [
        "recorded_at",
        "tenant",
        "operator",
        "session",
        "provider_instance",
        "model",
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
        "cost",
        "currency",
        "cost_source",
    ]
    list_filter = [
        TenantFilter,
        "cost_source",
        "provider_instance",
        "model",
        ("recorded_at", admin.DateFieldListFilter),
    ]
    search_fields = ["source_ref", "operator__username", "session__title"]
    list_select_related = ["tenant", "operator", "session"]
    date_hierarchy = "recorded_at"


from . import budget_admin  # noqa: E402,F401  (registers the Budget admin)
