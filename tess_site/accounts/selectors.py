"""Reads of identity and tenancy."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import QuerySet

from tess_site.scope import Role

from .models import Membership, PersonalToken, Tenant


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


def live_credential(*, user_id: int, token_id: int | None) -> tuple[Any, PersonalToken | None] | None:
    """The user, still active, and (for a token credential) the token re-read with its tenant, still usable.

    ``None`` once the user is gone or deactivated or the token was revoked, deleted or expired: what a
    long-lived connection re-checks so that ending a credential ends its sockets too.
    """
    user = get_user_model().objects.filter(pk=user_id, is_active=True).first()
    if user is None:
        return None
    if token_id is None:
        return user, None
    token = PersonalToken.objects.select_related("tenant").filter(pk=token_id).first()
    if token is None or not token.is_usable():
        return None
    return user, token
