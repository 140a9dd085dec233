"""Deriving the Scope from a verified credential — the only place a Scope is built for a request."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.contrib.sessions.backends.base import SessionBase

from tess_site.context import get_correlation_id
from tess_site.scope import Channel, Role, Scope

from .models import PersonalToken, Tenant
from .selectors import roles_for, tenants_for

SESSION_TENANT_KEY = "tess_tenant_id"


def selected_tenant(*, user: AbstractBaseUser | AnonymousUser, session: SessionBase) -> Tenant | None:
    """The tenant selected in this browser session, falling back to the user's first tenant.

    A stale selection (membership removed since) is replaced, never trusted.
    """
    tenants = tenants_for(user=user)
    chosen = session.get(SESSION_TENANT_KEY)
    tenant = tenants.filter(pk=chosen).first() if chosen else None
    if tenant is None:
        tenant = tenants.first()
        if tenant is not None:
            session[SESSION_TENANT_KEY] = tenant.pk
    return tenant


def select_tenant(*, session: SessionBase, tenant: Tenant) -> None:
    """Remember ``tenant`` as this browser session's tenant. The caller has checked membership."""
    session[SESSION_TENANT_KEY] = tenant.pk


def scope_for_credential(
    *,
    user: AbstractBaseUser | AnonymousUser,
    auth: Any,
    session: SessionBase | None,
    correlation_id: str,
    channel: Channel | None = None,
    token_roles: frozenset[Role] | None = None,
) -> Scope | None:
    """The Scope of a verified user: from the token's tenant, or the browser session's selected tenant.

    ``None`` means the credential does not make the caller a member of any tenant. ``token_roles`` are the
    roles this same request read together with the token (``token_authenticate_with_roles``); without
    them the roles are read here.
    """
    if not user.is_authenticated:
        return None
    if isinstance(auth, PersonalToken):
        tenant: Tenant | None = auth.tenant
        default_channel = Channel.CLI
    else:
        tenant = selected_tenant(user=user, session=session) if session is not None else None
        default_channel = Channel.WEB
    if tenant is None:
        return None
    roles = token_roles if token_roles is not None and isinstance(auth, PersonalToken) else None
    if roles is None:
        roles = roles_for(user=user, tenant=tenant)
    if not roles:
        return None
    return Scope(
        tenant=tenant,
        actor=user,  # type: ignore[arg-type]
        channel=channel or default_channel,
        correlation_id=correlation_id,
        roles=roles,
    )


def scope_for_page(request: Any) -> Scope | None:
    """The signed-in person's Scope for one of Tess's admin pages (None: not a member of any tenant)."""
    return scope_for_credential(
        user=request.user,
        auth=None,
        session=request.session,
        correlation_id=getattr(request, "correlation_id", None) or get_correlation_id(),
    )
