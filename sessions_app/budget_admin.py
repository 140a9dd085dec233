"""Budgets in the Django admin: set by the admins of a tenant, read by its auditors, audited on every change.

A tenant admin sees, adds, changes and deletes the budgets of the tenants they administer (a superuser counts
as every tenant's admin); an auditor only reads them. Forms offer only that tenant's people and sessions, and
every write goes through ``budgets.budget_save``/``budget_delete``, which check the role again and record the
change in the audit feed.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.db.models import QuerySet
from django.http import HttpRequest

from tess_site.accounts.admin import tenants_with_roles
from tess_site.accounts.models import Membership, Tenant
from tess_site.accounts.selectors import roles_for
from tess_site.context import get_correlation_id
from tess_site.scope import Channel, Role, Scope

from .budgets import budget_check, budget_delete, budget_save, budget_state
from .models import Budget, Session


def _tenants_with(request: HttpRequest, *roles: Role) -> list[int] | None:
    """Tenants where the user holds one of ``roles``; ``None``: every tenant (a superuser)."""
    return tenants_with_roles(request, *roles)


def _admin_of(request: HttpRequest, tenant_id: int | None) -> bool:
    ids = _tenants_with(request, Role.ADMIN)
    if ids is None:
        return True
    return tenant_id in ids if tenant_id is not None else bool(ids)


def _scope(request: HttpRequest, tenant: Tenant) -> Scope:
    roles = roles_for(user=request.user, tenant=tenant) | ({Role.ADMIN} if request.user.is_superuser else set())
    return Scope(
        tenant=tenant,
        actor=request.user,  # type: ignore[arg-type]
        channel=Channel.WEB,
        correlation_id=get_correlation_id(),
        roles=frozenset(roles),
    )


class BudgetForm(forms.ModelForm):
    class Meta:
        model = Budget
        fields = ["tenant", "name", "operator", "session", "period", "metric", "currency", "limit", "action"]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if self.errors:
            return data
        candidate = Budget(**{name: data.get(name) for name in self.Meta.fields})
        candidate.currency = candidate.currency or ""
        budget_check(budget=candidate)  # a ValidationError names its fields
        data["currency"] = candidate.currency
        return data


@admin.register(Budget)
class BudgetAdmin(admin.ModelAdmin):
    form = BudgetForm
    list_display = ["name", "tenant", "subject", "period", "metric", "limit", "currency", "action", "this_period"]
    list_filter = ["period", "metric", "action"]
    search_fields = ["name", "operator__username"]
    list_select_related = ["tenant", "operator"]

    @admin.display(description="this period")
    def this_period(self, budget: Budget) -> str:
        state = budget_state(budget, time_zone=budget.tenant.time_zone)
        return f"{state.spent.normalize()} ({state.percent}%)"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Budget]:
        budgets = Budget.objects.all()
        ids = _tenants_with(request, Role.ADMIN, Role.AUDITOR)
        return budgets if ids is None else budgets.filter(tenant_id__in=ids)

    def has_module_permission(self, request: HttpRequest) -> bool:
        ids = _tenants_with(request, Role.ADMIN, Role.AUDITOR)
        return ids is None or bool(ids)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        ids = _tenants_with(request, Role.ADMIN, Role.AUDITOR)
        if ids is None:
            return True
        return obj.tenant_id in ids if obj is not None else bool(ids)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return _admin_of(request, None)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return _admin_of(request, obj.tenant_id if obj is not None else None)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return _admin_of(request, obj.tenant_id if obj is not None else None)

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        ids = _tenants_with(request, Role.ADMIN)
        if ids is not None:
            if db_field.name == "tenant":
                kwargs["queryset"] = Tenant.objects.filter(pk__in=ids)
            elif db_field.name == "operator":
                members = Membership.objects.filter(tenant_id__in=ids).values("user_id")
                kwargs["queryset"] = get_user_model().objects.filter(pk__in=members).order_by("username")
            elif db_field.name == "session":
                kwargs["queryset"] = Session.objects.filter(tenant_id__in=ids).order_by("-created_at")
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def save_model(self, request: HttpRequest, obj: Budget, form: Any, change: bool) -> None:
        budget_save(scope=_scope(request, obj.tenant), budget=obj, created=not change)

    def delete_model(self, request: HttpRequest, obj: Budget) -> None:
        budget_delete(scope=_scope(request, obj.tenant), budget=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Budget]) -> None:
        for budget in queryset.select_related("tenant"):
            budget_delete(scope=_scope(request, budget.tenant), budget=budget)
