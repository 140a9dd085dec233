"""Admin for identity and tenancy. Tokens are made here too; the plaintext is shown once, then only its hash."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.db.models import QuerySet
from django.http import HttpRequest

from tess_site.context import get_correlation_id
from tess_site.scope import Channel, Role, Scope

from . import services
from .models import ExternalIdentity, Membership, PersonalToken, Tenant
from .selectors import roles_for


def tenants_with_roles(request: HttpRequest, *roles: Role) -> list[int] | None:
    """Tenants where the user holds one of ``roles``; ``None`` means all (superuser). The user's memberships
    are read once per request: the admin asks for permissions many times while rendering one page (the
    sidebar asks every model admin)."""
    user = request.user
    if not user.is_authenticated or not user.is_active:
        return []
    if user.is_superuser:
        return None
    if not hasattr(request, "_tess_memberships"):
        rows = Membership.objects.filter(user=user).values_list("tenant_id", "role")
        request._tess_memberships = list(rows)  # type: ignore[attr-defined]
    memberships: list[tuple[int, str]] = request._tess_memberships  # type: ignore[attr-defined]
    wanted = {role.value for role in roles}
    return sorted({tenant_id for tenant_id, role in memberships if role in wanted})


def admin_tenant_ids(request: HttpRequest) -> list[int] | None:
    """Tenants whose identity records the user may manage here; ``None`` means all (superuser)."""
    return tenants_with_roles(request, Role.ADMIN)


class TenantAdminMixin:
    """Restrict a ModelAdmin to rows of tenants the user administers."""

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        qs = super().get_queryset(request)  # type: ignore[misc]
        ids = admin_tenant_ids(request)
        return qs if ids is None else qs.filter(tenant_id__in=ids)

    def has_module_permission(self, request: HttpRequest) -> bool:
        ids = admin_tenant_ids(request)
        return ids is None or bool(ids)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_module_permission(request)

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        ids = admin_tenant_ids(request)
        if db_field.name == "tenant" and ids is not None:
            kwargs["queryset"] = Tenant.objects.filter(pk__in=ids)
        if db_field.name == "user" and ids is not None:
            # A tenant admin picks among members of their own tenants: other tenants' people are not listed.
            members = Membership.objects.filter(tenant_id__in=ids).values("user_id")
            kwargs["queryset"] = get_user_model().objects.filter(pk__in=members).order_by("username")
        return super().formfield_for_foreignkey(db_field, request, **kwargs)  # type: ignore[misc]


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "time_zone", "created_at"]
    search_fields = ["slug", "name"]


@admin.register(Membership)
class MembershipAdmin(TenantAdminMixin, admin.ModelAdmin):
    list_display = ["user", "tenant", "role", "created_at"]
    list_filter = ["role", ("tenant", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["user__username", "tenant__slug"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return self.has_module_permission(request)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_module_permission(request)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_module_permission(request)


class TokenAddForm(forms.ModelForm):
    days = forms.IntegerField(min_value=1, max_value=366, initial=90, help_text="Days until the token expires.")

    class Meta:
        model = PersonalToken
        fields = ["tenant", "user", "name"]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        tenant, user = data.get("tenant"), data.get("user")
        if tenant and user and not Membership.objects.filter(tenant=tenant, user=user).exists():
            raise forms.ValidationError("That user is not a member of that tenant.")
        return data


@admin.register(PersonalToken)
class PersonalTokenAdmin(TenantAdminMixin, admin.ModelAdmin):
    list_display = ["name", "user", "tenant", "prefix", "created_at", "expires_at", "last_used_at", "revoked_at"]
    list_filter = [("tenant", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["name", "user__username", "prefix"]
    readonly_fields = ["tenant", "user", "name", "prefix", "created_at", "expires_at", "last_used_at", "revoked_at"]
    exclude = ["token_hash"]
    actions = ["revoke"]

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        if obj is None:
            kwargs["form"] = TokenAddForm
        return super().get_form(request, obj, change=change, **kwargs)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return self.readonly_fields if obj is not None else []

    def get_exclude(self, request: HttpRequest, obj: Any = None) -> Any:
        return self.exclude if obj is not None else None

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is None:
            return ["tenant", "user", "name", "days"]
        return self.readonly_fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return self.has_module_permission(request)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # tokens are immutable; revoke and make a new one

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # revoked tokens stay listed so their use remains explainable

    def _scope(self, request: HttpRequest, tenant: Tenant) -> Scope:
        return Scope(
            tenant=tenant,
            actor=request.user,  # type: ignore[arg-type]
            channel=Channel.WEB,
            correlation_id=get_correlation_id(),
            roles=roles_for(user=request.user, tenant=tenant) | ({Role.ADMIN} if request.user.is_superuser else set()),
        )

    def save_model(self, request: HttpRequest, obj: PersonalToken, form: Any, change: bool) -> None:
        issued = services.token_issue(
            scope=self._scope(request, obj.tenant), holder=obj.user, name=obj.name, days=form.cleaned_data["days"]
        )
        # The service made the row; point the admin's unsaved instance at it for the redirect.
        obj.pk, obj.prefix = issued.token.pk, issued.token.prefix
        messages.warning(request, f"Copy this token now; it will not be shown again: {issued.plaintext}")

    @admin.action(description="Revoke selected tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet[PersonalToken]) -> None:
        count = sum(
            services.token_revoke(scope=self._scope(request, token.tenant), token=token)
            for token in queryset.select_related("tenant")
        )
        self.message_user(request, f"{count} token(s) revoked.")


@admin.register(ExternalIdentity)
class ExternalIdentityAdmin(TenantAdminMixin, admin.ModelAdmin):
    list_display = ["provider", "external_id", "user", "tenant", "linked_at"]
    list_filter = ["provider", ("tenant", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["external_id", "user__username"]
