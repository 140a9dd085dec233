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
