"""Reads of identity and tenancy."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from tess_site.scope import Role

from .models import Membership, Tenant


def roles_for(*, user: Any, tenant: Tenant) -> frozenset[Role]:
    if not user.is_authenticated:
        return frozenset()
    rows = Membership.objects.filter(user=user, tenant=tenant).values_list("role", flat=True)
    return frozenset(Role(r) for r in rows)


def tenants_for(*, user: Any) -> QuerySet[Tenant]:
    if not user.is_authenticated:
        return Tenant.objects.none()
    return Tenant.objects.filter(memberships__user=user).distinct().order_by("slug")


def tenant_of_user(*, user: Any, slug: str) -> Tenant | None:
    """The tenant ``slug`` if ``user`` is a member of it; otherwise ``None`` (never a hint it exists)."""
    return tenants_for(user=user).filter(slug=slug).first()
